// checkpoint-epilogue (on by default since it measured faster on the H200): in a
// layer with a bf16 gate/up checkpoint, P1's region computes gate_up as
// moe.scale_rows(moe.unpack_checkpoint(ckpt), uitofp(ids >= 0)) (the padded
// slots' rows zeroed) for the activation backward alone. With the option
// the kernel reads the checkpoint [N, 2, I, B] and the token ids itself
// (g = ckpt[s / B, 0, i, s % B] widened exactly, times the slot's mask), so
// neither the f32 slot rows nor their masked copy are written: the launch
// takes the bf16 checkpoint and, last, the ids. Without it
// (checkpoint-epilogue=false) the region's ops stay for the elementwise kernels. Layer T=256 H=256 I=128 E=2 K=1 B=128
// (384 slots, 3 blocks).
// RUN: %moe_obj/bin/moe-run --layer T=256,H=256,I=128,E=2,K=1,B=128,checkpoint=bf16 --print-layer-ir > %t.mlir
// RUN: moe-opt %t.mlir --moe-decompose-bwd --moe-fuse | moe-opt --moe-gpu-kernel-config="act-epilogue=true lhs-gather=false" --convert-moe-to-nvgpu="act-epilogue=true lhs-gather=false" | FileCheck %s --implicit-check-not=moe.unpack_checkpoint
// RUN: moe-opt %t.mlir --moe-decompose-bwd --moe-fuse | moe-opt --moe-gpu-kernel-config="act-epilogue=true lhs-gather=false" --convert-moe-to-nvgpu="checkpoint-epilogue=false act-epilogue=true lhs-gather=false" | FileCheck %s --check-prefix=OFF
// The kernel (ping-pong: a consumer warpgroup computes a whole 128 x 128
// tile): bf16 loads of the checkpoint (2 M steps x 2 rows x 16 column pairs
// x g, u x 2 per thread), the L2 prefetch of the tile's two runs of 128 x
// 128 bf16 (32 KB each, the up half 128 x 128 x 2 bytes after the gate
// half), and no spills.
// REQUIRES: ptxas
// RUN: moe-opt %t.mlir --moe-decompose-bwd --moe-fuse | moe-opt --moe-gpu-device-pipeline="chip=sm_90a format=isa toolkit=%cuda_root act-epilogue=true lhs-gather=false" | %python %S/Inputs/extract-ptx.py > %t.ptx
// RUN: FileCheck %s --check-prefix=PTX < %t.ptx
// RUN: %ptxas -arch=sm_90a -v %t.ptx -o %t.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// (lhs-gather=false: x and dy reach their GEMMs as slot rows that the
// operand kernels gather and round, the launches these checks spell out;
// lhs-gather.mlir checks the default's.)

// CHECK-NOT:   moe.scale_rows
// CHECK:       call @block_matmul_act_2_launch({{.*}}) : (memref<384x256xbf16>, memref<2x128x256xbf16>, memref<3xi32>, memref<3x2x128x128xbf16>, memref<384xf32>, memref<384xi32>, memref<384xi32>, memref<384x256xf32>, memref<384x128xf32>, memref<384x1xf32>) -> ()
// CHECK:       func.func private @block_matmul_act_2_launch(
// CHECK-SAME:    pointers = [7, 2, 3, 4, 8, 9, 5, 6], results = 3>

// OFF:         moe.unpack_checkpoint %{{.*}} : tensor<3x2x128x128xbf16> -> tensor<384x256xf32>
// OFF:         moe.scale_rows
// OFF:         call @block_matmul_act_2_launch({{.*}}) : (memref<384x256xbf16>, memref<2x128x256xbf16>, memref<3xi32>, memref<384x256xf32>, memref<384xf32>,

// PTX-LABEL:   .entry block_matmul_act_2(
// PTX-COUNT-10:  .param .u64 .ptr
// PTX:           add.s64 [[Q:%rd[0-9]+]], [[P:%rd[0-9]+]], 32768;
// PTX:           cp.async.bulk.prefetch.L2.global [[[P]]], [[S:%r[0-9]+]];
// PTX-NEXT:      cp.async.bulk.prefetch.L2.global [[[Q]]], [[S]];
// The slot's mask as moe.scale_rows multiplies it: 1.0 for a token id >= 0,
// 0.0 for a padded slot, times the widened checkpoint value (a multiply,
// not a select: NaN and -0 behave as in the host lowering).
// (After the warpgroup's turn at the tensor cores; the tile's own
// padding test, before it, compares the first slot's id the same way.)
// PTX:           bar.sync {{%r[0-9]+}}, 256;
// PTX:           setp.gt.s32 [[P:%p[0-9]+]], %r{{[0-9]+}}, -1;
// PTX-NEXT:      selp.f32 [[MASK:%r[0-9]+]], 0f3F800000, 0f00000000, [[P]];
// PTX:           ld.global.nc.b16 [[G:%rs[0-9]+]],
// PTX:           cvt.f32.bf16 [[GF:%r[0-9]+]], [[G]];
// PTX-NEXT:      mul.rn.f32 %r{{[0-9]+}}, [[GF]], [[MASK]];
// PTX-COUNT-255: ld.global.nc.b16
// PTX-NOT:       ld.global.nc.b16
// PTX:           .entry

// PTXAS:       Compiling entry function 'block_matmul_act_2' for 'sm_90a'
// PTXAS-NEXT:  Function properties for block_matmul_act_2
// PTXAS-NEXT:  0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
