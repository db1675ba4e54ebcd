// RUN: moe-opt %s -convert-moe-to-linalg="read-only-inputs=false parallel-slot-ops=1" -cse | FileCheck %s --implicit-check-not=scf.for

// The GPU form of the slot ops: no loop carries a tensor (the one scf.for,
// checked below, carries an index inside an scf.parallel). The slot
// scatters are one scf.parallel over the slots storing into a fresh buffer
// by (token, expert), which a token holds at most one slot of; the sums
// are linalg reductions in the host lowering's order (the ops sweep checks
// the bits, test/Integration/Numerics/ops-sweep.test).

// CHECK-DAG: #[[$TK:.*]] = affine_map<(d0, d1, d2) -> (d0, d2)>

// affinity_grad: the host form's lane sums (I = 16 < 32: 16 lanes of one
// element each) and their sum, then result[t * E + e] = sum[s].
// CHECK-LABEL: func.func @affinity_grad(
// CHECK-SAME:      %[[DA:[^:]*]]: tensor<64x16xf32>, %[[H:[^:]*]]: tensor<64x16xf32>, %[[TOK:[^:]*]]: tensor<64xi32>, %[[BLK:[^:]*]]: tensor<2xi32>)
// CHECK:         %[[DAL:.*]] = tensor.expand_shape %[[DA]] {{\[}}[0], [1, 2]] output_shape [64, 1, 16]
// CHECK:         %[[HL:.*]] = tensor.expand_shape %[[H]] {{\[}}[0], [1, 2]] output_shape [64, 1, 16]
// CHECK:         %[[LANES:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction"]} ins(%[[DAL]], %[[HL]] : tensor<64x1x16xf32>, tensor<64x1x16xf32>) outs(%{{.*}} : tensor<64x16xf32>)
// CHECK:         %[[SUMS:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]} ins(%[[LANES]] : tensor<64x16xf32>)
// CHECK:         %[[OUT:.*]] = memref.alloc() : memref<40xf32>
// CHECK:         linalg.fill ins(%{{.*}} : f32) outs(%[[OUT]] : memref<40xf32>)
// CHECK:         %[[SB:.*]] = bufferization.to_buffer %[[SUMS]] read_only
// CHECK:         %[[TB:.*]] = bufferization.to_buffer %[[TOK]] read_only
// CHECK:         %[[BB:.*]] = bufferization.to_buffer %[[BLK]] read_only
// CHECK:         scf.parallel (%[[S:.*]]) =
// CHECK:           %[[T:.*]] = memref.load %[[TB]][%[[S]]]
// CHECK:           scf.if
// CHECK:             %[[N:.*]] = arith.divui %[[S]], %c32
// CHECK:             memref.load %[[BB]][%[[N]]]
// CHECK:             %[[V:.*]] = memref.load %[[SB]][%[[S]]]
// CHECK:             memref.store %[[V]], %[[OUT]][%{{.*}}]
// CHECK:         %[[R:.*]] = bufferization.to_tensor %[[OUT]] restrict writable
// CHECK:         return %[[R]]
func.func @affinity_grad(%dA: tensor<64x16xf32>, %h: tensor<64x16xf32>,
    %tok: tensor<64xi32>, %blk: tensor<2xi32>) -> tensor<40xf32> {
  %da = moe.affinity_grad %dA dot %h, %tok, %blk
      {block_size = 32 : i64, num_experts = 2 : i64}
      : tensor<64x16xf32> dot tensor<64x16xf32>, tensor<64xi32>, tensor<2xi32>
      -> tensor<40xf32>
  return %da : tensor<40xf32>
}

