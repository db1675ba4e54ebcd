"""Reads what an mlir-runner program printed with printMemrefI32.

Shared by the executed numerics tests (mx_sweep.py, ops_sweep.py).
"""
import re

import numpy as np


def parse_printout(path):
    """The printMemrefI32 arrays of a run, in order, as int64 arrays."""
    with open(path) as f:
        text = f.read()
    arrays = []
    for block in text.split("Unranked Memref")[1:]:
        sizes = re.search(r"sizes = \[([0-9, ]*)\]", block).group(1)
        shape = [int(v) for v in sizes.split(",")]
        data = block[block.index("data =") + len("data ="):]
        values = np.array(re.findall(r"-?[0-9]+", data), dtype=np.int64)
        arrays.append(values.reshape(shape))
    return arrays
