// RUN: moe-opt %s -moe-host-pipeline | FileCheck %s \
// RUN:   --implicit-check-not=moe. --implicit-check-not=memrefCopy
// RUN: moe-opt %s -moe-host-pipeline="fuse=false" | FileCheck %s \
// RUN:   --implicit-check-not=moe. --implicit-check-not=memrefCopy

// The host pipeline takes phase-level moe IR on tensors to the LLVM dialect
// with the calling convention of moe/Pipelines/Pipelines.h: every function
// keeps its inputs and gets one out-parameter per result after them, and a
// `_mlir_ciface_<name>` wrapper taking one pointer per memref descriptor.
// No dialect but llvm survives, temporaries are freed, bf16 conversions are
// integer code, the f32 exp of silu is a libm call, and no strided copy
// needs the runtime's memrefCopy.

// CHECK-DAG: llvm.func @malloc(i64) -> !llvm.ptr
// CHECK-DAG: llvm.func @free(!llvm.ptr)
// CHECK-DAG: llvm.func @expf(f32) -> f32

// Inputs x [8, 64] (rank 2: 7 descriptor fields), tok [64], blk [2] (5
// each), w [4, 32, 64] (9) and ckpt [1, 2, 32, 64] (11), then the results
// [64, 32] and [8, 64] (7 each) as out-parameters: 51 arguments, nothing
// returned.
// CHECK-LABEL: llvm.func @kernel(
// CHECK-SAME: %arg0: !llvm.ptr, %arg1: !llvm.ptr, %arg2: i64, %arg3: i64, %arg4: i64, %arg5: i64, %arg6: i64, %arg7: !llvm.ptr,
// CHECK-SAME: %arg37: !llvm.ptr, %arg38: !llvm.ptr, %arg39: i64, %arg40: i64, %arg41: i64, %arg42: i64, %arg43: i64, %arg44: !llvm.ptr,
// CHECK-SAME: %arg50: i64) attributes {llvm.emit_c_interface} {
// CHECK: llvm.call @malloc
// CHECK: llvm.call @exp
// CHECK: llvm.call @free
// CHECK: llvm.return{{$}}

// CHECK-LABEL: llvm.func @_mlir_ciface_kernel(
// CHECK-SAME: %[[X:[^:]*]]: !llvm.ptr, %[[TOK:[^:]*]]: !llvm.ptr, %[[BLK:[^:]*]]: !llvm.ptr, %[[W:[^:]*]]: !llvm.ptr, %[[CK:[^:]*]]: !llvm.ptr, %[[OUT0:[^:]*]]: !llvm.ptr, %[[OUT1:[^:]*]]: !llvm.ptr)
// CHECK-SAME: attributes {llvm.emit_c_interface}
// CHECK: llvm.load %[[X]] : !llvm.ptr -> !llvm.struct<(ptr, ptr, i64, array<2 x i64>, array<2 x i64>)>
// CHECK: llvm.load %[[W]] : !llvm.ptr -> !llvm.struct<(ptr, ptr, i64, array<3 x i64>, array<3 x i64>)>
// CHECK: llvm.load %[[CK]] : !llvm.ptr -> !llvm.struct<(ptr, ptr, i64, array<4 x i64>, array<4 x i64>)>
// CHECK: llvm.load %[[OUT0]] : !llvm.ptr -> !llvm.struct<(ptr, ptr, i64, array<2 x i64>, array<2 x i64>)>
// CHECK: llvm.load %[[OUT1]] : !llvm.ptr -> !llvm.struct<(ptr, ptr, i64, array<2 x i64>, array<2 x i64>)>
// CHECK: llvm.call @kernel(
// CHECK-NEXT: llvm.return{{$}}
func.func @kernel(%x: tensor<8x64xbf16>, %tok: tensor<64xi32>,
                  %blk: tensor<2xi32>, %w: tensor<4x32x64xbf16>,
                  %ckpt: tensor<1x2x32x64xbf16>)
    -> (tensor<64x32xf32>, tensor<8x64xbf16>) {
  %rows = moe.gather_rows %x[%tok]
      : tensor<8x64xbf16>, tensor<64xi32> -> tensor<64x64xbf16>
  %q, %s = moe.mx_quantize %rows
      {axis = 1 : i64, quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>}
      : tensor<64x64xbf16> -> tensor<64x64xf8E4M3FN>, tensor<64x2xf8E8M0FNU>
  %dA = moe.block_matmul
      lhs(%q : tensor<64x64xf8E4M3FN> scales %s : tensor<64x2xf8E8M0FNU>)
      rhs(%w : tensor<4x32x64xbf16>) experts(%blk : tensor<2xi32>)
      {block_size = 32 : i64} -> tensor<64x32xf32>
  %gu = moe.unpack_checkpoint %ckpt
      : tensor<1x2x32x64xbf16> -> tensor<64x64xf32>
  %a = arith.constant dense<0.5> : tensor<64xf32>
  %dgu, %h = moe.gated_act_bwd %gu, %dA, %a
      : tensor<64x64xf32>, tensor<64x32xf32>, tensor<64xf32>
      -> tensor<64x64xf32>, tensor<64x32xf32>
  %dx = moe.scatter_add_rows %dgu[%tok], %blk
      {block_size = 32 : i64, num_experts = 4 : i64, top_k = 2 : i64}
      : tensor<64x64xf32>, tensor<64xi32>, tensor<2xi32> -> tensor<8x64xbf16>
  return %h, %dx : tensor<64x32xf32>, tensor<8x64xbf16>
}

// Arith ops on tensors, as the decomposition emits them, become loops too:
// one input and one out-parameter.
// CHECK-LABEL: llvm.func @elementwise(
// CHECK-NOT: llvm.call @kernel
// CHECK: llvm.return{{$}}
// CHECK-LABEL: llvm.func @_mlir_ciface_elementwise(
// CHECK-SAME: %{{[^:]*}}: !llvm.ptr, %{{[^:]*}}: !llvm.ptr)
func.func @elementwise(%a: tensor<64x16xf32>) -> tensor<64x16xbf16> {
  %b = arith.truncf %a : tensor<64x16xf32> to tensor<64x16xbf16>
  return %b : tensor<64x16xbf16>
}
