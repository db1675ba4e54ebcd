// RUN: moe-opt %s | FileCheck %s
// RUN: moe-opt %s | moe-opt | FileCheck %s
// Every enum value and attribute form, round-tripped on a carrier op.

// CHECK-LABEL: func.func @attrs
// CHECK: moe.activation<swiglu>
// CHECK-SAME: moe.activation<geglu>
// CHECK-SAME: moe.affinity<on_i>
// CHECK-SAME: moe.affinity<on_h>
// CHECK-SAME: moe.dx_accumulate<f32>
// CHECK-SAME: moe.dx_accumulate<bf16>
// CHECK-SAME: moe.mx<f8E4M3FN, block = 32, rule = rceil>
// CHECK-SAME: moe.mx<f8E5M2, block = 32, rule = floor>
// CHECK-SAME: moe.mx<none, block = 32, rule = floor_alt>
// CHECK-SAME: moe.clamp<gate_lo = -1.500000e+00>
// CHECK-SAME: moe.clamp<gate_lo = -7.000000e+00, gate_hi = 7.000000e+00, up_lo = -3.000000e+00, up_hi = 3.000000e+00>
// CHECK-SAME: moe.clamp<up_hi = 2.500000e-01>
// CHECK-SAME: moe.gemm_config<mma = bf16_operands, tile = [128, 128, 64], mma_shape = [64, 128, 16], stages = 6, warpgroups = [1, 2], registers = [40, 232]>
// CHECK-SAME: moe.gemm_config<mma = bf16, tile = [128, 128, 128], mma_shape = [64, 128, 16], stages = 3, dequant_stages = 2, warpgroups = [2, 2], registers = [144, 112]>
// CHECK-SAME: moe.gemm_config<mma = fp8, tile = [128, 128, 128], mma_shape = [64, 128, 32], stages = 5, warpgroups = [1, 2], registers = [40, 232]>
// CHECK-SAME: moe.gemm_config<mma = bf16_operands, tile = [128, 256, 64], mma_shape = [64, 256, 16], stages = 4, warpgroups = [1, 2], registers = [40, 232], rhs_n_major = true, lhs_m_major = true, persistent = true>
// CHECK-SAME: moe.gemm_config<mma = bf16_operands, tile = [64, 128, 64], mma_shape = [64, 128, 16], stages = 4, warpgroups = [1, 1], registers = [40, 216], ctas_per_sm = 2>
// CHECK-SAME: moe.gemm_config<mma = bf16_operands, tile = [128, 128, 64], mma_shape = [64, 128, 16], stages = 6, warpgroups = [1, 2], registers = [40, 232], persistent = true, pingpong = true>
// CHECK-SAME: moe.gemm_config<mma = bf16_operands, tile = [128, 128, 64], mma_shape = [64, 128, 16], stages = 6, warpgroups = [1, 2], registers = [40, 232], cluster_n = 2>
// CHECK-SAME: moe.gemm_config<mma = bf16_operands, tile = [128, 256, 64], mma_shape = [64, 256, 16], stages = 4, warpgroups = [1, 2], registers = [40, 232], persistent = true, raster_m = 8>
// CHECK-SAME: moe.gemm_config<mma = bf16_operands, tile = [128, 128, 64], mma_shape = [64, 128, 16], stages = 6, warpgroups = [1, 2], registers = [24, 240], persistent = true, pingpong = true, evict_first_outputs = true>
// CHECK-SAME: moe.gemm_config<mma = bf16_operands, tile = [128, 128, 64], mma_shape = [64, 128, 16], stages = 6, dequant_stages = 2, warpgroups = [1, 2], registers = [40, 232], persistent = true, pingpong = true, rhs_codes = true>
// CHECK-SAME: moe.gemm_config<mma = bf16_operands, tile = [128, 128, 64], mma_shape = [64, 128, 16], stages = 6, warpgroups = [1, 2], registers = [32, 232], persistent = true, pingpong = true, lhs_codes = true>
// CHECK-SAME: moe.gemm_config<mma = bf16_operands, tile = [128, 256, 64], mma_shape = [64, 256, 16], stages = 4, warpgroups = [1, 2], registers = [40, 232], persistent = true, lhs_gather = true>
// CHECK-SAME: moe.gemm_config<mma = bf16_operands, tile = [128, 256, 64], mma_shape = [64, 256, 16], stages = 4, warpgroups = [1, 2], registers = [40, 232], persistent = true, tma_store = 2>
// CHECK-SAME: moe.gemm_config<mma = bf16_operands, tile = [128, 256, 64], mma_shape = [64, 256, 16], stages = 4, warpgroups = [1, 2], registers = [40, 232], persistent = true, tma_store = 4, store_columns = 16>
// CHECK-SAME: moe.gemm_config<mma = bf16_operands, tile = [128, 256, 64], mma_shape = [64, 256, 16], stages = 4, warpgroups = [1, 2], registers = [40, 232], persistent = true, round_lhs = true, swap_operands = true, rhs_gather = true, tma_store = 2>
// CHECK-SAME: moe.gemm_config<mma = bf16_operands, tile = [128, 256, 64], mma_shape = [64, 256, 16], stages = 4, warpgroups = [1, 2], registers = [40, 232], lhs_m_major = true, persistent = true, round_lhs = true, swap_operands = true, tma_store = 2, k_turns = true>
// CHECK-SAME: moe.gpu_launch<kernel = @moe_kernels::@block_matmul_2, grid = [2, 4, 1], block = [384, 1, 1], dynamic_shared_memory = 197744, tensor_maps = [0 : !nvgpu.tensormap.descriptor<tensor = memref<128x128xi8, 3>, swizzle = swizzle_128b, l2promo = l2promo_256b, oob = zero, interleave = none>, 1 : !nvgpu.tensormap.descriptor<tensor = memref<128x128xi8, 3>, swizzle = swizzle_128b, l2promo = l2promo_256b, oob = zero, interleave = none>], pointers = [3, 2]>
// CHECK-SAME: moe.gpu_launch<kernel = @moe_kernels::@mx_operand_0, grid = [64, 1, 1], block = [256, 1, 1], pointers = [0, 1, 2]>
// CHECK-SAME: moe.gpu_launch<kernel = @moe_kernels::@block_matmul_2, grid = [132, 1, 1], block = [384, 1, 1], counters = 1, pointers = [3, 2], results = 2>
func.func @attrs() attributes {
    a0 = #moe.activation<swiglu>, a1 = #moe.activation<geglu>,
    b0 = #moe.affinity<on_i>, b1 = #moe.affinity<on_h>,
    c0 = #moe.dx_accumulate<f32>, c1 = #moe.dx_accumulate<bf16>,
    d0 = #moe.mx<f8E4M3FN, block = 32, rule = rceil>,
    d1 = #moe.mx<f8E5M2, block = 32, rule = floor>,
    d2 = #moe.mx<none, block = 32, rule = floor_alt>,
    e0 = #moe.clamp<gate_lo = -1.5>,
    e1 = #moe.clamp<up_hi = 3.0, gate_lo = -7.0, up_lo = -3.0, gate_hi = 7.0>,
    e2 = #moe.clamp<up_hi = 0.25>,
    f0 = #moe.gemm_config<mma = bf16_operands, tile = [128, 128, 64],
                          mma_shape = [64, 128, 16], stages = 6,
                          warpgroups = [1, 2], registers = [40, 232]>,
    f1 = #moe.gemm_config<mma = bf16, tile = [128, 128, 128],
                          mma_shape = [64, 128, 16], stages = 3,
                          dequant_stages = 2, warpgroups = [2, 2],
                          registers = [144, 112]>,
    f2 = #moe.gemm_config<mma = fp8, tile = [128, 128, 128],
                          mma_shape = [64, 128, 32], stages = 5,
                          warpgroups = [1, 2], registers = [40, 232]>,
    f3 = #moe.gemm_config<mma = bf16_operands, tile = [128, 256, 64],
                          mma_shape = [64, 256, 16], stages = 4,
                          warpgroups = [1, 2], registers = [40, 232],
                          persistent = true, lhs_m_major = true,
                          rhs_n_major = true>,
    f4 = #moe.gemm_config<mma = bf16_operands, tile = [64, 128, 64],
                          mma_shape = [64, 128, 16], stages = 4,
                          warpgroups = [1, 1], registers = [40, 216],
                          ctas_per_sm = 2>,
    f5 = #moe.gemm_config<mma = bf16_operands, tile = [128, 128, 64],
                          mma_shape = [64, 128, 16], stages = 6,
                          warpgroups = [1, 2], registers = [40, 232],
                          pingpong = true, persistent = true>,
    f6 = #moe.gemm_config<mma = bf16_operands, tile = [128, 128, 64],
                          mma_shape = [64, 128, 16], stages = 6,
                          warpgroups = [1, 2], registers = [40, 232],
                          cluster_n = 2>,
    f7 = #moe.gemm_config<mma = bf16_operands, tile = [128, 256, 64],
                          mma_shape = [64, 256, 16], stages = 4,
                          warpgroups = [1, 2], registers = [40, 232],
                          raster_m = 8, persistent = true>,
    f8 = #moe.gemm_config<mma = bf16_operands, tile = [128, 128, 64],
                          mma_shape = [64, 128, 16], stages = 6,
                          warpgroups = [1, 2], registers = [24, 240],
                          evict_first_outputs = true, pingpong = true,
                          persistent = true>,
    f9 = #moe.gemm_config<mma = bf16_operands, tile = [128, 128, 64],
                          mma_shape = [64, 128, 16], stages = 6,
                          dequant_stages = 2,
                          warpgroups = [1, 2], registers = [40, 232],
                          rhs_codes = true, pingpong = true,
                          persistent = true>,
    fa = #moe.gemm_config<mma = bf16_operands, tile = [128, 128, 64],
                          mma_shape = [64, 128, 16], stages = 6,
                          warpgroups = [1, 2], registers = [32, 232],
                          lhs_codes = true, pingpong = true,
                          persistent = true>,
    fb = #moe.gemm_config<mma = bf16_operands, tile = [128, 256, 64],
                          mma_shape = [64, 256, 16], stages = 4,
                          warpgroups = [1, 2], registers = [40, 232],
                          lhs_gather = true, persistent = true>,
    fc = #moe.gemm_config<mma = bf16_operands, tile = [128, 256, 64],
                          mma_shape = [64, 256, 16], stages = 4,
                          warpgroups = [1, 2], registers = [40, 232],
                          tma_store = 2, store_columns = 32,
                          persistent = true>,
    fd = #moe.gemm_config<mma = bf16_operands, tile = [128, 256, 64],
                          mma_shape = [64, 256, 16], stages = 4,
                          warpgroups = [1, 2], registers = [40, 232],
                          store_columns = 16, persistent = true,
                          tma_store = 4>,
    fe = #moe.gemm_config<mma = bf16_operands, tile = [128, 256, 64],
                          mma_shape = [64, 256, 16], stages = 4,
                          warpgroups = [1, 2], registers = [40, 232],
                          persistent = true, tma_store = 2, rhs_gather = true,
                          swap_operands = true, round_lhs = true>,
    ff = #moe.gemm_config<mma = bf16_operands, tile = [128, 256, 64],
                          mma_shape = [64, 256, 16], stages = 4,
                          warpgroups = [1, 2], registers = [40, 232],
                          k_turns = true, persistent = true,
                          tma_store = 2, round_lhs = true,
                          swap_operands = true, lhs_m_major = true>,
    g0 = #moe.gpu_launch<kernel = @moe_kernels::@block_matmul_2,
                         grid = [2, 4, 1], block = [384, 1, 1],
                         dynamic_shared_memory = 197744,
                         tensor_maps = [0 : !nvgpu.tensormap.descriptor<tensor = memref<128x128xi8, 3>, swizzle = swizzle_128b, l2promo = l2promo_256b, oob = zero, interleave = none>,
                                        1 : !nvgpu.tensormap.descriptor<tensor = memref<128x128xi8, 3>, swizzle = swizzle_128b, l2promo = l2promo_256b, oob = zero, interleave = none>],
                         pointers = [3, 2]>,
    g1 = #moe.gpu_launch<kernel = @moe_kernels::@mx_operand_0,
                         grid = [64, 1, 1], block = [256, 1, 1],
                         dynamic_shared_memory = 0, pointers = [0, 1, 2]>,
    g2 = #moe.gpu_launch<kernel = @moe_kernels::@block_matmul_2,
                         grid = [132, 1, 1], block = [384, 1, 1],
                         counters = 1, pointers = [3, 2], results = 2>} {
  return
}
