"""MoEMLP: a routed gated expert MLP whose backward is the compiled MXFP8
kernel of moe-mlir.

    mlp = MoEMLP(hidden=4096, intermediate=1536, experts=128, top_k=8,
                 target="sm90a").cuda()
    y = mlp(x, topk_idx, topk_scores)      # x [T, H] bf16, router top-k [T, K]

The forward runs in torch (bf16 GEMMs per expert) and saves only its
inputs: the backward recomputes g and u (the layer's recompute mode). The
backward builds the routing layout and the masked affinities from the
top-k selection (moe_mlir.build_routing, on the host: [T, K] indices, not
activations), runs the compiled backward of the layer's shape (compiled once
per token count and cached), and returns the gradients of x, the top-k
scores and both weights. On the host target the tensors are CPU tensors; on
sm90a CUDA tensors, the kernel queued on the current stream.
"""
import numpy as np
import torch

from . import build_routing, compile as _compile, masked_affinities

__all__ = ["MoEMLP", "moe_mlp"]


def _activation(g, kind):
    if kind == "swiglu":
        return torch.nn.functional.silu(g)
    return torch.nn.functional.gelu(g, approximate="tanh")


def _forward(x, topk_idx, topk_scores, wgu, wd, activation):
    """y[t] = sum_k a[t,k] * (act(x Wg) * (x Wu)) Wd of expert idx[t,k],
    the affinity on I, in the dtype of x (weights cast to it: f32 master
    weights give a bf16 forward)."""
    y = torch.zeros_like(x)
    for e in range(wgu.shape[0]):
        tokens, slot = (topk_idx == e).nonzero(as_tuple=True)
        if tokens.numel() == 0:
            continue
        rows = x.index_select(0, tokens)
        w = wgu[e].to(x.dtype)
        g = rows @ w[:, 0, :]
        u = rows @ w[:, 1, :]
        a = topk_scores[tokens, slot].to(x.dtype).unsqueeze(1)
        h = _activation(g, activation) * u
        y.index_add_(0, tokens, (a * h) @ wd[e].to(x.dtype))
    return y


class _MoEMLPFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, topk_idx, topk_scores, wgu, wd, mlp):
        ctx.save_for_backward(x, topk_idx, topk_scores, wgu, wd)
        ctx.mlp = mlp
        with torch.no_grad():
            return _forward(x, topk_idx, topk_scores, wgu, wd, mlp.activation)

    @staticmethod
    def backward(ctx, dy):
        x, topk_idx, topk_scores, wgu, wd = ctx.saved_tensors
        mlp = ctx.mlp
        T = x.shape[0]
        E, B = mlp.experts, mlp.block_size
        idx = topk_idx.detach().to("cpu", torch.int32).numpy()
        scores = topk_scores.detach().to("cpu", torch.float32).numpy()
        tok, blk = build_routing(idx, E, B)
        aff = masked_affinities(idx, scores, E)
        device = x.device
        as_tensor = lambda a: torch.from_numpy(a).to(device)  # noqa: E731
        bf16 = lambda t: t.detach().to(torch.bfloat16).contiguous()  # noqa
        kernel = mlp.kernel(T)
        dx, da, dwgu, dwd = kernel(bf16(x), bf16(dy), as_tensor(aff),
                                   bf16(wgu), bf16(wd), as_tensor(tok),
                                   as_tensor(blk))
        d_scores = da.view(T, E).gather(1, topk_idx.long())
        return (dx.to(x.dtype), None, d_scores.to(topk_scores.dtype),
                dwgu.to(wgu.dtype), dwd.to(wd.dtype), None)


def moe_mlp(x, topk_idx, topk_scores, wgu, wd, mlp):
    """The function MoEMLP.forward applies (for weights held elsewhere)."""
    return _MoEMLPFunction.apply(x, topk_idx, topk_scores, wgu, wd, mlp)


class MoEMLP(torch.nn.Module):
    """Experts' gate/up weights wgu [E, H, 2, I] and down weights wd [E, I, H]
    (bf16 parameters, N(0, 1/H) and N(0, 1/I)), applied to the tokens a
    router sent them; see the module docstring."""

    def __init__(self, hidden, intermediate, experts, top_k, *,
                 block_size=128, activation="swiglu", quant="e4m3",
                 rule="rceil", target="host", dtype=torch.bfloat16,
                 device=None):
        super().__init__()
        if activation not in ("swiglu", "geglu"):
            raise ValueError("activation %r: expected swiglu or geglu" %
                             activation)
        self.hidden, self.intermediate = hidden, intermediate
        self.experts, self.top_k, self.block_size = experts, top_k, block_size
        self.activation, self.quant, self.rule = activation, quant, rule
        self.target = target
        self.wgu = torch.nn.Parameter(
            (torch.randn(experts, hidden, 2, intermediate, device=device) /
             np.sqrt(hidden)).to(dtype))
        self.wd = torch.nn.Parameter(
            (torch.randn(experts, intermediate, hidden, device=device) /
             np.sqrt(intermediate)).to(dtype))
        self._kernels = {}

    def layer_spec(self, tokens):
        return ("T=%d,H=%d,I=%d,E=%d,K=%d,B=%d,act=%s,quant=%s,rule=%s" % (
            tokens, self.hidden, self.intermediate, self.experts, self.top_k,
            self.block_size, self.activation, self.quant, self.rule))

    def kernel(self, tokens):
        """The compiled backward for `tokens` tokens (cached)."""
        if tokens not in self._kernels:
            self._kernels[tokens] = _compile(self.layer_spec(tokens),
                                             self.target)
        return self._kernels[tokens]

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
