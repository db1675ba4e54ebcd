// The hybrid sm_90a pipeline reaches the LLVM dialect: the five MX GEMMs
// (recompute, P1, P2 as block GEMMs; P3, P4 as expert GEMMs) become kernel
// launches through the mgpu* runtime, the kernels a cubin in a gpu.binary
// (ptxas runs), everything else host code. Layer T=256 H=256 I=128 E=2 K=1
// B=128 (S = 384 slots): the recompute is 384x256x256, P1 384x128x256.
// The main checks are on the bf16-dequantization path (the codes the host
// quantized go to the kernels); OPS checks the default path, where operand
// kernels round each GEMM operand before its GEMM (one kernel both
// roundings of a value two GEMMs take: operands-both-axes), P1 stores dA
// and the activation backward of its moe.fused region is a kernel that
// writes what P2, P3 and P4 read (no host exp).
// REQUIRES: ptxas
// RUN: moe-opt %s -moe-gpu-hybrid-pipeline="toolkit=%cuda_root mma-path=bf16 round-reuse=0 weight-reuse=0" | FileCheck %s --implicit-check-not=moe.
// RUN: moe-opt %s -moe-gpu-hybrid-pipeline="format=isa mma-path=bf16 round-reuse=0 weight-reuse=0" | FileCheck %s --check-prefix=PTX
// RUN: moe-opt %s -moe-gpu-hybrid-pipeline="format=isa round-reuse=0 weight-reuse=0" | FileCheck %s --check-prefix=OPS --implicit-check-not=moe.
// RUN: not moe-opt %s -moe-gpu-hybrid-pipeline="chip=sm_80 round-reuse=0 weight-reuse=0" 2>&1 | FileCheck %s --check-prefix=CHIP

// CHECK-LABEL: llvm.func @moe_layer_bwd(
// CHECK:         llvm.call @mx_block_matmul_0_launch(
// CHECK:         llvm.call @mx_block_matmul_1_launch(
// CHECK:         llvm.call @exp
// CHECK:         llvm.call @mx_block_matmul_2_launch(
// CHECK:         llvm.call @mx_expert_matmul_3_launch(
// CHECK:         llvm.call @mx_expert_matmul_4_launch(
// CHECK-LABEL: llvm.func @_mlir_ciface_moe_layer_bwd(
//
// The recompute: lhs [384, 256] codes, the transposed rhs [2, 256, 256];
// grid (Nout/128, M/128).
// Descriptors: rank 2, data type 0 (UINT8), interleave 0, swizzle 3
// (128B), L2 promotion 3 (256B), fill 0.
// CHECK-LABEL: llvm.func @mx_block_matmul_0_launch(
// CHECK-DAG:     %[[RANK:.*]] = llvm.mlir.constant(2 : index) : i64
// CHECK-DAG:     %[[ZERO:.*]] = llvm.mlir.constant(0 : i32) : i64
// CHECK-DAG:     %[[THREE:.*]] = llvm.mlir.constant(3 : i32) : i64
// CHECK:         %[[STREAM:.*]] = llvm.call @mgpuStreamCreate()
// CHECK:         llvm.call @mgpuMemAlloc(%{{.*}}, %[[STREAM]], %{{.*}})
// CHECK:         llvm.call @mgpuMemcpy(%{{.*}}, %{{.*}}, %{{.*}}, %[[STREAM]])
// CHECK:         %[[TMA:.*]] = llvm.call @mgpuTensorMapEncodeTiledMemref(%[[RANK]], %{{.*}}, %[[ZERO]], %[[ZERO]], %[[THREE]], %[[THREE]], %[[ZERO]], %{{.*}})
// CHECK:         %[[TMB:.*]] = llvm.call @mgpuTensorMapEncodeTiledMemref(%[[RANK]], %{{.*}}, %[[ZERO]], %[[ZERO]], %[[THREE]], %[[THREE]], %[[ZERO]], %{{.*}})
// CHECK:         gpu.launch_func <%[[STREAM]] : !llvm.ptr> @moe_kernels_mx_block_matmul_0::@mx_block_matmul_0 blocks in (%{{.*}}, %{{.*}}, %{{.*}}) threads in (%{{.*}}, %{{.*}}, %{{.*}}) : i64 dynamic_shared_memory_size %{{.*}} args(%[[TMA]] : !llvm.ptr, %[[TMB]] : !llvm.ptr, %{{.*}} : !llvm.ptr<1>, %{{.*}} : !llvm.ptr<1>, %{{.*}} : !llvm.ptr<1>, %{{.*}} : !llvm.ptr<1>)
// CHECK:         llvm.call @mgpuMemcpy(
// CHECK:         llvm.call @mgpuMemFree(
// CHECK:         llvm.call @mgpuStreamSynchronize(%[[STREAM]])
// CHECK:         llvm.call @mgpuStreamDestroy(%[[STREAM]])
//
// CHECK-LABEL: llvm.func @mx_block_matmul_1_launch(
// CHECK:         gpu.launch_func {{.*}} @moe_kernels_mx_block_matmul_1::@mx_block_matmul_1
// CHECK-LABEL: llvm.func @mx_expert_matmul_4_launch(
// CHECK:         gpu.launch_func {{.*}} @moe_kernels_mx_expert_matmul_4::@mx_expert_matmul_4
//
// The kernels as cubins, one per kernel (an ELF image of OS ABI 0x41, CUDA).
// CHECK:       gpu.binary @moe_kernels_mx_block_matmul_0  [#gpu.object<#nvvm.target<O = 3, chip = "sm_90a", features = "+ptx80">, properties = {{{.*}}}, bin = "\7FELF\02\01\01A
//
// PTX: gpu.binary @moe_kernels_mx_block_matmul_0  [#gpu.object<#nvvm.target<O = 3, chip = "sm_90a", features = "+ptx80">, properties = {{{.*}}}, assembly = "{{.*}}.target sm_90a

