#!/usr/bin/env python3
"""Statistics of the host function FUNC of an MLIR file after
convert-parallel-loops-to-gpu / device buffers (gpu.launch still inline):
device buffers (all freed at the end, so their sum is the peak), copies,
and the launch grids."""
import re, sys
from collections import Counter
W = {'f8E4M3FN': 1, 'f8E5M2': 1, 'f8E8M0FNU': 1, 'i8': 1, 'ui8': 1, 'bf16': 2,
     'f16': 2, 'f32': 4, 'i32': 4, 'f64': 8, 'i64': 8, 'index': 8}
def nbytes(shape):
    *dims, et = shape.split('x')
    n = 1
    for d in dims:
        n *= int(d)
    return n * W[et]
text = open(sys.argv[1]).read()
func = sys.argv[2] if len(sys.argv) > 2 else 'moe_layer_bwd'
m = re.search(r'func\.func @' + func + r'\(.*?\n  }\n', text, re.S)
body = m.group(0)
allocs = [nbytes(s) for s in re.findall(r'gpu\.alloc\s+\(\)\s*:\s*memref<([^>,]+)>', body)]
copies = [nbytes(s) for s in re.findall(r'gpu\.memcpy\s+%\S+, %\S+ : memref<([^>,]+)>', body)]
launches = re.findall(r'gpu\.launch blocks\([^)]*\) in \(%\w+ = %c(\d+)[^)]*\) threads\([^)]*\) in \(%\w+ = %c(\d+)', body)
calls = re.findall(r'call @(\w+_launch)', body)
print(f"device buffers: {len(allocs)} gpu.alloc, {sum(allocs)/2**30:.3f} GiB "
      f"(freed at the end, so this is the peak), largest {max(allocs)/2**30:.3f} GiB")
print(f"host<->device copies: {len(copies)} gpu.memcpy, {sum(copies)/2**30:.3f} GiB")
print(f"elementwise kernels: {len(launches)} gpu.launch (1-D); GEMM launch calls: {len(calls)}")
grids = sorted(int(g) for g, b in launches)
blocks = Counter(int(b) for g, b in launches)
print(f"  grid.x min {grids[0]} max {grids[-1]}; block.x {dict(blocks)}")
