// RUN: moe-opt %s -moe-gpu-reductions-innermost | FileCheck %s

// A column amax with the reduction (rows) first becomes parallel-first;
// the maps and linalg.index follow the interchange.

// CHECK-DAG:   #[[IN:.*]] = affine_map<(d0, d1) -> (d1, d0)>
// CHECK-DAG:   #[[OUT:.*]] = affine_map<(d0, d1) -> (d0)>
// CHECK-DAG:   #[[ROW:.*]] = affine_map<(d0, d1) -> (d1)>
// CHECK-LABEL: func.func @column_amax(
// CHECK:         linalg.generic {indexing_maps = [#[[IN]], #[[OUT]]], iterator_types = ["parallel", "reduction"]}
// CHECK:           %[[I0:.*]] = linalg.index 0 : index
// CHECK:           %[[I1:.*]] = linalg.index 1 : index
// CHECK:           %[[ROWIDX:.*]] = affine.apply #[[ROW]](%[[I0]], %[[I1]])
// CHECK:           arith.index_cast %[[ROWIDX]]
#in = affine_map<(d0, d1) -> (d0, d1)>
#out = affine_map<(d0, d1) -> (d1)>
func.func @column_amax(%x: memref<64x96xf32>, %o: memref<96xf32>) {
  linalg.generic {indexing_maps = [#in, #out],
                  iterator_types = ["reduction", "parallel"]}
      ins(%x : memref<64x96xf32>) outs(%o : memref<96xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %row = linalg.index 0 : index
    %r = arith.index_cast %row : index to i32
    %rf = arith.sitofp %r : i32 to f32
    %s = arith.addf %a, %rf : f32
    %m = arith.maximumf %s, %acc : f32
    linalg.yield %m : f32
  }
  return
}

// Already parallel-first (and all-parallel) generics are left alone.
// CHECK-LABEL: func.func @in_order(
// CHECK:         iterator_types = ["parallel", "parallel", "reduction"]
// CHECK:         iterator_types = ["parallel", "parallel"]
#a3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#o3 = affine_map<(d0, d1, d2) -> (d0, d1)>
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @in_order(%x: memref<4x8x32xf32>, %o: memref<4x8xf32>,
                    %p: memref<4x8xf32>) {
  linalg.generic {indexing_maps = [#a3, #o3],
                  iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x : memref<4x8x32xf32>) outs(%o : memref<4x8xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %a, %acc : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [#id, #id],
                  iterator_types = ["parallel", "parallel"]}
      ins(%o : memref<4x8xf32>) outs(%p : memref<4x8xf32>) {
  ^bb0(%a: f32, %b: f32):
    linalg.yield %a : f32
  }
  return
}
