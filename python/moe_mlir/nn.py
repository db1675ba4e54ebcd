"""MoEMLP: a routed gated expert MLP whose backward is the compiled MXFP8
kernel of moe-mlir.

    mlp = MoEMLP(hidden=4096, intermediate=1536, experts=128, top_k=8,
                 target="sm90a").cuda()
    y = mlp(x, topk_idx, topk_scores)      # x [T, H] bf16, router top-k [T, K]

The forward runs in torch (the routed rows gathered into the blocked
layout, bf16 torch._grouped_mm over the experts) and saves only its inputs:
the backward recomputes g and u (the layer's recompute mode). The backward
builds the routing layout and the masked affinities from the top-k
selection, runs the compiled backward of the layer's shape (compiled once
per token count and cached), and returns the gradients of x, the top-k
scores and both weights. On the host target the tensors are CPU tensors and
the library builds the layout (checking the indices); on sm90a they are
CUDA tensors, torch ops build the layout on the device (`route`) and the
kernel is queued on the current stream: a training step's backward makes no
copy to or from the host and never synchronizes.

Both directions are torch custom ops (moe_mlir::mlp_forward with its
autograd formula, moe_mlir::mlp_backward), so torch.compile captures the
layer in one graph (fullgraph=True).
"""
import numpy as np
import torch

from . import MoeMLIRError, _capi, build_routing, compile as _compile
from . import check_kernel_choices, masked_affinities

__all__ = ["MoEMLP", "moe_mlp", "mlp_forward", "mlp_backward", "route"]


def _activation(g, kind):
    if kind == "swiglu":
        return torch.nn.functional.silu(g)
    return torch.nn.functional.gelu(g, approximate="tanh")


