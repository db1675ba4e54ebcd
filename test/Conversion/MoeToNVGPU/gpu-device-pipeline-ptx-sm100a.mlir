// sm_100a (compile-verified only, docs/numerics.md): the five MX GEMMs of
// the embedded example layer (recompute, P1, P2 as block GEMMs, P3 and P4
// as expert GEMMs) on tcgen05.mma ... kind::mxf8f6f4.block_scale. Per
// kernel: one warp allocates tensor memory (256 columns: the 128 x 128 f32
// accumulator and the per-stage scale atoms); per K tile of 128 codes the
// issuer copies the A and B scale atoms into tensor memory
// (tcgen05.cp 32x128b.warpx4, unswizzled descriptor with SBO 128 B) and
// issues four K = 32 MMAs whose instruction descriptors carry ue8m0, M =
// 128, N = 128 and the scale-factor id 0..3 (0x08A00000, 0x28A00010,
// 0x48A00020, 0x68A00030, as BlockScaleLayouts.h and its unit tests have
// them), the 128B-swizzled K-major code panels' descriptors advancing by 2
// (32 bytes) per MMA; tcgen05.commit frees the stage; the epilogue reads
// the accumulator with tcgen05.ld 32x32b.x32. No wgmma. ptxas -arch=sm_100a
// takes all five without spills.
// REQUIRES: ptxas
// RUN: moe-opt %S/../../../examples/blockwise_bwd.mlir --moe-decompose-bwd --moe-fuse | moe-opt --moe-gpu-device-pipeline="chip=sm_100a format=isa" | %python %S/Inputs/extract-ptx.py > %t.ptx
// RUN: FileCheck %s --implicit-check-not=wgmma < %t.ptx
// RUN: FileCheck %s --check-prefix=ENTRIES < %t.ptx
// RUN: FileCheck %s --check-prefix=EACH < %t.ptx
// RUN: %ptxas -arch=sm_100a -v %t.ptx -o %t.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: not moe-opt %S/../../../examples/blockwise_bwd.mlir --moe-decompose-bwd --moe-fuse --moe-gpu-kernel-config="chip=sm_100a mma-path=fp8" 2>&1 | FileCheck %s --check-prefix=NOPATH
// A 64-column tile set by hand: two 32-column tcgen05.ld per row, sixteen
// 16-byte stores; e5m2 codes (format 1 in the descriptor's A and B fields:
// 0x08A00480); a tile whose columns the 32-column loads do not divide is
// rejected.
// RUN: %moe_obj/bin/moe-run --gemm M=512,N=512,K=512,G=2 --print-layer-ir --gemm-config "#moe.gemm_config<mma = block_scale, tile = [128, 64, 128], mma_shape = [128, 64, 32], stages = 4, warpgroups = [1, 1], registers = [40, 232]>" | moe-opt --moe-gpu-device-pipeline="chip=sm_100a format=isa" | %python %S/Inputs/extract-ptx.py > %t.n64.ptx
// RUN: FileCheck %s --check-prefix=N64 < %t.n64.ptx
// RUN: %ptxas -arch=sm_100a -v %t.n64.ptx -o %t.n64.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS1
// RUN: %moe_obj/bin/moe-run --gemm M=512,N=512,K=512,G=2,quant=e5m2 --print-layer-ir | moe-opt --moe-gpu-device-pipeline="chip=sm_100a format=isa" | %python %S/Inputs/extract-ptx.py | FileCheck %s --check-prefix=E5M2
// RUN: %moe_obj/bin/moe-run --gemm M=512,N=512,K=512,G=2 --print-layer-ir --gemm-config "#moe.gemm_config<mma = block_scale, tile = [128, 48, 128], mma_shape = [128, 48, 32], stages = 4, warpgroups = [1, 1], registers = [40, 232]>" | not moe-opt --moe-gpu-device-pipeline="chip=sm_100a format=isa" 2>&1 | FileCheck %s --check-prefix=N48

// ENTRIES:       .version 8.8
// ENTRIES:       .target sm_100a
// ENTRIES-COUNT-3: .visible .entry mx_block_matmul_
// ENTRIES-COUNT-2: .visible .entry mx_expert_matmul_
// ENTRIES-NOT:     .entry

