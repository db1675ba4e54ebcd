#!/usr/bin/env python3
"""The SASS of a layer's sm_90a kernels, on any machine (no GPU).

moe-run compiles the layer (--compile-only --emit cubin) and cuobjdump
disassembles each kernel (on a machine without the CUDA disassembler:
scripts/install-sass-tools.sh). Prints, per kernel, the registers a thread,
the spill bytes, the instruction count and the most frequent opcodes (the
benchmark's SASS mix, bench/moe_bench.py); --dump prints the SASS of the
kernels that --kernel selects. Arguments after `--` go to moe-run, e.g.

  python3 bench/sass_mix.py --kernel expert_matmul -- --round-operands
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from moe_bench import find_cuobjdump, parse_sass, run_cuobjdump  # noqa: E402

SHAPE1 = "T=16384,H=4096,I=1536,E=128,K=8,B=128"


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    extra = []
    if "--" in argv:
        at = argv.index("--")
        argv, extra = argv[:at], argv[at + 1:]
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    built = os.path.join(root, "build", "bin", "moe-run")
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--layer", default=SHAPE1,
                        help="the layer spec (default: reference shape 1)")
    parser.add_argument("--moe-run", default=built if os.access(
        built, os.X_OK) else "moe-run")
    parser.add_argument("--kernel", metavar="REGEX", default="",
                        help="only the kernels whose name matches")
    parser.add_argument("--top", type=int, default=10,
                        help="opcodes listed per kernel")
    parser.add_argument("--dump", action="store_true",
                        help="print the SASS of the selected kernels")
    parser.add_argument("--cuobjdump", default=None,
                        help="the disassembler (default: PATH, the CUDA "
                        "toolkit, .tools/sass)")
    args = parser.parse_args(argv)
    tool = args.cuobjdump or find_cuobjdump()
    if not tool:
        sys.exit("sass_mix: no cuobjdump (run scripts/install-sass-tools.sh)")
    with tempfile.TemporaryDirectory() as work:
        cmd = [args.moe_run, "--target=sm90a", "--layer", args.layer,
               "--compile-only", "--cache-dir", "", "--emit", "cubin",
               work] + extra
        got = subprocess.run(cmd, capture_output=True, text=True)
        if got.returncode != 0:
            sys.exit("sass_mix: %s: exit status %d\n%s" % (
                " ".join(cmd), got.returncode, got.stderr[-2000:]))
        selected = re.compile(args.kernel)
        for name in sorted(os.listdir(work)):
            if not name.endswith(".cubin"):
                continue
            sass = run_cuobjdump(tool, os.path.join(work, name))
            if sass.returncode != 0:
                sys.exit("sass_mix: cuobjdump %s: %s" % (
                    name, sass.stderr.strip()[-500:]))
            for k in parse_sass(sass.stdout):
                if not selected.search(k["name"]):
                    continue
                top = sorted(k["mix"].items(), key=lambda kv: -kv[1])
                print("%-28s REG %3s STACK %s LOCAL %s %6d instructions: %s" % (
                    k["name"], k["registers"], k["stack_bytes"],
                    k["local_bytes"],
                    k["instructions"], ", ".join(
                        "%s %d" % kv for kv in top[:args.top])))
                if args.dump:
                    print(sass.stdout)


if __name__ == "__main__":
    main()
