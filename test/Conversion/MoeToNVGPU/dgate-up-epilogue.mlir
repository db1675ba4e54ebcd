// dgate-up-epilogue (off by default: P1 measured slower on the H200,
// docs/results/2026-12-02-dgate-up-epilogue.md): P2 reads [dg | du] MX-rounded along
// 2I and P3 along the slots. P1's epilogue holds [dg | du] in registers, so
// it writes those two bf16 roundings itself and the f32 [dg | du] is never
// written or read by an operand kernel. Along 2I, a 32-column block is the
// four column pairs that each of a lane quad's four lanes holds: the amax
// takes two xor shuffles. Along the slots, a 32-row block is the rows of
// two warps: the amax takes three xor shuffles (lane bits 2..4), then the
// two warps swap their amaxes through shared memory, joined by a named
// barrier of 64 threads. The scale byte and the rounding come from the
// shared builders (MXBuilders, MXRounding), so the bits equal the operand
// kernel's (checked bit for bit on the H200: gpu-suite.sh dgate-up,
// docs/results/2026-12-02-gpu-suite-dgate-up.log).
// P1's kernel is one CTA per tile for this (persistent-gemms=false): the
// ping-pong kernel (the default) keeps f32 [dg | du], as beside its second
// accumulator the roundings would spill.
// The example layer: S = 896 slots, I = 128, [dg | du] 896 x 256.
// RUN: moe-opt %S/../../../examples/blockwise_bwd.mlir --moe-decompose-bwd --moe-fuse | moe-opt --moe-gpu-kernel-config="persistent-gemms=false act-epilogue=true lhs-gather=false weight-reuse=0" --convert-moe-to-nvgpu="dgate-up-epilogue=true act-epilogue=true lhs-gather=false weight-reuse=0" | FileCheck %s
// RUN: moe-opt %S/../../../examples/blockwise_bwd.mlir --moe-decompose-bwd --moe-fuse | moe-opt --moe-gpu-kernel-config="persistent-gemms=false act-epilogue=true lhs-gather=false weight-reuse=0" --convert-moe-to-nvgpu="act-epilogue=true lhs-gather=false weight-reuse=0" | FileCheck %s --check-prefix=OFF
// RUN: moe-opt %S/../../../examples/blockwise_bwd.mlir --moe-decompose-bwd --moe-fuse | moe-opt --moe-gpu-kernel-config="act-epilogue=true lhs-gather=false weight-reuse=0" --convert-moe-to-nvgpu="dgate-up-epilogue=true act-epilogue=true lhs-gather=false weight-reuse=0" | FileCheck %s --check-prefix=PINGPONG
// With biases the gate/up bias gradient sums the f32 [dg | du] over the
// slots (moe.expert_sum): the kernel writes it too, beside the roundings.
// RUN: %moe_obj/bin/moe-run --layer T=64,H=64,I=32,E=4,K=2,B=128,bias=on --print-layer-ir > %t.bias.mlir
// RUN: moe-opt %t.bias.mlir --moe-decompose-bwd --moe-fuse | moe-opt --moe-gpu-kernel-config="persistent-gemms=false act-epilogue=true lhs-gather=false weight-reuse=0" --convert-moe-to-nvgpu="dgate-up-epilogue=true act-epilogue=true lhs-gather=false weight-reuse=0" | FileCheck %s --check-prefix=BIAS
// REQUIRES: ptxas
// RUN: moe-opt %S/../../../examples/blockwise_bwd.mlir --moe-decompose-bwd --moe-fuse | moe-opt --moe-gpu-device-pipeline="chip=sm_90a format=isa toolkit=%cuda_root dgate-up-epilogue=true persistent-gemms=false act-epilogue=true lhs-gather=false weight-reuse=0" | %python %S/Inputs/extract-ptx.py > %t.ptx
// RUN: FileCheck %s --check-prefix=PTX < %t.ptx
// RUN: FileCheck %s --check-prefix=CVT < %t.ptx
// RUN: %ptxas -arch=sm_90a -v %t.ptx -o %t.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// (lhs-gather=false: x and dy reach their GEMMs as slot rows that the
// operand kernels gather and round, the launches these checks spell out;
// lhs-gather.mlir checks the default's.)

