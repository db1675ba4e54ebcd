"""python3 -m moe_crosscheck --moe-ref PATH --workdir DIR [--suite ...]
python3 -m moe_crosscheck torch-check --inputs DIR --outputs DIR [...]
python3 -m moe_crosscheck torch-selfcheck --moe-ref PATH --workdir DIR [...]
python3 -m moe_crosscheck torch-gen --config T=..,H=..,... --out DIR [...]

The first form runs the cross-check suites against a moe-ref binary and
prints one summary line per suite; exits 1 if any suite fails (2 on a usage
error). The torch commands are described in torch_check.py; they need torch
but not ml_dtypes, so neither the suites nor torch are imported before the
command is known.
"""

import argparse
import os
import shutil
import sys
import time

TORCH_COMMANDS = ("torch-check", "torch-selfcheck", "torch-gen")


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in TORCH_COMMANDS:
        from . import torch_check
        return torch_check.main(argv)
    from . import suites

    parser = argparse.ArgumentParser(
        prog="python3 -m moe_crosscheck",
        description="Cross-check moe-ref against an independent numpy "
        "implementation of SPEC.md and docs/numerics.md.")
    parser.add_argument("--moe-ref", required=True,
                        help="the moe-ref binary (a path or a name on PATH)")
    parser.add_argument("--workdir", required=True,
                        help="scratch directory for the exchanged .npy files")
    parser.add_argument("--suite", default="all",
                        choices=sorted(suites.SUITES) + ["all"])
    parser.add_argument("--no-rmx", action="store_true",
                        help="layer suite: compare R_64 only")
    args = parser.parse_args(argv)

    tool = shutil.which(args.moe_ref)
    if tool is None:
        parser.error("moe-ref not found: %s" % args.moe_ref)
    os.makedirs(args.workdir, exist_ok=True)
    names = sorted(suites.SUITES) if args.suite == "all" else [args.suite]

    ok = True
    for name in names:
        start = time.monotonic()
        try:
            if name == "layer":
                result = suites.layer_suite(tool, args.workdir,
                                            with_rmx=not args.no_rmx)
            else:
                result = suites.SUITES[name](tool, args.workdir)
        except suites.ToolError as err:
            print("%s: moe-ref failed: %s" % (name, err))
            print("%s: FAIL" % name)
            ok = False
            continue
        for failure in result.failures:
            print("%s: %s" % (name, failure))
        errors = ", ".join("max %s %.1e" % (label, value) if isinstance(
            value, float) else "%s %d" % (label, value)
                           for label, value in sorted(result.errors.items()))
        print("%s: %d cases, %s (%.1f s): %s" %
              (name, result.cases, errors or "no comparisons",
               time.monotonic() - start, "PASS" if result.passed else "FAIL"))
        ok &= result.passed
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
