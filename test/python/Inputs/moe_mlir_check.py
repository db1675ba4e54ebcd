"""moe_mlir (the Python package) on the host target, against R_mx.

Usage: moe_mlir_check.py MOE_REF WORKDIR

Generates a layer's inputs with `moe-ref gen`, runs the compiled backward
through moe_mlir on numpy arrays (bf16 as ml_dtypes.bfloat16), and checks
every output against the numpy R_mx of moe_crosscheck (2e-3 relative
Frobenius), then the errors a caller gets for a wrong dtype, shape,
layout, count and routing, with no output written."""
import json
import os
import subprocess
import sys

import ml_dtypes
import numpy as np

import moe_mlir
from moe_crosscheck import layer, routing


def main():
    moe_ref, work = sys.argv[1], sys.argv[2]
    print("moe_mlir from", os.path.dirname(moe_mlir.__file__))
    indir = os.path.join(work, "in")
    subprocess.run([moe_ref, "gen", "--T", "40", "--H", "64", "--I", "32",
                    "--E", "4", "--K", "2", "--B", "128", "--seed", "3",
                    "--out", indir], check=True, stdout=subprocess.DEVNULL)
    cfg = json.load(open(os.path.join(indir, "config.json")))
    names = ["x", "dy", "affinities", "wgu", "wd", "token_position_to_id",
             "block_to_expert"]
    inp = {n: np.load(os.path.join(indir, n + ".npy")) for n in names}

    kernel = moe_mlir.compile("T=40,H=64,I=32,E=4,K=2,B=128", opt_level=0)
    print("inputs:", ", ".join("%s %s %s" % (s.name, s.dtype, list(s.shape))
                               for s in kernel.inputs))
    args = [np.ascontiguousarray(inp[s.name].astype(s.dtype))
            for s in kernel.inputs]
    outs = kernel(*args)
    want = layer.backward_mx(cfg, inp)
    failed = 0
    for spec, got in zip(kernel.outputs, outs):
        g = np.asarray(got, dtype=np.float64)
        w = want[spec.name]
        rel = np.linalg.norm(g - w) / np.linalg.norm(w)
        ok = rel <= 2e-3 and np.isfinite(g).all()
        failed += not ok
        print("%-5s rel(R_mx) %.3e %s" % (spec.name, rel,
                                          "PASS" if ok else "FAIL"))

    def expect(error, fragment, call):
        nonlocal failed
        out = [np.full(s.shape, 7, s.dtype) for s in kernel.outputs]
        try:
            call(out)
        except error as err:
            written = any((o != 7).any() for o in out)
            ok = fragment in str(err) and not written
            print("%s: %s%s" % ("PASS" if ok else "FAIL", err,
                                " (outputs written)" if written else ""))
            failed += not ok
            return
        print("FAIL: no %s for %r" % (error.__name__, fragment))
        failed += 1

    bad = list(args)
    bad[2] = args[2].astype(np.float64)
    expect(ValueError, "input 'affinities' (#2): dtype float64, expected "
           "float32", lambda out: kernel(*bad, out=out))
    bad = list(args)
    bad[0] = args[0][:, :32]
    expect(ValueError, "input 'x' (#0): shape [40, 32], expected [40, 64]",
           lambda out: kernel(*bad, out=out))
    bad = list(args)
    bad[0] = np.asfortranarray(args[0])
    expect(ValueError, "input 'x' (#0): not C-contiguous",
           lambda out: kernel(*bad, out=out))
    expect(TypeError, "kernel takes 7 inputs",
           lambda out: kernel(*args[:6], out=out))
    bad = list(args)
    bad[5] = args[5].copy()
    bad[5][0] = 40
    expect(moe_mlir.MoeMLIRError, "element 0 is token id 40",
           lambda out: kernel(*bad, out=out))
    try:
        moe_mlir.compile("T=40,H=64,X=1")
        print("FAIL: no error for an unknown key")
        failed += 1
    except moe_mlir.MoeMLIRError as err:
        print("PASS: %s" % err)
    # Kernel choices, as a mapping or as text: checked by the library
    # before anything compiles (so on the host target too).
    small = "T=40,H=64,I=32,E=4,K=2,B=128"
    kernel_choices = moe_mlir.compile(
        small, opt_level=0,
        kernel_choices={"weight-reuse": 2, "swap-weights": True})
    print("PASS: kernel choices accepted: %d inputs" %
          len(kernel_choices.inputs))
    text = moe_mlir.check_kernel_choices({"round-reuse": 0,
                                          "swap-weights": False})
    print("%s: check_kernel_choices gives %r" %
          ("PASS" if text == "round-reuse=0,swap-weights=false" else "FAIL",
           text))
    failed += text != "round-reuse=0,swap-weights=false"
    for choices, error in (({"weight-reuse": 65}, moe_mlir.MoeMLIRError),
                           ("swap-weights=yes", moe_mlir.MoeMLIRError),
                           (["weight-reuse=2"], TypeError)):
        try:
            moe_mlir.compile(small, kernel_choices=choices)
            print("FAIL: no error for kernel_choices=%r" % (choices,))
            failed += 1
        except error as err:
            print("PASS: %s" % err)
    # The routing helpers against the independent numpy builder, on
    # selections with experts left empty and uneven loads.
    rng = np.random.default_rng(5)
    for T, K, E, B in ((40, 2, 4, 128), (300, 3, 8, 32), (1, 1, 1, 32),
                       (64, 4, 16, 32)):
        idx = np.stack([rng.permutation(E)[:K] for _ in range(T)])
        idx = np.where(idx == 1, 0, idx) if K == 1 and E > 1 else idx
        scores = rng.random((T, K)).astype(np.float32)
        tok, blk = moe_mlir.build_routing(idx, E, B)
        want_tok, want_blk = routing.build_routing(idx, E, B)
        aff = moe_mlir.masked_affinities(idx, scores, E)
        want_aff = routing.masked_affinities(idx, scores, E).astype(np.float32)
        ok = (np.array_equal(tok, want_tok) and np.array_equal(blk, want_blk)
              and np.array_equal(aff, want_aff))
        failed += not ok
        print("%s: routing T=%d K=%d E=%d B=%d (%d blocks)" %
              ("PASS" if ok else "FAIL", T, K, E, B, blk.size))
    twice = np.array([[0, 1], [2, 2]], np.int32)
    expect(moe_mlir.MoeMLIRError, "buildRouting: token 1, k = 1: expert 2 "
           "appears twice in the token's row",
           lambda out: moe_mlir.build_routing(twice, 4, 32))
    expect(moe_mlir.MoeMLIRError, "maskedAffinities: token 0, k = 1: "
           "expert 9 is outside [0, 4)",
           lambda out: moe_mlir.masked_affinities([[0, 9]], [[1, 1]], 4))
    # The weight quantizer: a weights=mx layer on quantize_mx's codes gives
    # the bits of the same layer quantizing its bf16 weights itself (both
    # take g and u from the checkpoint, so the weights enter P1 and P2
    # only, quantized along H and 2I as quantize_mx does).
    ckdir = os.path.join(work, "ckpt")
    subprocess.run([moe_ref, "gen", "--T", "40", "--H", "64", "--I", "32",
                    "--E", "4", "--K", "2", "--B", "128", "--checkpoint",
                    "--seed", "4", "--out", ckdir], check=True,
                   stdout=subprocess.DEVNULL)
    ck = {n: np.load(os.path.join(ckdir, n + ".npy"))
          for n in names + ["checkpoint"]}
    base = "T=40,H=64,I=32,E=4,K=2,B=128,checkpoint=bf16"
    plain = moe_mlir.compile(base, opt_level=0)
    prequant = moe_mlir.compile(base + ",weights=mx", opt_level=0)
    wgu_q, wgu_s = moe_mlir.quantize_mx(ck["wgu"].astype(np.float32))
    wd_q, wd_s = moe_mlir.quantize_mx(ck["wd"].astype(np.float32))
    codes = dict(ck, wgu=wgu_q, wgu_scales=wgu_s, wd=wd_q, wd_scales=wd_s)
    run = lambda k, arrays: k(*[np.ascontiguousarray(  # noqa: E731
        arrays[s.name].astype(s.dtype)) for s in k.inputs])
    same = all(np.array_equal(a.view(np.uint8), b.view(np.uint8))
               for a, b in zip(run(plain, ck), run(prequant, codes)))
    failed += not same
    print("%s: weights=mx on quantize_mx's codes gives the bf16-weight "
          "layer's bits" % ("PASS" if same else "FAIL"))
    expect(moe_mlir.MoeMLIRError, "quantizeMX: [2, 40] must have "
           "non-negative sizes and a multiple of 32 columns",
           lambda out: moe_mlir.quantize_mx(np.ones((2, 40))))
    print("moe_mlir check: %s" % ("FAIL" if failed else "PASS"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
