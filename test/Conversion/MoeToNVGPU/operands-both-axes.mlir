// RUN: moe-opt %S/../../../examples/blockwise_bwd.mlir --moe-decompose-bwd --moe-fuse | moe-opt --moe-gpu-kernel-config="act-epilogue=true lhs-gather=false round-reuse=0 weight-reuse=0" --convert-moe-to-nvgpu="act-epilogue=true lhs-gather=false round-reuse=0 weight-reuse=0" | FileCheck %s
// RUN: moe-opt %S/../../../examples/blockwise_bwd.mlir --moe-decompose-bwd --moe-fuse | moe-opt --moe-gpu-kernel-config="act-epilogue=true lhs-gather=false round-reuse=0 weight-reuse=0" --convert-moe-to-nvgpu="operands-both-axes=false act-epilogue=true lhs-gather=false round-reuse=0 weight-reuse=0" | FileCheck %s --check-prefix=SINGLE
// (lhs-gather=false: x and dy reach their GEMMs as slot rows that the
// operand kernels gather and round, the launches these checks spell out;
// lhs-gather.mlir checks the default's.)

// operands-both-axes: the values that two GEMMs take quantized along
// different axes, one along its columns (K contiguous) and one along its
// rows in place (a GEMM that reads it M- or N-major), are read once by one
// operand kernel that writes both roundings. In the example layer (H = 256,
// 2I = 256): x (the recompute along H, P3 along the slots), the gate/up
// weight (P2 along 2I, the recompute along H in place), dy (P1 along H, P4
// along the slots) and [dg|du] (P2 along 2I, P3 along the slots). Wd and
// a*h have one rounding each. 6 operand kernels instead of 10; each GEMM
// reads the output of the axis it contracts. (With P1's activation
// epilogue, act-epilogue=true, as [dg|du] then has an operand kernel; by
// default the activation backward's kernel writes both of its roundings,
// act-bwd-operands.mlir.)

// CHECK-LABEL: func.func @moe_layer_bwd(
// x, gathered through the token ids: along H, then along the slots.
// CHECK:         call @mx_operand_0_launch(%{{.*}}, %{{.*}}, %[[XC_M:.*]], %[[XR_M:.*]]) : (memref<256x256xbf16>, memref<896xi32>, memref<896x256xbf16>, memref<896x256xbf16>)
// CHECK:         %[[XC:.*]] = bufferization.to_tensor %[[XC_M]]
// CHECK:         %[[XR:.*]] = bufferization.to_tensor %[[XR_M]]
// The gate/up weight [E, H, 2I]: along 2I, then along H in place.
// CHECK:         call @mx_operand_1_launch(%{{.*}}, %[[WC_M:.*]], %[[WR_M:.*]]) : (memref<4x256x256xbf16>, memref<4x256x256xbf16>, memref<4x256x256xbf16>)
// CHECK:         %[[WC:.*]] = bufferization.to_tensor %[[WC_M]]
// CHECK:         %[[WR:.*]] = bufferization.to_tensor %[[WR_M]]
// The recompute: x along H, the weight along H as stored (N-major).
// CHECK:         %[[A0:.*]] = bufferization.to_buffer %[[XC]] read_only
// CHECK:         %[[B0:.*]] = bufferization.to_buffer %[[WR]] read_only
// CHECK:         call @block_matmul_2_launch(%[[A0]], %[[B0]],
// dy: along H for P1, along the slots for P4.
// CHECK:         call @mx_operand_3_launch(%{{.*}}, %{{.*}}, %[[DC_M:.*]], %[[DR_M:.*]]) : (memref<256x256xbf16>, memref<896xi32>, memref<896x256xbf16>, memref<896x256xbf16>)
// CHECK:         %[[DC:.*]] = bufferization.to_tensor %[[DC_M]]
// CHECK:         %[[DR:.*]] = bufferization.to_tensor %[[DR_M]]
// CHECK:         call @mx_operand_4_launch(%{{.*}}, %{{.*}}) : (memref<4x128x256xbf16>, memref<4x128x256xbf16>)
// CHECK:         %[[A1:.*]] = bufferization.to_buffer %[[DC]] read_only
// CHECK:         call @block_matmul_act_5_launch(%[[A1]],
// [dg|du] (f32, from P1's epilogue): along 2I, then along the slots.
// CHECK:         call @mx_operand_6_launch(%{{.*}}, %[[GC_M:.*]], %[[GR_M:.*]]) : (memref<896x256xf32>, memref<896x256xbf16>, memref<896x256xbf16>)
// CHECK:         %[[GC:.*]] = bufferization.to_tensor %[[GC_M]]
// CHECK:         %[[GR:.*]] = bufferization.to_tensor %[[GR_M]]
// P2: [dg|du] and the weight along 2I.
// CHECK:         %[[A2:.*]] = bufferization.to_buffer %[[GC]] read_only
// CHECK:         %[[B2:.*]] = bufferization.to_buffer %[[WC]] read_only
// CHECK:         call @block_matmul_7_launch(%[[A2]], %[[B2]],
// P3: x and [dg|du] along the slots.
// CHECK:         %[[A3:.*]] = bufferization.to_buffer %[[XR]] read_only
// CHECK:         %[[B3:.*]] = bufferization.to_buffer %[[GR]] read_only
// CHECK:         call @expert_matmul_8_launch(%[[A3]], %[[B3]],
// P4: a*h (its own kernel) and dy along the slots.
// CHECK:         call @mx_operand_9_launch(%{{.*}}, %{{.*}}) : (memref<896x128xf32>, memref<896x128xbf16>)
// CHECK:         %[[B4:.*]] = bufferization.to_buffer %[[DR]] read_only
// CHECK:         call @expert_matmul_10_launch(%{{.*}}, %[[B4]],

// The kernel of both roundings: the tile's rows loaded by 16 bytes, each
// lane's 8 values rounded in the block of its lane quad (the amax over
// lanes xor 1 and xor 2), stored as 16 bytes along the columns; then each
// thread rounds a column of the shared-memory tile and stores it in place.
// CHECK-LABEL:   gpu.func @mx_operand_1(
// CHECK-SAME:        %{{[^:]*}}: !llvm.ptr<1>, %{{[^:]*}}: !llvm.ptr<1>, %{{[^:]*}}: !llvm.ptr<1>) workgroup(
// CHECK:           gpu.shuffle  xor %{{.*}}, %c1_i32{{.*}}, %c32_i32{{.*}} : f32
// CHECK:           gpu.shuffle  xor %{{.*}}, %c2_i32{{.*}}, %c32_i32{{.*}} : f32
// CHECK:           nvvm.convert.f32x2.to.f8x2
// CHECK:           llvm.store %{{.*}} {alignment = 16 : i64} : vector<8xbf16>, !llvm.ptr<1>
// CHECK:           gpu.barrier
// CHECK-COUNT-32:  llvm.store %{{.*}} {alignment = 2 : i64} : bf16, !llvm.ptr<1>
// CHECK:           gpu.return

// Off (operands-both-axes=false): ten operand kernels, one rounding each.
// SINGLE-COUNT-10: gpu.func @mx_operand_
// SINGLE-NOT:      gpu.func @mx_operand_
// SINGLE-NOT:      gpu.shuffle
