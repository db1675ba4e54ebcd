#!/usr/bin/env python3
"""Emit the MLIR (gpu + nvgpu + nvvm + llvm dialects) of an exact-MXFP8 GEMM kernel for sm_90a.

  C[M,N] (f32) = sum_kb sa[m,kb] * sb[n,kb] * (sum_{k in kb} qa[m,k] * qb[n,k])

qa [M,K], qb [N,K]: e4m3 bytes, K contiguous.  sa [M,K/32], sb [N,K/32]: E8M0 bytes.

Variant "fp8": FP8 wgmma m64n128k32 into a fresh fp32 partial per 32-wide K block (scale-d = 0),
  then acc = fma(partial, 2^(sa-127) * 2^(sb-127), acc) per element (exact promotion in fp32).
Variant "bf16": the producer warpgroup-side dequantizes the fp8 tiles exactly into bf16
  (q * 2^(s-127)) in shared memory, in the 128B-swizzled K-major layout; the consumers run
  bf16 wgmma m64n128k16 accumulating straight into the fp32 accumulator.

CTA: 384 threads = warpgroup 0 (producer: TMA + scales [+ dequant]) and warpgroups 1, 2
(consumers, 64 rows each of a 128x128 output tile).  setmaxnreg moves registers to consumers.

Kernel ABI (after lowering with bare pointers), in this order:
  (ptr tmapA, ptr tmapB, ptr<1> sa, ptr<1> sb, ptr<1> C, i32 M, i32 N, i32 K)
tmapA / tmapB point to CUtensorMap objects in device global memory (64-byte aligned).
Launch: grid (N/128, M/128), block 384, dynamic shared memory = smem_bytes (printed with --info).
"""
import argparse
import sys

BM, BN, BK = 128, 128, 128         # CTA tile; BK bytes = one 128B swizzle row of fp8
TICKS = 1000000                    # mbarrier.try_wait.parity suspend-time hint
FBVEC = 4   # fp8: floats per consumer load of its 32 B-scale factors (4 = LDS.128, 2, 1)
SBQ = 36    # fp8: floats per lane-quad group in the B-scale smem table (32 used + 4 pad: the 4
            # groups of a quarter-warp then hit different banks; 32 gave 4-way conflicts)


class Emitter:
    def __init__(self):
        self.lines = []
        self.n = 0
        self.ind = 2

    def fresh(self, hint="v"):
        self.n += 1
        return f"%{hint}{self.n}"

    def line(self, s):
        self.lines.append("  " * self.ind + s)

    def op(self, rhs, hint="v"):
        v = self.fresh(hint)
        self.line(f"{v} = {rhs}")
        return v

    # ---- small helpers -------------------------------------------------------------------
    def ci(self, val, ty="i32"):
        return self.op(f"arith.constant {val} : {ty}", "c")

    def idx(self, val):
        return self.op(f"arith.constant {val} : index", "c")

    def bin(self, name, a, b, ty):
        return self.op(f"arith.{name} {a}, {b} : {ty}")

    def cast_index(self, v, ty):
        return self.op(f"arith.index_cast {v} : {ty} to index")

    def i64(self, v):
        return self.op(f"arith.extui {v} : i32 to i64")

    def _k(self, b, ty):
        if isinstance(b, int):
            return self.idx(b) if ty == "index" else self.ci(b, ty)
        return b

    def a(self, name, x, y, ty="i32", hint="v"):
        """arith binary op; y (or x) may be a Python int (materialized as a constant)."""
        x = self._k(x, ty)
        y = self._k(y, ty)
        return self.op(f"arith.{name} {x}, {y} : {ty}", hint)

    def add(self, x, y, ty="i32"):
        return self.a("addi", x, y, ty)

    def mul(self, x, y, ty="i32"):
        return self.a("muli", x, y, ty)

    def sptr(self, addr64):
        return self.op(f"llvm.inttoptr {addr64} : i64 to !llvm.ptr<3>", "sp")


ACC_T = "!llvm.struct<(" + ", ".join(["f32"] * 64) + ")>"
TMAP_T = ("!nvgpu.tensormap.descriptor<tensor = memref<128x128xi8, 3>, swizzle = swizzle_128b, "
          "l2promo = l2promo_256b, oob = zero, interleave = none>")


def bars_t(n):
    return f"!nvgpu.mbarrier.group<memorySpace = #gpu.address_space<workgroup>, num_barriers = {n}>"