// scatter_add_rows: slot[e, t] = s (-1 where not routed); one thread per
// token lists its slots in ascending expert order (the slot order) in
// list[t, k], k < top_k, in a loop that carries only the count; then per
// (t, h) a sum over the list, rounded to bf16 after each add with
// dx_accumulate = bf16, then once to the result.
// CHECK-LABEL: func.func @scatter_add_rows(
// CHECK-SAME:      %[[C:[^:]*]]: tensor<64x16xf32>
// CHECK:         %[[SLOT:.*]] = memref.alloc() : memref<4x20xi32>
// CHECK:         linalg.fill ins(%c-1_i32 : i32) outs(%[[SLOT]] : memref<4x20xi32>)
// CHECK:         scf.parallel
// CHECK:           %[[T:.*]] = arith.index_cast %{{.*}} : i32 to index
// CHECK:           %[[E:.*]] = arith.index_cast %{{.*}} : i32 to index
// CHECK:           memref.store %{{.*}}, %[[SLOT]][%[[E]], %[[T]]] : memref<4x20xi32>
// CHECK:         %[[LIST:.*]] = memref.alloc() : memref<20x2xi32>
// CHECK:         linalg.fill ins(%c-1_i32 : i32) outs(%[[LIST]] : memref<20x2xi32>)
// CHECK:         scf.parallel (%[[TOKEN:.*]]) = (%c0) to (%c20) step (%c1) {
// CHECK:           scf.for %[[EXPERT:.*]] = %c0 to %c4 step %c1 iter_args(%[[COUNT:.*]] = %c0) -> (index) {
// CHECK:             %[[S:.*]] = memref.load %[[SLOT]][%[[EXPERT]], %[[TOKEN]]]
// CHECK:             %[[ROOM:.*]] = arith.cmpi ult, %[[COUNT]], %c2
// CHECK:             %[[ROUTED:.*]] = arith.cmpi sge, %[[S]], %c0_i32
// CHECK:             %[[APPEND:.*]] = arith.andi %[[ROUTED]], %[[ROOM]]
// CHECK:             %[[NEXT:.*]] = scf.if %[[APPEND]] -> (index) {
// CHECK:               memref.store %[[S]], %[[LIST]][%[[TOKEN]], %[[COUNT]]] : memref<20x2xi32>
// CHECK:               %[[INC:.*]] = arith.addi %[[COUNT]], %c1
// CHECK:               scf.yield %[[INC]]
// CHECK:             } else {
// CHECK:               scf.yield %[[COUNT]]
// CHECK:             scf.yield %[[NEXT]]
// CHECK:         %[[LT:.*]] = bufferization.to_tensor %[[LIST]] restrict writable
// CHECK:         %[[SUM:.*]] = linalg.generic {indexing_maps = [#[[$TK]], #{{.*}}], iterator_types = ["parallel", "parallel", "reduction"]} ins(%[[LT]] : tensor<20x2xi32>) outs(%{{.*}} : tensor<20x16xf32>)
// CHECK:           tensor.extract %[[C]]
// CHECK:           arith.addf
// CHECK:           arith.truncf %{{.*}} : f32 to bf16
// CHECK:           arith.select
// CHECK:         linalg.generic {{.*}} ins(%[[SUM]] : tensor<20x16xf32>) outs(%{{.*}} : tensor<20x16xbf16>)
func.func @scatter_add_rows(%c: tensor<64x16xf32>, %tok: tensor<64xi32>,
    %blk: tensor<2xi32>) -> tensor<20x16xbf16> {
  %dx = moe.scatter_add_rows %c[%tok], %blk
      {block_size = 32 : i64, dx_accumulate = #moe.dx_accumulate<bf16>,
       num_experts = 4 : i64, top_k = 2 : i64}
      : tensor<64x16xf32>, tensor<64xi32>, tensor<2xi32> -> tensor<20x16xbf16>
  return %dx : tensor<20x16xbf16>
}

// expert_sum: loops (e, m, s), s reducing, over the slots of expert e.
// CHECK-LABEL: func.func @expert_sum(
// CHECK:         linalg.generic {indexing_maps = [#{{.*}}, #{{.*}}], iterator_types = ["parallel", "parallel", "reduction"]} ins(%{{.*}} : tensor<64x16xf32>) outs(%{{.*}} : tensor<2x16xf32>)
// CHECK:           linalg.index 0
// CHECK:           linalg.index 2
// CHECK:           arith.cmpi eq
// CHECK:           arith.addf
// CHECK:           arith.select
func.func @expert_sum(%rows: tensor<64x16xf32>, %blk: tensor<2xi32>)
    -> tensor<2x16xf32> {
  %s = moe.expert_sum %rows, %blk {block_size = 32 : i64}
      : tensor<64x16xf32>, tensor<2xi32> -> tensor<2x16xf32>
  return %s : tensor<2x16xf32>
}
