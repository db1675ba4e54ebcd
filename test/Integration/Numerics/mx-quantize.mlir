// RUN: moe-opt %s -moe-host-pipeline -o %t.mlir
// RUN: %mlir_runner %t.mlir -e e4m3_rceil -entry-point-result=void \
// RUN:     -shared-libs=%mlir_c_runner_utils,%mlir_runner_utils \
// RUN: | FileCheck %s --check-prefix=E4M3-RCEIL
// RUN: %mlir_runner %t.mlir -e e4m3_floor -entry-point-result=void \
// RUN:     -shared-libs=%mlir_c_runner_utils,%mlir_runner_utils \
// RUN: | FileCheck %s --check-prefix=E4M3-FLOOR
// RUN: %mlir_runner %t.mlir -e e4m3_floor_alt -entry-point-result=void \
// RUN:     -shared-libs=%mlir_c_runner_utils,%mlir_runner_utils \
// RUN: | FileCheck %s --check-prefix=E4M3-FLOOR-ALT
// RUN: %mlir_runner %t.mlir -e e5m2_rceil -entry-point-result=void \
// RUN:     -shared-libs=%mlir_c_runner_utils,%mlir_runner_utils \
// RUN: | FileCheck %s --check-prefix=E5M2-RCEIL
// RUN: %mlir_runner %t.mlir -e e5m2_floor -entry-point-result=void \
// RUN:     -shared-libs=%mlir_c_runner_utils,%mlir_runner_utils \
// RUN: | FileCheck %s --check-prefix=E5M2-FLOOR
// RUN: %mlir_runner %t.mlir -e e4m3_rceil_axis0 -entry-point-result=void \
// RUN:     -shared-libs=%mlir_c_runner_utils,%mlir_runner_utils \
// RUN: | FileCheck %s --check-prefix=AXIS0
// RUN: %mlir_runner %t.mlir -e e4m3_rceil_bf16 -entry-point-result=void \
// RUN:     -shared-libs=%mlir_c_runner_utils,%mlir_runner_utils \
// RUN: | FileCheck %s --check-prefix=BF16

// moe.mx_quantize compiled for the host and executed, on hand-picked
// blocks; the expected codes and scale bytes are those of lib/Reference
// (moe-ref quantize) and are derived in the comments. Each row of the 8x32
// input is one block (axis 1): the first 8 values below, then zeros.
//
//   row 0  448 1 -2 0.5 3.5 -0 0.25 0.001   amax 448: RCEIL r = 1, byte 127
//          (FLOOR 127, FLOOR_ALT 128). E4M3: 448 0x7E=126, 1 0x38=56,
//          -2 0xC0=192, 0.5 48, 3.5 70, -0 keeps its sign 0x80=128,
//          0.25 40, 0.001 = 0.512 * 2^-9 -> subnormal code 1.
//   row 1  round-to-nearest-even ties at scale 1: 1.0625 (1 | 1.125) -> 1
//          (56), 1.1875 (1.125 | 1.25) -> 1.25 (58), -1.0625 -> 184, the
//          subnormal ties 0.5, 1.5, 2.5 and 7.5 * 2^-9 -> 0, 2, 2, and 8
//          (the smallest normal, 2^-6).
//   row 2  +0 and -0 only: amax 0, byte 0; codes 0 and 0x80.
//   row 3  a NaN (and -Inf): byte 0xFF, every element the NaN code with its
//          own sign (0x7F = 127, 0xFF = 255).
//   row 4  +Inf: byte 0xFF, as row 3.
//   row 5  amax = 448 * 2^-127 (0x04600000): r = 2^-127 is an fp32
//          subnormal, RCEIL byte 0 (numerics.md); x * 2^127 gives 448 (126),
//          -224 (246), 56 (102); 2^-149 * 2^127 = 2^-22 rounds to 0.
//   row 6  amax 4 ulps above (0x04600004): r rounds to 2^-127 + 2^-149,
//          RCEIL byte 1, so amax * 2^126 = 224.00001 -> 224 (118) and half
//          of it 112 (110). FLOOR: exponent field 8 - 8 = byte 0, so amax
//          stays 448 (126).
//   row 7  FLT_MAX: RCEIL byte 247 (r in [2^119, 2^120)), FLT_MAX * 2^-120
//          rounds to 256 (120); FLOOR byte 254 - 8 = 246, FLT_MAX * 2^-119
//          saturates to 448 (126), -3e38 to -448 (254).

func.func private @printMemrefI32(memref<*xi32>)

