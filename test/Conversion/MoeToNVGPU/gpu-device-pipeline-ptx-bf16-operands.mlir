// The PTX of the sm_90a block GEMM on the default bf16-operands MMA path
// (moe-gpu-device-pipeline, format=isa), for a GEMM whose operands come
// from mx_quantize along K (e4m3, RCEIL): two operand kernels that round
// the quantizations' bf16 inputs to their MX values, then the GEMM kernel.
// S = 256 slots in 2 blocks of 128, E = 2, N = 128, K = 256: 4 K tiles of
// 64 bf16, which the consumers' loop unrolls. One CTA per tile
// (persistent-gemms=false; persistent-gemm.mlir has the persistent form).
// RUN: moe-opt %s --moe-gpu-device-pipeline="chip=sm_90a format=isa persistent-gemms=false tma-store=false" | %python %S/Inputs/extract-ptx.py > %t.ptx
// RUN: FileCheck %s < %t.ptx
// RUN: FileCheck %s --check-prefix=KINDS --implicit-check-not=wgmma.mma_async < %t.ptx
// ptxas accepts the three kernels: no spills, no stack, no warning (C7508:
// setmaxnreg ignored; C7514 / C7520: wgmma serialized). Only where the CUDA
// toolkit is installed (the `ptxas` feature).
// RUN: %if ptxas %{ %ptxas -arch=sm_90a -v %t.ptx -o %t.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS %}

func.func @mx_gemm(%x: tensor<256x256xbf16>, %w: tensor<2x128x256xbf16>,
                   %blk: tensor<2xi32>) -> tensor<256x128xf32> {
  %xq, %xs = moe.mx_quantize %x
      {axis = 1 : i64, quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>}
      : tensor<256x256xbf16> -> tensor<256x256xf8E4M3FN>, tensor<256x8xf8E8M0FNU>
  %wq, %ws = moe.mx_quantize %w
      {axis = 2 : i64, quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>}
      : tensor<2x128x256xbf16> -> tensor<2x128x256xf8E4M3FN>, tensor<2x128x8xf8E8M0FNU>
  %r = moe.block_matmul
      lhs(%xq : tensor<256x256xf8E4M3FN> scales %xs : tensor<256x8xf8E8M0FNU>)
      rhs(%wq : tensor<2x128x256xf8E4M3FN> scales %ws : tensor<2x128x8xf8E8M0FNU>)
      experts(%blk : tensor<2xi32>) {block_size = 128 : i64}
      -> tensor<256x128xf32>
  return %r : tensor<256x128xf32>
}

// CHECK:       .target sm_90a
//
// The lhs operand kernel, a lane quad per 32-element block: one 16-byte
// load of a lane's 8 values, their amax on the magnitude bits, the quad's
// amax by two butterfly shuffles, the RCEIL division by 448 (0f43E00000),
// per pair the hardware rounding to e4m3x2 with saturation and the exact
// conversion back through f16x2, the pairs packed to bf16x2, one 16-byte
// store.
// CHECK-LABEL: .visible .entry mx_operand_0(
// CHECK:       .maxntid 256, 1, 1
// CHECK:       ld.global.v4.b32
// CHECK-NOT:   ld.global
// CHECK:       and.b32 {{.*}}, 2147483647;
// CHECK:       max.u32
// CHECK:       shfl.sync.bfly.b32 {{.*}}, 1, 31, -1;
// CHECK:       shfl.sync.bfly.b32 {{.*}}, 2, 31, -1;
// CHECK:       div.rn.f32 {{.*}}, 0f43E00000;
// CHECK:       cvt.rn.satfinite.e4m3x2.f32
// CHECK-NEXT:  cvt.rn.f16x2.e4m3x2
// CHECK-COUNT-3: cvt.rn.satfinite.e4m3x2.f32
// CHECK-NOT:   cvt.rn.satfinite
// CHECK:       cvt.rn.bf16x2.f32
// CHECK:       st.global.v4.b32
// CHECK-NOT:   st.global
// CHECK:       ret;
// The rhs operand kernel: the same for the weight.
// CHECK-LABEL: .visible .entry mx_operand_1(
// CHECK:       div.rn.f32 {{.*}}, 0f43E00000;
// CHECK-COUNT-4: cvt.rn.satfinite.e4m3x2.f32
// CHECK:       st.global.v4.b32
//
// The GEMM kernel: 384 threads, 6 full and 6 empty barriers.
// CHECK-LABEL: .visible .entry block_matmul_2(
// CHECK:       .maxntid 384, 1, 1
// CHECK-COUNT-12: mbarrier.init.shared.b64
// CHECK-NOT:   mbarrier.init
// CHECK:       bar.sync 0;
// The producer warpgroup gives registers away; thread 0 issues the two
// TMA loads of each of the 4 K tiles.
// CHECK:       setmaxnreg.dec.sync.aligned.u32 40;
// CHECK-COUNT-8: cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
// CHECK-NOT:   cp.async.bulk.tensor
// The consumers: 4 bf16 wgmmas (k16) per 64-wide K tile, one group in
// flight; from the second tile on, the previous tile's stage is released,
// by the first thread of each warpgroup (the other threads branch past it).
// CHECK:       setmaxnreg.inc.sync.aligned.u32 232;
// CHECK:       wgmma.fence.sync.aligned;
// CHECK-COUNT-4: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16
// CHECK:       wgmma.commit_group.sync.aligned;
// CHECK-NEXT:  wgmma.wait_group.sync.aligned 1;
// CHECK-COUNT-4: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16
// CHECK:       wgmma.wait_group.sync.aligned 1;
// CHECK-NEXT:  @%p{{[0-9]+}} bra
// CHECK:       mbarrier.arrive.shared.b64
// CHECK-COUNT-4: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16
// CHECK:       wgmma.wait_group.sync.aligned 1;
// CHECK-NEXT:  @%p{{[0-9]+}} bra
// CHECK:       mbarrier.arrive.shared.b64
// CHECK-COUNT-4: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16
// CHECK:       wgmma.wait_group.sync.aligned 1;
// CHECK-NEXT:  @%p{{[0-9]+}} bra
// CHECK:       mbarrier.arrive.shared.b64
// CHECK:       wgmma.wait_group.sync.aligned 0;
// CHECK-COUNT-32: st.global.v2.b32
// CHECK-NOT:   wgmma.mma_async

// Every wgmma of the module is a bf16 m64n128k16 with an f32 accumulator.
// KINDS-COUNT-16: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16

// PTXAS-NOT:   warning
// PTXAS:       Compiling entry function 'block_matmul_2' for 'sm_90a'
// PTXAS-NOT:   warning
// PTXAS:       0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// PTXAS-NOT:   warning
// PTXAS:       Compiling entry function 'mx_operand_1' for 'sm_90a'
// PTXAS-NOT:   warning
// PTXAS:       0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// PTXAS-NOT:   warning
// PTXAS:       Compiling entry function 'mx_operand_0' for 'sm_90a'
// PTXAS-NOT:   warning
// PTXAS:       0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// PTXAS-NOT:   warning
