"""moe_mlir with torch on the host target (CPU tensors).

Usage: moe_mlir_torch_check.py

1. A kernel called on torch tensors gives the bits of the same call on
   numpy arrays, and bad tensors are named.
2. MoEMLP's gradients (autograd through the compiled backward) against the
   numpy R_mx of moe_crosscheck on the same inputs: dx, dWgu, dWd and the
   top-k scores' gradient (da at the selected experts), 2e-3.
3. A short training loop on a synthetic regression: the loss falls.
4. The custom ops: torch.library.opcheck on both, and torch.compile
   (fullgraph, aot_eager) of MoEMLP gives the eager forward and gradients
   bit for bit.
5. moe_mlir.nn.route (the routing layout by torch ops, what the CUDA
   backward uses) gives build_routing's and masked_affinities' values,
   with empty experts and spare blocks; the grouped forward matches a
   per-expert fp64 forward.
"""
import sys

import ml_dtypes
import numpy as np
import torch

import moe_mlir
from check_errors import expect_value_errors
from moe_crosscheck import layer
from moe_mlir.nn import MoEMLP, _forward, mlp_backward, mlp_forward, route

T, H, I, E, K, B = 64, 64, 32, 4, 2, 128


def rel(got, want):
    got = np.asarray(got, dtype=np.float64)
    return np.linalg.norm(got - want) / np.linalg.norm(want)


def check_route_and_forward():
    failed = 0
    rng = np.random.default_rng(5)
    # (T, K, E, B, experts used): all experts; experts 2 and 5 empty; one
    # expert only (every other one empty, spare blocks); no tokens.
    for T_, K_, E_, B_, used in ((300, 2, 8, 32, 8), (97, 3, 8, 64, 6),
                                 (40, 1, 4, 32, 1), (0, 2, 4, 32, 4)):
        pool = [e for e in range(E_) if used == E_ or e not in (2, 5)][:used]
        idx = np.array([rng.permutation(pool)[:K_] for _ in range(T_)],
                       dtype=np.int32).reshape(T_, K_)
        scores = rng.random((T_, K_)).astype(np.float32)
        tok, blk = moe_mlir.build_routing(idx, E_, B_)
        aff = moe_mlir.masked_affinities(idx, scores, E_)
        r = route(torch.from_numpy(idx), torch.from_numpy(scores), E_, B_)
        same = (np.array_equal(r["tok"].numpy(), tok) and
                np.array_equal(r["blk"].numpy(), blk) and
                np.array_equal(r["aff"].numpy(), aff) and
                r["tok"].dtype == torch.int32 and
                r["blk"].dtype == torch.int32)
        # Every pair's slot holds its token, and the offsets end each
        # expert's blocks.
        slots = r["slot"].numpy().reshape(T_, K_) if T_ else np.zeros((0,))
        same &= all(tok[slots[t, k]] == t for t in range(T_)
                    for k in range(K_))
        ends = np.searchsorted(blk, np.arange(E_), side="right") * B_
        ends[-1] = len(tok)
        same &= np.array_equal(r["offs"].numpy(), ends)
        failed += not same
        print("%s: route T=%d K=%d E=%d B=%d (%d experts used) gives "
              "build_routing's layout" % ("PASS" if same else "FAIL", T_, K_,
                                          E_, B_, used))
    # The grouped forward against fp64 per expert, on bf16-exact inputs.
    T_, H_, I_, E_, K_ = 96, 64, 32, 6, 2
    idx = np.stack([rng.permutation(E_ - 1)[:K_] for _ in range(T_)]
                   ).astype(np.int32)  # expert E-1 empty
    scores = rng.random((T_, K_)).astype(np.float32)
    x = torch.randn(T_, H_).to(torch.bfloat16)
    wgu = (torch.randn(E_, H_, 2, I_) / 8).to(torch.bfloat16)
    wd = (torch.randn(E_, I_, H_) / 6).to(torch.bfloat16)
    y = _forward(x, torch.from_numpy(idx), torch.from_numpy(scores), wgu,
                 wd, "swiglu", 32)
    want = torch.zeros(T_, H_, dtype=torch.float64)
    for t in range(T_):
        for k in range(K_):
            e = idx[t, k]
            xd = x[t].double()
            g = xd @ wgu[e, :, 0, :].double()
            u = xd @ wgu[e, :, 1, :].double()
            h = torch.nn.functional.silu(g) * u
            want[t] += float(scores[t, k]) * (h @ wd[e].double())
    err = rel(y.double().numpy(), want.numpy())
    ok = err < 1e-2
    failed += not ok
    print("%s: grouped forward rel(fp64) %.3e" % ("PASS" if ok else "FAIL",
                                                 err))
    return failed


