// RUN: moe-opt %s -convert-moe-to-linalg="read-only-inputs=false" -cse \
// RUN: | FileCheck %s
// RUN: moe-opt %s -convert-moe-to-linalg -cse \
// RUN: | FileCheck %s --check-prefix=READONLY

// The structure of each op's lowering (loops, indexing, slices) and the
// arithmetic that carries its numerics. The bits these compute are checked
// by the executed tests in test/Integration/Numerics.

// CHECK-DAG: #[[$SLOT:.*]] = affine_map<(d0, d1) -> (d0)>
// CHECK-DAG: #[[$ID2:.*]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-DAG: #[[$COL:.*]] = affine_map<(d0, d1) -> (d1)>
// CHECK-DAG: #[[$ID3:.*]] = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
// CHECK-DAG: #[[$BLOCK3:.*]] = affine_map<(d0, d1, d2) -> (d0, d1)>
// CHECK-DAG: #[[$D0D2:.*]] = affine_map<(d0, d1, d2) -> (d0, d2)>
// CHECK-DAG: #[[$D1D2:.*]] = affine_map<(d0, d1, d2) -> (d1, d2)>
// CHECK-DAG: #[[$CKPT:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d2, d3, d1)>
// CHECK-DAG: #[[$LANE:.*]] = affine_map<(d0, d1, d2) -> (d0, d2, d1)>

// By default every tensor argument is marked read only for bufferization
// (the host calling convention: inputs are never written).
// READONLY-LABEL: func.func @gather_rows
// READONLY-SAME: (%{{.*}}: tensor<8x64xbf16> {bufferization.writable = false}, %{{.*}}: tensor<64xi32> {bufferization.writable = false})

// A slot reads its token's row through tensor.extract; padding (-1)
// reads row 0 and yields zero.
// CHECK-LABEL: func.func @gather_rows
// CHECK-SAME: (%[[X:.*]]: tensor<8x64xbf16>, %[[TOK:.*]]: tensor<64xi32>)
// CHECK: %[[EMPTY:.*]] = tensor.empty() : tensor<64x64xbf16>
// CHECK: linalg.generic {indexing_maps = [#[[$SLOT]], #[[$ID2]]], iterator_types = ["parallel", "parallel"]}
// CHECK-SAME: ins(%[[TOK]] : tensor<64xi32>) outs(%[[EMPTY]] : tensor<64x64xbf16>)
// CHECK: ^bb0(%[[T:.*]]: i32, %{{.*}}: bf16):
// CHECK: %[[VALID:.*]] = arith.cmpi sge, %[[T]], %{{.*}} : i32
// CHECK: %[[ROW:.*]] = arith.select %[[VALID]], %[[T]], %{{.*}} : i32
// CHECK: %[[ROWI:.*]] = arith.index_cast %[[ROW]] : i32 to index
// CHECK: %[[C:.*]] = linalg.index 1 : index
// CHECK: %[[V:.*]] = tensor.extract %[[X]][%[[ROWI]], %[[C]]] : tensor<8x64xbf16>
// CHECK: %[[R:.*]] = arith.select %[[VALID]], %[[V]], %{{.*}} : bf16
// CHECK: linalg.yield %[[R]] : bf16
func.func @gather_rows(%x: tensor<8x64xbf16>, %tok: tensor<64xi32>)
    -> tensor<64x64xbf16> {
  %r = moe.gather_rows %x[%tok]
      : tensor<8x64xbf16>, tensor<64xi32> -> tensor<64x64xbf16>
  return %r : tensor<64x64xbf16>
}

// affinities[t * E + block_to_expert[s / B]].
// CHECK-LABEL: func.func @slot_affinities
// CHECK-SAME: (%[[AFF:.*]]: tensor<40xf32>, %[[TOK:.*]]: tensor<64xi32>, %[[BLK:.*]]: tensor<2xi32>)
// CHECK: linalg.generic
// CHECK-SAME: ins(%[[TOK]] : tensor<64xi32>)
// CHECK: %[[T:.*]] = arith.index_cast %{{.*}} : i32 to index
// CHECK: %[[S:.*]] = linalg.index 0 : index
// CHECK: %[[N:.*]] = arith.divui %[[S]], %{{.*}} : index
// CHECK: %[[E32:.*]] = tensor.extract %[[BLK]][%[[N]]] : tensor<2xi32>
// CHECK: %[[E:.*]] = arith.index_cast %[[E32]] : i32 to index
// CHECK: %[[TE:.*]] = arith.muli %[[T]], %{{.*}} : index
// CHECK: %[[IDX:.*]] = arith.addi %[[TE]], %[[E]] : index
// CHECK: tensor.extract %[[AFF]][%[[IDX]]] : tensor<40xf32>
func.func @slot_affinities(%aff: tensor<40xf32>, %tok: tensor<64xi32>,
                           %blk: tensor<2xi32>) -> tensor<64xf32> {
  %a = moe.slot_affinities %aff, %tok, %blk
      {block_size = 32 : i64, num_experts = 4 : i64}
      : tensor<40xf32>, tensor<64xi32>, tensor<2xi32> -> tensor<64xf32>
  return %a : tensor<64xf32>
}

