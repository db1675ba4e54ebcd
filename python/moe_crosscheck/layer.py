"""The layer backward of SPEC section 3 in numpy.

``backward64`` is R_64 (unquantized fp64). ``backward_mx`` is R_mx, with
every rounding docs/numerics.md fixes: the operands of the five GEMMs go
through Q(M, axis) (MX quantize + dequantize, or bf16 for quant = none), the
GEMMs run in fp64 on the dequantized values, and the elementwise math is
rounded to fp32 where the table says so.

Both take ``cfg`` (the dict of config.json) and ``inp`` (a dict of arrays
named like the .npy files ``moe-ref gen`` writes) and return a dict of
gradients named like the files ``moe-ref bwd`` writes.
"""

import numpy as np

from . import mx

SQRT_2_OVER_PI = np.sqrt(2.0 / np.pi)
GELU_C = 0.044715


def act_and_grad(g, kind):
    """act(g) and act'(g) in fp64: silu (swiglu) or tanh-gelu (geglu)."""
    g = np.asarray(g, dtype=np.float64)
    if kind == "swiglu":
        sig = 1.0 / (1.0 + np.exp(-g))
        return g * sig, sig * (1.0 + g * (1.0 - sig))
    inner = SQRT_2_OVER_PI * (g + GELU_C * g ** 3)
    th = np.tanh(inner)
    value = 0.5 * g * (1.0 + th)
    grad = 0.5 * (1.0 + th) + 0.5 * g * (1.0 - th * th) * SQRT_2_OVER_PI * (
        1.0 + 3.0 * GELU_C * g * g)
    return value, grad


def _limits(cfg, name):
    lo, hi = cfg["clamp_%s_lo" % name], cfg["clamp_%s_hi" % name]
    return (-np.inf if lo is None else lo), (np.inf if hi is None else hi)


def expert_slots(cfg, inp):
    """(e, slots) for every expert that owns blocks: the slot indices of its
    blocks, in order."""
    B = cfg["B"]
    owner = np.asarray(inp["block_to_expert"])
    for e in range(cfg["E"]):
        blocks = np.nonzero(owner == e)[0]
        if blocks.size:
            yield e, (blocks[:, None] * B + np.arange(B)[None, :]).reshape(-1)


def _checkpoint_rows(cfg, inp, slots):
    """g and u of the given slots from the [N,2,I,B] checkpoint, [S,I] each."""
    ckpt = np.asarray(inp["checkpoint"])
    # Slot n*B + b holds ckpt[n, :, :, b]: move the token index next to n.
    per_slot = ckpt.transpose(0, 3, 1, 2).reshape(-1, 2, cfg["I"])
    rows = per_slot[slots]
    return rows[:, 0, :], rows[:, 1, :]


def _zero_grads(cfg):
    T, H, I, E = cfg["T"], cfg["H"], cfg["I"], cfg["E"]
    grads = {
        "dx": np.zeros((T, H)),
        "da": np.zeros(T * E),
        "dwgu": np.zeros((E, H, 2, I)),
        "dwd": np.zeros((E, I, H)),
    }
    if cfg["bias"]:
        grads["dbgu"] = np.zeros((E, 2, I))
        grads["dbd"] = np.zeros((E, H))
    return grads


def backward64(cfg, inp):
    """R_64: the fp64 backward over the routed pairs of the blocked layout."""
    E = cfg["E"]
    gate_lo, gate_hi = _limits(cfg, "gate")
    up_lo, up_hi = _limits(cfg, "up")
    x, dy = inp["x"], inp["dy"]
    aff = inp["affinities"].reshape(-1)
    grads = _zero_grads(cfg)
    for e, slots in expert_slots(cfg, inp):
        ids = inp["token_position_to_id"][slots]
        keep = ids >= 0
        tok, slots = ids[keep], slots[keep]
        if tok.size == 0:
            continue
        X, dY = x[tok], dy[tok]
        a = aff[tok * E + e][:, None]
        w_gate, w_up = inp["wgu"][e][:, 0, :], inp["wgu"][e][:, 1, :]
        if cfg["checkpoint"]:
            g, u = _checkpoint_rows(cfg, inp, slots)
        else:
            g, u = X @ w_gate, X @ w_up
            if cfg["bias"]:
                g = g + inp["bgu"][e, 0]
                u = u + inp["bgu"][e, 1]
        g = np.clip(g, gate_lo, gate_hi)
        u = np.clip(u, up_lo, up_hi)
        s, s_grad = act_and_grad(g, cfg["act"])
        h = s * u
        dA = dY @ inp["wd"][e].T
        da = (dA * h).sum(axis=1)
        if cfg["bias"]:
            da = da + dY @ inp["bd"][e]
        grads["da"][tok * E + e] = da
        dh = a * dA
        dg = dh * u * s_grad * ((gate_lo < g) & (g < gate_hi))
        du = dh * s * ((up_lo < u) & (u < up_hi))
        grads["dx"][tok] += dg @ w_gate.T + du @ w_up.T
        grads["dwgu"][e][:, 0, :] = X.T @ dg
        grads["dwgu"][e][:, 1, :] = X.T @ du
        grads["dwd"][e] = (a * h).T @ dY
        if cfg["bias"]:
            grads["dbgu"][e, 0] = dg.sum(axis=0)
            grads["dbgu"][e, 1] = du.sum(axis=0)
            grads["dbd"][e] = (a * dY).sum(axis=0)
    return grads