func.func @input() -> tensor<8x32xf32> {
  %head = arith.constant dense<[
    [448.0, 1.0, -2.0, 0.5, 3.5, -0.0, 0.25, 0.001],
    [448.0, 1.0625, 1.1875, -1.0625, 0x3A800000, 0x3B400000, 0x3BA00000, 0x3C700000],
    [0.0, -0.0, 0.0, -0.0, 0.0, 0.0, 0.0, 0.0],
    [0x7FC00000, -1.0, 2.0, 0xFF800000, 0.0, -0.0, 3.0, 4.0],
    [0x7F800000, 1.0, -1.0, 0.0, 0.0, 0.0, 0.0, 0.0],
    [0x04600000, 0x83E00000, 0x00000001, 0x02E00000, 0.0, 0.0, 0.0, 0.0],
    [0x04600004, 0x03E00004, 0x00000001, 0.0, 0.0, 0.0, 0.0, 0.0],
    [0x7F7FFFFF, 1.0e38, -3.0e38, 1.0, 0.0, 0.0, 0.0, 0.0]]> : tensor<8x8xf32>
  %zeros = arith.constant dense<0.0> : tensor<8x32xf32>
  %x = tensor.insert_slice %head into %zeros[0, 0] [8, 8] [1, 1]
      : tensor<8x8xf32> into tensor<8x32xf32>
  return %x : tensor<8x32xf32>
}

func.func @print(%t: tensor<8x8xi8>) {
  %i = arith.extui %t : tensor<8x8xi8> to tensor<8x8xi32>
  %m = bufferization.to_buffer %i : tensor<8x8xi32> to memref<8x8xi32>
  %u = memref.cast %m : memref<8x8xi32> to memref<*xi32>
  call @printMemrefI32(%u) : (memref<*xi32>) -> ()
  return
}

func.func @print_scales(%s: tensor<8x1xf8E8M0FNU>) {
  %b = arith.bitcast %s : tensor<8x1xf8E8M0FNU> to tensor<8x1xi8>
  %i = arith.extui %b : tensor<8x1xi8> to tensor<8x1xi32>
  %m = bufferization.to_buffer %i : tensor<8x1xi32> to memref<8x1xi32>
  %u = memref.cast %m : memref<8x1xi32> to memref<*xi32>
  call @printMemrefI32(%u) : (memref<*xi32>) -> ()
  return
}

func.func @print_e4m3(%q: tensor<8x32xf8E4M3FN>) {
  %head = tensor.extract_slice %q[0, 0] [8, 8] [1, 1]
      : tensor<8x32xf8E4M3FN> to tensor<8x8xf8E4M3FN>
  %b = arith.bitcast %head : tensor<8x8xf8E4M3FN> to tensor<8x8xi8>
  call @print(%b) : (tensor<8x8xi8>) -> ()
  return
}

func.func @print_e5m2(%q: tensor<8x32xf8E5M2>) {
  %head = tensor.extract_slice %q[0, 0] [8, 8] [1, 1]
      : tensor<8x32xf8E5M2> to tensor<8x8xf8E5M2>
  %b = arith.bitcast %head : tensor<8x8xf8E5M2> to tensor<8x8xi8>
  call @print(%b) : (tensor<8x8xi8>) -> ()
  return
}

// E4M3-RCEIL: {{\[\[}}127],
// E4M3-RCEIL-NEXT: [127],
// E4M3-RCEIL-NEXT: [0],
// E4M3-RCEIL-NEXT: [255],
// E4M3-RCEIL-NEXT: [255],
// E4M3-RCEIL-NEXT: [0],
// E4M3-RCEIL-NEXT: [1],
// E4M3-RCEIL-NEXT: [247]]
// E4M3-RCEIL: {{\[\[}}126, 56, 192, 48, 70, 128, 40, 1],
// E4M3-RCEIL-NEXT: [126, 56, 58, 184, 0, 2, 2, 8],
// E4M3-RCEIL-NEXT: [0, 128, 0, 128, 0, 0, 0, 0],
// E4M3-RCEIL-NEXT: [127, 255, 127, 255, 127, 255, 127, 127],
// E4M3-RCEIL-NEXT: [127, 127, 255, 127, 127, 127, 127, 127],
// E4M3-RCEIL-NEXT: [126, 246, 0, 102, 0, 0, 0, 0],
// E4M3-RCEIL-NEXT: [118, 110, 0, 0, 0, 0, 0, 0],
// E4M3-RCEIL-NEXT: [120, 105, 246, 0, 0, 0, 0, 0]]
func.func @e4m3_rceil() {
  %x = call @input() : () -> tensor<8x32xf32>
  %q, %s = moe.mx_quantize %x
      {axis = 1 : i64, quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>}
      : tensor<8x32xf32> -> tensor<8x32xf8E4M3FN>, tensor<8x1xf8E8M0FNU>
  call @print_scales(%s) : (tensor<8x1xf8E8M0FNU>) -> ()
  call @print_e4m3(%q) : (tensor<8x32xf8E4M3FN>) -> ()
  return
}

