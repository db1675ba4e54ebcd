// One definition of the MX numerics: the host lowering of moe.mx_quantize
// (convert-moe-to-linalg, in a linalg.generic) and the GPU operand kernel
// that rounds the same operand (convert-moe-to-nvgpu, in a gpu.func) emit
// the same op sequence for the block's scale, built by the shared builders
// of lib/Dialect/Moe/Utils/MXBuilders.cpp: the amax as the integer maximum
// of |x|'s bits, RCEIL's IEEE division by 448 (e4m3), the exponent field,
// plus one for a non-zero mantissa, byte 0 for amax = 0, 0xFF for NaN/Inf.
// The encode differs on purpose: host loops round with the integer
// emulation (buildEncodeFP8), the GPU with cvt.rn.satfinite, whose bits
// the H200 suite compares (docs/numerics.md).
// RUN: moe-opt %s -convert-moe-to-linalg | FileCheck %s --check-prefixes=COMMON,HOST
// RUN: moe-opt %s -convert-moe-to-nvgpu | FileCheck %s --check-prefixes=COMMON,GPU

// GPU-LABEL:   gpu.func @mx_operand_0(
// HOST:          %[[C448:.*]] = arith.constant 4.480000e+02 : f32
// COMMON:        arith.andi %{{.*}}, %c2147483647_i32{{(_[0-9]+)?}} : i32
// COMMON:        arith.maxui %{{.*}}, %{{.*}} : i32
// GPU:           %[[C448:.*]] = arith.constant 4.480000e+02 : f32
// COMMON:        arith.divf %{{.*}}, %[[C448]] : f32
// COMMON-NEXT:   arith.bitcast %{{.*}} : f32 to i32
// COMMON:        arith.shrui %{{.*}}, %c23_i32{{(_[0-9]+)?}} : i32
// COMMON:        arith.andi %{{.*}}, %c8388607_i32{{(_[0-9]+)?}} : i32
// COMMON:        arith.cmpi ne, %{{.*}}, %c0_i32{{(_[0-9]+)?}} : i32
// COMMON:        arith.cmpi ugt, %{{.*}}, %c4194304_i32{{(_[0-9]+)?}} : i32
// COMMON:        arith.cmpi eq, %{{.*}}, %c0_i32{{(_[0-9]+)?}} : i32
// COMMON-NEXT:   arith.addi %{{.*}}, %{{.*}} : i32
// COMMON-NEXT:   arith.select %{{.*}}, %{{.*}}, %{{.*}} : i32
// COMMON:        arith.minsi %{{.*}}, %c254_i32{{(_[0-9]+)?}} : i32
// COMMON:        arith.cmpi uge, %{{.*}}, %c2139095040_i32{{(_[0-9]+)?}} : i32
// COMMON:        arith.select %{{.*}}, %c255_i32{{(_[0-9]+)?}}, %{{.*}} : i32
// HOST:          arith.bitcast %{{.*}} : i8 to f8E8M0FNU
// HOST-NOT:      nvvm.convert
// GPU:           nvvm.convert.f32x2.to.f8x2 {{.*}} {rnd = #nvvm.fp_rnd_mode<rn>, sat = #nvvm.sat_mode<satfinite>} : vector<2xi8>(f8E4M3FN)
// GPU:           nvvm.convert.f8x2.to.f16x2 %{{.*}} : vector<2xi8>(f8E4M3FN) -> vector<2xf16>
#mx = #moe.mx<f8E4M3FN, block = 32, rule = rceil>
func.func @q(%x: tensor<128x64xbf16>, %w: tensor<1x96x64xbf16>,
             %blk: tensor<1xi32>) -> tensor<128x96xf32> {
  %q, %s = moe.mx_quantize %x {axis = 1 : i64, quant = #mx}
      : tensor<128x64xbf16> -> tensor<128x64xf8E4M3FN>, tensor<128x2xf8E8M0FNU>
  %wq, %ws = moe.mx_quantize %w {axis = 2 : i64, quant = #mx}
      : tensor<1x96x64xbf16> -> tensor<1x96x64xf8E4M3FN>, tensor<1x96x2xf8E8M0FNU>
  %r = moe.block_matmul
      lhs(%q : tensor<128x64xf8E4M3FN> scales %s : tensor<128x2xf8E8M0FNU>)
      rhs(%wq : tensor<1x96x64xf8E4M3FN> scales %ws : tensor<1x96x2xf8E8M0FNU>)
      experts(%blk : tensor<1xi32>) {block_size = 128 : i64}
      -> tensor<128x96xf32>
  return %r : tensor<128x96xf32>
}
