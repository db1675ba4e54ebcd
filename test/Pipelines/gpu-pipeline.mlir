// The device-resident sm_90a pipeline reaches the LLVM dialect with every
// phase on the GPU: the five MX GEMMs as in the hybrid pipeline, and the
// gathers, quantizations, activation backward, affinity gradient and dx
// sums as outlined kernels (one gpu.binary each, cubin: ptxas runs), all
// on one stream of the entry with the buffers in device memory. The entry
// takes device buffers: no host computation, no copy of an argument, and
// the launch functions build their TMA descriptors over the buffers they
// get (a memref descriptor of ui8 over the aligned pointer) without
// allocating or copying. Same layer as gpu-hybrid-pipeline.mlir.
// REQUIRES: ptxas
// RUN: moe-opt %s -moe-gpu-pipeline="toolkit=%cuda_root" | FileCheck %s --implicit-check-not=moe.
// RUN: moe-opt %s -moe-gpu-pipeline="format=isa host-arguments=1" | FileCheck %s --check-prefix=HOST
// RUN: not moe-opt %s -moe-gpu-pipeline="chip=sm_80" 2>&1 | FileCheck %s --check-prefix=CHIP

// The entry: elementwise kernels on its stream, a host synchronization
// before each launch function (its own stream), no host math. Each GEMM
// follows the operand kernels that round its two operands.
// CHECK-LABEL: llvm.func @moe_layer_bwd(
// CHECK-NOT:     llvm.call @exp
// CHECK:         %[[S:.*]] = llvm.call @mgpuStreamCreate()
// CHECK-NOT:     llvm.call @mgpuMemcpy
// CHECK:         gpu.launch_func <%[[S]] : !llvm.ptr> @moe_layer_bwd_kernel::@moe_layer_bwd_kernel
// CHECK-NOT:     llvm.call @exp
// CHECK:         llvm.call @mgpuStreamSynchronize(%[[S]])
// CHECK-NEXT:    llvm.call @mgpuStreamDestroy(%[[S]])
// CHECK-NEXT:    llvm.call @mx_operand_0_launch(
// CHECK-NOT:     llvm.call @exp
// CHECK:         llvm.call @mx_operand_1_launch(
// CHECK-NOT:     llvm.call @exp
// CHECK:         llvm.call @block_matmul_2_launch(
// CHECK-NOT:     llvm.call @exp
// CHECK:         llvm.call @mx_operand_3_launch(
// CHECK-NOT:     llvm.call @exp
// CHECK:         llvm.call @mx_operand_4_launch(
// CHECK-NOT:     llvm.call @exp
// CHECK:         llvm.call @block_matmul_5_launch(
// CHECK-NOT:     llvm.call @exp
// CHECK:         llvm.call @mx_operand_6_launch(
// CHECK-NOT:     llvm.call @exp
// CHECK:         llvm.call @mx_operand_7_launch(
// CHECK-NOT:     llvm.call @exp
// CHECK:         llvm.call @block_matmul_8_launch(
// CHECK-NOT:     llvm.call @exp
// CHECK:         llvm.call @mx_operand_9_launch(
// CHECK-NOT:     llvm.call @exp
// CHECK:         llvm.call @mx_operand_10_launch(
// CHECK-NOT:     llvm.call @exp
// CHECK:         llvm.call @expert_matmul_11_launch(
// CHECK-NOT:     llvm.call @exp
// CHECK:         llvm.call @mx_operand_12_launch(
// CHECK-NOT:     llvm.call @exp
// CHECK:         llvm.call @mx_operand_13_launch(
// CHECK-NOT:     llvm.call @exp
// CHECK:         llvm.call @expert_matmul_14_launch(
// CHECK-NOT:     llvm.call @exp
// CHECK:         llvm.return
// CHECK-LABEL: llvm.func @_mlir_ciface_moe_layer_bwd(
//
// The elementwise kernels, cubins (the GEMM kernels further down).
// CHECK:       gpu.binary @moe_layer_bwd_kernel  [#gpu.object<#nvvm.target<O = 3, chip = "sm_90a", features = "+ptx80">, properties = {{{.*}}}, bin = "\7FELF\02\01\01A
//
// A launch function on device arguments: descriptors over the arguments,
// the kernel, the synchronization; nothing allocated, nothing copied.
// CHECK-LABEL: llvm.func @block_matmul_2_launch(
// CHECK:         %[[STREAM:.*]] = llvm.call @mgpuStreamCreate()
// CHECK-NOT:     llvm.call @mgpuMemAlloc
// CHECK-NOT:     llvm.call @mgpuMemcpy
// CHECK:         llvm.insertvalue
// CHECK:         llvm.call @mgpuTensorMapEncodeTiledMemref(
// CHECK:         llvm.call @mgpuTensorMapEncodeTiledMemref(
// CHECK-NOT:     llvm.call @mgpuMemAlloc
// CHECK:         gpu.launch_func <%[[STREAM]] : !llvm.ptr> @moe_kernels::@block_matmul_2
// CHECK-NOT:     llvm.call @mgpuMemcpy
// CHECK-NOT:     llvm.call @mgpuMemFree
// CHECK:         llvm.call @mgpuStreamSynchronize(%[[STREAM]])
// CHECK-NEXT:    llvm.call @mgpuStreamDestroy(%[[STREAM]])
// CHECK-NEXT:    llvm.return

// With host arguments the entry copies its inputs in first.
// HOST-LABEL: llvm.func @moe_layer_bwd(
// HOST:         %[[S:.*]] = llvm.call @mgpuStreamCreate()
// HOST:         llvm.call @mgpuMemAlloc(
// HOST:         llvm.call @mgpuMemcpy(
// HOST:         gpu.launch_func <%[[S]] : !llvm.ptr> @moe_layer_bwd_kernel::@moe_layer_bwd_kernel

// CHIP: error: unsupported GPU chip 'sm_80' (supported: sm_90a)

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
