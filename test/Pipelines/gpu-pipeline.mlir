// The device-resident sm_90a pipeline reaches the LLVM dialect with every
// phase on the GPU: the five MX GEMMs as in the hybrid pipeline, and the
// gathers, quantizations, activation backward, affinity gradient and dx
// sums as outlined kernels (one gpu.binary each, cubin: ptxas runs), all
// on the caller's stream with the buffers in device memory. The entry
// takes device buffers and, last, the stream: no host computation, no copy
// of an argument, no stream of its own, no host synchronization; its
// workspace is allocated and freed on the stream, and the GEMM launches
// build their TMA descriptors over the buffers they get (a memref
// descriptor of ui8 over the aligned pointer) in the entry, in program
// order. Same layer as gpu-hybrid-pipeline.mlir.
// REQUIRES: ptxas
// RUN: moe-opt %s -moe-gpu-pipeline="toolkit=%cuda_root tma-store=false round-reuse=0" | FileCheck %s --implicit-check-not=moe.
// RUN: moe-opt %s -moe-gpu-pipeline="format=isa host-arguments=1 tma-store=false round-reuse=0" | FileCheck %s --check-prefix=HOST
// RUN: not moe-opt %s -moe-gpu-pipeline="chip=sm_80 tma-store=false round-reuse=0" 2>&1 | FileCheck %s --check-prefix=CHIP

