// The PTX of the sm_90a MX block GEMM on the bf16-dequantization MMA path
// (moe-gpu-device-pipeline, format=isa, mma-path=bf16; input:
// Inputs/mx-block-matmul.mlir, Nout = 128, K = 256: 2 K tiles).
// RUN: moe-opt %S/Inputs/mx-block-matmul.mlir --moe-gpu-device-pipeline="chip=sm_90a format=isa mma-path=bf16" | %python %S/Inputs/extract-ptx.py | FileCheck %s

// CHECK:       .target sm_90a
// CHECK-LABEL: .visible .entry mx_block_matmul_0(
// CHECK:       .maxntid 512, 1, 1
// CHECK-COUNT-10: mbarrier.init.shared.b64
// CHECK:       bar.sync 0;
// Producers: TMA of the first stages, scale bytes, exact dequantization
// (prmt places two codes into bf16 lanes, mul.rn.bf16x2 scales them),
// stores to the swizzled bf16 tile, and the proxy fence before release.
// CHECK:       setmaxnreg.inc.sync.aligned.u32 144;
// CHECK:       cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
// CHECK:       ld.global.nc.b8
// CHECK:       prmt.b32 {{.*}}, 0, 0x1404;
// CHECK:       mul.rn.bf16x2
// CHECK:       prmt.b32 {{.*}}, 0, 0x3424;
// CHECK:       st.shared.v4.b32
// CHECK:       fence.proxy.async.shared::cta;
// CHECK:       mbarrier.arrive.shared.b64
// CHECK:       vote.sync.any.pred
// Consumers: 8 bf16 wgmmas per K tile (2 panels x 4 k16 steps).
// CHECK:       setmaxnreg.dec.sync.aligned.u32 112;
// CHECK-COUNT-8: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16
// CHECK:       wgmma.wait_group.sync.aligned 1;
// CHECK-COUNT-8: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16
// CHECK:       wgmma.wait_group.sync.aligned 1;
// CHECK:       wgmma.wait_group.sync.aligned 0;
// CHECK-COUNT-32: st.global.v2.b32
// CHECK-NOT:   wgmma.mma_async
