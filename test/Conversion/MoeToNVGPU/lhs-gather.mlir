// RUN: %moe_obj/bin/moe-run --layer T=256,H=256,I=128,E=2,K=2,B=128 --print-layer-ir | moe-opt --moe-decompose-bwd --moe-fuse --moe-gpu-kernel-config="lhs-gather=true" > %t.config.mlir
// RUN: FileCheck %s --check-prefix=CONFIG < %t.config.mlir
// RUN: moe-opt %t.config.mlir -convert-moe-to-nvgpu="lhs-gather=true" | FileCheck %s
// REQUIRES: ptxas
// RUN: %moe_obj/bin/moe-run --layer T=256,H=256,I=128,E=2,K=2,B=128 --print-layer-ir | moe-opt --moe-decompose-bwd --moe-fuse | moe-opt --moe-gpu-device-pipeline="chip=sm_90a format=isa toolkit=%cuda_root lhs-gather=true" | %python %S/Inputs/extract-ptx.py > %t.layer.ptx
// RUN: FileCheck %s --check-prefix=PTX < %t.layer.ptx
// RUN: %ptxas -arch=sm_90a -v %t.layer.ptx -o %t.layer.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS

// #moe.gemm_config lhs_gather (moe-gpu-kernel-config lhs-gather, off by
// default; not yet run on the H200): the block GEMMs whose lhs rows are
// gathered from token rows and MX-rounded along K (x of the recompute, dy
// of P1) read the token rows rounded once, T rows instead of T * K, and the
// producer loads each row of a tile by its own TMA box from its slot's
// token row. The rounding is along a row, so the rows are the gathered
// copy's.
//
// The recompute GEMM and P1 take it; P2 (the lhs [dg | du], not gathered)
// and the expert GEMMs do not.
// CONFIG:      moe.block_matmul {{.*}}lhs_gather = true
// CONFIG:      moe.block_matmul {{.*}}lhs_gather = true
// CONFIG-NOT:  lhs_gather

// x's operand kernel rounds the 256 token rows, with no ids; the GEMM's
// lhs map is over them, one 128-byte row a box, and it takes the token ids
// (pointer 3). The slot rounding of x for P3 is a kernel of its own,
// through the ids (no longer the both-axes partner of the recompute's).
// CHECK:       call @mx_operand_0_launch(%{{.*}}, %{{.*}}) : (memref<256x256xbf16>, memref<256x256xbf16>) -> ()
// CHECK:       call @block_matmul_2_launch({{.*}}) : (memref<256x256xbf16>, memref<2x256x256xbf16>, memref<5xi32>, memref<640xi32>, memref<640x256xf32>) -> ()
// CHECK:       call @mx_operand_3_launch(%{{.*}}, %{{.*}}) : (memref<256x256xbf16>, memref<256x256xbf16>) -> ()
// CHECK:       call @block_matmul_5_launch({{.*}}) : (memref<256x256xbf16>, memref<2x128x256xbf16>, memref<5xi32>, memref<640xi32>, memref<640x128xf32>) -> ()
// CHECK:       call @mx_operand_8_launch(%{{.*}}, %{{.*}}, %{{.*}}) : (memref<256x256xbf16>, memref<640xi32>, memref<640x256xbf16>) -> ()
// CHECK-LABEL: func.func private @mx_operand_0_launch(
// CHECK-SAME:    pointers = [0, 1]>
// CHECK-LABEL: func.func private @block_matmul_2_launch(
// CHECK-SAME:    tensor_maps = [0 : !nvgpu.tensormap.descriptor<tensor = memref<1x128xi8, 3>, swizzle = swizzle_128b, l2promo = l2promo_256b, oob = zero, interleave = none>,
// CHECK-SAME:    pointers = [4, 2, 3]>
//
// The producer: 128 one-row loads a stage, each at row r's offset of the
// stage (r * 128 bytes) from the token row of slot m0 + r, or from row 256
// (past the end: zeros) for a padding slot, the tile's token ids read 4 at
// a time; the stage still expects the whole tile's bytes.
// CHECK-LABEL: gpu.func @block_matmul_2(
// CHECK:         nvgpu.mbarrier.arrive.expect_tx %{{.*}}, %c49152
// CHECK:         scf.for %{{.*}} = %c0{{.*}} to %c128{{.*}} step %c4{{.*}} {
// CHECK:           %[[IDS:.*]] = llvm.load %{{.*}} invariant {alignment = 16 : i64} : !llvm.ptr<1> -> vector<4xi32>
// CHECK:           llvm.extractelement %[[IDS]]
// CHECK:           arith.select %{{.*}}, %{{.*}}, %c256_i32{{.*}} : i32
// CHECK-COUNT-4:   nvgpu.tma.async.load {{.*}} : <tensor = memref<1x128xi8, 3>, swizzle = swizzle_128b, {{.*}}> -> memref<1x128xi8, 3>
// CHECK:         }
// CHECK:         nvgpu.tma.async.load {{.*}} -> memref<64x128xi8, 3>

// In the PTX, the one-row loads in the recompute GEMM's producer, the row
// past the end for padding.
// PTX-LABEL: .entry block_matmul_2(
// PTX:       selp.b32 {{.*}}, 256, %p{{[0-9]+}};
// PTX:       cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
// PTX-LABEL: .entry block_matmul_5(
// PTX:       cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes

// PTXAS-COUNT-12: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// PTXAS-NOT:      bytes spill stores
