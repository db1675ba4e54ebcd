"""Router forward (top-k, softmax) and backward, SPEC section 3."""

import numpy as np

MODES = ("topk_softmax", "softmax_topk", "softmax_topk_renorm")


def _softmax(z):
    z = z - z.max(axis=-1, keepdims=True)
    p = np.exp(z)
    return p / p.sum(axis=-1, keepdims=True)


def select(logits, K):
    """The K largest logits per row, by descending logit, ties to the lower
    expert index."""
    order = np.argsort(-np.asarray(logits), axis=1, kind="stable")
    return order[:, :K].astype(np.int32)


def forward(logits, K, mode):
    """(topk_idx [T,K] int32, topk_scores [T,K] float64)."""
    logits = np.asarray(logits, dtype=np.float64)
    idx = select(logits, K)
    picked = np.take_along_axis(logits, idx, axis=1)
    if mode == "topk_softmax":
        return idx, _softmax(picked)
    p_sel = np.take_along_axis(_softmax(logits), idx, axis=1)
    if mode == "softmax_topk":
        return idx, p_sel
    return idx, p_sel / p_sel.sum(axis=1, keepdims=True)


def backward(logits, idx, dscores, mode):
    """dlogits [T,E] from dscores [T,K] for the selection idx."""
    logits = np.asarray(logits, dtype=np.float64)
    ds = np.asarray(dscores, dtype=np.float64)
    dlogits = np.zeros_like(logits)
    if mode == "topk_softmax":
        s = _softmax(np.take_along_axis(logits, idx, axis=1))
        g = s * (ds - (ds * s).sum(axis=1, keepdims=True))
        np.put_along_axis(dlogits, idx, g, axis=1)
        return dlogits
    p = _softmax(logits)
    p_sel = np.take_along_axis(p, idx, axis=1)
    if mode == "softmax_topk":
        dp_sel = ds
    else:
        total = p_sel.sum(axis=1, keepdims=True)
        s = p_sel / total
        dp_sel = (ds - (ds * s).sum(axis=1, keepdims=True)) / total
    dp = np.zeros_like(logits)
    np.put_along_axis(dp, idx, dp_sel, axis=1)
    return p * (dp - (dp_sel * p_sel).sum(axis=1, keepdims=True))