// Each of the five kernels, in order.
// EACH-LABEL: .entry mx_block_matmul_0(
// EACH:         cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
// EACH:         tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32
// EACH:         tcgen05.cp.cta_group::1.32x128b.warpx4
// EACH:         tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale.block32
// EACH:         tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64
// EACH:         tcgen05.ld.sync.aligned.32x32b.x32.b32
// EACH:         tcgen05.dealloc.cta_group::1.sync.aligned.b32
// EACH-LABEL: .entry mx_block_matmul_1(
// EACH:         cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
// EACH:         tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32
// EACH:         tcgen05.cp.cta_group::1.32x128b.warpx4
// EACH:         tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale.block32
// EACH:         tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64
// EACH:         tcgen05.ld.sync.aligned.32x32b.x32.b32
// EACH:         tcgen05.dealloc.cta_group::1.sync.aligned.b32
// EACH-LABEL: .entry mx_block_matmul_2(
// EACH:         cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
// EACH:         tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32
// EACH:         tcgen05.cp.cta_group::1.32x128b.warpx4
// EACH:         tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale.block32
// EACH:         tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64
// EACH:         tcgen05.ld.sync.aligned.32x32b.x32.b32
// EACH:         tcgen05.dealloc.cta_group::1.sync.aligned.b32
// EACH-LABEL: .entry mx_expert_matmul_3(
// EACH:         cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
// EACH:         tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32
// EACH:         tcgen05.cp.cta_group::1.32x128b.warpx4
// EACH:         tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale.block32
// EACH:         tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64
// EACH:         tcgen05.ld.sync.aligned.32x32b.x32.b32
// EACH:         tcgen05.dealloc.cta_group::1.sync.aligned.b32
// EACH-LABEL: .entry mx_expert_matmul_4(
// EACH:         cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
// EACH:         tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32
// EACH:         tcgen05.cp.cta_group::1.32x128b.warpx4
// EACH:         tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale.block32
// EACH:         tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64
// EACH:         tcgen05.ld.sync.aligned.32x32b.x32.b32
// EACH:         tcgen05.dealloc.cta_group::1.sync.aligned.b32

// CHECK-LABEL: .entry mx_block_matmul_0(
// CHECK:         mov.b32 [[COLS:%r[0-9]+]], 256;
// CHECK-NEXT:    tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [{{%rd[0-9]+}}], [[COLS]];
// CHECK-NEXT:    tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;
// CHECK:         bar.sync 1, 128;
// CHECK:         or.b64 {{%rd[0-9]+}}, {{%rd[0-9]+}}, 70403103916032;
// CHECK:         tcgen05.cp.cta_group::1.32x128b.warpx4 [{{%r[0-9]+}}+128], {{%rd[0-9]+}};
// CHECK:         tcgen05.cp.cta_group::1.32x128b.warpx4 [{{%r[0-9]+}}+132], {{%rd[0-9]+}};
// CHECK:         or.b64 {{%rd[0-9]+}}, {{%rd[0-9]+}}, 4611756662049538048;
// CHECK:         mov.b32 [[D0:%r[0-9]+]], 144703488;
// CHECK:         tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale.block32.collector::a::discard [{{%r[0-9]+}}], {{%rd[0-9]+}}, {{%rd[0-9]+}}, [[D0]], [{{%r[0-9]+}}], [{{%r[0-9]+}}], {{%p[0-9]+}};
// CHECK:         or.b64 {{%rd[0-9]+}}, {{%rd[0-9]+}}, 4611756662049538050;
// CHECK:         mov.b32 [[D1:%r[0-9]+]], 681574416;
// CHECK:         tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale.block32.collector::a::discard {{.*}}, [[D1]],
// CHECK:         mov.b32 [[D2:%r[0-9]+]], 1218445344;
// CHECK:         tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale.block32.collector::a::discard {{.*}}, [[D2]],
// CHECK:         mov.b32 [[D3:%r[0-9]+]], 1755316272;
// CHECK:         tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale.block32.collector::a::discard {{.*}}, [[D3]],
// CHECK-NEXT:    tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64
// CHECK:         tcgen05.ld.sync.aligned.32x32b.x32.b32
// CHECK-NEXT:    tcgen05.wait::ld.sync.aligned;
// CHECK:         tcgen05.dealloc.cta_group::1.sync.aligned.b32

// The expert GEMMs loop over their experts' K tiles (a commit per tile in
// the loop, one for the accumulator after it).
// CHECK-LABEL: .entry mx_expert_matmul_3(
// CHECK:         tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32
// CHECK:         tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale.block32
// CHECK:         tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64
// CHECK:         tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64
// CHECK:         tcgen05.ld.sync.aligned.32x32b.x32.b32
// CHECK:         tcgen05.dealloc.cta_group::1.sync.aligned.b32

// PTXAS-NOT:     error
// PTXAS-NOT:     warning
// PTXAS-COUNT-5: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// PTXAS-NOT:     bytes stack frame

// NOPATH: error: the fp8 MMA path does not exist on sm_100a (its default is block-scale)

// N64-COUNT-2:   tcgen05.ld.sync.aligned.32x32b.x32.b32
// N64-NOT:       tcgen05.ld
// PTXAS1:        0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// E5M2:          mov.b32 {{%r[0-9]+}}, 144704640;
// E5M2:          tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale.block32
// N48: error: 'moe.block_matmul' op the block_scale kernel of sm_100a needs a 128 x N x 128 tile (N a multiple of 32 up to 256), one 128 x N x 32 MMA and warpgroups [1, 1], got 128x48x128