def acc_row_col(i):
    """Fragment index i (0..63) of the m64n128 f32 accumulator -> (row half r, column slot c).
    row = 16*warp + lane/4 + 8*r;  col = 8*(i/4) + 2*(lane%4) + (i%2) = 8*(i/4) + 2q + e.
    c indexes the 32 columns a thread owns: c = 2*(i/4) + (i%2)."""
    return (i // 2) % 2, 2 * (i // 4) + (i % 2)


def gen(variant, stages, maxreg_prod, maxreg_cons, name, nprod=1, exp=(), maxreg_prod_b=0):
    e = Emitter()
    NP = nprod if variant == "bf16" else 1
    NT = 128 * (NP + 2)
    S = stages
    fp8 = variant == "fp8"
    # ---- shared memory layout (bytes, from a 1024-aligned base) ----------------------------
    A_BYTES = BM * BK            # fp8 tile of A, 128B swizzled (TMA destination)
    B_BYTES = BN * BK
    if fp8:
        # stage: [A fp8 16K][B fp8 16K] ; scales f32 [S][4][128] each ; barriers
        offA = 0
        offB = S * A_BYTES
        offSA = offB + S * B_BYTES
        offSB = offSA + S * 4 * BM * 4
        offBar = offSB + S * 4 * SBQ * 4 * 4
        nbars = 2 * S
        total = offBar + nbars * 8
    else:
        # fp8 staging ring (TMA) + bf16 ring (dequantized, consumers' wgmma operands)
        # bf16 tile: 128 rows x 128 k = 256 B per row -> two 128B-swizzle panels of 64 k each,
        # panel = 128 rows x 128 B = 16 KB.  A bf16 tile = 32 KB, B bf16 tile = 32 KB.
        offA = 0
        offB = S * A_BYTES
        SD = 2                                       # bf16 (dequantized) ring depth
        offAD = offB + S * B_BYTES
        offBD = offAD + SD * 2 * A_BYTES
        offBar = offBD + SD * 2 * B_BYTES
        nbars = 2 * S + 2 * SD
        total = offBar + nbars * 8
    smem_bytes = total + 1024    # slack for run-time 1024B alignment of the base
    if smem_bytes > 232448:
        raise SystemExit(f"shared memory {smem_bytes} exceeds 227 KB; use fewer stages")

    L = e.lines
    L.append("// Generated by gen_mxgemm.py: exact-MXFP8 GEMM for sm_90a, variant " + variant)
    L.append(f"// smem_bytes = {smem_bytes}, stages = {S}, block = {NT}, tile = {BM}x{BN}x{BK}, "
             f"producer warpgroups = {NP}, experiments = {','.join(exp) or 'none'}")
    L.append("gpu.module @mxgemm {")
    L.append("  memref.global @dsmem : memref<0xi8, 3> {alignment = 1024 : i64}")
    L.append(f"  gpu.func @{name}(%tmA_p: !llvm.ptr, %tmB_p: !llvm.ptr, %sa: !llvm.ptr<1>, "
             f"%sb: !llvm.ptr<1>, %C: !llvm.ptr<1>, %M: i32, %N: i32, %K: i32) kernel attributes "
             f"{{nvvm.maxntid = array<i32: {NT}, 1, 1>, nvvm.minctasm = 1 : i32}} {{")
    e.ind = 2
    # TMA descriptors: gpu.func cannot take !nvgpu.tensormap.descriptor arguments in MLIR 22
    # (convert-gpu-to-nvvm has no type conversion for it); pass !llvm.ptr and cast.
    e.line(f"%tmA = builtin.unrealized_conversion_cast %tmA_p : !llvm.ptr to {TMAP_T}")
    e.line(f"%tmB = builtin.unrealized_conversion_cast %tmB_p : !llvm.ptr to {TMAP_T}")
    c0 = e.idx(0)
    c1 = e.idx(1)
    cS = e.idx(S)
    ticks = e.idx(TICKS)
    i0 = e.ci(0)
    i1_ = e.ci(1)
    tid_x = e.op("gpu.thread_id x", "tid")
    tid = e.op(f"arith.index_cast {tid_x} : index to i32", "tid")
    bx = e.op("gpu.block_id x", "bx")
    by = e.op("gpu.block_id y", "by")
    bx32 = e.op(f"arith.index_cast {bx} : index to i32")
    by32 = e.op(f"arith.index_cast {by} : index to i32")
    n0 = e.bin("muli", bx32, e.ci(BN), "i32")
    m0 = e.bin("muli", by32, e.ci(BM), "i32")
    KT = e.bin("divui", "%K", e.ci(BK), "i32")           # number of K tiles
    KTi = e.cast_index(KT, "i32")
    KW = e.bin("divui", "%K", e.ci(128), "i32")          # scale words (4 E8M0 bytes) per row

    # ---- dynamic shared memory, aligned base -----------------------------------------------
    g = e.op("memref.get_global @dsmem : memref<0xi8, 3>")
    big_t = f"memref<{smem_bytes}xi8, 3>"
    big = e.op(f"memref.reinterpret_cast {g} to offset: [0], sizes: [{smem_bytes}], strides: [1] : "
               f"memref<0xi8, 3> to {big_t}", "smem")
    rawi = e.op(f"memref.extract_aligned_pointer_as_index {big} : {big_t} -> index")
    raw = e.op(f"arith.index_cast {rawi} : index to i64", "raw")
    alg = e.bin("andi", e.bin("addi", raw, e.ci(1023, "i64"), "i64"), e.ci(-1024, "i64"), "i64")
    pad64 = e.bin("subi", alg, raw, "i64")
    pad = e.op(f"arith.index_cast {pad64} : i64 to index", "pad")

    def view(off_idx, shape, elt="i8"):
        return e.op(f"memref.view {big}[{off_idx}][] : {big_t} to memref<{shape}x{elt}, 3>")

    def sptr(addr64):   # i64 shared address -> !llvm.ptr<3>
        return e.op(f"llvm.inttoptr {addr64} : i64 to !llvm.ptr<3>", "sp")

    # barriers live in dynamic smem (nvgpu.mbarrier.create would make a static global)
    barv = view(e.bin("addi", pad, e.idx(offBar), "index"), f"{nbars}", "i64")
    BT = bars_t(nbars)
    bars = e.op(f"builtin.unrealized_conversion_cast {barv} : memref<{nbars}xi64, 3> to {BT}", "bars")
    # barrier ids: full[s] = s, empty[s] = S + s  (fp8 and bf16);  bf16: dq_full[d] = 2S + d,
    # dq_empty[d] = 2S + SD + d
    is0 = e.op(f"arith.cmpi eq, {tid}, {i0} : i32", "is0")
    e.line(f"scf.if {is0} {{")
    e.ind += 1
    nfull = 129 if fp8 else 1     # fp8: thread0 arrive.expect_tx + 128 scale writers
    for s in range(S):
        e.line(f"nvgpu.mbarrier.init {bars}[{e.idx(s)}], {e.idx(nfull)} : {BT}")
        e.line(f"nvgpu.mbarrier.init {bars}[{e.idx(S + s)}], {e.idx(256 if fp8 else 128 * NP)} : {BT}")
    if not fp8:
        for d in range(SD):
            e.line(f"nvgpu.mbarrier.init {bars}[{e.idx(2 * S + d)}], {e.idx(128 * NP)} : {BT}")
            e.line(f"nvgpu.mbarrier.init {bars}[{e.idx(2 * S + SD + d)}], {e.idx(256)} : {BT}")
    e.line(f"nvgpu.tma.prefetch.descriptor %tmA : {TMAP_T}")
    e.line(f"nvgpu.tma.prefetch.descriptor %tmB : {TMAP_T}")
    e.ind -= 1
    e.line("}")
    e.line("gpu.barrier")

    is_prod = e.op(f"arith.cmpi ult, {tid}, {e.ci(128 * NP)} : i32", "isprod")
    e.line(f"scf.if {is_prod} {{")
    e.ind += 1
    # ======================================= PRODUCER =========================================
    if fp8:
        e.line(f"nvvm.setmaxregister decrease {maxreg_prod}")
    elif NP == 2 and maxreg_prod_b:
        e.line(f"nvvm.setmaxregister increase {maxreg_prod_b}")
    if fp8:
        gen_producer_fp8(e, locals())
    else:
        gen_producer_bf16(e, locals())
    e.ind -= 1
    e.line("} else {")
    e.ind += 1
    # ======================================= CONSUMERS ========================================
    if fp8:
        e.line(f"nvvm.setmaxregister increase {maxreg_cons}")
    elif NP == 2 and maxreg_prod_b:
        e.line(f"nvvm.setmaxregister decrease {256 - maxreg_prod_b}")
    if fp8:
        gen_consumer_fp8(e, locals())
    else:
        gen_consumer_bf16(e, locals())
    e.ind -= 1
    e.line("}")
    e.line("gpu.return")
    e.ind = 1
    e.line("}")
    L.append("}")
    return "\n".join(L) + "\n", smem_bytes, NT


# ------------------------------------------------------------------------------------------
def e8m0_to_f32(e, byte_i32):
    """2^(b-127) as f32, exactly: b<<23 for 1..254, 2^-127 (subnormal) for 0, NaN for 255."""
    sh = e.op(f"arith.shli {byte_i32}, {e.ci(23)} : i32")
    isz = e.op(f"arith.cmpi eq, {byte_i32}, {e.ci(0)} : i32")
    isn = e.op(f"arith.cmpi eq, {byte_i32}, {e.ci(255)} : i32")
    a = e.op(f"arith.select {isz}, {e.ci(0x00400000)}, {sh} : i32")
    b = e.op(f"arith.select {isn}, {e.ci(0x7FC00000)}, {a} : i32")
    return e.op(f"arith.bitcast {b} : i32 to f32")


def tile_coords_and_tma(e, v, t, s, guard=True):
    """thread 0: expect 32 KB on full[s] and issue the two TMA loads of K tile t into stage s."""
    BT = bars_t(v["nbars"])
    bars, big_t = v["bars"], v["big_t"]
    if guard:
        e.line(f"scf.if {v['is0']} {{")
        e.ind += 1
    e.line(f"nvgpu.mbarrier.arrive.expect_tx {bars}[{s}], {e.idx(2 * 128 * 128)} : {BT}")
    kk = e.op(f"arith.muli {t}, {e.idx(BK)} : index")
    m0i = e.cast_index(v["m0"], "i32")
    n0i = e.cast_index(v["n0"], "i32")
    so = e.mul(s, 128 * 128, "index")
    offA = e.add(e.add(v["pad"], so, "index"), v["offA"], "index")
    offB = e.add(e.add(v["pad"], so, "index"), v["offB"], "index")
    va = e.op(f"memref.view {v['big']}[{offA}][] : {big_t} to memref<128x128xi8, 3>")
    vb = e.op(f"memref.view {v['big']}[{offB}][] : {big_t} to memref<128x128xi8, 3>")
    # coordinates innermost first: [k, row]
    e.line(f"nvgpu.tma.async.load %tmA[{kk}, {m0i}], {bars}[{s}] to {va} : {TMAP_T}, {BT} -> memref<128x128xi8, 3>")
    e.line(f"nvgpu.tma.async.load %tmB[{kk}, {n0i}], {bars}[{s}] to {vb} : {TMAP_T}, {BT} -> memref<128x128xi8, 3>")
    if guard:
        e.ind -= 1
        e.line("}")


def stage_and_parity(e, t, S, flip):
    s = e.op(f"arith.remui {t}, {e.idx(S)} : index", "s")
    r = e.op(f"arith.divui {t}, {e.idx(S)} : index")
    r32 = e.op(f"arith.index_cast {r} : index to i32")
    ph = e.op(f"arith.andi {r32}, {e.ci(1)} : i32")
    if flip:
        ph = e.op(f"arith.xori {ph}, {e.ci(1)} : i32")
    ph1 = e.op(f"arith.trunci {ph} : i32 to i1", "ph")
    return s, ph1


def gen_producer_fp8(e, v):
    S = v["S"]
    BT = bars_t(v["nbars"])
    bars = v["bars"]
    t = "%tp"
    e.line(f"scf.for {t} = {v['c0']} to {v['KTi']} step {v['c1']} {{")
    e.ind += 1
    s, ph = stage_and_parity(e, t, S, flip=True)
    es = e.op(f"arith.addi {s}, {e.idx(S)} : index")
    e.line(f"nvgpu.mbarrier.try_wait.parity {bars}[{es}], {ph}, {v['ticks']} : {BT}")
    tile_coords_and_tma(e, v, t, s)
    # scales: thread tid loads 4 E8M0 bytes (kb 4t..4t+3) of row m0+tid (A) and row n0+tid (B)
    t32 = e.op(f"arith.index_cast {t} : index to i32")
    s32 = e.op(f"arith.index_cast {s} : index to i32")
    s64 = e.i64(s32)
    tid = v["tid"]
    for which, r0, gp, offS in (("a", v["m0"], "%sa", v["offSA"]), ("b", v["n0"], "%sb", v["offSB"])):
        row = e.add(r0, tid)
        w = e.add(e.mul(row, v["KW"]), t32)
        w64 = e.i64(w)
        p = e.op(f"llvm.getelementptr {gp}[{w64}] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, i32")
        if "no_scales" in v["exp"]:
            word = e.ci(0x7F7F7F7F)
        else:
            word = e.op(f"llvm.load {p} invariant {{alignment = 4 : i64}} : !llvm.ptr<1> -> i32", "w")
        if which == "a":
            slot = tid                    # SA[s][j][row]
        else:
            # SB[s][j][q*32 + 2*(c/8) + c%2], c = column = tid; q = (c%8)/2
            c8 = e.op(f"arith.divui {tid}, {e.ci(8)} : i32")
            cm = e.op(f"arith.remui {tid}, {e.ci(8)} : i32")
            q = e.op(f"arith.divui {cm}, {e.ci(2)} : i32")
            ee = e.op(f"arith.remui {cm}, {e.ci(2)} : i32")
            slot = e.add(e.mul(q, SBQ), e.add(e.mul(c8, 2), ee))
        slot64 = e.i64(slot)
        for j in range(4):
            byte = e.a("andi", e.a("shrui", word, 8 * j), 255)
            f = e8m0_to_f32(e, byte)
            # byte address: alg + offS + ((s*4 + j)*128 + slot)*4
            sj = e.add(e.mul(s64, 4, "i64"), j, "i64")
            el = e.add(e.mul(sj, 128 if which == "a" else 4 * SBQ, "i64"), slot64, "i64")
            addr = e.add(v["alg"], e.add(e.mul(el, 4, "i64"), offS, "i64"), "i64")
            e.line(f"llvm.store {f}, {e.sptr(addr)} {{alignment = 4 : i64}} : f32, !llvm.ptr<3>")
    e.op(f"nvgpu.mbarrier.arrive {bars}[{s}] : {BT} -> !nvgpu.mbarrier.token", "tok")
    e.ind -= 1
    e.line("}")


def fence_regs(e, st, ty=ACC_T):
    """Pin a wgmma result after wgmma.wait_group: an empty asm with side effects that ties all 64
    registers, so no read of them can be scheduled above the wait (CUTLASS's fence_operand)."""
    vals = [e.op(f"llvm.extractvalue {st}[{i}] : {ty}") for i in range(64)]
    cons = ",".join(["=f"] * 64 + [str(i) for i in range(64)])
    return e.op(f"llvm.inline_asm has_side_effects asm_dialect = att \"\", \"{cons}\" "
                f"{', '.join(vals)} : ({', '.join(['f32'] * 64)}) -> {ty}", "pin")


def wgmma(e, da, db, pin, scale_d, ty_ab, k):
    return e.op(f"nvvm.wgmma.mma_async {da}, {db}, {pin}, #nvvm.shape<m = 64, n = 128, k = {k}>, "
                f"D[<f32>, <{scale_d}>], A[<{ty_ab}>, <one>, <row>], B[<{ty_ab}>, <one>, <col>] : "
                f"{ACC_T} -> {ACC_T}", "P")


def desc_hi():
    # K-major operand, 128B swizzle: LBO = 16 B (unused), SBO = 1024 B (8 rows x 128 B),
    # layout type 1 (128B swizzle) in bits 62-63.
    return (1 << 16) | ((1024 >> 4) << 32) | (1 << 62)


def make_desc(e, addr64):
    lo = e.a("shrui", e.a("andi", addr64, 0x3FFFF, "i64"), 4, "i64")
    return e.op(f"arith.ori {lo}, {e.ci(desc_hi(), 'i64')} : i64", "desc")


def gen_consumer_fp8(e, v):
    S = v["S"]
    BT = bars_t(v["nbars"])
    bars = v["bars"]
    tid = v["tid"]
    ct = e.op(f"arith.subi {tid}, {e.ci(128)} : i32")
    cw = e.op(f"arith.divui {ct}, {e.ci(128)} : i32", "cw")        # consumer warpgroup 0/1
    wt = e.op(f"arith.remui {ct}, {e.ci(128)} : i32")
    w = e.op(f"arith.divui {wt}, {e.ci(32)} : i32", "warp")
    l = e.op(f"arith.remui {wt}, {e.ci(32)} : i32", "lane")
    q = e.op(f"arith.remui {l}, {e.ci(4)} : i32", "q")
    rowl = e.add(e.mul(cw, 64), e.add(e.mul(w, 16), e.a("divui", l, 4)))
    cw64 = e.i64(cw)
    aoff_cw = e.op(f"arith.muli {cw64}, {e.ci(64 * 128, 'i64')} : i64")
    row64 = e.i64(rowl)
    q64 = e.i64(q)
    alg = v["alg"]

    def stage_descs(s):
        s64 = e.i64(e.op(f"arith.index_cast {s} : index to i32"))
        so = e.op(f"arith.muli {s64}, {e.ci(128 * 128, 'i64')} : i64")
        aA = e.add(alg, e.add(so, e.add(aoff_cw, v["offA"], "i64"), "i64"), "i64")
        aB = e.add(alg, e.add(so, v["offB"], "i64"), "i64")
        return make_desc(e, aA), make_desc(e, aB), s64

    def kdesc(d, j):    # advance the start address by j*32 bytes (16-byte units)
        return d if j == 0 else e.op(f"arith.addi {d}, {e.ci(2 * j, 'i64')} : i64")

    def load_scales(s64, j):
        sj = e.add(e.mul(s64, 4, "i64"), j, "i64")
        aSA = e.add(alg, e.add(e.mul(sj, 128 * 4, "i64"), v["offSA"], "i64"), "i64")
        aSB = e.add(alg, e.add(e.mul(sj, 4 * SBQ * 4, "i64"), v["offSB"], "i64"), "i64")
        pa0 = e.add(aSA, e.mul(row64, 4, "i64"), "i64")
        fa0 = e.op(f"llvm.load {e.sptr(pa0)} {{alignment = 4 : i64}} : !llvm.ptr<3> -> f32", "fa")
        pa1 = e.add(pa0, 32, "i64")
        fa1 = e.op(f"llvm.load {e.sptr(pa1)} {{alignment = 4 : i64}} : !llvm.ptr<3> -> f32", "fa")
        pb = e.add(aSB, e.mul(q64, SBQ * 4, "i64"), "i64")
        fb = []
        vw = FBVEC       # floats per shared-memory load of the B-scale row (4: LDS.128)
        for k4 in range(32 // vw):
            pk = e.add(pb, 4 * vw * k4, "i64")
            if vw == 1:
                fb.append(e.op(f"llvm.load {e.sptr(pk)} {{alignment = 4 : i64}} : !llvm.ptr<3> -> f32", "fb"))
                continue
            vec = e.op(f"llvm.load {e.sptr(pk)} {{alignment = {4 * vw} : i64}} : !llvm.ptr<3> -> vector<{vw}xf32>", "fbv")
            for u in range(vw):
                fb.append(e.op(f"llvm.extractelement {vec}[{e.ci(u)} : i32] : vector<{vw}xf32>", "fb"))
        return (fa0, fa1), fb

    def promote(acc, P, fa, fb):
        Pp = P if "nopin" in v["exp"] else fence_regs(e, P)
        if "no_promote" in v["exp"]:
            return acc, Pp
        if "const_scales" in v["exp"]:
            one = e.op("llvm.mlir.constant(1.0 : f32) : f32")
            fa, fb = (one, one), [one] * 32
        for i in range(64):
            r, c = acc_row_col(i)
            if "fma_only" in v["exp"]:
                f = fb[c]
            else:
                f = e.op(f"llvm.fmul {fa[r]}, {fb[c]} : f32", "f")
            pv = e.op(f"llvm.extractvalue {Pp}[{i}] : {ACC_T}", "p")
            av = e.op(f"llvm.extractvalue {acc}[{i}] : {ACC_T}", "a")
            nv = e.op(f"llvm.intr.fma({pv}, {f}, {av}) : (f32, f32, f32) -> f32", "a")
            acc = e.op(f"llvm.insertvalue {nv}, {acc}[{i}] : {ACC_T}", "acc")
        return acc, Pp

    def wait_full(t):
        s, ph = stage_and_parity(e, t, S, flip=False)
        e.line(f"nvgpu.mbarrier.try_wait.parity {bars}[{s}], {ph}, {v['ticks']} : {BT}")
        return s

    def release(s_prev):
        es = e.op(f"arith.addi {s_prev}, {e.idx(S)} : index")
        e.op(f"nvgpu.mbarrier.arrive {bars}[{es}] : {BT} -> !nvgpu.mbarrier.token", "tok")

    def tile_body(t, acc, P0, P1):
        """The 4 K-blocks of tile t: issue block j, then promote block j-1 while j runs.
        The last block is drained with wait_group 0 inside the tile: ptxas (CUDA 13.0) cannot
        prove a wait_group 1 across the loop back-edge safe and then serializes every wgmma
        (C7514), so no wgmma stays in flight across iterations."""
        s = wait_full(t)
        dA, dB, s64 = stage_descs(s)
        P = [P0, P1]
        hoist = "hoist" in v["exp"]   # +1% with --maxreg-cons 240 --maxreg-prod 24; spills at 232
        for j in range(4):
            if j > 0 and hoist:
                # the scales of block j-1 do not depend on the wgmma: load them before the
                # issue/wait so their latency hides behind it (LLVM will not move loads
                # across the wgmma intrinsics)
                sc = load_scales(s64, j - 1)
            e.line("nvvm.wgmma.fence.aligned")
            P[j % 2] = wgmma(e, kdesc(dA, j), kdesc(dB, j), P[j % 2], "zero", "e4m3", 32)
            e.line("nvvm.wgmma.commit.group.sync.aligned")
            if j == 0:
                continue
            e.line(f"nvvm.wgmma.wait.group.sync.aligned {0 if 'wait0' in v['exp'] else 1}")
            if "half" in v["exp"] and j % 2 == 0:
                continue
            fa, fb = sc if hoist else load_scales(s64, j - 1)
            acc, P[(j - 1) % 2] = promote(acc, P[(j - 1) % 2], fa, fb)
        if hoist:
            sc = load_scales(s64, 3)
        e.line("nvvm.wgmma.wait.group.sync.aligned 0")
        fa, fb = sc if hoist else load_scales(s64, 3)
        release(s)
        acc, P[1] = promote(acc, P[1], fa, fb)
        return acc, P[0], P[1]

    zero = e.op(f"llvm.mlir.zero : {ACC_T}", "zero")
    e.line(f"%res:3 = scf.for %tc = {v['c0']} to {v['KTi']} step {v['c1']} "
           f"iter_args(%acc_i = {zero}, %p0_i = {zero}, %p1_i = {zero}) -> ({ACC_T}, {ACC_T}, {ACC_T}) {{")
    e.ind += 1
    a2, q0, q1 = tile_body("%tc", "%acc_i", "%p0_i", "%p1_i")
    e.line(f"scf.yield {a2}, {q0}, {q1} : {ACC_T}, {ACC_T}, {ACC_T}")
    e.ind -= 1
    e.line("}")
    acc = "%res#0"
    store_acc(e, v, acc, rowl, q)


def store_acc(e, v, acc, rowl, q):
    """C[m0+row(+8), n0 + 8j + 2q + {0,1}] <- fragment; 8-byte stores."""
    N64 = e.i64("%N")
    grow = e.i64(e.op(f"arith.addi {v['m0']}, {rowl} : i32"))
    gcol = e.i64(e.add(v["n0"], e.mul(q, 2)))
    base0 = e.add(e.mul(grow, N64, "i64"), gcol, "i64")
    base1 = e.add(base0, e.mul(N64, 8, "i64"), "i64")
    for jb in range(16):
        for r, base in ((0, base0), (1, base1)):
            i = 4 * jb + 2 * r
            x0 = e.op(f"llvm.extractvalue {acc}[{i}] : {ACC_T}")
            x1 = e.op(f"llvm.extractvalue {acc}[{i + 1}] : {ACC_T}")
            vec = e.op("llvm.mlir.undef : vector<2xf32>")
            vec = e.op(f"llvm.insertelement {x0}, {vec}[{e.ci(0)} : i32] : vector<2xf32>")
            vec = e.op(f"llvm.insertelement {x1}, {vec}[{e.ci(1)} : i32] : vector<2xf32>")
            ix = e.op(f"arith.addi {base}, {e.ci(8 * jb, 'i64')} : i64")
            p = e.op(f"llvm.getelementptr %C[{ix}] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, f32")
            e.line(f"llvm.store {vec}, {p} {{alignment = 8 : i64}} : vector<2xf32>, !llvm.ptr<1>")


# ------------------------------------------------------------------------------------------
def prmt(e, w, sel):
    return e.op(f'llvm.inline_asm asm_dialect = att "prmt.b32 $0, $1, 0, {sel:#06x};", "=r,r" {w} : (i32) -> i32', "pm")


def bf16x2_mul(e, x, f):
    xa = e.op(f"llvm.bitcast {x} : i32 to vector<2xbf16>")
    fa = e.op(f"llvm.bitcast {f} : i32 to vector<2xbf16>")
    m = e.op(f"llvm.fmul {xa}, {fa} : vector<2xbf16>")
    return e.op(f"llvm.bitcast {m} : vector<2xbf16> to i32")


def bf16_factors(e, sbyte):
    """Two packed bf16x2 factors whose product is 2^(s-7) (= 2^(s-127) * 2^120, undoing the 2^-120
    of the bit-placed e4m3 value), each exactly representable: f1 = 2^(min(s,134)-7),
    f2 = 2^(max(s,134)-134) (1 unless s > 134); s = 255 (NaN scale) gives f2 = NaN."""
    lo = e.op(f"arith.minui {sbyte}, {e.ci(134)} : i32")
    hi = e.op(f"arith.maxui {sbyte}, {e.ci(134)} : i32")
    b1 = e.a("shli", e.add(lo, 120), 7)
    b2 = e.a("shli", e.a("subi", hi, 7), 7)
    isn = e.op(f"arith.cmpi eq, {sbyte}, {e.ci(255)} : i32")
    b2 = e.op(f"arith.select {isn}, {e.ci(0x7FC0)}, {b2} : i32")
    f1 = e.a("ori", b1, e.a("shli", b1, 16))
    f2 = e.a("ori", b2, e.a("shli", b2, 16))
    return f1, f2


def gen_producer_bf16(e, v):
    """Producer warpgroup(s): thread 0 keeps the fp8 TMA ring (S stages) full; all producer
    threads dequantize exactly to bf16 into the SD-deep bf16 ring (128B-swizzled K-major panels
    of 64 k), fence the generic->async proxy, and signal the consumers.
    NP = 2: warpgroup 0 converts A, warpgroup 1 converts B (8 chunks per thread per tile);
    NP = 1: one warpgroup converts both (16 chunks)."""
    S, SD, NP = v["S"], v["SD"], v["NP"]
    BT = bars_t(v["nbars"])
    bars, tid, alg = v["bars"], v["tid"], v["alg"]
    pt = e.a("remui", tid, 128)
    # Thread -> (row rb + 16 i, fp8 chunk c).  A quarter-warp takes chunks 0-3 of one row and
    # chunks 4-7 of the row next to it (rows 2g, 2g+1: their swizzle phases differ in bit 0), so
    # both its 16-byte fp8 loads and its 16-byte bf16 stores (chunks 2(c%4)[+1] of panel c/4)
    # land on 8 different bank groups.  (Mapping all 8 chunks of one row to a quarter-warp made
    # the stores of chunks c and c+4 -- same offset in the two 64-k panels -- conflict 2-way.)
    x16 = e.a("remui", pt, 16)
    qq = e.a("divui", x16, 8)
    hh = e.a("remui", e.a("divui", x16, 4), 2)
    rb = e.add(e.mul(e.a("divui", pt, 16), 2), hh)
    c = e.add(e.a("remui", x16, 4), e.mul(e.a("xori", hh, qq), 4))
    sw = e.a("remui", rb, 8)             # (row % 8) is the same for all 8 rows of the thread
    kbl = e.a("divui", c, 2)             # 32-block within the K tile
    src_off = e.i64(e.mul(e.a("xori", c, sw), 16))                       # swizzled fp8 chunk
    cc0 = e.mul(e.a("remui", c, 4), 2)
    dst_off0 = e.i64(e.mul(e.a("xori", cc0, sw), 16))                    # swizzled bf16 chunks
    dst_off1 = e.i64(e.mul(e.a("xori", e.add(cc0, 1), sw), 16))
    panel_off = e.i64(e.mul(e.a("divui", c, 4), 128 * 128))
    rb64 = e.i64(rb)
    KS = e.a("divui", "%K", 32)          # scale bytes per row
    KT1 = e.a("subi", v["KT"], 1)
    if NP == 2:
        isB = e.op(f"arith.cmpi uge, {tid}, {e.ci(128)} : i32", "isB")
        ops = [dict(
            r0=e.op(f"arith.select {isB}, {v['n0']}, {v['m0']} : i32"),
            gp=e.op(f"llvm.select {isB}, %sb, %sa : i1, !llvm.ptr<1>"),
            offS=e.op(f"arith.select {isB}, {e.ci(v['offB'], 'i64')}, {e.ci(v['offA'], 'i64')} : i64"),
            offD=e.op(f"arith.select {isB}, {e.ci(v['offBD'], 'i64')}, {e.ci(v['offAD'], 'i64')} : i64"))]
    else:
        ops = [dict(r0=v["m0"], gp="%sa", offS=v["offA"], offD=v["offAD"]),
               dict(r0=v["n0"], gp="%sb", offS=v["offB"], offD=v["offBD"])]
    NSC = 8 * len(ops)

    def load_scales(t32):
        out = []
        kb = e.add(e.mul(t32, 4), kbl)
        for o in ops:
            for i in range(8):
                row = e.add(o["r0"], e.add(rb, 16 * i))
                idx = e.i64(e.add(e.mul(row, KS), kb))
                p = e.op(f"llvm.getelementptr {o['gp']}[{idx}] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, i8")
                b = e.op(f"llvm.load {p} invariant : !llvm.ptr<1> -> i8", "sb")
                out.append(e.op(f"arith.extui {b} : i8 to i32", "sc"))
        return out

    # prologue: TMA of tiles 0 .. S-2
    for ptile in range(S - 1):
        lt = e.op(f"arith.cmpi ult, {e.ci(ptile)}, {v['KT']} : i32")
        cond = e.op(f"arith.andi {v['is0']}, {lt} : i1")
        e.line(f"scf.if {cond} {{")
        e.ind += 1
        tile_coords_and_tma(e, v, e.idx(ptile), e.idx(ptile), guard=False)
        e.ind -= 1
        e.line("}")
    sc0 = load_scales(e.ci(0))
    ity = ", ".join(["i32"] * NSC)
    iters = ", ".join(f"%sc_i{i} = {sc0[i]}" for i in range(NSC))
    e.line(f"%pres:{NSC} = scf.for %tp = {v['c0']} to {v['KTi']} step {v['c1']} iter_args({iters}) -> ({ity}) {{")
    e.ind += 1
    t = "%tp"
    t32 = e.op(f"arith.index_cast {t} : index to i32")
    # thread 0: refill the stage for tile t+S-1
    tn = e.add(t32, S - 1)
    lt = e.op(f"arith.cmpi ult, {tn}, {v['KT']} : i32")
    cond = e.op(f"arith.andi {v['is0']}, {lt} : i1")
    e.line(f"scf.if {cond} {{")
    e.ind += 1
    tni = e.op(f"arith.index_cast {tn} : i32 to index")
    sn, phn = stage_and_parity(e, tni, S, flip=True)
    esn = e.add(sn, S, "index")
    e.line(f"nvgpu.mbarrier.try_wait.parity {bars}[{esn}], {phn}, {v['ticks']} : {BT}")
    tile_coords_and_tma(e, v, tni, sn, guard=False)
    e.ind -= 1
    e.line("}")
    s, ph = stage_and_parity(e, t, S, flip=False)
    e.line(f"nvgpu.mbarrier.try_wait.parity {bars}[{s}], {ph}, {v['ticks']} : {BT}")
    d, phd = stage_and_parity(e, t, SD, flip=True)
    dqe = e.add(d, 2 * S + SD, "index")
    e.line(f"nvgpu.mbarrier.try_wait.parity {bars}[{dqe}], {phd}, {v['ticks']} : {BT}")
    # prefetch the scales of tile t+1 (clamped; the last iteration reloads tile KT-1)
    tnext = e.op(f"arith.minui {e.add(t32, 1)}, {KT1} : i32")
    scn = load_scales(tnext)
    sc = [f"%sc_i{i}" for i in range(NSC)]
    s64 = e.i64(e.op(f"arith.index_cast {s} : index to i32"))
    d64 = e.i64(e.op(f"arith.index_cast {d} : index to i32"))

    def convert(two_factor):
        for X, o in enumerate(ops):
            if "Aonly" in v["exp"] and X == 1:
                continue
            stg = e.add(alg, e.add(e.mul(s64, 128 * 128, "i64"), o["offS"], "i64"), "i64")
            dq = e.add(alg, e.add(e.mul(d64, 2 * 128 * 128, "i64"), o["offD"], "i64"), "i64")
            dq = e.add(dq, panel_off, "i64")
            rows = []
            for i in range(8):     # all loads first: 8 independent 16-byte chunks in flight
                row_off = e.mul(e.add(rb64, 16 * i, "i64"), 128, "i64")
                src = e.add(e.add(stg, row_off, "i64"), src_off, "i64")
                rows.append((row_off, e.op(f"llvm.load {e.sptr(src)} {{alignment = 16 : i64}} : !llvm.ptr<3> -> vector<4xi32>", "q")))
            for i, (row_off, v4) in enumerate(rows):
                sbyte = sc[8 * X + i]
                if two_factor:
                    fs = bf16_factors(e, sbyte)
                else:    # 2^(s-7) as bf16, s <= 134: one exact factor
                    b1 = e.a("shli", e.add(sbyte, 120), 7)
                    fs = (e.a("ori", b1, e.a("shli", b1, 16)),)
                outs = []
                for wi in range(4):
                    w = e.op(f"llvm.extractelement {v4}[{e.ci(wi)} : i32] : vector<4xi32>")
                    for sel in (0x1404, 0x3424):
                        x = prmt(e, w, sel)
                        y = e.a("ori", e.a("andi", x, 0x80008000 - (1 << 32)),
                                e.a("andi", e.a("shrui", x, 4), 0x07F007F0))
                        for f in ([] if "nomul" in v["exp"] else fs):
                            y = bf16x2_mul(e, y, f)
                        outs.append(y)
                for half, doff in ((0, dst_off0), (1, dst_off1)):
                    vec = e.op("llvm.mlir.undef : vector<4xi32>")
                    for u in range(4):
                        vec = e.op(f"llvm.insertelement {outs[4 * half + u]}, {vec}[{e.ci(u)} : i32] : vector<4xi32>")
                    dst = e.add(e.add(dq, row_off, "i64"), doff, "i64")
                    e.line(f"llvm.store {vec}, {e.sptr(dst)} {{alignment = 16 : i64}} : vector<4xi32>, !llvm.ptr<3>")

    if "no_dequant" not in v["exp"]:
        # warp-uniform choice: one bf16 factor 2^(s-7) unless some lane has s > 134 (or NaN)
        mx = sc[0]
        for x in sc[1:]:
            mx = e.op(f"arith.maxui {mx}, {x} : i32")
        big = e.op(f"arith.cmpi ugt, {mx}, {e.ci(134)} : i32")
        anybig = e.op(f"nvvm.vote.sync any {e.ci(-1)}, {big} -> i1", "slow")
        e.line(f"scf.if {anybig} {{")
        e.ind += 1
        convert(True)
        e.ind -= 1
        e.line("} else {")
        e.ind += 1
        convert(False)
        e.ind -= 1
        e.line("}")
    # generic-proxy smem writes -> async-proxy (wgmma) reads: fence before the release
    e.line("nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}")
    e.op(f"nvgpu.mbarrier.arrive {bars}[{e.add(d, 2 * S, 'index')}] : {BT} -> !nvgpu.mbarrier.token", "tok")
    e.op(f"nvgpu.mbarrier.arrive {bars}[{e.add(s, S, 'index')}] : {BT} -> !nvgpu.mbarrier.token", "tok")
    e.line(f"scf.yield {', '.join(scn)} : {ity}")
    e.ind -= 1
    e.line("}")


def gen_consumer_bf16(e, v):
    S, SD = v["S"], v["SD"]
    BT = bars_t(v["nbars"])
    bars, tid, alg = v["bars"], v["tid"], v["alg"]
    ct = e.a("subi", tid, 128 * v["NP"])
    cw = e.a("divui", ct, 128)
    wt = e.a("remui", ct, 128)
    w = e.a("divui", wt, 32)
    l = e.a("remui", wt, 32)
    q = e.a("remui", l, 4)
    rowl = e.add(e.mul(cw, 64), e.add(e.mul(w, 16), e.a("divui", l, 4)))
    aoff_cw = e.mul(e.i64(cw), 64 * 128, "i64")
    def tile(t, acc, first):
        d, ph = stage_and_parity(e, t, SD, flip=False)
        dqf = e.add(d, 2 * S, "index")
        e.line(f"nvgpu.mbarrier.try_wait.parity {bars}[{dqf}], {ph}, {v['ticks']} : {BT}")
        d64 = e.i64(e.op(f"arith.index_cast {d} : index to i32"))
        so = e.mul(d64, 2 * 128 * 128, "i64")
        e.line("nvvm.wgmma.fence.aligned")
        for p in range(2):
            aA = e.add(alg, e.add(so, e.add(aoff_cw, v["offAD"] + p * 128 * 128, "i64"), "i64"), "i64")
            aB = e.add(alg, e.add(so, v["offBD"] + p * 128 * 128, "i64"), "i64")
            dA, dB = make_desc(e, aA), make_desc(e, aB)
            for i in range(4):
                da = dA if i == 0 else e.add(dA, 2 * i, "i64")
                db = dB if i == 0 else e.add(dB, 2 * i, "i64")
                # the very first wgmma starts the accumulator (scale-d = 0): no zero-fill
                sd = "zero" if (first and p == 0 and i == 0) else "one"
                acc = wgmma(e, da, db, acc, sd, "bf16", 16)
        e.line("nvvm.wgmma.commit.group.sync.aligned")
        e.line("nvvm.wgmma.wait.group.sync.aligned 1")
        if not first:
            # the previous tile's wgmmas are complete: hand its bf16 buffer back
            tp = e.op(f"arith.subi {t}, {v['c1']} : index")
            dp = e.op(f"arith.remui {tp}, {e.idx(SD)} : index")
            e.op(f"nvgpu.mbarrier.arrive {bars}[{e.add(dp, 2 * S + SD, 'index')}] : {BT} -> !nvgpu.mbarrier.token", "tok")
        return acc

    # tile 0 peeled (K >= 128 always): no zero-initialized accumulator path exists, which
    # ptxas would otherwise see as a divergent definition of the wgmma registers (C7520)
    undef = e.op(f"llvm.mlir.undef : {ACC_T}", "undef")
    acc0 = tile(v["c0"], undef, True)
    e.line(f"%cres = scf.for %tc = {v['c1']} to {v['KTi']} step {v['c1']} iter_args(%acc_i = {acc0}) -> ({ACC_T}) {{")
    e.ind += 1
    acc = tile("%tc", "%acc_i", False)
    e.line(f"scf.yield {acc} : {ACC_T}")
    e.ind -= 1
    e.line("}")
    e.line("nvvm.wgmma.wait.group.sync.aligned 0")
    store_acc(e, v, "%cres", rowl, q)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--variant", choices=["fp8", "bf16"], default="fp8")
    ap.add_argument("--stages", type=int, default=None)
    ap.add_argument("--maxreg-prod", type=int, default=40)
    ap.add_argument("--maxreg-cons", type=int, default=232)
    ap.add_argument("--fbvec", type=int, default=4, choices=[1, 2, 4])
    ap.add_argument("--ticks", type=int, default=1000000, help="mbarrier try_wait suspend-time hint (ns)")
    ap.add_argument("--maxreg-prod-bf16", type=int, default=144,
                    help="bf16 with 2 producer warpgroups: setmaxnreg for producers (consumers get 256-x)")
    ap.add_argument("--name", default=None)
    ap.add_argument("--nprod", type=int, default=2, help="bf16: producer (dequant) warpgroups, 1 or 2")
    ap.add_argument("--exp", default="", help="comma list. Timing experiments that give wrong "
                    "results on purpose: no_promote, no_scales, const_scales, fma_only, half (fp8); "
                    "no_dequant, nomul, Aonly (bf16).  Variants that stay correct: wait0, nopin, "
                    "hoist (fp8)")
    ap.add_argument("-o", "--output", default="-")
    ap.add_argument("--info", action="store_true")
    a = ap.parse_args()
    name = a.name or f"mxgemm_{a.variant}"
    stages = a.stages or (5 if a.variant == "fp8" else 3)
    exp = tuple(x for x in a.exp.split(",") if x)
    global TICKS, FBVEC
    TICKS = a.ticks
    FBVEC = a.fbvec
    text, smem, nt = gen(a.variant, stages, a.maxreg_prod, a.maxreg_cons, name, a.nprod, exp,
                         a.maxreg_prod_bf16)
    if a.info:
        print(f"{name} smem_bytes={smem} threads={nt} tile={BM}x{BN}")
        return
    if a.output == "-":
        sys.stdout.write(text)
    else:
        open(a.output, "w").write(text)


if __name__ == "__main__":
    main()