// [N, 2, I, B] read as [N, B, 2, I], widened, collapsed to [N*B, 2I].
// CHECK-LABEL: func.func @unpack_checkpoint
// CHECK: %[[T:.*]] = linalg.generic {indexing_maps = [#[[$CKPT]], #{{.*}}]
// CHECK-SAME: ins(%{{.*}} : tensor<2x2x32x32xbf16>) outs(%{{.*}} : tensor<2x32x2x32xf32>)
// CHECK: arith.extf %{{.*}} : bf16 to f32
// CHECK: tensor.collapse_shape %[[T]] {{\[\[}}0, 1], [2, 3]] : tensor<2x32x2x32xf32> into tensor<64x64xf32>
func.func @unpack_checkpoint(%c: tensor<2x2x32x32xbf16>) -> tensor<64x64xf32> {
  %gu = moe.unpack_checkpoint %c : tensor<2x2x32x32xbf16> -> tensor<64x64xf32>
  return %gu : tensor<64x64xf32>
}

// Blocks along axis 1: [64, 64] viewed as [64, 2, 32]. The amax reduces the
// block loop on the magnitude bits; RCEIL divides by 448 in f32 and rounds
// subnormal ratios up by comparing the fraction with 0x400000; the encoder
// multiplies by 2^(127 - byte) (254 -> the subnormal 0x400000), rounds to
// nearest even on the bits, saturates at 0x7E and writes NaN codes for
// byte 0xFF.
// CHECK-LABEL: func.func @mx_quantize_rceil
// CHECK-SAME: (%[[X:.*]]: tensor<64x64xbf16>)
// CHECK: %[[XB:.*]] = tensor.expand_shape %[[X]] {{\[\[}}0], [1, 2]] output_shape [64, 2, 32] : tensor<64x64xbf16> into tensor<64x2x32xbf16>
// CHECK: %[[ZERO:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<64x2xf32>)
// CHECK: %[[AMAX:.*]] = linalg.generic {indexing_maps = [#[[$ID3]], #[[$BLOCK3]]], iterator_types = ["parallel", "parallel", "reduction"]}
// CHECK-SAME: ins(%[[XB]] : tensor<64x2x32xbf16>) outs(%[[ZERO]] : tensor<64x2xf32>)
// CHECK: arith.extf %{{.*}} : bf16 to f32
// CHECK: arith.constant 2147483647 : i32
// CHECK: arith.maxui
// CHECK: %[[SCALES:.*]] = linalg.generic
// CHECK-SAME: ins(%[[AMAX]] : tensor<64x2xf32>) outs(%{{.*}} : tensor<64x2xf8E8M0FNU>)
// CHECK: arith.constant 4.480000e+02 : f32
// CHECK: arith.divf
// CHECK: arith.constant 4194304 : i32
// CHECK: arith.cmpi ugt, %{{.*}}, %{{.*}} : i32
// CHECK: arith.constant 254 : i32
// CHECK: arith.minsi
// CHECK: arith.constant 2139095040 : i32
// CHECK: arith.cmpi uge
// CHECK: %[[BYTE:.*]] = arith.trunci %{{.*}} : i32 to i8
// CHECK: arith.bitcast %[[BYTE]] : i8 to f8E8M0FNU
// CHECK: %[[CODES:.*]] = linalg.generic {indexing_maps = [#[[$ID3]], #[[$BLOCK3]], #[[$ID3]]], iterator_types = ["parallel", "parallel", "parallel"]}
// CHECK-SAME: ins(%[[XB]], %[[SCALES]] : tensor<64x2x32xbf16>, tensor<64x2xf8E8M0FNU>) outs(%{{.*}} : tensor<64x2x32xf8E4M3FN>)
// CHECK: arith.bitcast %{{.*}} : f8E8M0FNU to i8
// CHECK: arith.mulf
// CHECK: arith.shrui
// CHECK: arith.constant 126 : i32
// CHECK: arith.minsi
// CHECK: %[[CODE:.*]] = arith.trunci %{{.*}} : i32 to i8
// CHECK: arith.bitcast %[[CODE]] : i8 to f8E4M3FN
// CHECK: %[[Q:.*]] = tensor.collapse_shape %[[CODES]] {{\[\[}}0], [1, 2]] : tensor<64x2x32xf8E4M3FN> into tensor<64x64xf8E4M3FN>
// CHECK: return %[[Q]], %[[SCALES]]
func.func @mx_quantize_rceil(%x: tensor<64x64xbf16>)
    -> (tensor<64x64xf8E4M3FN>, tensor<64x2xf8E8M0FNU>) {
  %q, %s = moe.mx_quantize %x
      {axis = 1 : i64, quant = #moe.mx<f8E4M3FN, block = 32, rule = rceil>}
      : tensor<64x64xbf16> -> tensor<64x64xf8E4M3FN>, tensor<64x2xf8E8M0FNU>
  return %q, %s : tensor<64x64xf8E4M3FN>, tensor<64x2xf8E8M0FNU>
}

// Axis 0 with E5M2 and FLOOR: blocks of 32 rows ([64, 16] as [2, 32, 16]),
// the byte is amax's exponent field minus 15, and codes saturate at 0x7B.
// CHECK-LABEL: func.func @mx_quantize_floor_axis0
// CHECK: tensor.expand_shape %{{.*}} {{\[\[}}0, 1], [2]] output_shape [2, 32, 16] : tensor<64x16xf32> into tensor<2x32x16xf32>
// CHECK: linalg.generic {indexing_maps = [#[[$ID3]], #[[$D0D2]]], iterator_types = ["parallel", "reduction", "parallel"]}
// CHECK: arith.maxui
// CHECK: linalg.generic
// CHECK-NOT: arith.divf
// CHECK: arith.shrui %{{.*}}, %{{.*}} : i32
// CHECK: arith.constant -15 : i32
// CHECK: outs(%{{.*}} : tensor<2x32x16xf8E5M2>)
// CHECK: arith.constant 123 : i32
// CHECK: arith.bitcast %{{.*}} : i8 to f8E5M2
// CHECK: tensor.collapse_shape %{{.*}} {{\[\[}}0, 1], [2]] : tensor<2x32x16xf8E5M2> into tensor<64x16xf8E5M2>
func.func @mx_quantize_floor_axis0(%x: tensor<64x16xf32>)
    -> (tensor<64x16xf8E5M2>, tensor<2x16xf8E8M0FNU>) {
  %q, %s = moe.mx_quantize %x
      {axis = 0 : i64, quant = #moe.mx<f8E5M2, block = 32, rule = floor>}
      : tensor<64x16xf32> -> tensor<64x16xf8E5M2>, tensor<2x16xf8E8M0FNU>
  return %q, %s : tensor<64x16xf8E5M2>, tensor<2x16xf8E8M0FNU>
}

// decodeFP8(code) * decodeE8M0(scale), one f32 multiply per element.
// CHECK-LABEL: func.func @mx_dequantize
// CHECK-SAME: (%[[Q:.*]]: tensor<64x64xf8E4M3FN>, %[[S:.*]]: tensor<64x2xf8E8M0FNU>)
// CHECK: %[[QB:.*]] = tensor.expand_shape %[[Q]] {{\[\[}}0], [1, 2]] output_shape [64, 2, 32]
// CHECK: %[[V:.*]] = linalg.generic {indexing_maps = [#[[$ID3]], #[[$BLOCK3]], #[[$ID3]]]
// CHECK-SAME: ins(%[[QB]], %[[S]] : tensor<64x2x32xf8E4M3FN>, tensor<64x2xf8E8M0FNU>) outs(%{{.*}} : tensor<64x2x32xf32>)
// CHECK: %[[CODE:.*]] = arith.bitcast %{{.*}} : f8E4M3FN to i8
// CHECK: %[[BYTE:.*]] = arith.bitcast %{{.*}} : f8E8M0FNU to i8
// CHECK: %[[SCALE:.*]] = arith.bitcast %{{.*}} : i32 to f32
// CHECK: arith.uitofp
// CHECK: %[[VALUE:.*]] = arith.bitcast %{{.*}} : i32 to f32
// CHECK: %[[P:.*]] = arith.mulf %[[VALUE]], %[[SCALE]] : f32
// CHECK: linalg.yield %[[P]] : f32
// CHECK: tensor.collapse_shape %[[V]] {{\[\[}}0], [1, 2]] : tensor<64x2x32xf32> into tensor<64x64xf32>
func.func @mx_dequantize(%q: tensor<64x64xf8E4M3FN>, %s: tensor<64x2xf8E8M0FNU>)
    -> tensor<64x64xf32> {
  %v = moe.mx_dequantize %q, %s {axis = 1 : i64}
      : tensor<64x64xf8E4M3FN>, tensor<64x2xf8E8M0FNU> -> tensor<64x64xf32>
  return %v : tensor<64x64xf32>
}

// bf16 lhs widened, MX rhs dequantized along K and transposed to
// [E, K, Nout]; then per block n the rows [32n, 32n + 32) accumulate in
// place lhs . rhs[e] (e = experts[n]) over the loops (b, k, j), so each sum
// runs over k in order and the inner loop along rows, and get bias[e] added
// after the sum.
// CHECK-LABEL: func.func @block_matmul
// CHECK-SAME: (%[[LHS:.*]]: tensor<64x64xbf16>, %[[RHS:.*]]: tensor<4x32x64xf8E4M3FN>, %[[RS:.*]]: tensor<4x32x2xf8E8M0FNU>, %[[BLK:.*]]: tensor<2xi32>, %[[BIAS:.*]]: tensor<4x32xbf16>)
// CHECK: %[[LF:.*]] = linalg.generic {{.*}} ins(%[[LHS]] : tensor<64x64xbf16>) outs(%{{.*}} : tensor<64x64xf32>)
// CHECK: tensor.expand_shape %[[RHS]] {{\[\[}}0], [1], [2, 3]] output_shape [4, 32, 2, 32]
// CHECK: %[[RF:.*]] = tensor.collapse_shape %{{.*}} {{\[\[}}0], [1], [2, 3]] : tensor<4x32x2x32xf32> into tensor<4x32x64xf32>
// CHECK: %[[RT:.*]] = linalg.transpose ins(%[[RF]] : tensor<4x32x64xf32>) outs(%{{.*}} : tensor<4x64x32xf32>) permutation = [0, 2, 1]
// CHECK: %[[INIT:.*]] = tensor.empty() : tensor<64x32xf32>
// CHECK: %[[R:.*]] = scf.for %[[N:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[ACC:.*]] = %[[INIT]]) -> (tensor<64x32xf32>)
// CHECK: %[[E32:.*]] = tensor.extract %[[BLK]][%[[N]]] : tensor<2xi32>
// CHECK: %[[E:.*]] = arith.index_cast %[[E32]] : i32 to index
// CHECK: %[[ROW:.*]] = arith.muli %[[N]], %{{.*}} : index
// CHECK: %[[LB:.*]] = tensor.extract_slice %[[LF]][%[[ROW]], 0] [32, 64] [1, 1] : tensor<64x64xf32> to tensor<32x64xf32>
// CHECK: %[[RE:.*]] = tensor.extract_slice %[[RT]][%[[E]], 0, 0] [1, 64, 32] [1, 1, 1] : tensor<4x64x32xf32> to tensor<64x32xf32>
// CHECK: %[[OUT:.*]] = tensor.extract_slice %[[ACC]][%[[ROW]], 0] [32, 32] [1, 1] : tensor<64x32xf32> to tensor<32x32xf32>
// CHECK: %[[Z:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%[[OUT]] : tensor<32x32xf32>)
// CHECK: %[[MM:.*]] = linalg.generic {indexing_maps = [#[[$BLOCK3]], #[[$D1D2]], #[[$D0D2]]], iterator_types = ["parallel", "reduction", "parallel"]}
// CHECK-SAME: ins(%[[LB]], %[[RE]] : tensor<32x64xf32>, tensor<64x32xf32>) outs(%[[Z]] : tensor<32x32xf32>)
// CHECK: %[[P:.*]] = arith.mulf
// CHECK: arith.addf %{{.*}}, %[[P]] : f32
// CHECK: %[[BE:.*]] = tensor.extract_slice %[[BIAS]][%[[E]], 0] [1, 32] [1, 1] : tensor<4x32xbf16> to tensor<32xbf16>
// CHECK: %[[MB:.*]] = linalg.generic {indexing_maps = [#[[$COL]], #[[$ID2]]]
// CHECK-SAME: ins(%[[BE]] : tensor<32xbf16>) outs(%[[MM]] : tensor<32x32xf32>)
// CHECK: arith.extf %{{.*}} : bf16 to f32
// CHECK: arith.addf
// CHECK: %[[INS:.*]] = tensor.insert_slice %[[MB]] into %[[ACC]][%[[ROW]], 0] [32, 32] [1, 1]
// CHECK: scf.yield %[[INS]] : tensor<64x32xf32>
// CHECK: return %[[R]]
func.func @block_matmul(%lhs: tensor<64x64xbf16>, %rhs: tensor<4x32x64xf8E4M3FN>,
                        %rs: tensor<4x32x2xf8E8M0FNU>, %blk: tensor<2xi32>,
                        %bias: tensor<4x32xbf16>) -> tensor<64x32xf32> {
  %r = moe.block_matmul lhs(%lhs : tensor<64x64xbf16>)
      rhs(%rhs : tensor<4x32x64xf8E4M3FN> scales %rs : tensor<4x32x2xf8E8M0FNU>)
      experts(%blk : tensor<2xi32>) bias(%bias : tensor<4x32xbf16>)
      {block_size = 32 : i64} -> tensor<64x32xf32>
  return %r : tensor<64x32xf32>
}

// transpose_rhs: rhs[e] is [K, Nout] already.
// CHECK-LABEL: func.func @block_matmul_transposed
// CHECK-NOT: linalg.transpose
// CHECK: scf.for
// CHECK: tensor.extract_slice %{{.*}}[%{{.*}}, 0, 0] [1, 64, 32] [1, 1, 1] : tensor<4x64x32xf32> to tensor<64x32xf32>
// CHECK: linalg.generic {indexing_maps = [#[[$BLOCK3]], #[[$D1D2]], #[[$D0D2]]], iterator_types = ["parallel", "reduction", "parallel"]}
// CHECK-NOT: linalg.generic
// CHECK: tensor.insert_slice
func.func @block_matmul_transposed(%lhs: tensor<64x64xbf16>,
                                   %rhs: tensor<4x64x32xbf16>,
                                   %blk: tensor<2xi32>) -> tensor<64x32xf32> {
  %r = moe.block_matmul lhs(%lhs : tensor<64x64xbf16>)
      rhs(%rhs : tensor<4x64x32xbf16>) experts(%blk : tensor<2xi32>)
      {block_size = 32 : i64, transpose_rhs} -> tensor<64x32xf32>
  return %r : tensor<64x32xf32>
}

// Per block n of expert e: out[e] += lhs_blk^T . rhs_blk, in place in the
// [E, M, Nout] accumulator (zeros for experts without blocks), over the
// loops (b, m, j): the slot loop outermost.
// CHECK-LABEL: func.func @expert_matmul
// CHECK-SAME: %[[BLK:[^:]*]]: tensor<2xi32>)
// CHECK: %[[ZEROS:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<4x32x16xf32>)
// CHECK: scf.for %[[N:.*]] = %{{.*}} iter_args(%[[ACC:.*]] = %[[ZEROS]]) -> (tensor<4x32x16xf32>)
// CHECK: %[[E32:.*]] = tensor.extract %[[BLK]][%[[N]]]
// CHECK: %[[E:.*]] = arith.index_cast %[[E32]]
// CHECK: %[[ROW:.*]] = arith.muli %[[N]]
// CHECK: %[[L:.*]] = tensor.extract_slice %{{.*}}[%[[ROW]], 0] [32, 32] [1, 1] : tensor<64x32xf32> to tensor<32x32xf32>
// CHECK: %[[R:.*]] = tensor.extract_slice %{{.*}}[%[[ROW]], 0] [32, 16] [1, 1] : tensor<64x16xf32> to tensor<32x16xf32>
// CHECK: %[[OUT:.*]] = tensor.extract_slice %[[ACC]][%[[E]], 0, 0] [1, 32, 16] [1, 1, 1] : tensor<4x32x16xf32> to tensor<32x16xf32>
// CHECK: %[[SUM:.*]] = linalg.generic {indexing_maps = [#[[$BLOCK3]], #[[$D0D2]], #[[$D1D2]]], iterator_types = ["reduction", "parallel", "parallel"]}
// CHECK-SAME: ins(%[[L]], %[[R]] : tensor<32x32xf32>, tensor<32x16xf32>) outs(%[[OUT]] : tensor<32x16xf32>)
// CHECK: tensor.insert_slice %[[SUM]] into %[[ACC]][%[[E]], 0, 0] [1, 32, 16] [1, 1, 1]
func.func @expert_matmul(%l: tensor<64x32xbf16>, %r: tensor<64x16xf8E5M2>,
                         %rs: tensor<2x16xf8E8M0FNU>, %blk: tensor<2xi32>)
    -> tensor<4x32x16xf32> {
  %d = moe.expert_matmul lhs(%l : tensor<64x32xbf16>)
      rhs(%r : tensor<64x16xf8E5M2> scales %rs : tensor<2x16xf8E8M0FNU>)
      experts(%blk : tensor<2xi32>) {block_size = 32 : i64}
      -> tensor<4x32x16xf32>
  return %d : tensor<4x32x16xf32>
}

// One generic over [S, I] on the gate and up halves: clamp (v < lo ? lo : v,
// hi < v ? hi : v) and strict masks, silu in f32 through math.exp, the f32
// products of numerics.md, then [dg | du] stacked as [S, 2, I].
// CHECK-LABEL: func.func @gated_act_bwd_swiglu
// CHECK-SAME: (%[[GU:.*]]: tensor<64x64xf32>, %[[DA:.*]]: tensor<64x32xf32>, %[[A:.*]]: tensor<64xf32>)
// CHECK: %[[G:.*]] = tensor.extract_slice %[[GU]][0, 0] [64, 32] [1, 1]
// CHECK: %[[U:.*]] = tensor.extract_slice %[[GU]][0, 32] [64, 32] [1, 1]
// CHECK: %[[RES:.*]]:3 = linalg.generic {indexing_maps = [#[[$ID2]], #[[$ID2]], #[[$ID2]], #[[$SLOT]], #[[$ID2]], #[[$ID2]], #[[$ID2]]]
// CHECK-SAME: ins(%[[G]], %[[U]], %[[DA]], %[[A]] :
// CHECK: ^bb0(%[[GV:[^:]*]]: f32, %[[UV:[^:]*]]: f32, %[[DAV:[^:]*]]: f32, %[[AV:[^:]*]]: f32,
// CHECK: %[[HI:.*]] = arith.constant 7.000000e+00 : f32
// CHECK: %[[GT:.*]] = arith.cmpf olt, %[[HI]], %[[GV]] : f32
// CHECK: %[[GC:.*]] = arith.select %[[GT]], %[[HI]], %[[GV]] : f32
// CHECK: %[[GIN:.*]] = arith.cmpf olt, %[[GC]], %[[HI]] : f32
// CHECK: %[[LO:.*]] = arith.constant -7.000000e+00 : f32
// CHECK: %[[UL:.*]] = arith.cmpf olt, %[[UV]], %[[LO]] : f32
// CHECK: %[[UC:.*]] = arith.select %[[UL]], %[[LO]], %[[UV]] : f32
// CHECK: %[[UIN:.*]] = arith.cmpf ogt, %[[UC]], %[[LO]] : f32
// CHECK: %[[NEG:.*]] = arith.negf %[[GC]] : f32
// CHECK: math.exp %[[NEG]] : f32
// CHECK: %[[SIG:.*]] = arith.divf
// CHECK: %[[S:.*]] = arith.mulf %[[GC]], %[[SIG]] : f32
// CHECK: %[[SP:.*]] = arith.mulf %[[SIG]], %{{.*}} : f32
// CHECK: %[[DH:.*]] = arith.mulf %[[AV]], %[[DAV]] : f32
// CHECK: %[[H:.*]] = arith.mulf %[[S]], %[[UC]] : f32
// CHECK: %[[DHU:.*]] = arith.mulf %[[DH]], %[[UC]] : f32
// CHECK: %[[DG:.*]] = arith.mulf %[[DHU]], %[[SP]] : f32
// CHECK: %[[DGM:.*]] = arith.select %[[GIN]], %[[DG]], %{{.*}} : f32
// CHECK: %[[DU:.*]] = arith.mulf %[[DH]], %[[S]] : f32
// CHECK: %[[DUM:.*]] = arith.select %[[UIN]], %[[DU]], %{{.*}} : f32
// CHECK: linalg.yield %[[DGM]], %[[DUM]], %[[H]] : f32, f32, f32
// CHECK: %[[ST:.*]] = linalg.generic {indexing_maps = [#[[$D0D2]], #[[$D0D2]], #[[$ID3]]]
// CHECK-SAME: ins(%[[RES]]#0, %[[RES]]#1 : tensor<64x32xf32>, tensor<64x32xf32>) outs(%{{.*}} : tensor<64x2x32xf32>)
// CHECK: linalg.index 1 : index
// CHECK: %[[DGU:.*]] = tensor.collapse_shape %[[ST]] {{\[\[}}0], [1, 2]] : tensor<64x2x32xf32> into tensor<64x64xf32>
// CHECK: return %[[DGU]], %[[RES]]#2
func.func @gated_act_bwd_swiglu(%gu: tensor<64x64xf32>, %dA: tensor<64x32xf32>,
                                %a: tensor<64xf32>)
    -> (tensor<64x64xf32>, tensor<64x32xf32>) {
  %dgu, %h = moe.gated_act_bwd %gu, %dA, %a
      {clamp = #moe.clamp<gate_hi = 7.0, up_lo = -7.0>}
      : tensor<64x64xf32>, tensor<64x32xf32>, tensor<64xf32>
      -> tensor<64x64xf32>, tensor<64x32xf32>
  return %dgu, %h : tensor<64x64xf32>, tensor<64x32xf32>
}

// geglu: tanh in f32, and without a clamp no mask.
// CHECK-LABEL: func.func @gated_act_bwd_geglu
// CHECK: linalg.generic
// CHECK-NOT: arith.cmpf
// CHECK: math.tanh %{{.*}} : f32
// CHECK-NOT: arith.select
// CHECK: linalg.yield
func.func @gated_act_bwd_geglu(%gu: tensor<64x64xf32>, %dA: tensor<64x32xf32>,
                               %a: tensor<64xf32>)
    -> (tensor<64x64xf32>, tensor<64x32xf32>) {
  %dgu, %h = moe.gated_act_bwd %gu, %dA, %a
      {activation = #moe.activation<geglu>}
      : tensor<64x64xf32>, tensor<64x32xf32>, tensor<64xf32>
      -> tensor<64x64xf32>, tensor<64x32xf32>
  return %dgu, %h : tensor<64x64xf32>, tensor<64x32xf32>
}

// Per-slot sums <dA, h> + <dy, bd[e]> in 32 lanes (lane l over the
// elements l, l + 32, ...; loops (s, l, j), j reducing), the lanes added up
// in order, then a loop over the slots that writes each routed slot's sum
// at t * E + e.
// CHECK-LABEL: func.func @affinity_grad
// CHECK-SAME: (%[[DA:.*]]: tensor<64x64xf32>, %[[H:.*]]: tensor<64x64xf32>, %[[TOK:.*]]: tensor<64xi32>, %[[BLK:.*]]: tensor<2xi32>, %[[DY:.*]]: tensor<64x64xbf16>, %[[BD:.*]]: tensor<4x64xbf16>)
// CHECK: %[[LZ:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<64x32xf32>)
// CHECK: %[[DAL:.*]] = tensor.expand_shape %[[DA]] {{\[}}[0], [1, 2]] output_shape [64, 2, 32] : tensor<64x64xf32> into tensor<64x2x32xf32>
// CHECK: %[[HL:.*]] = tensor.expand_shape %[[H]] {{\[}}[0], [1, 2]] output_shape [64, 2, 32]
// CHECK: %[[L1:.*]] = linalg.generic {indexing_maps = [#[[$LANE]], #[[$LANE]], #[[$BLOCK3]]], iterator_types = ["parallel", "parallel", "reduction"]}
// CHECK-SAME: ins(%[[DAL]], %[[HL]] : tensor<64x2x32xf32>, tensor<64x2x32xf32>) outs(%[[LZ]] : tensor<64x32xf32>)
// CHECK: arith.mulf
// CHECK: arith.addf
// CHECK: %[[DYL:.*]] = tensor.expand_shape %[[DY]] {{\[}}[0], [1, 2]] output_shape [64, 2, 32] : tensor<64x64xbf16> into tensor<64x2x32xbf16>
// CHECK: %[[L2:.*]] = linalg.generic {indexing_maps = [#[[$LANE]], #[[$BLOCK3]]], iterator_types = ["parallel", "parallel", "reduction"]}
// CHECK-SAME: ins(%[[DYL]] : tensor<64x2x32xbf16>) outs(%[[L1]] : tensor<64x32xf32>)
// CHECK: %[[L:.*]] = linalg.index 1
// CHECK: %[[J:.*]] = linalg.index 2
// CHECK: %[[JW:.*]] = arith.muli %[[J]], %c32
// CHECK: %[[COLUMN:.*]] = arith.addi %[[JW]], %[[L]]
// CHECK: tensor.extract %[[BLK]]
// CHECK: tensor.extract %[[BD]][%{{.*}}, %[[COLUMN]]]
// CHECK: %[[SUMS:.*]] = linalg.generic {indexing_maps = [#[[$ID2]], #[[$SLOT]]], iterator_types = ["parallel", "reduction"]}
// CHECK-SAME: ins(%[[L2]] : tensor<64x32xf32>) outs(%{{.*}} : tensor<64xf32>)
// CHECK: %[[ZEROS:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<40xf32>)
// CHECK: scf.for %[[S:.*]] = %{{.*}} iter_args(%[[OUT:.*]] = %[[ZEROS]]) -> (tensor<40xf32>)
// CHECK: %[[T:.*]] = tensor.extract %[[TOK]][%[[S]]]
// CHECK: %[[VALID:.*]] = arith.cmpi sge, %[[T]]
// CHECK: scf.if %[[VALID]] -> (tensor<40xf32>)
// CHECK: %[[IDX:.*]] = arith.addi
// CHECK: %[[V:.*]] = tensor.extract %[[SUMS]][%[[S]]]
// CHECK: %[[UPD:.*]] = tensor.insert %[[V]] into %[[OUT]][%[[IDX]]]
// CHECK: scf.yield %[[UPD]]
// CHECK: } else {
// CHECK: scf.yield %[[OUT]]
func.func @affinity_grad(%dA: tensor<64x64xf32>, %h: tensor<64x64xf32>,
                         %tok: tensor<64xi32>, %blk: tensor<2xi32>,
                         %dy: tensor<64x64xbf16>, %bd: tensor<4x64xbf16>)
    -> tensor<40xf32> {
  %da = moe.affinity_grad %dA dot %h, %tok, %blk bias(%dy, %bd)
      {block_size = 32 : i64, num_experts = 4 : i64}
      : tensor<64x64xf32> dot tensor<64x64xf32>, tensor<64xi32>, tensor<2xi32>,
        tensor<64x64xbf16>, tensor<4x64xbf16> -> tensor<40xf32>
  return %da : tensor<40xf32>
}

// CHECK-LABEL: func.func @scale_rows
// CHECK: linalg.generic {indexing_maps = [#[[$ID2]], #[[$SLOT]], #[[$ID2]]]
// CHECK: %[[W:.*]] = arith.extf %{{.*}} : bf16 to f32
// CHECK: arith.mulf %{{.*}}, %[[W]] : f32
func.func @scale_rows(%x: tensor<64x16xbf16>, %a: tensor<64xf32>)
    -> tensor<64x16xf32> {
  %r = moe.scale_rows %x, %a
      : tensor<64x16xbf16>, tensor<64xf32> -> tensor<64x16xf32>
  return %r : tensor<64x16xf32>
}

// Slots in ascending order add their row to the token's f32 row; with
// dx_accumulate = bf16 each sum is rounded to bf16; one final rounding to
// the bf16 result.
// CHECK-LABEL: func.func @scatter_add_rows_bf16
// CHECK-SAME: (%[[C:.*]]: tensor<64x16xf32>, %[[TOK:.*]]: tensor<64xi32>, %{{.*}}: tensor<2xi32>)
// CHECK: %[[ZEROS:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<10x16xf32>)
// CHECK: %[[SUM:.*]] = scf.for %[[S:.*]] = %{{.*}} iter_args(%[[ACC:.*]] = %[[ZEROS]]) -> (tensor<10x16xf32>)
// CHECK: %[[T:.*]] = tensor.extract %[[TOK]][%[[S]]]
// CHECK: scf.if
// CHECK: %[[TI:.*]] = arith.index_cast %[[T]]
// CHECK: %[[ROW:.*]] = tensor.extract_slice %[[ACC]][%[[TI]], 0] [1, 16] [1, 1] : tensor<10x16xf32> to tensor<16xf32>
// CHECK: %[[CROW:.*]] = tensor.extract_slice %[[C]][%[[S]], 0] [1, 16] [1, 1] : tensor<64x16xf32> to tensor<16xf32>
// CHECK: %[[NEW:.*]] = linalg.generic {{.*}} ins(%[[CROW]] : tensor<16xf32>) outs(%[[ROW]] : tensor<16xf32>)
// CHECK: %[[ADD:.*]] = arith.addf
// CHECK: %[[RB:.*]] = arith.truncf %[[ADD]] : f32 to bf16
// CHECK: arith.extf %[[RB]] : bf16 to f32
// CHECK: tensor.insert_slice %[[NEW]] into %[[ACC]][%[[TI]], 0] [1, 16] [1, 1]
// CHECK: linalg.generic {{.*}} ins(%[[SUM]] : tensor<10x16xf32>) outs(%{{.*}} : tensor<10x16xbf16>)
// CHECK: arith.truncf %{{.*}} : f32 to bf16
func.func @scatter_add_rows_bf16(%c: tensor<64x16xf32>, %tok: tensor<64xi32>,
    %blk: tensor<2xi32>) -> tensor<10x16xbf16> {
  %dx = moe.scatter_add_rows %c[%tok], %blk
      {block_size = 32 : i64, dx_accumulate = #moe.dx_accumulate<bf16>,
       num_experts = 2 : i64, top_k = 2 : i64}
      : tensor<64x16xf32>, tensor<64xi32>, tensor<2xi32> -> tensor<10x16xbf16>
  return %dx : tensor<10x16xbf16>
}

// An f32 result is the accumulator itself: no rounding anywhere.
// CHECK-LABEL: func.func @scatter_add_rows_f32
// CHECK: %[[SUM:.*]] = scf.for
// CHECK-NOT: arith.truncf
// CHECK: return %[[SUM]] : tensor<10x16xf32>
func.func @scatter_add_rows_f32(%c: tensor<64x16xf32>, %tok: tensor<64xi32>,
    %blk: tensor<2xi32>) -> tensor<10x16xf32> {
  %dx = moe.scatter_add_rows %c[%tok], %blk
      {block_size = 32 : i64, num_experts = 2 : i64, top_k = 2 : i64}
      : tensor<64x16xf32>, tensor<64xi32>, tensor<2xi32> -> tensor<10x16xf32>
  return %dx : tensor<10x16xf32>
}

// CHECK-LABEL: func.func @expert_sum
// CHECK: scf.for %[[N:.*]] = %{{.*}} iter_args(%[[ACC:.*]] = %{{.*}}) -> (tensor<4x16xf32>)
// CHECK: %[[ROWS:.*]] = tensor.extract_slice %{{.*}}[%{{.*}}, 0] [32, 16] [1, 1] : tensor<64x16xf32> to tensor<32x16xf32>
// CHECK: %[[OUT:.*]] = tensor.extract_slice %[[ACC]][%{{.*}}, 0] [1, 16] [1, 1] : tensor<4x16xf32> to tensor<16xf32>
// CHECK: linalg.generic {indexing_maps = [#[[$ID2]], #[[$COL]]], iterator_types = ["reduction", "parallel"]}
// CHECK-SAME: ins(%[[ROWS]] : tensor<32x16xf32>) outs(%[[OUT]] : tensor<16xf32>)
func.func @expert_sum(%x: tensor<64x16xf32>, %blk: tensor<2xi32>)
    -> tensor<4x16xf32> {
  %d = moe.expert_sum %x, %blk {block_size = 32 : i64}
      : tensor<64x16xf32>, tensor<2xi32> -> tensor<4x16xf32>
  return %d : tensor<4x16xf32>
}

// A kernel region is inlined: its arguments are the inputs, its yield the
// results.
// CHECK-LABEL: func.func @fused
// CHECK-SAME: (%[[H:.*]]: tensor<64x16xf32>, %[[A:.*]]: tensor<64xf32>)
// CHECK-NOT: moe.
// CHECK: %[[R:.*]] = linalg.generic
// CHECK-SAME: ins(%[[H]], %[[A]] : tensor<64x16xf32>, tensor<64xf32>)
// CHECK: return %[[R]] : tensor<64x16xf32>
func.func @fused(%h: tensor<64x16xf32>, %a: tensor<64xf32>) -> tensor<64x16xf32> {
  %r = moe.fused phase(#moe.phase<p4>) ins(%h, %a : tensor<64x16xf32>, tensor<64xf32>) {
  ^bb0(%h0: tensor<64x16xf32>, %a0: tensor<64xf32>):
    %s = moe.scale_rows %h0, %a0
        : tensor<64x16xf32>, tensor<64xf32> -> tensor<64x16xf32>
    moe.yield %s : tensor<64x16xf32>
  } -> tensor<64x16xf32>
  return %r : tensor<64x16xf32>
}
