// RUN: moe-opt %s -split-input-file -convert-moe-to-nvgpu -verify-diagnostics | FileCheck %s

// convert-moe-to-nvgpu builds the kernel a GEMM's #moe.gemm_config
// describes, and rejects a configuration sm_90a cannot run.

// Four stages instead of the bf16-operands path's six: 8 mbarriers (full and
// empty per stage) and 4 stages of two 16 KiB panels, 16 bytes of counters,
// 8 barriers and 1 KiB of alignment slack in the launch record.

// CHECK-LABEL: func.func private @block_matmul_0_launch(
// CHECK-SAME:      dynamic_shared_memory = 132176,
// CHECK-LABEL: gpu.func @block_matmul_0(
// CHECK-COUNT-8:   nvgpu.mbarrier.init
// CHECK-NOT:       nvgpu.mbarrier.init
// CHECK:           gpu.return

func.func @four_stages(%x: tensor<256x256xbf16>, %w: tensor<2x128x256xbf16>,
    %blk: tensor<2xi32>) -> tensor<256x128xf32> {
  %r = moe.block_matmul lhs(%x : tensor<256x256xbf16>)
      rhs(%w : tensor<2x128x256xbf16>) experts(%blk : tensor<2xi32>)
      {block_size = 128 : i64,
       moe.gemm_config = #moe.gemm_config<mma = bf16_operands, tile = [128, 128, 64], mma_shape = [64, 128, 16], stages = 4, warpgroups = [1, 2], registers = [40, 232]>}
      -> tensor<256x128xf32>
  return %r : tensor<256x128xf32>
}

// -----

// A K tile of two swizzle panels.

func.func @tile_k(%x: tensor<256x256xbf16>, %w: tensor<2x128x256xbf16>,
    %blk: tensor<2xi32>) -> tensor<256x128xf32> {
  // expected-error @+1 {{'moe.block_matmul' op the bf16-operands MMA path of sm_90a needs tile K 64 (one 128-byte swizzle panel), got 128}}
  %r = moe.block_matmul lhs(%x : tensor<256x256xbf16>)
      rhs(%w : tensor<2x128x256xbf16>) experts(%blk : tensor<2xi32>)
      {block_size = 128 : i64,
       moe.gemm_config = #moe.gemm_config<mma = bf16_operands, tile = [128, 128, 128], mma_shape = [64, 128, 16], stages = 4, warpgroups = [1, 2], registers = [40, 232]>}
      -> tensor<256x128xf32>
  return %r : tensor<256x128xf32>
}

// -----

// setmaxnreg counts beyond what the CTA is launched with (384 threads at
// 168 registers): the consumers' setmaxnreg.inc would wait forever.

func.func @registers(%x: tensor<256x256xbf16>, %w: tensor<2x128x256xbf16>,
    %blk: tensor<2xi32>) -> tensor<256x128xf32> {
  // expected-error @+1 {{'moe.block_matmul' op setmaxnreg registers [48, 232] need 65536 registers, more than the 64512 of 384 threads at 168 each}}
  %r = moe.block_matmul lhs(%x : tensor<256x256xbf16>)
      rhs(%w : tensor<2x128x256xbf16>) experts(%blk : tensor<2xi32>)
      {block_size = 128 : i64,
       moe.gemm_config = #moe.gemm_config<mma = bf16_operands, tile = [128, 128, 64], mma_shape = [64, 128, 16], stages = 4, warpgroups = [1, 2], registers = [48, 232], persistent = true>}
      -> tensor<256x128xf32>
  return %r : tensor<256x128xf32>
}

// -----

// Two consumer warpgroups of 64x64: a 128x64 tile.

func.func @not_square(%x: tensor<256x256xbf16>, %w: tensor<2x128x256xbf16>,
    %blk: tensor<2xi32>) -> tensor<256x128xf32> {
  // expected-error @+1 {{'moe.block_matmul' op the bf16-operands MMA path of sm_90a needs square tiles, 128x256 or 64x128, got 128x64}}
  %r = moe.block_matmul lhs(%x : tensor<256x256xbf16>)
      rhs(%w : tensor<2x128x256xbf16>) experts(%blk : tensor<2xi32>)
      {block_size = 128 : i64,
       moe.gemm_config = #moe.gemm_config<mma = bf16_operands, tile = [128, 64, 64], mma_shape = [64, 64, 16], stages = 4, warpgroups = [1, 2], registers = [40, 232]>}
      -> tensor<256x128xf32>
  return %r : tensor<256x128xf32>
}

// -----

// Two CTAs per SM: 256 threads at 128 registers each, and 6 stages of 24 KB
// (148592 bytes with the barriers, the counters and the alignment slack, plus the 1 KB the
// system reserves) twice exceed the SM's 228 KB.

func.func @two_ctas_registers(%x: tensor<256x256xbf16>,
    %w: tensor<2x128x256xbf16>, %blk: tensor<2xi32>) -> tensor<256x128xf32> {
  // expected-error @+1 {{'moe.block_matmul' op setmaxnreg registers [40, 232] need 34816 registers, more than the 32768 of 256 threads at 128 each}}
  %r = moe.block_matmul lhs(%x : tensor<256x256xbf16>)
      rhs(%w : tensor<2x128x256xbf16>) experts(%blk : tensor<2xi32>)
      {block_size = 128 : i64,
       moe.gemm_config = #moe.gemm_config<mma = bf16_operands, tile = [64, 128, 64], mma_shape = [64, 128, 16], stages = 4, warpgroups = [1, 1], registers = [40, 232], ctas_per_sm = 2>}
      -> tensor<256x128xf32>
  return %r : tensor<256x128xf32>
}

// -----

func.func @two_ctas_shared_memory(%x: tensor<256x256xbf16>,
    %w: tensor<2x128x256xbf16>, %blk: tensor<2xi32>) -> tensor<256x128xf32> {
  // expected-error @+1 {{'moe.block_matmul' op 2 CTAs of 149616 bytes of shared memory do not fit the 233472 of an SM of sm_90a}}
  %r = moe.block_matmul lhs(%x : tensor<256x256xbf16>)
      rhs(%w : tensor<2x128x256xbf16>) experts(%blk : tensor<2xi32>)
      {block_size = 128 : i64,
       moe.gemm_config = #moe.gemm_config<mma = bf16_operands, tile = [64, 128, 64], mma_shape = [64, 128, 16], stages = 6, warpgroups = [1, 1], registers = [40, 216], ctas_per_sm = 2>}
      -> tensor<256x128xf32>
  return %r : tensor<256x128xf32>
}

// -----

// A bf16 wgmma is 16 deep.

func.func @wgmma_k(%x: tensor<256x256xbf16>, %w: tensor<2x128x256xbf16>,
    %blk: tensor<2xi32>) -> tensor<256x128xf32> {
  // expected-error @+1 {{'moe.block_matmul' op MMA shape 64x128x32 is not a wgmma of the bf16-operands MMA path of sm_90a (64xNx16, N a multiple of 8 up to 256)}}
  %r = moe.block_matmul lhs(%x : tensor<256x256xbf16>)
      rhs(%w : tensor<2x128x256xbf16>) experts(%blk : tensor<2xi32>)
      {block_size = 128 : i64,
       moe.gemm_config = #moe.gemm_config<mma = bf16_operands, tile = [128, 128, 64], mma_shape = [64, 128, 32], stages = 4, warpgroups = [1, 2], registers = [40, 232]>}
      -> tensor<256x128xf32>
  return %r : tensor<256x128xf32>
}

// -----

// Eight stages of two 16 KiB panels do not fit.

func.func @too_many_stages(%x: tensor<256x256xbf16>, %w: tensor<2x128x256xbf16>,
    %blk: tensor<2xi32>) -> tensor<256x128xf32> {
  // expected-error @+1 {{'moe.block_matmul' op the MX GEMM needs 263312 bytes of shared memory, more than 232448}}
  %r = moe.block_matmul lhs(%x : tensor<256x256xbf16>)
      rhs(%w : tensor<2x128x256xbf16>) experts(%blk : tensor<2xi32>)
      {block_size = 128 : i64,
       moe.gemm_config = #moe.gemm_config<mma = bf16_operands, tile = [128, 128, 64], mma_shape = [64, 128, 16], stages = 8, warpgroups = [1, 2], registers = [40, 232]>}
      -> tensor<256x128xf32>
  return %r : tensor<256x128xf32>
}

// -----

// The MX paths read codes and scales.

func.func @mx_path_on_bf16(%x: tensor<256x256xbf16>, %w: tensor<2x128x256xbf16>,
    %blk: tensor<2xi32>) -> tensor<256x128xf32> {
  // expected-error @+1 {{'moe.block_matmul' op the bf16 MMA path takes codes of one FP8 type on both sides and no bias}}
  %r = moe.block_matmul lhs(%x : tensor<256x256xbf16>)
      rhs(%w : tensor<2x128x256xbf16>) experts(%blk : tensor<2xi32>)
      {block_size = 128 : i64,
       moe.gemm_config = #moe.gemm_config<mma = bf16, tile = [128, 128, 128], mma_shape = [64, 128, 16], stages = 3, dequant_stages = 2, warpgroups = [2, 2], registers = [144, 112]>}
      -> tensor<256x128xf32>
  return %r : tensor<256x128xf32>
}

// -----

// Not a #moe.gemm_config.

func.func @not_a_config(%x: tensor<256x256xbf16>, %w: tensor<2x128x256xbf16>,
    %blk: tensor<2xi32>) -> tensor<256x128xf32> {
  // expected-error @+1 {{'moe.block_matmul' op 'moe.gemm_config' must be a #moe.gemm_config, got 1 : i64}}
  %r = moe.block_matmul lhs(%x : tensor<256x256xbf16>)
      rhs(%w : tensor<2x128x256xbf16>) experts(%blk : tensor<2xi32>)
      {block_size = 128 : i64,
       moe.gemm_config = 1 : i64}
      -> tensor<256x128xf32>
  return %r : tensor<256x128xf32>
}

// -----

// The bf16 path dequantizes each operand in its own producer warpgroup.

func.func @one_producer(%lq: tensor<256x256xf8E4M3FN>, %ls: tensor<256x8xf8E8M0FNU>,
    %rq: tensor<2x256x256xf8E4M3FN>, %rs: tensor<2x256x8xf8E8M0FNU>,
    %blk: tensor<2xi32>) -> tensor<256x256xf32> {
  // expected-error @+1 {{'moe.block_matmul' op the bf16 MMA path of sm_90a needs 2 producer warpgroups (one per operand), got 1}}
  %r = moe.block_matmul
      lhs(%lq : tensor<256x256xf8E4M3FN> scales %ls : tensor<256x8xf8E8M0FNU>)
      rhs(%rq : tensor<2x256x256xf8E4M3FN> scales %rs : tensor<2x256x8xf8E8M0FNU>)
      experts(%blk : tensor<2xi32>)
      {block_size = 128 : i64,
       moe.gemm_config = #moe.gemm_config<mma = bf16, tile = [128, 128, 128], mma_shape = [64, 128, 16], stages = 3, dequant_stages = 2, warpgroups = [1, 2], registers = [40, 232]>}
      -> tensor<256x256xf32>
  return %r : tensor<256x256xf32>
}