// The launch: [dg | du] along 2I first (kernel argument 2), along the slots
// after the affinities; 8 KB more shared memory (8 consumer warps x 256
// column amaxes x 4 bytes) than the f32 form. No operand kernel rounds an
// f32 [dg | du]; P2 reads the first rounding, P3 the second.
// CHECK-NOT:   memref<896x256xf32>, memref<896x256xbf16>
// CHECK:       call @block_matmul_act_5_launch(%{{.*}}, %[[ALONG_N:.*]], %[[ALONG_M:.*]], %{{.*}}, %{{.*}}) : (memref<896x256xbf16>, memref<4x128x256xbf16>, memref<7xi32>, memref<896x256xf32>, memref<896xf32>, memref<896xi32>, memref<896x256xbf16>, memref<896x256xbf16>, memref<896x128xf32>, memref<896x1xf32>) -> ()
// CHECK:       %[[N:.*]] = bufferization.to_tensor %[[ALONG_N]]
// CHECK:       %[[M:.*]] = bufferization.to_tensor %[[ALONG_M]]
// CHECK:       %[[NB:.*]] = bufferization.to_buffer %[[N]] read_only
// CHECK:       call @block_matmul_6_launch(%[[NB]],
// CHECK:       %[[MB:.*]] = bufferization.to_buffer %[[M]] read_only
// CHECK:       call @expert_matmul_7_launch(%{{.*}}, %[[MB]],
// CHECK-NOT:   memref<896x256xf32>, memref<896x256xbf16>
// CHECK:       func.func private @block_matmul_act_5_launch(
// CHECK-SAME:    dynamic_shared_memory = 205936,
// CHECK-SAME:    pointers = [6, 2, 3, 4, 7, 8, 9, 5], results = 4>

// OFF:         call @block_matmul_act_5_launch({{.*}}) : (memref<896x256xbf16>, memref<4x128x256xbf16>, memref<7xi32>, memref<896x256xf32>, memref<896xf32>, memref<896xi32>, memref<896x256xf32>, memref<896x128xf32>, memref<896x1xf32>) -> ()
// OFF:         call @mx_operand_6_launch(%{{.*}}, %{{.*}}, %{{.*}}) : (memref<896x256xf32>, memref<896x256xbf16>, memref<896x256xbf16>) -> ()
// OFF:         func.func private @block_matmul_act_5_launch(
// OFF-SAME:      dynamic_shared_memory = 197744,

// PINGPONG:    call @block_matmul_act_5_launch({{.*}}) : (memref<896x256xbf16>, memref<4x128x256xbf16>, memref<7xi32>, memref<896x256xf32>, memref<896xf32>, memref<896xi32>, memref<896x256xf32>, memref<896x128xf32>, memref<896x1xf32>) -> ()
// PINGPONG:    call @mx_operand_6_launch(%{{.*}}, %{{.*}}, %{{.*}}) : (memref<896x256xf32>, memref<896x256xbf16>, memref<896x256xbf16>) -> ()
// PINGPONG:    func.func private @block_matmul_act_5_launch(
// PINGPONG-SAME: dynamic_shared_memory = 197776, {{.*}}counters = 1

// BIAS:        call @block_matmul_act_5_launch({{.*}}) : (memref<512x64xbf16>, memref<4x32x64xbf16>, memref<4xi32>, memref<512x64xf32>, memref<512xf32>, memref<512xi32>, memref<512x64xf32>, memref<512x64xbf16>, memref<512x64xbf16>, memref<512x32xf32>, memref<512x1xf32>) -> ()
// BIAS-NEXT:   %[[F32:.*]] = bufferization.to_tensor
// BIAS:        moe.expert_sum %[[F32]]
// BIAS:        func.func private @block_matmul_act_5_launch(
// BIAS-SAME:     pointers = [6, 2, 3, 4, 7, 8, 9, 10, 5], results = 5>

// In the kernel, per 32 columns: a * h stored as f32 pairs; along 2I, for
// dg and du of both rows, the quad's amax, then the pairs rounded and stored
// as bf16 pairs (4 bytes); along the slots, the warp's amax over its 16
// rows, lanes 0..3 store it to shared memory, the pair's barrier, the
// partner's amaxes read back, the pairs rounded.
// PTX-LABEL:   .entry block_matmul_act_5(
// PTX:           wgmma.wait_group.sync.aligned 0
// PTX:           st.global.v2.b32
// PTX:           shfl.sync.bfly.b32 {{.*}}, 1, 31, -1;
// PTX:           shfl.sync.bfly.b32 {{.*}}, 2, 31, -1;
// PTX:           cvt.rn.satfinite.e4m3x2.f32
// PTX-NEXT:      cvt.rn.f16x2.e4m3x2
// PTX:           st.global.b32
// PTX:           shfl.sync.bfly.b32 {{.*}}, 4, 31, -1;
// PTX:           shfl.sync.bfly.b32 {{.*}}, 8, 31, -1;
// PTX:           shfl.sync.bfly.b32 {{.*}}, 16, 31, -1;
// PTX:           st.shared.v2.b32
// PTX:           bar.sync {{%r[0-9]+}}, 64;
// PTX:           ld.shared.v2.b32
// PTX:           cvt.rn.satfinite.e4m3x2.f32
// PTX:           st.global.b32
// 16 column pairs x 2 rows x (dg, du) x 2 roundings: 128 conversions.
// CVT-LABEL:   .entry block_matmul_act_5(
// CVT-COUNT-128: cvt.rn.satfinite.e4m3x2.f32
// CVT-NOT:       cvt.rn.satfinite.e4m3x2.f32
// CVT:         .entry block_matmul_6(

// PTXAS:       Compiling entry function 'block_matmul_act_5' for 'sm_90a'
// PTXAS-NEXT:  Function properties for block_matmul_act_5
// PTXAS-NEXT:  0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
