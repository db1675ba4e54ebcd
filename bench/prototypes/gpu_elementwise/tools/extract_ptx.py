#!/usr/bin/env python3
"""Extracts the PTX (assembly = "...") of every gpu.binary object in an MLIR
file into DIR/<binary>.ptx (DIR/<binary>_<i>.ptx for several objects)."""
import os, re, sys

def read_string(t, i):
    """t[i] is the opening quote; returns (bytes, index after closing quote)."""
    out = bytearray(); i += 1
    while t[i] != '"':
        c = t[i]
        if c == '\\':
            n = t[i + 1]
            if n in '\\"':
                out += n.encode(); i += 2
            elif n == 'n':
                out += b'\n'; i += 2
            elif n == 't':
                out += b'\t'; i += 2
            else:
                out.append(int(t[i + 1:i + 3], 16)); i += 3
        else:
            out += c.encode(); i += 1
    return bytes(out), i + 1

t = open(sys.argv[1]).read()
outdir = sys.argv[2]
os.makedirs(outdir, exist_ok=True)
starts = [(m.start(), m.group(1)) for m in re.finditer(r'gpu\.binary @(\S+)', t)]
n = 0
for k, (pos, name) in enumerate(starts):
    end = starts[k + 1][0] if k + 1 < len(starts) else len(t)
    seg_objs = [m.end() - 1 for m in re.finditer(r'assembly = "', t[pos:end])]
    for j, off in enumerate(seg_objs):
        body, _ = read_string(t, pos + off)
        fn = name if len(seg_objs) == 1 else f"{name}_{j}"
        open(os.path.join(outdir, fn + '.ptx'), 'wb').write(body)
        n += 1
print(n, "PTX modules written to", outdir)
