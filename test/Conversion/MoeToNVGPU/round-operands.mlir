// RUN: %moe_obj/bin/moe-run --layer T=256,H=256,I=128,E=2,K=2,B=128 --print-layer-ir | moe-opt --moe-decompose-bwd --moe-fuse --moe-gpu-kernel-config="round-lhs=true round-rhs=true tma-store=false round-reuse=0" > %t.config.mlir
// RUN: FileCheck %s --check-prefix=CONFIG < %t.config.mlir
// RUN: %moe_obj/bin/moe-run --layer T=256,H=256,I=128,E=2,K=2,B=128 --print-layer-ir | moe-opt --moe-decompose-bwd --moe-fuse --moe-gpu-kernel-config="round-lhs=true tma-store=false round-reuse=0" | FileCheck %s --check-prefix=LHS-ONLY
// RUN: %moe_obj/bin/moe-run --layer T=256,H=256,I=128,E=2,K=2,B=128 --print-layer-ir | moe-opt --moe-decompose-bwd --moe-fuse --moe-gpu-kernel-config="tma-store=false round-reuse=0" | FileCheck %s --check-prefix=DEFAULT
// RUN: moe-opt %t.config.mlir -convert-moe-to-nvgpu="tma-store=false round-reuse=0" | FileCheck %s
// RUN: %moe_obj/bin/moe-run --layer T=256,H=256,I=128,E=2,K=2,B=128,quant=e5m2 --print-layer-ir | moe-opt --moe-decompose-bwd --moe-fuse --moe-gpu-kernel-config="round-lhs=true round-rhs=true tma-store=false round-reuse=0" | moe-opt -convert-moe-to-nvgpu="tma-store=false round-reuse=0" | FileCheck %s --check-prefix=E5M2
// RUN: sed 's/persistent = true, round_rhs = true/persistent = true, round_lhs = true/' %t.config.mlir | not moe-opt -convert-moe-to-nvgpu="tma-store=false round-reuse=0" 2>&1 | FileCheck %s --check-prefix=NOT-GATHERED
// RUN: sed 's/stages = 4\(.*\)round_lhs = true/stages = 2\1round_lhs = true/' %t.config.mlir | not moe-opt -convert-moe-to-nvgpu="tma-store=false round-reuse=0" 2>&1 | FileCheck %s --check-prefix=STAGES
// REQUIRES: ptxas
// RUN: moe-opt %t.config.mlir --moe-gpu-device-pipeline="chip=sm_90a format=isa toolkit=%cuda_root round-lhs=true round-rhs=true tma-store=false round-reuse=0" | %python %S/Inputs/extract-ptx.py > %t.layer.ptx
// RUN: FileCheck %s --check-prefix=PTX < %t.layer.ptx
// RUN: %ptxas -arch=sm_90a -v %t.layer.ptx -o %t.layer.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS

// #moe.gemm_config round_lhs / round_rhs (moe-gpu-kernel-config
// round-operands, off by default, docs/sm90a-kernels.md): an expert GEMM's
// operand that is rows gathered from token rows and MX-rounded along the
// slots (x of P3, dy of P4) is gathered by the GEMM's producer warpgroup
// and rounded in the kernel, so that no rounded copy of it is written: the
// lhs by the consumers in their A-fragment registers, the rhs by the
// producer warpgroup in shared memory.
// P3 keeps the table's registers (the consumers need 232: with 216,
// ptxas serialized the register-A wgmmas); P4's producer rounds with 64.
// CONFIG:      moe.expert_matmul {{.*}}stages = 4, {{.*}}registers = [40, 232], rhs_n_major = true, lhs_m_major = true, persistent = true, round_lhs = true>
// CONFIG:      moe.expert_matmul {{.*}}stages = 4, {{.*}}registers = [64, 216], rhs_n_major = true, lhs_m_major = true, persistent = true, round_rhs = true>
// DEFAULT-NOT: round_lhs
// DEFAULT-NOT: round_rhs
// Each switch sets its own operand's: round-lhs alone, P3's.
// LHS-ONLY:      moe.expert_matmul {{.*}}registers = [40, 232], rhs_n_major = true, lhs_m_major = true, persistent = true, round_lhs = true>
// LHS-ONLY:      moe.expert_matmul {{.*}}lhs_m_major = true, persistent = true{{(, tma_store = [0-9]+)?}}>
// LHS-ONLY-NOT:  round_rhs

