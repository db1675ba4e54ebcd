"""Prints the PTX that gpu-module-to-binary{format=isa} embedded in a module.

The PTX is the `assembly = "..."` string of the `#gpu.object`; MLIR prints
it with `\\XX` hex escapes (and `\\\\`, `\\"`), which are undone here.
Usage: extract-ptx.py < module.mlir > kernel.ptx
"""
import re
import sys

text = sys.stdin.read()
match = re.search(r'assembly = "((?:[^"\\]|\\.)*)"', text)
if not match:
    sys.exit("extract-ptx.py: no `assembly = \"...\"` in the input")


def unescape(m):
    s = m.group(1)
    return s if s in ('\\', '"') else chr(int(s, 16))


sys.stdout.write(re.sub(r'\\(\\|"|[0-9A-Fa-f]{2})', unescape, match.group(1)))
