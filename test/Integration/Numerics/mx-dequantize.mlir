// RUN: moe-opt %s -moe-host-pipeline -o %t.mlir
// RUN: %mlir_runner %t.mlir -e e4m3 -entry-point-result=void \
// RUN:     -shared-libs=%mlir_c_runner_utils,%mlir_runner_utils \
// RUN: | FileCheck %s --check-prefix=E4M3
// RUN: %mlir_runner %t.mlir -e e5m2 -entry-point-result=void \
// RUN:     -shared-libs=%mlir_c_runner_utils,%mlir_runner_utils \
// RUN: | FileCheck %s --check-prefix=E5M2

// moe.mx_dequantize compiled for the host and executed on codes and scales
// that no quantizer of this project writes but pre-quantized weights may
// carry: every special code, scale byte 0 (2^-127, an fp32 subnormal),
// 254 (2^127, where large codes overflow to Inf) and 255 (NaN). Each row
// is one 32-element block whose first 8 codes are listed; the results are
// printed as f32 bit patterns (signed i32), those of lib/Reference's
// decodeFP8(code) * decodeE8M0(byte) rounded once to fp32.

func.func private @printMemrefI32(memref<*xi32>)

func.func @print_bits(%v: tensor<5x32xf32>) {
  %head = tensor.extract_slice %v[0, 0] [5, 8] [1, 1]
      : tensor<5x32xf32> to tensor<5x8xf32>
  %i = arith.bitcast %head : tensor<5x8xf32> to tensor<5x8xi32>
  %m = bufferization.to_buffer %i : tensor<5x8xi32> to memref<5x8xi32>
  %u = memref.cast %m : memref<5x8xi32> to memref<*xi32>
  call @printMemrefI32(%u) : (memref<*xi32>) -> ()
  return
}

/// 8 codes per row followed by zeros, as a [5, 32] i8 tensor.
func.func @codes(%head: tensor<5x8xi8>) -> tensor<5x32xi8> {
  %zeros = arith.constant dense<0> : tensor<5x32xi8>
  %c = tensor.insert_slice %head into %zeros[0, 0] [5, 8] [1, 1]
      : tensor<5x8xi8> into tensor<5x32xi8>
  return %c : tensor<5x32xi8>
}

// Row 0, scale 127 (1.0): 448 0x43E00000, 2^-9 0x3B000000, -0, 1.0,
//   2^-6 (smallest normal) 0x3C800000, -1.0, and the NaN codes 0x7F / 0xFF.
// Row 1, scale 0 (2^-127): 448 * 2^-127 = 0x04600000 (normal), 2^-136 and
//   7 * 2^-136 (fp32 subnormals 0x2000, 0xE000), 2^-127 (0x00400000), -0.
// Row 2, scale 254 (2^127): 448 * 2^127 overflows to +Inf, 1.0 -> 2^127
//   (0x7F000000), 2^-9 -> 2^118 (0x7A800000), -0.5 -> -2^126 (0xFE800000).
// Row 3, scale 255: NaN for every code.
// Row 4, scale 1 (2^-126): 2^-135 (0x4000), -2^-135, 448 * 2^-126.
// E4M3: {{\[\[}}1138753536, 989855744, -2147483648, 1065353216, 1015021568, -1082130432, 2143289344, -4194304],
// E4M3-NEXT: [73400320, 8192, 4194304, 57344, -2147483648, 0, 0, 0],
// E4M3-NEXT: [2139095040, 2130706432, 2055208960, -25165824, 0, 0, 0, 0],
// E4M3-NEXT: [{{2143289344|-4194304}}, {{2143289344|-4194304}}, {{2143289344|-4194304}}, {{2143289344|-4194304}}, {{2143289344|-4194304}}, {{2143289344|-4194304}}, {{2143289344|-4194304}}, {{2143289344|-4194304}}],
// E4M3-NEXT: [16384, -2147467264, 81788928, 0, 0, 0, 0, 0]]
func.func @e4m3() {
  %head = arith.constant dense<[
    [0x7E, 0x01, 0x80, 0x38, 0x08, 0xB8, 0x7F, 0xFF],
    [0x7E, 0x01, 0x38, 0x07, 0x80, 0, 0, 0],
    [0x7E, 0x38, 0x01, 0xB0, 0, 0, 0, 0],
    [0x38, 0x00, 0x80, 0, 0, 0, 0, 0],
    [0x01, 0x81, 0x7E, 0, 0, 0, 0, 0]]> : tensor<5x8xi8>
  %c = call @codes(%head) : (tensor<5x8xi8>) -> tensor<5x32xi8>
  %q = arith.bitcast %c : tensor<5x32xi8> to tensor<5x32xf8E4M3FN>
  %sb = arith.constant dense<[[127], [0], [254], [255], [1]]> : tensor<5x1xi8>
  %s = arith.bitcast %sb : tensor<5x1xi8> to tensor<5x1xf8E8M0FNU>
  %v = moe.mx_dequantize %q, %s {axis = 1 : i64}
      : tensor<5x32xf8E4M3FN>, tensor<5x1xf8E8M0FNU> -> tensor<5x32xf32>
  call @print_bits(%v) : (tensor<5x32xf32>) -> ()
  return
}

// E5M2 row 0, scale 127: 57344 (0x47600000), +Inf and -Inf (0x7C, 0xFC),
//   a NaN code (0x7D), 2^-16 (0x37800000), 1.0, -3 * 2^-16 (0xB8400000),
//   2^-14 (0x38800000).
// Row 1, scale 0: 57344 * 2^-127 = 0x07E00000, 2^-143 (subnormal 0x40),
//   -0, 2^-127.
// E5M2: {{\[\[}}1197473792, 2139095040, -8388608, {{2143289344|-4194304}}, 931135488, 1065353216, -1203765248, 947912704],
// E5M2-NEXT: [132120576, 64, -2147483648, 4194304, 0, 0, 0, 0],
func.func @e5m2() {
  %head = arith.constant dense<[
    [0x7B, 0x7C, 0xFC, 0x7D, 0x01, 0x3C, 0x83, 0x04],
    [0x7B, 0x01, 0x80, 0x3C, 0, 0, 0, 0],
    [0, 0, 0, 0, 0, 0, 0, 0],
    [0, 0, 0, 0, 0, 0, 0, 0],
    [0, 0, 0, 0, 0, 0, 0, 0]]> : tensor<5x8xi8>
  %c = call @codes(%head) : (tensor<5x8xi8>) -> tensor<5x32xi8>
  %q = arith.bitcast %c : tensor<5x32xi8> to tensor<5x32xf8E5M2>
  %sb = arith.constant dense<[[127], [0], [127], [127], [127]]> : tensor<5x1xi8>
  %s = arith.bitcast %sb : tensor<5x1xi8> to tensor<5x1xf8E8M0FNU>
  %v = moe.mx_dequantize %q, %s {axis = 1 : i64}
      : tensor<5x32xf8E5M2>, tensor<5x1xf8E8M0FNU> -> tensor<5x32xf32>
  call @print_bits(%v) : (tensor<5x32xf32>) -> ()
  return
}