def main():
    failed = 0
    print("torch", torch.__version__)
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    idx = np.stack([rng.permutation(E)[:K] for _ in range(T)]).astype(np.int32)
    logits = rng.standard_normal((T, K))
    scores = (np.exp(logits) / np.exp(logits).sum(1, keepdims=True)).astype(
        np.float32)

    # 1. torch tensors against numpy arrays.
    kernel = moe_mlir.compile("T=%d,H=%d,I=%d,E=%d,K=%d,B=%d" %
                              (T, H, I, E, K, B), opt_level=0)
    tok, blk = moe_mlir.build_routing(idx, E, B)
    aff = moe_mlir.masked_affinities(idx, scores, E)
    bf = lambda a: a.astype(ml_dtypes.bfloat16)  # noqa: E731
    x = bf(rng.standard_normal((T, H)))
    dy = bf(rng.standard_normal((T, H)))
    wgu = bf(rng.standard_normal((E, H, 2, I)) / np.sqrt(H))
    wd = bf(rng.standard_normal((E, I, H)) / np.sqrt(I))
    arrays = [x, dy, aff, wgu, wd, tok, blk]
    want = kernel(*arrays)
    tensors = [torch.from_numpy(a.view(np.uint16)).view(torch.bfloat16)
               if a.dtype == ml_dtypes.bfloat16 else torch.from_numpy(a)
               for a in arrays]
    got = kernel(*tensors)
    same = all(np.array_equal(
        g.view(torch.uint16).numpy() if g.dtype == torch.bfloat16
        else g.numpy(), w.view(np.uint16) if w.dtype == ml_dtypes.bfloat16
        else w) for g, w in zip(got, want))
    failed += not same
    print("%s: torch tensors give the numpy call's bits" %
          ("PASS" if same else "FAIL"))
    failed += expect_value_errors(kernel, [
        (tensors[:2] + [tensors[2].double()] + tensors[3:],
         "input 'affinities' (#2): dtype torch.float64, expected "
         "torch.float32"),
        ([tensors[0].t().contiguous().t()] + tensors[1:],
         "input 'x' (#0): not contiguous")])

    # 2. MoEMLP gradients against R_mx, with f32 (master) weights holding
    # bf16 values: the kernel takes them as bf16 and its f32 weight
    # gradients come back unrounded (bf16 parameters would get their
    # gradients rounded to bf16, ~1.6e-3 from R_mx on their own).
    mlp = MoEMLP(H, I, E, K, block_size=B, dtype=torch.float32)
    with torch.no_grad():
        mlp.wgu.copy_(torch.from_numpy(wgu.astype(np.float32)))
        mlp.wd.copy_(torch.from_numpy(wd.astype(np.float32)))
    xt = torch.from_numpy(x.astype(np.float32)).to(torch.bfloat16)
    xt.requires_grad_(True)
    st = torch.from_numpy(scores).requires_grad_(True)
    it = torch.from_numpy(idx)
    y = mlp(xt, it, st)
    y.backward(torch.from_numpy(dy.astype(np.float32)).to(torch.bfloat16))
    cfg = {"T": T, "H": H, "I": I, "E": E, "K": K, "B": B, "act": "swiglu",
           "affinity": "on_i", "quant": "e4m3", "rule": "rceil",
           "clamp_gate_lo": None, "clamp_gate_hi": None,
           "clamp_up_lo": None, "clamp_up_hi": None, "bias": False,
           "checkpoint": False, "dense": False, "dx_accumulate": "f32",
           "dx_f32": False, "weight_grad_bf16": False}
    inp = {"x": x.astype(np.float64), "dy": dy.astype(np.float64),
           "affinities": aff.astype(np.float64),
           "wgu": wgu.astype(np.float64), "wd": wd.astype(np.float64),
           "token_position_to_id": tok, "block_to_expert": blk}
    ref = layer.backward_mx(cfg, inp)
    rows = np.repeat(np.arange(T), K)
    checks = [("dx", xt.grad.float().numpy(), ref["dx"]),
              ("dwgu", mlp.wgu.grad.float().numpy(), ref["dwgu"]),
              ("dwd", mlp.wd.grad.float().numpy(), ref["dwd"]),
              ("d_scores", st.grad.numpy().reshape(-1),
               ref["da"].reshape(T, E)[rows, idx.reshape(-1)])]
    for name, g, w in checks:
        err = rel(g, w)
        ok = err <= 2e-3
        failed += not ok
        print("%-8s rel(R_mx) %.3e %s" % (name, err, "PASS" if ok else "FAIL"))

    # Kernel choices reach the compiled backward; bad ones raise when the
    # module is made, with the library's message.
    try:
        MoEMLP(H, I, E, K, block_size=B, dtype=torch.float32,
               kernel_choices={"weight-reuse": 65})
        print("FAIL: no error for kernel_choices weight-reuse=65")
        failed += 1
    except moe_mlir.MoeMLIRError as err:
        print("PASS: MoEMLP %s" % err)
    chosen = MoEMLP(H, I, E, K, block_size=B, dtype=torch.float32,
                    kernel_choices={"weight-reuse": 2, "tma-store": False})
    ok = chosen.kernel_choices == "weight-reuse=2,tma-store=false" and len(
        chosen.kernel(T).inputs) == 7
    failed += not ok
    print("%s: MoEMLP kernel choices %r compile" %
          ("PASS" if ok else "FAIL", chosen.kernel_choices))

    # 3. Training: fit a fixed random target for 30 SGD steps.
    torch.manual_seed(1)
    student = MoEMLP(H, I, E, K, block_size=B, dtype=torch.float32)
    target = torch.randn(T, H).to(torch.bfloat16)
    opt = torch.optim.SGD(student.parameters(), lr=0.5)
    losses = []
    for step in range(30):
        opt.zero_grad()
        out = student(xt.detach(), it, torch.from_numpy(scores))
        loss = ((out.float() - target.float()) ** 2).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    ok = losses[-1] < 0.9 * losses[0] and all(np.isfinite(losses))
    failed += not ok
    print("%s: training loss %.4f -> %.4f over 30 steps" %
          ("PASS" if ok else "FAIL", losses[0], losses[-1]))
    # 4. The custom ops under opcheck, and MoEMLP under torch.compile.
    spec = mlp.layer_spec(T)
    w = (mlp.wgu.detach(), mlp.wd.detach())
    dyt = torch.from_numpy(dy.astype(np.float32)).to(torch.bfloat16)
    for name, op, args in (
            ("mlp_forward", mlp_forward,
             (xt.detach(), it, st.detach()) + w + (spec, "host", "")),
            ("mlp_backward", mlp_backward,
             (xt.detach(), dyt, it, st.detach()) + w +
             (spec, "host", "weight-reuse=2"))):
        result = torch.library.opcheck(op, args)
        ok = all(v == "SUCCESS" for v in result.values())
        failed += not ok
        print("%s: opcheck moe_mlir::%s: %s" % ("PASS" if ok else "FAIL",
                                                name, sorted(result)))
    eager = [xt.grad.clone(), st.grad.clone(), mlp.wgu.grad.clone(),
             mlp.wd.grad.clone()]
    for t in (xt, st, mlp.wgu, mlp.wd):
        t.grad = None
    compiled = torch.compile(mlp, backend="aot_eager", fullgraph=True)
    y2 = compiled(xt, it, st)
    y2.backward(dyt)
    ok = torch.equal(y, y2) and all(
        torch.equal(a, b) for a, b in
        zip(eager, (xt.grad, st.grad, mlp.wgu.grad, mlp.wd.grad)))
    failed += not ok
    print("%s: torch.compile(fullgraph, aot_eager) gives the eager forward "
          "and gradients" % ("PASS" if ok else "FAIL"))
    failed += check_route_and_forward()
    print("moe_mlir torch check: %s" % ("FAIL" if failed else "PASS"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