// E4M3-FLOOR: {{\[\[}}127],
// E4M3-FLOOR-NEXT: [127],
// E4M3-FLOOR-NEXT: [0],
// E4M3-FLOOR-NEXT: [255],
// E4M3-FLOOR-NEXT: [255],
// E4M3-FLOOR-NEXT: [0],
// E4M3-FLOOR-NEXT: [0],
// E4M3-FLOOR-NEXT: [246]]
// E4M3-FLOOR: [126, 246, 0, 102, 0, 0, 0, 0],
// E4M3-FLOOR-NEXT: [126, 118, 0, 0, 0, 0, 0, 0],
// E4M3-FLOOR-NEXT: [126, 113, 254, 0, 0, 0, 0, 0]]
func.func @e4m3_floor() {
  %x = call @input() : () -> tensor<8x32xf32>
  %q, %s = moe.mx_quantize %x
      {axis = 1 : i64, quant = #moe.mx<f8E4M3FN, block = 32, rule = floor>}
      : tensor<8x32xf32> -> tensor<8x32xf8E4M3FN>, tensor<8x1xf8E8M0FNU>
  call @print_scales(%s) : (tensor<8x1xf8E8M0FNU>) -> ()
  call @print_e4m3(%q) : (tensor<8x32xf8E4M3FN>) -> ()
  return
}

// FLOOR_ALT: byte = exponent field - 7, one more than FLOOR, so row 0 is
// halved: 448 -> 224 (118), 1 -> 0.5 (48), 0.001 -> 0.256 * 2^-9 -> 0.
// E4M3-FLOOR-ALT: {{\[\[}}128],
// E4M3-FLOOR-ALT-NEXT: [128],
// E4M3-FLOOR-ALT-NEXT: [0],
// E4M3-FLOOR-ALT-NEXT: [255],
// E4M3-FLOOR-ALT-NEXT: [255],
// E4M3-FLOOR-ALT-NEXT: [1],
// E4M3-FLOOR-ALT-NEXT: [1],
// E4M3-FLOOR-ALT-NEXT: [247]]
// E4M3-FLOOR-ALT: {{\[\[}}118, 48, 184, 40, 62, 128, 32, 0],
// E4M3-FLOOR-ALT-NEXT: [118, 48, 50, 176, 0, 1, 1, 4],
func.func @e4m3_floor_alt() {
  %x = call @input() : () -> tensor<8x32xf32>
  %q, %s = moe.mx_quantize %x
      {axis = 1 : i64, quant = #moe.mx<f8E4M3FN, block = 32, rule = floor_alt>}
      : tensor<8x32xf32> -> tensor<8x32xf8E4M3FN>, tensor<8x1xf8E8M0FNU>
  call @print_scales(%s) : (tensor<8x1xf8E8M0FNU>) -> ()
  call @print_e4m3(%q) : (tensor<8x32xf8E4M3FN>) -> ()
  return
}

// E5M2 (max 57344 = 1.75 * 2^15): RCEIL r = 448 / 57344 = 2^-7, byte 120,
// so row 0 is scaled by 2^7: 448 * 2^7 = 57344 (0x7B = 123), 1 -> 2^7
// (0x58 = 88); row 1: 1.0625 * 2^7 = 136 lies between the E5M2 values 128
// and 160 and rounds down (88), 1.1875 * 2^7 = 152 up to 160 (89). Row 5:
// r = 448 * 2^-127 / 57344 = 2^-134, byte 0. The NaN and Inf rows give the
// E5M2 NaN code 0x7F with each element's sign.
// E5M2-RCEIL: {{\[\[}}120],
// E5M2-RCEIL-NEXT: [120],
// E5M2-RCEIL-NEXT: [0],
// E5M2-RCEIL-NEXT: [255],
// E5M2-RCEIL-NEXT: [255],
// E5M2-RCEIL-NEXT: [0],
// E5M2-RCEIL-NEXT: [0],
// E5M2-RCEIL-NEXT: [240]]
// E5M2-RCEIL: {{\[\[}}123, 88, 220, 84, 95, 128, 80, 48],
// E5M2-RCEIL-NEXT: [123, 88, 89, 216, 48, 54, 57, 64],
// E5M2-RCEIL-NEXT: [0, 128, 0, 128, 0, 0, 0, 0],
// E5M2-RCEIL-NEXT: [127, 255, 127, 255, 127, 255, 127, 127],
// E5M2-RCEIL-NEXT: [127, 127, 255, 127, 127, 127, 127, 127],
// E5M2-RCEIL-NEXT: [95, 219, 0, 83, 0, 0, 0, 0],
// E5M2-RCEIL-NEXT: [95, 91, 0, 0, 0, 0, 0, 0],
// E5M2-RCEIL-NEXT: [120, 113, 247, 0, 0, 0, 0, 0]]
func.func @e5m2_rceil() {
  %x = call @input() : () -> tensor<8x32xf32>
  %q, %s = moe.mx_quantize %x
      {axis = 1 : i64, quant = #moe.mx<f8E5M2, block = 32, rule = rceil>}
      : tensor<8x32xf32> -> tensor<8x32xf8E5M2>, tensor<8x1xf8E8M0FNU>
  call @print_scales(%s) : (tensor<8x1xf8E8M0FNU>) -> ()
  call @print_e5m2(%q) : (tensor<8x32xf8E5M2>) -> ()
  return
}

// FLOOR for E5M2 on FLT_MAX: byte 254 - 15 = 239, FLT_MAX * 2^-112 =
// 65536 - 2^-7 saturates to 57344 (123); 1e38 * 2^-112 = 19259 -> 20480
// (117); -3e38 * 2^-112 = -57779 saturates to -57344 (251).
// E5M2-FLOOR: [239]]
// E5M2-FLOOR: [123, 117, 251, 0, 0, 0, 0, 0]]
func.func @e5m2_floor() {
  %x = call @input() : () -> tensor<8x32xf32>
  %q, %s = moe.mx_quantize %x
      {axis = 1 : i64, quant = #moe.mx<f8E5M2, block = 32, rule = floor>}
      : tensor<8x32xf32> -> tensor<8x32xf8E5M2>, tensor<8x1xf8E8M0FNU>
  call @print_scales(%s) : (tensor<8x1xf8E8M0FNU>) -> ()
  call @print_e5m2(%q) : (tensor<8x32xf8E5M2>) -> ()
  return
}

// The same blocks down the columns of the transpose (axis 0): the scales
// are [1, 8] and the codes the transpose of the RCEIL E4M3 codes above.
// AXIS0: {{\[\[}}127, 127, 0, 255, 255, 0, 1, 247]]
// AXIS0: {{\[\[}}126, 126, 0, 127, 127, 126, 118, 120],
// AXIS0-NEXT: [56, 56, 128, 255, 127, 246, 110, 105],
// AXIS0-NEXT: [192, 58, 0, 127, 255, 0, 0, 246],
func.func @e4m3_rceil_axis0() {
  %x = call @input() : () -> tensor<8x32xf32>
  %empty = tensor.empty() : tensor<32x8xf32>
  %xt = linalg.transpose ins(%x : tensor<8x32xf32>)
      outs(%empty : tensor<32x8xf32>) permutation = [1, 0]
  %q, %s = moe.mx_quantize %xt
      {axis = 0 : i64, quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>}
      : tensor<32x8xf32> -> tensor<32x8xf8E4M3FN>, tensor<1x8xf8E8M0FNU>
  %sb = arith.bitcast %s : tensor<1x8xf8E8M0FNU> to tensor<1x8xi8>
  %si = arith.extui %sb : tensor<1x8xi8> to tensor<1x8xi32>
  %sm = bufferization.to_buffer %si : tensor<1x8xi32> to memref<1x8xi32>
  %su = memref.cast %sm : memref<1x8xi32> to memref<*xi32>
  call @printMemrefI32(%su) : (memref<*xi32>) -> ()
  %head = tensor.extract_slice %q[0, 0] [8, 8] [1, 1]
      : tensor<32x8xf8E4M3FN> to tensor<8x8xf8E4M3FN>
  %hb = arith.bitcast %head : tensor<8x8xf8E4M3FN> to tensor<8x8xi8>
  call @print(%hb) : (tensor<8x8xi8>) -> ()
  return
}

// bf16 input (the decomposition quantizes bf16 rows): row 1 holds bf16
// values, so its codes are those of the f32 run.
// BF16: [126, 56, 58, 184, 0, 2, 2, 8],
func.func @e4m3_rceil_bf16() {
  %x = call @input() : () -> tensor<8x32xf32>
  %xb = arith.truncf %x : tensor<8x32xf32> to tensor<8x32xbf16>
  %q, %s = moe.mx_quantize %xb
      {axis = 1 : i64, quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>}
      : tensor<8x32xbf16> -> tensor<8x32xf8E4M3FN>, tensor<8x1xf8E8M0FNU>
  call @print_e4m3(%q) : (tensor<8x32xf8E4M3FN>) -> ()
  return
}
