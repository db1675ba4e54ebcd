// Ping-pong bf16-operands GEMM kernels (#moe.gemm_config pingpong; P1's by
// default, moe-gpu-kernel-config.mlir): a persistent CTA whose two consumer
// warpgroups each compute every other tile whole, two m64n128k16 wgmmas (the
// tile's two 64-row halves, one accumulator each) per k16 step on the same
// B descriptor. Both warpgroups read every tile id from the producer's ring
// (its empty barriers count all 256 consumer threads) and advance their
// ring position by every tile's K tiles, since the producer fills the TMA
// ring in tile order; a stage is one warpgroup's (its empty barriers count
// 1: the warpgroup's first thread arrives once its wgmma.wait_group has
// covered the stage's MMAs, after the mainloop for the tile's last stage
// too). The warpgroups take turns at the tensor cores through two named
// barriers of 256 threads: warpgroup w waits on 8 + w before its mainloop
// and, once it has issued its last wgmma, arrives on the other's; warpgroup
// 0 arrives on its own first, and after the tile loop the warpgroup whose
// turn is next (the tiles received mod 2) takes it, so that no arrival is
// left unmet when the CTA exits.
// A block GEMM of 64 x 8 tiles of 128x128 on 132 CTAs, the config set by
// hand (a plain GEMM's table row is the cooperative one); its producer
// thread needs 32 registers (24, P1's, spill 8 bytes here).
// RUN: %moe_obj/bin/moe-run --gemm M=8192,N=1024,K=256,G=2 --print-layer-ir --gemm-config "#moe.gemm_config<mma = bf16_operands, tile = [128, 128, 64], mma_shape = [64, 128, 16], stages = 6, warpgroups = [1, 2], registers = [32, 232], persistent = true, pingpong = true>" > %t.mlir
// RUN: moe-opt %t.mlir --convert-moe-to-nvgpu | FileCheck %s
// REQUIRES: ptxas
// RUN: moe-opt %t.mlir --moe-gpu-device-pipeline="chip=sm_90a format=isa" | %python %S/Inputs/extract-ptx.py > %t.ptx
// RUN: FileCheck %s --check-prefix=PTX < %t.ptx
// RUN: FileCheck %s --check-prefix=PTXATOM < %t.ptx
// RUN: %ptxas -arch=sm_90a -v %t.ptx -o %t.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// A ping-pong config the kernel cannot take: 128x256 per warpgroup (256
// accumulator registers per thread).
// RUN: %moe_obj/bin/moe-run --gemm M=8192,N=1024,K=256,G=2 --print-layer-ir --gemm-config "#moe.gemm_config<mma = bf16_operands, tile = [128, 256, 64], mma_shape = [64, 256, 16], stages = 4, warpgroups = [1, 2], registers = [24, 240], persistent = true, pingpong = true>" > %t.wide.mlir
// RUN: not moe-opt %t.wide.mlir --convert-moe-to-nvgpu 2>&1 | FileCheck %s --check-prefix=WIDE

// CHECK:       func.func private @block_matmul_2_launch(
// CHECK-SAME:    grid = [132, 1, 1], block = [384, 1, 1]
// CHECK-SAME:    counters = 1
// CHECK-LABEL: gpu.func @block_matmul_2(
// Stage barriers: full (1 arrival, the producer's expect_tx), empty (one
// warpgroup); tile-id slots: full (1), empty (both warpgroups).
// CHECK:         nvgpu.mbarrier.init %{{.*}}[%c0], %c1
// CHECK:         nvgpu.mbarrier.init %{{.*}}[%c6], %c1
// CHECK:         nvgpu.mbarrier.init %{{.*}}[%c12], %c1
// CHECK:         nvgpu.mbarrier.init %{{.*}}[%c14], %c256
// CHECK:         nvvm.setmaxregister decrease 32
// CHECK:         llvm.atomicrmw add
// CHECK:         nvgpu.tma.async.load
// CHECK:         nvvm.setmaxregister increase 232
// CHECK:         %[[WG:.*]] = arith.divui %{{.*}}, %c128_i32
// CHECK:         %[[FIRST:.*]] = arith.cmpi eq, %[[WG]], %c0_i32
// CHECK:         scf.if %[[FIRST]] {
// CHECK:           nvvm.barrier.arrive id = %{{.*}} number_of_threads = %c256_i32
// CHECK:         scf.while
// CHECK:           nvgpu.mbarrier.try_wait.parity
// CHECK:           llvm.load %{{.*}} : !llvm.ptr<3> -> i32
// CHECK:           nvgpu.mbarrier.arrive
// CHECK:           scf.condition
// CHECK:           %[[PARITY:.*]] = arith.andi %{{.*}}, %c1_i32
// CHECK:           %[[OWN:.*]] = arith.cmpi eq, %[[PARITY]], %[[WG]]
// CHECK:           scf.if %[[OWN]] {
// CHECK:             nvvm.barrier id = %{{.*}} number_of_threads = %c256_i32
// CHECK:             %[[ACC0:.*]] = nvvm.wgmma.mma_async %[[A0:.*]], %[[B:.*]], %{{.*}}, <m = 64, n = 128, k = 16>, D[<f32>, <zero>]
// CHECK-NEXT:        %[[ACC1:.*]] = nvvm.wgmma.mma_async %[[A1:.*]], %[[B]], %{{.*}}, <m = 64, n = 128, k = 16>, D[<f32>, <zero>]
// CHECK:             nvvm.wgmma.mma_async %{{.*}}, %{{.*}}, %[[ACC0]], <m = 64, n = 128, k = 16>, D[<f32>, <one>]
// CHECK-NEXT:        nvvm.wgmma.mma_async %{{.*}}, %{{.*}}, %[[ACC1]], <m = 64, n = 128, k = 16>, D[<f32>, <one>]
// CHECK:             scf.for
// CHECK:             nvvm.barrier.arrive id = %{{.*}} number_of_threads = %c256_i32
// CHECK-NEXT:        nvvm.wgmma.wait.group.sync.aligned 0
// CHECK:             scf.if %[[LEADER:.*]] {
// CHECK-NEXT:          nvgpu.mbarrier.arrive
// CHECK-NEXT:        }
// CHECK:             llvm.store {{.*}} : vector<2xf32>, !llvm.ptr<1>
// CHECK:           scf.yield

// PTX-LABEL:   .entry block_matmul_2(
// PTX:           setmaxnreg.dec.sync.aligned.u32 32;
// PTX:           setmaxnreg.inc.sync.aligned.u32 232;
// PTX:           bar.arrive {{%r[0-9]+}}, 256;
// PTX:           bar.sync {{%r[0-9]+}}, 256;
// PTX:           wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16
// PTX:           wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16
// PTX:           bar.arrive {{%r[0-9]+}}, 256;
// PTX:           wgmma.wait_group.sync.aligned 0;
// PTX:           bar.sync {{%r[0-9]+}}, 256;
// PTX-NEXT:    {{^\$L__BB[0-9_]+:}}
// PTX-NEXT:      ret;
// PTXATOM:       atom.global.add.u32

// PTXAS:       Function properties for block_matmul_2
// PTXAS-NEXT:  0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads

// WIDE: error: 'moe.block_matmul' op {{.*}}a pingpong warpgroup's 128x256 tile needs 256 accumulator registers per thread, more than 128