def f32(values):
    """Rounds to float32 (nearest-even) and returns float64."""
    return np.asarray(values, dtype=np.float64).astype(np.float32).astype(
        np.float64)


def backward_mx(cfg, inp):
    """R_mx: docs/numerics.md, per expert over all slots of its blocks
    (padding slots are zero rows of every operand)."""
    T, H, I, E = cfg["T"], cfg["H"], cfg["I"], cfg["E"]
    quant, rule = cfg["quant"], cfg["rule"]

    def Q(matrix, axis):
        return mx.qdq(matrix, axis, quant, rule)

    gate_lo, gate_hi = [np.float32(v) for v in _limits(cfg, "gate")]
    up_lo, up_hi = [np.float32(v) for v in _limits(cfg, "up")]
    aff = f32(inp["affinities"].reshape(-1))
    grads = _zero_grads(cfg)
    contributions = []  # (expert, token ids, c rows), experts ascending
    for e, slots in expert_slots(cfg, inp):
        ids = inp["token_position_to_id"][slots]
        valid = ids >= 0
        if not valid.any():
            continue
        tok = np.where(valid, ids, 0)
        rows = valid[:, None]
        X = np.where(rows, inp["x"][tok], 0.0)
        dY = np.where(rows, inp["dy"][tok], 0.0)
        a = np.where(rows, aff[tok * E + e][:, None], 0.0)
        wgu = inp["wgu"][e].reshape(H, 2 * I)
        if cfg["checkpoint"]:
            g, u = _checkpoint_rows(cfg, inp, slots)
        else:
            gu = f32(Q(X, 1) @ Q(wgu, 0))
            g, u = gu[:, :I], gu[:, I:]
            if cfg["bias"]:
                g = f32(g + f32(inp["bgu"][e, 0]))
                u = f32(u + f32(inp["bgu"][e, 1]))
        g = np.minimum(np.maximum(f32(g), gate_lo), gate_hi).astype(np.float64)
        u = np.minimum(np.maximum(f32(u), up_lo), up_hi).astype(np.float64)
        s_wide, s_grad_wide = act_and_grad(g, cfg["act"])
        s, s_grad = f32(s_wide), f32(s_grad_wide)
        h = np.where(rows, f32(s * u), 0.0)
        dA = f32(Q(dY, 1) @ Q(inp["wd"][e], 1).T)
        dh = f32(a * dA)
        dg = f32(f32(dh * u) * s_grad) * ((gate_lo < g) & (g < gate_hi))
        du = f32(dh * s) * ((up_lo < u) & (u < up_hi))
        dgu = np.where(rows, np.concatenate([dg, du], axis=1), 0.0)

        da = (dA * h).sum(axis=1)
        if cfg["bias"]:
            da = da + dY @ inp["bd"][e]
        grads["da"][ids[valid] * E + e] = f32(da[valid])

        c = f32(Q(dgu, 1) @ Q(wgu, 1).T)
        contributions.append((ids[valid], c[valid]))
        grads["dwgu"][e] = f32(Q(X, 0).T @ Q(dgu, 0)).reshape(H, 2, I)
        if cfg["affinity"] == "on_i":
            grads["dwd"][e] = f32(Q(f32(a * h), 0).T @ Q(dY, 0))
        else:
            grads["dwd"][e] = f32(Q(h, 0).T @ Q(f32(a * dY), 0))
        if cfg["bias"]:
            grads["dbgu"][e] = f32(dgu.sum(axis=0)).reshape(2, I)
            grads["dbd"][e] = f32(f32(a * dY).sum(axis=0))

    acc = np.zeros((T, H))
    for tok, c in contributions:
        if cfg["dx_accumulate"] == "bf16":
            acc[tok] = mx.round_bf16(acc[tok] + c)
        else:
            acc[tok] = f32(acc[tok] + c)
    grads["dx"] = acc if cfg["dx_f32"] else mx.round_bf16(acc)
    if cfg["weight_grad_bf16"]:
        grads["dwgu"] = mx.round_bf16(grads["dwgu"])
        grads["dwd"] = mx.round_bf16(grads["dwd"])
    return grads
