"""The blocked routing layout of SPEC section 4, built from top-k indices."""

import numpy as np


def num_blocks(T, K, E, B):
    """N = ceil((T*K - (E-1)) / B) + E - 1 (a true ceiling, also for a
    negative numerator), at least 1."""
    numerator = T * K - (E - 1)
    return max(-(-numerator // B) + E - 1, 1)


def build_routing(topk_idx, E, B):
    """token_position_to_id [N*B] and block_to_expert [N] (int32) for a
    [T,K] selection: experts ascending, each expert's tokens ascending from
    its first block on, spare blocks to expert E-1."""
    topk_idx = np.asarray(topk_idx)
    T, K = topk_idx.shape
    N = num_blocks(T, K, E, B)
    slots = np.full(N * B, -1, dtype=np.int32)
    owner = np.full(N, E - 1, dtype=np.int32)
    block = 0
    for e in range(E):
        tokens = np.nonzero((topk_idx == e).any(axis=1))[0]
        if tokens.size == 0:
            continue
        need = -(-tokens.size // B)
        slots[block * B:block * B + tokens.size] = tokens
        owner[block:block + need] = e
        block += need
    assert block <= N, "routing needs more blocks than the formula allows"
    return slots, owner


def masked_affinities(topk_idx, topk_scores, E):
    """a[t*E + idx[t,k]] = scores[t,k], zero elsewhere, flat [T*E]."""
    topk_idx = np.asarray(topk_idx)
    T, K = topk_idx.shape
    a = np.zeros((T, E), dtype=np.float64)
    rows = np.repeat(np.arange(T), K)
    a[rows, topk_idx.reshape(-1)] = np.asarray(topk_scores).reshape(-1)
    return a.reshape(-1)
