// RUN: %moe_obj/bin/moe-run --layer T=256,H=256,I=128,E=2,K=1,B=128 --print-layer-ir | moe-opt --moe-decompose-bwd --moe-fuse | moe-opt -convert-moe-to-nvgpu="act-epilogue=false lhs-gather=false tma-store=false" | FileCheck %s
// RUN: %moe_obj/bin/moe-run --layer T=256,H=256,I=160,E=2,K=2,B=128,checkpoint=bf16 --print-layer-ir | moe-opt --moe-decompose-bwd --moe-fuse | moe-opt -convert-moe-to-nvgpu="act-epilogue=false lhs-gather=false tma-store=false" | FileCheck %s --check-prefix=CKPT
// RUN: %moe_obj/bin/moe-run --layer T=256,H=256,I=128,E=2,K=1,B=128 --print-layer-ir | moe-opt --moe-decompose-bwd --moe-fuse --moe-gpu-kernel-config="act-epilogue=false lhs-gather=false tma-store=false" | FileCheck %s --check-prefix=CONFIG
// RUN: %moe_obj/bin/moe-run --layer T=256,H=256,I=256,E=2,K=1,B=128 --print-layer-ir | moe-opt --moe-decompose-bwd --moe-fuse | moe-opt -convert-moe-to-nvgpu="act-epilogue=false lhs-gather=false tma-store=false act-bwd-narrow=true" | FileCheck %s --check-prefix=NARROW
// REQUIRES: ptxas
// RUN: %moe_obj/bin/moe-run --layer T=256,H=256,I=160,E=2,K=2,B=128,checkpoint=bf16 --print-layer-ir | moe-opt --moe-decompose-bwd --moe-fuse | moe-opt --moe-gpu-device-pipeline="chip=sm_90a format=isa toolkit=%cuda_root act-epilogue=false lhs-gather=false tma-store=false" | %python %S/Inputs/extract-ptx.py > %t.ptx
// RUN: FileCheck %s --check-prefix=PTX < %t.ptx
// RUN: %ptxas -arch=sm_90a -v %t.ptx -o %t.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: %moe_obj/bin/moe-run --layer T=256,H=256,I=256,E=2,K=1,B=128 --print-layer-ir | moe-opt --moe-decompose-bwd --moe-fuse | moe-opt --moe-gpu-device-pipeline="chip=sm_90a format=isa toolkit=%cuda_root act-epilogue=false lhs-gather=false tma-store=false act-bwd-narrow=true" | %python %S/Inputs/extract-ptx.py > %t.narrow.ptx
// RUN: %ptxas -arch=sm_90a -v %t.narrow.ptx -o %t.narrow.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// (lhs-gather=false: x and dy reach their GEMMs as slot rows that the
// operand kernels gather and round, the launches these checks spell out;
// lhs-gather.mlir checks the default's.)

// convert-moe-to-nvgpu act-epilogue=false: P1's GEMM stores dA, and the
// activation backward of its moe.fused region becomes the kernel of
// ActBwdKernel.h, which writes what P2, P3 and P4 read: [dg | du] rounded
// along 2I (P2's lhs) and along the slots in place (P3's rhs), a * h
// rounded along the slots in place (P4's lhs), and the partial sums of
// <dA, h> the affinity gradient adds up. No operand kernel rounds [dg | du]
// or a * h, and no f32 [dg | du] is written.

// CHECK-LABEL: func.func @moe_layer_bwd(
// CHECK:         call @block_matmul_5_launch({{.*}}) : (memref<384x256xbf16>, memref<2x128x256xbf16>, memref<3xi32>, memref<384xi32>, memref<384x128xf32>) -> ()
// CHECK-NOT:     mx_operand
// CHECK:         call @act_bwd_operands_6_launch({{.*}}) : (memref<384x128xf32>, memref<384x256xf32>, memref<384xf32>, memref<384x256xbf16>, memref<384x256xbf16>, memref<384x128xbf16>, memref<384x1xf32>) -> ()
// CHECK:         moe.affinity_grad %{{.*}}, %{{.*}}, %{{.*}} {block_size = 128 : i64, num_experts = 2 : i64} : tensor<384x1xf32>, tensor<384xi32>, tensor<3xi32> -> tensor<512xf32>
// CHECK-NOT:     mx_operand
// CHECK:         call @block_matmul_7_launch(
// CHECK-NOT:     mx_operand
// CHECK:         call @expert_matmul_8_launch(
// CHECK-NOT:     mx_operand
// CHECK:         call @expert_matmul_9_launch(
// CHECK-NOT:     moe.gated_act_bwd
// CHECK-NOT:     moe.scale_rows
// CHECK-LABEL: func.func private @act_bwd_operands_6_launch(
// CHECK-SAME:      kernel = @moe_kernels::@act_bwd_operands_6, grid = [12, 1, 1], block = [256, 1, 1], dynamic_shared_memory = 99840, pointers = [0, 1, 2, 3, 4, 5, 6], results = 4>
//
// The kernel: per row of the warp, the activation math (two exp per
// element, buildGatedActBwd), dg and du rounded along the columns (the lane
// quad's amax: two xor shuffles, four pair conversions each), <dA, h> over
// the warp (five xor shuffles); after the barrier each thread rounds its
// column of dg, du and a * h and stores them in place.
// CHECK-LABEL: gpu.func @act_bwd_operands_6(
// CHECK:           memref.get_global @moe_dynamic_smem
// CHECK-COUNT-16:  math.exp
// CHECK:           gpu.shuffle  xor %{{.*}}, %c1_i32{{.*}} : f32
// CHECK:           gpu.shuffle  xor %{{.*}}, %c2_i32{{.*}} : f32
// CHECK-COUNT-4:   nvvm.convert.f32x2.to.f8x2
// CHECK:           llvm.store %{{.*}} {alignment = 16 : i64} : vector<8xbf16>, !llvm.ptr<1>
// CHECK:           gpu.shuffle  xor %{{.*}}, %c16_i32{{.*}} : f32
// CHECK:           gpu.shuffle  xor %{{.*}}, %c8_i32{{.*}} : f32
// CHECK:           gpu.shuffle  xor %{{.*}}, %c4_i32{{.*}} : f32
// CHECK:           gpu.shuffle  xor %{{.*}}, %c2_i32{{.*}} : f32
// CHECK:           gpu.shuffle  xor %{{.*}}, %c1_i32{{.*}} : f32
// CHECK:           llvm.store %{{.*}} {alignment = 4 : i64} : f32, !llvm.ptr<1>
// CHECK:           llvm.store %{{.*}} {alignment = 16 : i64} : vector<4xf32>, !llvm.ptr<3>
// CHECK:           gpu.barrier
// CHECK-COUNT-32:  llvm.load %{{.*}} {alignment = 4 : i64} : !llvm.ptr<3> -> f32
// CHECK-COUNT-16:  nvvm.convert.f32x2.to.f8x2
// CHECK-COUNT-32:  llvm.store %{{.*}} {alignment = 2 : i64} : bf16, !llvm.ptr<1>
// CHECK:           gpu.return