// CHIP: error: unsupported GPU chip 'sm_80' (supported: sm_90a, sm_100a, sm_120a)

// OPS-LABEL: llvm.func @moe_layer_bwd(
// OPS:         llvm.call @mx_operand_0_launch(
// OPS:         llvm.call @mx_operand_1_launch(
// OPS:         llvm.call @block_matmul_2_launch(
// OPS:         llvm.call @mx_operand_3_launch(
// OPS:         llvm.call @mx_operand_4_launch(
// OPS-NOT:     llvm.call @exp
// OPS:         llvm.call @block_matmul_5_launch(
// OPS-NOT:     llvm.call @exp
// OPS:         llvm.call @act_bwd_operands_6_launch(
// OPS-NOT:     llvm.call @exp
// OPS:         llvm.call @block_matmul_7_launch(
// OPS:         llvm.call @mx_operand_8_launch(
// OPS:         llvm.call @expert_matmul_9_launch(
// OPS:         llvm.call @mx_operand_10_launch(
// OPS:         llvm.call @expert_matmul_11_launch(
// OPS-LABEL: llvm.func @_mlir_ciface_moe_layer_bwd(
// OPS:       gpu.binary @moe_kernels_mx_operand_0
// OPS-SAME:    cvt.rn.satfinite.e4m3x2.f32
// OPS:       gpu.binary @moe_kernels_block_matmul_5
// OPS-SAME:    wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16
// OPS:       gpu.binary @moe_kernels_act_bwd_operands_6
// OPS-SAME:    cvt.rn.satfinite.e4m3x2.f32

func.func @moe_layer_bwd(%x: tensor<256x256xbf16>, %dy: tensor<256x256xbf16>,
                         %aff: tensor<512xf32>, %wgu: tensor<2x256x2x128xbf16>,
                         %wd: tensor<2x128x256xbf16>, %tok: tensor<384xi32>,
                         %blk: tensor<3xi32>)
    -> (tensor<256x256xbf16>, tensor<512xf32>, tensor<2x256x2x128xf32>,
        tensor<2x128x256xf32>) {
  %dx, %da, %dwgu, %dwd = moe.blockwise_bwd x(%x : tensor<256x256xbf16>)
      dy(%dy : tensor<256x256xbf16>) affinities(%aff : tensor<512xf32>)
      gate_up(%wgu : tensor<2x256x2x128xbf16>) down(%wd : tensor<2x128x256xbf16>)
      routing(%tok : tensor<384xi32>, %blk : tensor<3xi32>)
      {block_size = 128 : i64, quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>,
       top_k = 1 : i64}
      -> tensor<256x256xbf16>, tensor<512xf32>, tensor<2x256x2x128xf32>,
         tensor<2x128x256xf32>
  return %dx, %da, %dwgu, %dwd : tensor<256x256xbf16>, tensor<512xf32>,
      tensor<2x256x2x128xf32>, tensor<2x128x256xf32>
}