// The entry: every allocation, kernel and free on the stream argument,
// the GEMMs in program order among the elementwise kernels, each after the
// operand kernels that round its two operands (one kernel writes both
// roundings of the gate/up weight, for the two GEMMs that take them:
// operands-both-axes; x and dy are rounded once per token for the
// recompute GEMM and P1, which copy their rows through the token ids with
// no lhs tensor map (lhs_gather), and along the slots for P3 and P4 by
// kernels of their own; P1 stores dA, and the activation backward's kernel
// writes both roundings of [dg|du] and a * h's), no host math.
// CHECK-LABEL: llvm.func @moe_layer_bwd(
// CHECK-SAME:      %[[S:[^:]*]]: !llvm.ptr) attributes {llvm.emit_c_interface} {
// CHECK-NOT:     llvm.call @exp
// CHECK-NOT:     llvm.call @mgpuStream
// CHECK-NOT:     llvm.call @mgpuEvent
// CHECK:         llvm.call @mgpuMemAlloc(%{{.*}}, %[[S]], %{{.*}})
// CHECK-NOT:     llvm.call @mgpuMemcpy
// CHECK:         gpu.launch_func <%[[S]] : !llvm.ptr> @moe_kernels_mx_operand_0::@mx_operand_0
// CHECK-NOT:     llvm.call @mgpuStream
// CHECK:         gpu.launch_func <%[[S]] : !llvm.ptr> @moe_kernels_mx_operand_1::@mx_operand_1
// CHECK-NOT:     llvm.call @mgpuStream
// CHECK:         llvm.call @mgpuTensorMapEncodeTiledMemref(
// CHECK-NOT:     llvm.call @mgpuTensorMapEncodeTiledMemref(
// CHECK:         gpu.launch_func <%[[S]] : !llvm.ptr> @moe_kernels_block_matmul_2::@block_matmul_2
// CHECK-NOT:     llvm.call @mgpuStream
// CHECK:         gpu.launch_func <%[[S]] : !llvm.ptr> @moe_kernels_mx_operand_3::@mx_operand_3
// CHECK-NOT:     llvm.call @mgpuStream
// CHECK:         gpu.launch_func <%[[S]] : !llvm.ptr> @moe_kernels_mx_operand_4::@mx_operand_4
// CHECK-NOT:     llvm.call @mgpuStream
// CHECK:         llvm.call @mgpuTensorMapEncodeTiledMemref(
// CHECK-NOT:     llvm.call @mgpuTensorMapEncodeTiledMemref(
// CHECK:         gpu.launch_func <%[[S]] : !llvm.ptr> @moe_kernels_block_matmul_5::@block_matmul_5
// CHECK-NOT:     llvm.call @mgpuStream
// CHECK:         gpu.launch_func <%[[S]] : !llvm.ptr> @moe_layer_bwd_kernel::@moe_layer_bwd_kernel
// CHECK-NOT:     llvm.call @mgpuStream
// CHECK:         gpu.launch_func <%[[S]] : !llvm.ptr> @moe_kernels_act_bwd_operands_6::@act_bwd_operands_6
// CHECK-NOT:     llvm.call @mgpuStream
// CHECK:         llvm.call @mgpuTensorMapEncodeTiledMemref(
// CHECK:         llvm.call @mgpuTensorMapEncodeTiledMemref(
// CHECK-NOT:     llvm.call @mgpuStream
// CHECK:         gpu.launch_func <%[[S]] : !llvm.ptr> @moe_kernels_block_matmul_7::@block_matmul_7
// CHECK-NOT:     llvm.call @mgpuStream
// CHECK:         gpu.launch_func <%[[S]] : !llvm.ptr> @moe_kernels_mx_operand_8::@mx_operand_8
// CHECK-NOT:     llvm.call @mgpuStream
// CHECK:         llvm.call @mgpuTensorMapEncodeTiledMemref(
// CHECK:         llvm.call @mgpuTensorMapEncodeTiledMemref(
// CHECK-NOT:     llvm.call @mgpuStream
// CHECK:         gpu.launch_func <%[[S]] : !llvm.ptr> @moe_kernels_expert_matmul_9::@expert_matmul_9
// CHECK-NOT:     llvm.call @mgpuStream
// CHECK:         gpu.launch_func <%[[S]] : !llvm.ptr> @moe_kernels_mx_operand_10::@mx_operand_10
// CHECK-NOT:     llvm.call @mgpuStream
// CHECK:         llvm.call @mgpuTensorMapEncodeTiledMemref(
// CHECK:         llvm.call @mgpuTensorMapEncodeTiledMemref(
// CHECK-NOT:     llvm.call @mgpuStream
// CHECK:         gpu.launch_func <%[[S]] : !llvm.ptr> @moe_kernels_expert_matmul_11::@expert_matmul_11
// CHECK-NOT:     llvm.call @mgpuStream
// CHECK-NOT:     llvm.call @mgpuEvent
// CHECK:         llvm.call @mgpuMemFree(%{{.*}}, %[[S]])
// CHECK-NOT:     llvm.call @mgpuStream
// CHECK-NOT:     llvm.call @mgpuEvent
// CHECK-NOT:     llvm.call @exp
// CHECK:         llvm.return
// CHECK-NEXT:  }
// CHECK-LABEL: llvm.func @_mlir_ciface_moe_layer_bwd(
// CHECK-SAME:      %{{[^:]*}}: !llvm.ptr, %[[CS:[^:]*]]: !llvm.ptr) attributes {llvm.emit_c_interface} {
// CHECK:         llvm.call @moe_layer_bwd({{.*}}, %[[CS]]) :
//
// The elementwise kernels, cubins (the GEMM kernels further down). No
// launch function is left.
// CHECK:       gpu.binary @moe_layer_bwd_kernel  [#gpu.object<#nvvm.target<O = 3, chip = "sm_90a", features = "+ptx80">, properties = {{{.*}}}, bin = "\7FELF\02\01\01A
// CHECK-NOT:   _launch(

// With host arguments the entry copies its inputs in first.
// HOST-LABEL: llvm.func @moe_layer_bwd(
// HOST:         %[[S:.*]] = llvm.call @mgpuStreamCreate()
// HOST:         llvm.call @mgpuMemAlloc(
// HOST:         llvm.call @mgpuMemcpy(
// HOST:         gpu.launch_func <%[[S]] : !llvm.ptr> @moe_kernels_mx_operand_0::@mx_operand_0

// CHIP: error: unsupported GPU chip 'sm_80' (supported: sm_90a, sm_100a, sm_120a)

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