// No operand kernel rounds x or dy along the slots: P3 takes x [T, H] and
// P4 dy [T, H] themselves, as their first pointer after the other
// operand's tensor map (P3: the rhs's, argument 1; P4: the lhs's,
// argument 0).
// CHECK-NOT:   call @mx_operand_{{[0-9]+}}_launch({{.*}}memref<640x256xbf16>) -> ()
// CHECK:       call @expert_matmul_8_launch({{.*}}) : (memref<256x256xbf16>, memref<640x256xbf16>, memref<5xi32>, memref<640xi32>, memref<2x256x256xf32>) -> ()
// CHECK:       call @expert_matmul_9_launch({{.*}}) : (memref<640x128xbf16>, memref<256x256xbf16>, memref<5xi32>, memref<640xi32>, memref<2x128x256xf32>) -> ()
// CHECK-LABEL: func.func private @expert_matmul_8_launch(
// CHECK-SAME:    tensor_maps = [1 : !nvgpu.tensormap.descriptor<tensor = memref<64x128xi8, 3>, {{.*}}>], counters = 1, pointers = [0, 4, 2, 3]>
// CHECK-LABEL: func.func private @expert_matmul_9_launch(
// CHECK-SAME:    tensor_maps = [0 : !nvgpu.tensormap.descriptor<tensor = memref<64x128xi8, 3>, {{.*}}>], counters = 1, pointers = [1, 4, 2, 3]>
//
// P3: full[s] counts thread 0's expect_tx (the rhs tile's 32 KB only) and
// the 128 producer threads' copies (cp.async.mbarrier.arrive.noinc); each
// tile slot's empty barrier counts the 256 consumers and 127 producers. A
// K tile's copies (16-byte chunks, source size 0 for a padding slot or a
// column past H) arrive when they land. The consumers load each k16 step's
// A fragments transposed from the M-major stage (ldmatrix .trans: the
// `col` layout), take each row's 32-slot amax over the lane quad (packed
// max.NaN.xorsign.abs.bf16x2 chains, then max.u16x2 and shfl.xor 1 and 2).
// An RCEIL block rounds on its bits
// (mxRoundPairBits: the bound from the amax, M's bits by one lop3, two
// fma.rn.bf16x2 a word)
// unless the warp votes that a block does not fit (mxBitsBlockFits: an
// amax from 0x7D00 up, or tiny and nonzero); such a warp shares the quad's
// four scale bytes (one shared-builder scale byte per lane, gathered by
// two more shuffles), rounds with the pair conversion and decodes with one
// factor unless its vote needs two. Then the register-A wgmma.
// CHECK-LABEL: gpu.func @expert_matmul_8(
// CHECK:         nvgpu.mbarrier.init %{{.*}}[%c0{{.*}}], %c129
// CHECK:         nvgpu.mbarrier.init %{{.*}}, %c383
// CHECK:         nvgpu.mbarrier.arrive.expect_tx %{{.*}}, %c32768
// CHECK:         nvvm.cp.async.shared.global {{.*}}, 16, cache =  cg, %{{.*}} : !llvm.ptr<3>, !llvm.ptr<1>, i32
// CHECK:         nvvm.cp.async.mbarrier.arrive %{{.*}} {noinc = true}
// CHECK-NOT:     nvvm.cp.async.wait.group
// CHECK:         nvvm.ldmatrix {{.*}}layout = #nvvm.mma_layout<col>, num = 4
// CHECK:         "max.NaN.xorsign.abs.bf16x2 $0, $1, $2;"
// CHECK:         "prmt.b32 $0, $1, $2, 0x5410;"
// CHECK-NEXT:    "prmt.b32 $0, $1, $2, 0x7632;"
// CHECK-NEXT:    "max.u16x2 $0, $1, $2;"
// CHECK:         gpu.shuffle xor %{{.*}}, %c1_i32
// CHECK:         gpu.shuffle xor %{{.*}}, %c2_i32
// CHECK:         "min.u16x2 $0, $1, $2;"
// CHECK:         %c1888_i32 = arith.constant 1888 : i32
// CHECK:         %[[MISFIT:.*]] = nvvm.vote.sync any
// CHECK:         scf.if %[[MISFIT]]
// CHECK:         nvvm.convert.f32x2.to.f8x2 {{.*}}satfinite
// CHECK:         "prmt.b32 $0, $1, 0, 0x1404;"
// CHECK:         nvvm.vote.sync any
// CHECK:         llvm.fmul {{.*}} : vector<2xbf16>
// CHECK:         } else {
// CHECK:         "prmt.b32 $0, $1, $2, 0x1010;"
// CHECK:         "prmt.b32 $0, $1, $2, 0x3232;"
// CHECK:         "max.xorsign.abs.bf16x2 $0, $1, $2;"
// CHECK:         %c4194368_i32 = arith.constant 4194368 : i32
// CHECK:         "lop3.b32 $0, $1, $2, $3, 0xEA;"
// CHECK:         "fma.rn.bf16x2 $0, $1, $2, $3;"
// CHECK-SAME:      %c1098924416_i32
// CHECK:         "fma.rn.bf16x2 $0, $1, $2, $3;"
// CHECK-SAME:      %c-1048526464_i32
// CHECK:         wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16
// CHECK:       gpu.func @expert_matmul_9(
// The element type's constants (MXBitRounding): the misfit bound
// (smallest - 1: 0x760 for e4m3, 0xEE0 for e5m2) and the step 2^(7 - f)
// that scales M to C (bf16 16.0 in both lanes: 0x41804180, and -16.0 for
// the second fma; 32.0: 0x42004200).
// E5M2-LABEL:  gpu.func @expert_matmul_8(
// E5M2:          %c3808_i32 = arith.constant 3808 : i32
// E5M2:          nvvm.vote.sync any
// E5M2:          } else {
// E5M2:          %c1107313152_i32 = arith.constant 1107313152 : i32
// E5M2:          "fma.rn.bf16x2 $0, $1, $2, $3;"
// E5M2-SAME:       %c1107313152_i32
// E5M2-LABEL:  gpu.func @expert_matmul_9(
// E5M2:          %c3808_i32 = arith.constant 3808 : i32
// E5M2:          %c1107313152_i32 = arith.constant 1107313152 : i32

