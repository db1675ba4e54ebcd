// RUN: %moe_obj/bin/moe-run --layer T=256,H=256,I=128,E=2,K=2,B=128 --print-layer-ir | moe-opt --moe-decompose-bwd --moe-fuse --moe-gpu-kernel-config="lhs-gather=true round-reuse=0 weight-reuse=0" > %t.config.mlir
// RUN: FileCheck %s --check-prefix=CONFIG < %t.config.mlir
// RUN: moe-opt %t.config.mlir -convert-moe-to-nvgpu="lhs-gather=true round-reuse=0 weight-reuse=0" | FileCheck %s
// REQUIRES: ptxas
// RUN: %moe_obj/bin/moe-run --layer T=256,H=256,I=128,E=2,K=2,B=128 --print-layer-ir | moe-opt --moe-decompose-bwd --moe-fuse | moe-opt --moe-gpu-device-pipeline="chip=sm_90a format=isa toolkit=%cuda_root lhs-gather=true round-reuse=0 weight-reuse=0" | %python %S/Inputs/extract-ptx.py > %t.layer.ptx
// RUN: FileCheck %s --check-prefix=PTX < %t.layer.ptx
// RUN: %ptxas -arch=sm_90a -v %t.layer.ptx -o %t.layer.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS

// #moe.gemm_config lhs_gather (moe-gpu-kernel-config lhs-gather, off by
// default): the block GEMMs whose lhs rows are gathered from token rows and
// MX-rounded along K (x of the recompute, dy of P1) read the token rows
// rounded once, T rows instead of T * K, and the producer warpgroup copies
// each row of a tile from its slot's token row with cp.async. The rounding
// is along a row, so the rows are the gathered copy's.
//
// The recompute GEMM and P1 take it; P2 (the lhs [dg | du], not gathered)
// and the expert GEMMs do not.
// CONFIG:      moe.block_matmul {{.*}}lhs_gather = true
// CONFIG:      moe.block_matmul {{.*}}lhs_gather = true
// CONFIG-NOT:  lhs_gather

// x's operand kernel rounds the 256 token rows, with no ids; the GEMM has
// no lhs map (the rhs's, argument 1, then the result's, argument 4:
// tma_store): the token rows are its first pointer, then the blocks'
// experts and the token ids. The
// slot rounding of x for P3 is a kernel of its own, through the ids (no
// longer the both-axes partner of the recompute's).
// CHECK:       call @mx_operand_0_launch(%{{.*}}, %{{.*}}) : (memref<256x256xbf16>, memref<256x256xbf16>) -> ()
// CHECK:       call @block_matmul_2_launch({{.*}}) : (memref<256x256xbf16>, memref<2x256x256xbf16>, memref<5xi32>, memref<640xi32>, memref<640x256xf32>) -> ()
// CHECK:       call @mx_operand_3_launch(%{{.*}}, %{{.*}}) : (memref<256x256xbf16>, memref<256x256xbf16>) -> ()
// CHECK:       call @block_matmul_5_launch({{.*}}) : (memref<256x256xbf16>, memref<2x128x256xbf16>, memref<5xi32>, memref<640xi32>, memref<640x128xf32>) -> ()
// CHECK:       call @mx_operand_8_launch(%{{.*}}, %{{.*}}, %{{.*}}) : (memref<256x256xbf16>, memref<640xi32>, memref<640x256xbf16>) -> ()
// CHECK-LABEL: func.func private @mx_operand_0_launch(
// CHECK-SAME:    pointers = [0, 1]>
// CHECK-LABEL: func.func private @block_matmul_2_launch(
// CHECK-SAME:    tensor_maps = [1 : !nvgpu.tensormap.descriptor<tensor = memref<64x128xi8, 3>, {{.*}}>, 4 : !nvgpu.tensormap.descriptor<tensor = memref<64x128xi8, 3>, {{.*}}>],
// CHECK-SAME:    pointers = [0, 2, 3]>
// CHECK-LABEL: func.func private @block_matmul_5_launch(
// CHECK-SAME:    tensor_maps = [1 : {{.*}}, 4 : {{.*}}], counters = 1, pointers = [0, 2, 3]>
//
// The recompute GEMM (one CTA per tile): full[s] counts thread 0's
// expect_tx (the rhs tile's 32 KB only) and the 128 producer threads'
// cp.async arrivals. Each producer thread reads the token ids of its 8 rows
// once, then copies 8 chunks of 16 bytes a stage: source size 16, or 0 for
// a padding slot (zeros), from token row * 512 bytes (K = 256 bf16s), and
// has full[s] track them. The consumers fence the generic proxy's writes
// from their wgmmas.
// CHECK-LABEL: gpu.func @block_matmul_2(
// CHECK:         nvgpu.mbarrier.init %{{.*}}[%c0{{.*}}], %c129
// CHECK-COUNT-8: llvm.load %{{.*}} invariant {alignment = 4 : i64} : !llvm.ptr<1> -> i32
// CHECK:         scf.for
// CHECK:           nvgpu.mbarrier.try_wait.parity
// CHECK:           nvgpu.mbarrier.arrive.expect_tx %{{.*}}, %c32768
// CHECK:           arith.select %{{.*}}, %c16_i32{{.*}}, %c0_i32{{.*}} : i32
// CHECK:           arith.muli %{{.*}}, %c512_i32{{.*}} : i32
// CHECK:           nvvm.cp.async.shared.global {{.*}}, 16, cache =  cg, %{{.*}} : !llvm.ptr<3>, !llvm.ptr<1>, i32
// CHECK-COUNT-7:   nvvm.cp.async.shared.global
// CHECK:           nvvm.cp.async.mbarrier.arrive %{{.*}} {noinc = true} : !llvm.ptr<3>
// CHECK:         nvgpu.mbarrier.try_wait.parity
// CHECK-NEXT:    nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// CHECK:         nvvm.wgmma.mma_async
//
// P1 (persistent): the producer threads but thread 0 receive the tile ids
// as the consumers do (each tile slot's empty barrier counts 256 consumers
// and 127 producers).
// CHECK-LABEL: gpu.func @block_matmul_5(
// CHECK:         nvgpu.mbarrier.init %{{.*}}, %c383
// CHECK:         nvvm.cp.async.mbarrier.arrive %{{.*}} {noinc = true}
// CHECK:         nvvm.cp.async.mbarrier.arrive %{{.*}} {noinc = true}

// In the PTX, the recompute GEMM's producer copies with zero fill for
// padding and no lhs tensor loads; P1's too.
// PTX-LABEL: .entry block_matmul_2(
// PTX:       selp.b32 {{.*}}, {{16, 0|0, 16}}, %p{{[0-9]+}};
// PTX:       cp.async.cg.shared.global [%rd{{[0-9]+}}], [%rd{{[0-9]+}}], 16, %r{{[0-9]+}};
// PTX:       cp.async.mbarrier.arrive.noinc.shared.b64
// PTX:       fence.proxy.async.shared::cta;
// PTX-LABEL: .entry block_matmul_5(
// PTX:       cp.async.cg.shared.global
// PTX:       cp.async.mbarrier.arrive.noinc.shared.b64

// PTXAS-COUNT-12: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// PTXAS-NOT:      bytes spill stores
