// sm_120a (compile-verified only, docs/numerics.md): the five MX GEMMs of
// the embedded example layer on warp-level
// mma.sync.aligned.m16n8k32...kind::mxf8f6f4.block_scale.scale_vec::1X.
// The producer warpgroup loads the 128-byte code panels by TMA and each
// row's 4 scale bytes as one word; each of the 8 consumer warps (32 x 64 of
// the 128 x 128 tile) per K = 32 step loads its A fragments (2) and B
// fragment pairs (4) with ldmatrix.x4 from the swizzled panels and issues
// 2 x 8 MMAs, the scale words as the instruction's scale operands (byte-id
// = the K-block, thread-id 0: BlockScaleLayouts.h's packing). No wgmma, no
// tcgen05. ptxas -arch=sm_120a takes all five without spills. It reports
// an 8-byte stack frame: it implements the TMA load of sm_120a with a call
// (and then ignores setmaxnreg, C7506).
// REQUIRES: ptxas
// RUN: moe-opt %S/../../../examples/blockwise_bwd.mlir --moe-decompose-bwd --moe-fuse | moe-opt --moe-gpu-device-pipeline="chip=sm_120a format=isa" | %python %S/Inputs/extract-ptx.py > %t.ptx
// RUN: FileCheck %s --implicit-check-not=wgmma --implicit-check-not=tcgen05 < %t.ptx
// RUN: FileCheck %s --check-prefix=ENTRIES < %t.ptx
// RUN: FileCheck %s --check-prefix=EACH < %t.ptx
// RUN: %ptxas -arch=sm_120a -v %t.ptx -o %t.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// e5m2 codes: the instruction's .e5m2.e5m2 types.
// RUN: %moe_obj/bin/moe-run --gemm M=512,N=512,K=512,G=2,quant=e5m2 --print-layer-ir | moe-opt --moe-gpu-device-pipeline="chip=sm_120a format=isa" | %python %S/Inputs/extract-ptx.py | FileCheck %s --check-prefix=E5M2
// E5M2-COUNT-64: mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale.scale_vec::1X.f32.e5m2.e5m2.f32.ue8m0

// ENTRIES:         .version 8.8
// ENTRIES:         .target sm_120a
// ENTRIES-COUNT-3: .visible .entry mx_block_matmul_
// ENTRIES-COUNT-2: .visible .entry mx_expert_matmul_
// ENTRIES-NOT:     .entry

// Each of the five kernels, in order: per K = 32 step of a warp, 2 A and
// 4 B ldmatrix.x4 and 16 MMAs, 4 steps per K tile.
// EACH-LABEL:    .entry mx_block_matmul_0(
// EACH:            cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
// EACH-COUNT-6:    ldmatrix.sync.aligned.m8n8.x4.shared.b16
// EACH-COUNT-64:   mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale.scale_vec::1X.f32.e4m3.e4m3.f32.ue8m0
// EACH:            st.global.v2.b32
// EACH-LABEL:    .entry mx_block_matmul_1(
// EACH:            cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
// EACH-COUNT-6:    ldmatrix.sync.aligned.m8n8.x4.shared.b16
// EACH-COUNT-64:   mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale.scale_vec::1X.f32.e4m3.e4m3.f32.ue8m0
// EACH:            st.global.v2.b32
// EACH-LABEL:    .entry mx_block_matmul_2(
// EACH:            cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
// EACH-COUNT-6:    ldmatrix.sync.aligned.m8n8.x4.shared.b16
// EACH-COUNT-64:   mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale.scale_vec::1X.f32.e4m3.e4m3.f32.ue8m0
// EACH:            st.global.v2.b32
// EACH-LABEL:    .entry mx_expert_matmul_3(
// EACH:            cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
// EACH-COUNT-6:    ldmatrix.sync.aligned.m8n8.x4.shared.b16
// EACH-COUNT-64:   mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale.scale_vec::1X.f32.e4m3.e4m3.f32.ue8m0
// EACH:            st.global.v2.b32
// EACH-LABEL:    .entry mx_expert_matmul_4(
// EACH:            cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
// EACH-COUNT-6:    ldmatrix.sync.aligned.m8n8.x4.shared.b16
// EACH-COUNT-64:   mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale.scale_vec::1X.f32.e4m3.e4m3.f32.ue8m0
// EACH:            st.global.v2.b32

// CHECK-LABEL: .entry mx_block_matmul_0(
// CHECK:         cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
// CHECK-COUNT-6: ldmatrix.sync.aligned.m8n8.x4.shared.b16
// CHECK:         mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale.scale_vec::1X.f32.e4m3.e4m3.f32.ue8m0
// CHECK-NEXT:      {{[{]}}%r{{[0-9]+}}, %r{{[0-9]+}}, %r{{[0-9]+}}, %r{{[0-9]+}}},
// CHECK-NEXT:      {{[{]}}[[A0:%r[0-9]+]], [[A1:%r[0-9]+]], [[A2:%r[0-9]+]], [[A3:%r[0-9]+]]},
// CHECK-NEXT:      {{[{]}}[[B0:%r[0-9]+]], [[B1:%r[0-9]+]]},
// CHECK-NEXT:      {{[{]}}%r{{[0-9]+}}, %r{{[0-9]+}}, %r{{[0-9]+}}, %r{{[0-9]+}}},
// CHECK-NEXT:      %r{{[0-9]+}}, {[[SEL:%rs[0-9]+]], [[SEL]]},
// CHECK-NEXT:      %r{{[0-9]+}}, {[[SEL]], [[SEL]]};
// CHECK-COUNT-63: mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale.scale_vec::1X.f32.e4m3.e4m3.f32.ue8m0
// CHECK-NOT:     mma.sync
// CHECK:         mbarrier.arrive.shared.b64
// CHECK:         st.global.v2.b32

// PTXAS-NOT:     error
// PTXAS-NOT:     warning
// PTXAS-COUNT-5: 8 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// PTXAS-NOT:     bytes stack frame
