#!/usr/bin/env python3
"""Writes the seed corpora of the libFuzzer harnesses (tools/moe-fuzzers)
from the tests: every `// -----` split of the .mlir files under test/ (ir),
every --layer and --gemm spelling and the GPU passes' kernel choices in the tests
and examples (layer), and small .npy
files of each dtype and version the reader takes, plus damaged variants
(npy). Files are named by content hash, as libFuzzer names them, so a
re-run adds only what is new. Usage: make-corpus.py [OUT] (default:
test/Fuzz/corpus)."""
import hashlib
import pathlib
import re
import struct
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
OUT = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "test/Fuzz/corpus"
MAX_IR = 16384  # the IR harnesses skip larger inputs


def put(kind, data):
    d = OUT / kind
    d.mkdir(parents=True, exist_ok=True)
    (d / hashlib.sha1(data).hexdigest()).write_bytes(data)


for path in sorted((ROOT / "test").rglob("*.mlir")):
    if "Fuzz" in path.parts:
        continue
    for split in re.split(r"^// -----\s*$", path.read_text(), flags=re.M):
        # RUN/CHECK lines are comments to the parser; drop them so the
        # fuzzer mutates IR, not FileCheck patterns.
        body = "\n".join(l for l in split.splitlines()
                         if not l.lstrip().startswith("//")).strip()
        if body and len(body) <= MAX_IR:
            put("ir", body.encode() + b"\n")

spec = re.compile(r"--(?:layer|gemm)[= ]['\"]?((?:[A-Za-z_]+=[A-Za-z0-9_.:-]*,?)+)")
# The kernel choices' text (setKernelChoices, which the layer harness also
# fuzzes): the GPU passes' options in the tests, spaces made commas.
choices = re.compile(r"(?:moe-gpu-kernel-config|convert-moe-to-nvgpu)="
                     r"\"((?:[a-z-]+=[a-z0-9]+ ?)+)\"")
for path in sorted(list((ROOT / "test").rglob("*")) + list((ROOT / "examples").rglob("*"))):
    if path.is_file() and path.suffix in (".mlir", ".test", ".py", ".sh", ".cpp", ".c"):
        text = path.read_text(errors="replace")
        for m in spec.finditer(text):
            put("layer", m.group(1).rstrip(",").encode())
        for m in choices.finditer(text):
            put("layer", ",".join(m.group(1).split()).encode())


def npy(descr, shape, payload, version=1, fortran=False):
    header = "{'descr': '%s', 'fortran_order': %s, 'shape': (%s), }" % (
        descr, fortran, "".join("%d, " % s for s in shape) if len(shape) != 1
        else "%d," % shape[0])
    lenfmt = "<H" if version == 1 else "<I"
    pre = 6 + 2 + struct.calcsize(lenfmt)
    pad = (64 - (pre + len(header) + 1) % 64) % 64
    header = header + " " * pad + "\n"
    return (b"\x93NUMPY" + bytes([version, 0]) + struct.pack(lenfmt, len(header))
            + header.encode("latin1") + payload)


good = [
    npy("<f8", [2, 3], struct.pack("<6d", 0, -1.5, 2, float("inf"), float("nan"), 1e300)),
    npy("<f4", [4], struct.pack("<4f", 1, -2, 0.5, 3e38)),
    npy("<i4", [2, 2], struct.pack("<4i", -1, 0, 7, 2**31 - 1)),
    npy("|u1", [3], bytes([0, 127, 255])),
    npy("<V2", [2, 2], struct.pack("<4H", 0x3F80, 0xBF80, 0x7FC0, 0x0001)),
    npy("bfloat16", [1], struct.pack("<H", 0x4000)),
    npy("<f4", [], struct.pack("<f", 1.0)),
    npy("<f4", [0, 5], b""),
    npy("<f4", [2], struct.pack("<2f", 1, 2), version=2),
    npy("<i4", [1], struct.pack("<i", 5), version=3),
]
for data in good:
    put("npy", data)
bad = [
    npy("<f4", [4], struct.pack("<3f", 1, 2, 3)),            # truncated
    npy("<f4", [2], struct.pack("<3f", 1, 2, 3)),            # trailing bytes
    npy(">f4", [1], struct.pack(">f", 1)),                   # big-endian
    npy("<f4", [1], struct.pack("<f", 1), fortran=True),     # Fortran order
    npy("<c8", [1], b"\0" * 8),                              # complex
    npy("<f4", [2**40, 2**40], b""),                         # huge shape
    good[0][:9],                                             # cut header
    b"\x93NUMPY\x04\x00\x10\x00" + b" " * 16,                # version 4
]
for data in bad:
    put("npy", data)
