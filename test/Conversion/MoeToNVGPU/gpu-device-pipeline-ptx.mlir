// The PTX of the sm_90a MX block GEMM on the fp8 MMA path
// (moe-gpu-device-pipeline, format=isa, mma-path=fp8; input:
// Inputs/mx-block-matmul.mlir, Nout = 128, K = 256). The bf16 path's PTX:
// gpu-device-pipeline-ptx-bf16.mlir.
// RUN: moe-opt %S/Inputs/mx-block-matmul.mlir --moe-gpu-device-pipeline="chip=sm_90a format=isa mma-path=fp8" | FileCheck %s --check-prefix=MLIR
// RUN: moe-opt %S/Inputs/mx-block-matmul.mlir --moe-gpu-device-pipeline="chip=sm_90a format=isa mma-path=fp8" | %python %S/Inputs/extract-ptx.py | FileCheck %s
// RUN: not moe-opt %S/Inputs/mx-block-matmul.mlir --moe-gpu-device-pipeline="chip=sm_89" 2>&1 | FileCheck %s --check-prefix=CHIP

// The kernel module is serialized in place; the host side keeps the call
// and the launch function's declaration with its record.
// MLIR:      call @mx_block_matmul_0_launch(
// MLIR:      func.func private @mx_block_matmul_0_launch({{.*}}moe.gpu_launch = #moe.gpu_launch<kernel = @moe_kernels::@mx_block_matmul_0, {{.*}} block = [384, 1, 1],
// MLIR:      gpu.binary @moe_kernels [#gpu.object<#nvvm.target<O = 3, chip = "sm_90a", features = "+ptx80">, {{.*}}assembly = "

// CHIP: error: unsupported GPU chip 'sm_89' (supported: sm_90a, sm_100a, sm_120a)

// CHECK:       .version 8.0
// CHECK:       .target sm_90a
// Dynamic shared memory is an extern array (not a 1-byte static one).
// CHECK:       .extern .shared .align 1024 .b8 moe_dynamic_smem[];
// CHECK-LABEL: .visible .entry mx_block_matmul_0(
// CHECK-COUNT-6: .param .u64 .ptr
// CHECK:       .maxntid 384, 1, 1
// CHECK-NEXT:  .minnctapersm 1
// CHECK-COUNT-10: mbarrier.init.shared.b64
// CHECK:       bar.sync
// Producer: 40 registers, TMA of both tiles onto the stage's full barrier.
// CHECK:       setmaxnreg.dec.sync.aligned.u32 40;
// CHECK:       mbarrier.try_wait.parity.shared.b64
// CHECK:       mbarrier.arrive.expect_tx.shared.b64
// CHECK:       cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
// CHECK-NEXT:  cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
// CHECK:       ld.global.nc.b32
// CHECK:       st.shared.b32
// CHECK:       mbarrier.arrive.shared.b64
// Consumers: 232 registers; 4 fp8 wgmmas per K tile, each waited for
// with one group left in flight, the last drained inside the tile.
// CHECK:       setmaxnreg.inc.sync.aligned.u32 232;
// CHECK:       mbarrier.try_wait.parity.shared.b64
// CHECK:       wgmma.fence.sync.aligned;
// CHECK:       wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3
// CHECK:       wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3
// CHECK:       wgmma.wait_group.sync.aligned 1;
// CHECK:       ld.shared.v4.b32
// CHECK:       mul.rn.f32
// CHECK:       fma.rn.f32
// CHECK:       wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3
// CHECK:       wgmma.wait_group.sync.aligned 1;
// CHECK:       wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3
// CHECK:       wgmma.wait_group.sync.aligned 1;
// CHECK:       wgmma.wait_group.sync.aligned 0;
// CHECK:       mbarrier.arrive.shared.b64
// CHECK-COUNT-32: st.global.v2.b32
// CHECK-NOT:   wgmma.mma_async