def route(topk_idx, topk_scores, experts, block_size):
    """The blocked routing layout of the top-k selection, computed by torch
    ops on the selection's device with no synchronization and no copy to
    the host (what moe_mlir.build_routing and masked_affinities compute on
    the host, element for element):

      tok    [N*B] int32  token_position_to_id (-1 for padding slots)
      blk    [N] int32    block_to_expert
      aff    [T*E] f32    masked affinities (differentiable in the scores)
      slot   [T*K] int64  the slot of each routed pair, in [T, K] order
      offs   [E] int32    each expert's end row in the layout (the last one
                          N*B, spare blocks included): torch._grouped_mm's
                          group offsets

    N is the layer's block count (worst case over all routings), so every
    shape is known without looking at the indices. The indices are trusted
    as torch.topk gives them (in [0, E), distinct within a row): checking
    them would synchronize; build_routing checks them on the host."""
    T, K = topk_idx.shape
    E, B = experts, block_size
    device = topk_idx.device
    n = _capi.lib().moeRoutingNumBlocks(T, K, E, B)
    if n < 0:
        raise MoeMLIRError(_capi.last_error())
    flat = topk_idx.reshape(-1).long()
    # Counts by scatter_add, not bincount: bincount sizes its result from
    # the data and so synchronizes on CUDA.
    counts = torch.zeros(E, dtype=torch.long, device=device).scatter_add_(
        0, flat, torch.ones_like(flat))
    blocks = (counts + B - 1) // B
    block_end = torch.cumsum(blocks, 0)
    # Pairs are in token order, so a stable sort by expert keeps each
    # expert's tokens ascending, as the layout wants.
    order = torch.sort(flat, stable=True).indices
    expert = flat[order]
    first = torch.cumsum(counts, 0) - counts
    position = torch.arange(T * K, device=device) - first[expert]
    sorted_slot = (block_end - blocks)[expert] * B + position
    slot = torch.empty_like(sorted_slot).scatter_(0, order, sorted_slot)
    tok = torch.full((n * B,), -1, dtype=torch.int32, device=device)
    tok[sorted_slot] = (order // K).to(torch.int32)
    # Blocks past the last expert's (the spare ones) belong to expert E-1.
    blk = torch.searchsorted(block_end, torch.arange(n, device=device),
                             right=True).clamp_(max=E - 1).to(torch.int32)
    aff = torch.zeros(T, E, dtype=torch.float32, device=device).scatter(
        1, topk_idx.long(), topk_scores.float()).reshape(-1)
    # The last group takes the spare blocks too. (torch.where with a Python
    # scalar: an item assignment would upload the scalar and synchronize.)
    offs = torch.where(torch.arange(E, device=device) == E - 1, n * B,
                       block_end * B).to(torch.int32)
    return {"tok": tok, "blk": blk, "aff": aff, "slot": slot, "offs": offs,
            "blocks": n}


def _forward(x, topk_idx, topk_scores, wgu, wd, activation, block_size=128):
    """y[t] = sum_k a[t,k] * (act(x Wg) * (x Wu)) Wd of expert idx[t,k],
    the affinity on I, in the dtype of x (weights cast to it: f32 master
    weights give a bf16 forward). The routed rows are gathered into the
    blocked layout (padding rows zero) and each projection is one
    torch._grouped_mm over the experts; differentiable in x, the scores and
    both weights."""
    E, H = wgu.shape[0], x.shape[1]
    r = route(topk_idx, topk_scores, E, block_size)
    tok = r["tok"].long()
    valid = (tok >= 0).unsqueeze(1)
    token = tok.clamp(min=0)
    rows = x.index_select(0, token) * valid
    gu = torch._grouped_mm(rows, wgu.to(x.dtype).reshape(E, H, -1),
                           offs=r["offs"])
    g, u = gu.chunk(2, dim=1)
    # The slot's affinity: the pair's score at its slot, zero for padding.
    a = torch.zeros(tok.shape[0], dtype=topk_scores.dtype,
                    device=x.device).index_put(
        (r["slot"],), topk_scores.reshape(-1))
    h = _activation(g, activation) * u
    out = torch._grouped_mm((a.to(x.dtype).unsqueeze(1) * h),
                            wd.to(x.dtype), offs=r["offs"])
    return torch.zeros_like(x).index_add(0, token, out * valid)


# The layer's operations as torch custom ops, so that torch.compile graphs
# hold them whole (fullgraph): the forward's routing is data-dependent and
# the backward calls the compiled kernel, so both are opaque to tracing,
# with fake implementations that give the output shapes. The layer is
# passed as its spelling (moe-run --layer) plus the target and the kernel
# choices' text ("" for the defaults).
_KERNELS = {}


def _kernel(layer, target, kernel_choices=""):
    key = (layer, target, kernel_choices)
    if key not in _KERNELS:
        _KERNELS[key] = _compile(layer, target,
                                 kernel_choices=kernel_choices or None)
    return _KERNELS[key]


def _layer_field(layer, name):
    for item in layer.split(","):
        key, _, value = item.partition("=")
        if key == name:
            return value
    raise ValueError("layer %r has no %s" % (layer, name))


@torch.library.custom_op("moe_mlir::mlp_forward", mutates_args=())
def mlp_forward(x: torch.Tensor, topk_idx: torch.Tensor,
                topk_scores: torch.Tensor, wgu: torch.Tensor,
                wd: torch.Tensor, layer: str, target: str,
                kernel_choices: str) -> torch.Tensor:
    """The routed gated MLP's forward in torch (bf16 GEMMs per expert);
    `kernel_choices` is the backward's."""
    with torch.no_grad():
        return _forward(x, topk_idx, topk_scores, wgu, wd,
                        _layer_field(layer, "act"),
                        int(_layer_field(layer, "B")))


@mlp_forward.register_fake
def _(x, topk_idx, topk_scores, wgu, wd, layer, target, kernel_choices):
    return torch.empty_like(x)


@torch.library.custom_op("moe_mlir::mlp_backward", mutates_args=())
def mlp_backward(x: torch.Tensor, dy: torch.Tensor, topk_idx: torch.Tensor,
                 topk_scores: torch.Tensor, wgu: torch.Tensor,
                 wd: torch.Tensor, layer: str, target: str,
                 kernel_choices: str
                 ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor,
                            torch.Tensor]:
    """dx, d_scores [T, K], dWgu, dWd from the compiled MXFP8 backward
    (dx in x's dtype, the others f32), compiled with the kernel choices'
    text `kernel_choices` ("" for the defaults)."""
    T, E = x.shape[0], int(_layer_field(layer, "E"))
    B = int(_layer_field(layer, "B"))
    bf16 = lambda t: t.detach().to(torch.bfloat16).contiguous()  # noqa: E731
    if x.is_cuda:
        # On the GPU the layout is built by torch ops on the device: no
        # synchronization and no copy to the host in the backward.
        r = route(topk_idx.detach(), topk_scores.detach(), E, B)
        tok, blk, aff = r["tok"], r["blk"], r["aff"]
    else:
        # On the host the library builds it and checks the indices.
        idx = topk_idx.detach().to(torch.int32).numpy()
        scores = topk_scores.detach().to(torch.float32).numpy()
        tok, blk = (torch.from_numpy(a) for a in build_routing(idx, E, B))
        aff = torch.from_numpy(masked_affinities(idx, scores, E))
    dx, da, dwgu, dwd = _kernel(layer, target, kernel_choices)(
        bf16(x), bf16(dy), aff, bf16(wgu), bf16(wd), tok, blk)
    d_scores = da.view(T, E).gather(1, topk_idx.long())
    return dx.to(x.dtype), d_scores, dwgu, dwd


@mlp_backward.register_fake
def _(x, dy, topk_idx, topk_scores, wgu, wd, layer, target, kernel_choices):
    f32 = torch.float32
    return (torch.empty_like(x), topk_scores.new_empty(topk_scores.shape,
                                                       dtype=f32),
            wgu.new_empty(wgu.shape, dtype=f32),
            wd.new_empty(wd.shape, dtype=f32))


def _setup_context(ctx, inputs, output):
    x, topk_idx, topk_scores, wgu, wd, layer, target, kernel_choices = inputs
    ctx.save_for_backward(x, topk_idx, topk_scores, wgu, wd)
    ctx.layer, ctx.target = layer, target
    ctx.kernel_choices = kernel_choices


def _backward(ctx, dy):
    x, topk_idx, topk_scores, wgu, wd = ctx.saved_tensors
    dx, d_scores, dwgu, dwd = mlp_backward(x, dy, topk_idx, topk_scores, wgu,
                                           wd, ctx.layer, ctx.target,
                                           ctx.kernel_choices)
    return (dx, None, d_scores.to(topk_scores.dtype), dwgu.to(wgu.dtype),
            dwd.to(wd.dtype), None, None, None)


torch.library.register_autograd("moe_mlir::mlp_forward", _backward,
                                setup_context=_setup_context)


def moe_mlp(x, topk_idx, topk_scores, wgu, wd, mlp):
    """The function MoEMLP.forward applies (for weights held elsewhere)."""
    return mlp_forward(x, topk_idx, topk_scores, wgu, wd,
                       mlp.layer_spec(x.shape[0]), mlp.target,
                       mlp.kernel_choices)


class MoEMLP(torch.nn.Module):
    """Experts' gate/up weights wgu [E, H, 2, I] and down weights wd [E, I, H]
    (bf16 parameters, N(0, 1/H) and N(0, 1/I)), applied to the tokens a
    router sent them; see the module docstring."""

    def __init__(self, hidden, intermediate, experts, top_k, *,
                 block_size=128, activation="swiglu", quant="e4m3",
                 rule="rceil", target="host", kernel_choices=None,
                 dtype=torch.bfloat16, device=None):
        """kernel_choices: the backward's GPU kernel choices, as
        moe_mlir.compile takes them (a dict of option names to values, or
        their text), checked here (MoeMLIRError) rather than at the first
        backward."""
        super().__init__()
        if activation not in ("swiglu", "geglu"):
            raise ValueError("activation %r: expected swiglu or geglu" %
                             activation)
        self.hidden, self.intermediate = hidden, intermediate
        self.experts, self.top_k, self.block_size = experts, top_k, block_size
        self.activation, self.quant, self.rule = activation, quant, rule
        self.target = target
        self.kernel_choices = check_kernel_choices(kernel_choices) or ""
        self.wgu = torch.nn.Parameter(
            (torch.randn(experts, hidden, 2, intermediate, device=device) /
             np.sqrt(hidden)).to(dtype))
        self.wd = torch.nn.Parameter(
            (torch.randn(experts, intermediate, hidden, device=device) /
             np.sqrt(intermediate)).to(dtype))

    def layer_spec(self, tokens):
        return ("T=%d,H=%d,I=%d,E=%d,K=%d,B=%d,act=%s,quant=%s,rule=%s" % (
            tokens, self.hidden, self.intermediate, self.experts, self.top_k,
            self.block_size, self.activation, self.quant, self.rule))

    def kernel(self, tokens):
        """The compiled backward for `tokens` tokens (cached per process)."""
        return _kernel(self.layer_spec(tokens), self.target,
                       self.kernel_choices)

    def forward(self, x, topk_idx, topk_scores):
        if x.dim() != 2 or x.shape[1] != self.hidden:
            raise ValueError("x: shape %s, expected [T, %d]" %
                             (list(x.shape), self.hidden))
        if tuple(topk_idx.shape) != (x.shape[0], self.top_k) or \
                tuple(topk_scores.shape) != tuple(topk_idx.shape):
            raise ValueError("topk_idx, topk_scores: shapes %s, %s, expected "
                             "[%d, %d]" % (list(topk_idx.shape),
                                           list(topk_scores.shape),
                                           x.shape[0], self.top_k))
        return moe_mlp(x, topk_idx, topk_scores, self.wgu, self.wd, self)