// With the bf16 checkpoint: the kernel reads it and the slots' token ids
// (each thread its column's 32 slots of g and u into shared memory, masked)
// instead of f32 gate/up rows; five tiles of shared memory; I = 160 is a
// partial column tile.
// CKPT:          call @act_bwd_operands_{{[0-9]+}}_launch({{.*}}) : (memref<{{[0-9]+}}x160xf32>, memref<{{[0-9]+}}x2x160x128xbf16>, memref<{{[0-9]+}}xf32>, memref<{{[0-9]+}}xi32>, memref<{{[0-9]+}}x320xbf16>, memref<{{[0-9]+}}x320xbf16>, memref<{{[0-9]+}}x160xbf16>, memref<{{[0-9]+}}x1xf32>) -> ()
// CKPT-NOT:      moe.unpack_checkpoint
// CKPT-LABEL:    func.func private @act_bwd_operands_{{[0-9]+}}_launch(
// CKPT-SAME:       dynamic_shared_memory = 166400
// CKPT-LABEL:    gpu.func @act_bwd_operands_{{[0-9]+}}(
// CKPT-COUNT-4:    llvm.load %{{.*}} invariant {alignment = 16 : i64} : !llvm.ptr<1> -> vector<8xbf16>
// CKPT:            gpu.barrier

// moe-gpu-kernel-config act-epilogue=false: P1 is a plain GEMM (here
// 128x128, I = 128: no ping-pong activation kernel).
// CONFIG:        moe.block_matmul
// CONFIG:        moe.block_matmul
// CONFIG-SAME:     tile = [128, 128, 64], mma_shape = [64, 128, 16], stages = 6, warpgroups = [1, 2], registers = [40, 232], persistent = true>

// PTX-LABEL:     .entry act_bwd_operands_{{[0-9]+}}(
// PTX:           ld.global.nc.v4.b32
// PTX:           shfl.sync.bfly.b32
// PTX:           cvt.rn.satfinite.e4m3x2.f32
// PTX:           bar.sync 0;
// PTX-NOT:       .entry
// PTX:           st.global.b16

// PTXAS-NOT:     bytes spill stores, {{[1-9]}}

// act-bwd-narrow=true: 128 columns a CTA (I = 256: two column tiles, so
// the partial sums are [384, 2]), 128 threads, three tiles of 32 x 132
// words (50688 bytes). A lane holds 4 columns (one 16-byte load of each
// value), the 32-column block's amax takes 8 lanes (three xor shuffles),
// and its 4 bf16 values are one 8-byte store.
// NARROW:        call @act_bwd_operands_{{[0-9]+}}_launch({{.*}}) : (memref<384x256xf32>, memref<384x512xf32>, memref<384xf32>, memref<384x512xbf16>, memref<384x512xbf16>, memref<384x256xbf16>, memref<384x2xf32>) -> ()
// NARROW-LABEL:  func.func private @act_bwd_operands_{{[0-9]+}}_launch(
// NARROW-SAME:     grid = [24, 1, 1], block = [128, 1, 1], dynamic_shared_memory = 50688,
// NARROW-LABEL:  gpu.func @act_bwd_operands_{{[0-9]+}}(
// NARROW-SAME:     nvvm.maxntid = array<i32: 128, 1, 1>
// NARROW-COUNT-3:  llvm.load %{{.*}} invariant {alignment = 16 : i64} : !llvm.ptr<1> -> vector<4xf32>
// NARROW-COUNT-8:  math.exp
// NARROW:          gpu.shuffle  xor %{{.*}}, %c1_i32{{.*}} : f32
// NARROW:          gpu.shuffle  xor %{{.*}}, %c2_i32{{.*}} : f32
// NARROW:          gpu.shuffle  xor %{{.*}}, %c4_i32{{.*}} : f32
// NARROW-COUNT-2:  nvvm.convert.f32x2.to.f8x2
// NARROW:          llvm.store %{{.*}} {alignment = 8 : i64} : vector<4xbf16>, !llvm.ptr<1>
// NARROW:          gpu.barrier
// NARROW-COUNT-32: llvm.load %{{.*}} {alignment = 4 : i64} : !llvm.ptr<3> -> f32