// P4: the producer warpgroup rounds dy: this thread's copies landed, the
// warpgroup's barrier (not .aligned), the rounding (a column pair's two
// blocks on the bits, or the conversions where the warp votes that a block
// does not fit), the fence towards the wgmmas' proxy and the arrival.
// CHECK:         nvvm.cp.async.commit.group
// CHECK:         nvvm.cp.async.wait.group 2
// CHECK:         llvm.inline_asm has_side_effects {{.*}}"barrier.sync 1, 128;"
// CHECK:         "max.u16x2 $0, $1, $2;"
// CHECK:         "min.u16x2 $0, $1, $2;"
// CHECK:         %[[RHS_MISFIT:.*]] = nvvm.vote.sync any
// CHECK:         scf.if %[[RHS_MISFIT]] {
// CHECK:         nvvm.convert.f32x2.to.f8x2 {{.*}}satfinite
// CHECK:         } else {
// CHECK:         "fma.rn.bf16x2 $0, $1, $2, $3;"
// CHECK:         nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// CHECK-NEXT:    nvgpu.mbarrier.arrive

// A lhs that is not gathered (P4's a * h) cannot be rounded by the kernel;
// nor can a ring of 2 stages, as deep as the copies' lookahead.
// NOT-GATHERED: error: 'moe.expert_matmul' op round_lhs needs a lhs that an mx_quantize along the slots makes of bf16 rows gathered through the GEMM's token ids
// STAGES:       error: 'moe.expert_matmul' op round_lhs needs a persistent expert GEMM on the bf16-operands MMA path with token ids, one producer warpgroup and more than 2 stages, whose M-major lhs is bf16 rows gathered through them and MX-rounded along the slots, with its columns a multiple of 8 and tile columns of 128, and no pingpong, lhs_gather, lhs_codes or rhs_codes

// In the PTX, no operand kernel after the weights' (mx_operand_4) but the
// activation backward's; P3 rounds in its consumers' registers, P4 in its
// producer warpgroup; nothing spills.
// PTX-LABEL:   .entry mx_operand_4(
// PTX-NOT:     .entry mx_operand
// PTX-LABEL:   .entry expert_matmul_8(
// PTX:         cp.async.cg.shared.global [%rd{{[0-9]+}}{{(\+[0-9]+)?}}], [%rd{{[0-9]+}}], 16, %r{{[0-9]+}};
// PTX:         cp.async.mbarrier.arrive.noinc.shared{{(::cta)?}}.b64
// PTX:         ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16
// PTX:         max.u16x2
// PTX:         shfl.sync.bfly.b32
// PTX:         min.u16x2
// PTX:         vote.sync.any.pred
// PTX:         cvt.rn.satfinite.e4m3x2.f32
// PTX:         mul.rn.bf16x2
// PTX:         fma.rn.bf16x2
// PTX:         wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {{{.*}}}, {%r{{[0-9]+}}, %r{{[0-9]+}}, %r{{[0-9]+}}, %r{{[0-9]+}}}, %rd{{[0-9]+}}
// PTX-LABEL:   .entry expert_matmul_9(
// PTX:         cp.async.wait_group 2;
// PTX:         barrier.sync 1, 128;
// PTX:         vote.sync.any.pred
// PTX:         cvt.rn.satfinite.e4m3x2.f32
// PTX:         fma.rn.bf16x2
// PTX:         fence.proxy.async.shared::cta;
// PTXAS-NOT:      C7512
// PTXAS-COUNT-10: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// PTXAS-NOT:      bytes spill stores
// PTXAS-NOT:      C7512
