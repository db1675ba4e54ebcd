// RUN: moe-opt %s -split-input-file --moe-gpu-kernel-config="tma-store=false" --convert-moe-to-nvgpu="tma-store=false" | FileCheck %s --enable-var-scope
// RUN: moe-opt %s -split-input-file --moe-gpu-kernel-config="persistent-gemms=false tma-store=false" --convert-moe-to-nvgpu="tma-store=false" | FileCheck %s --check-prefix=GRID --enable-var-scope

// GEMMs given the slots' token ids (moe-decompose-bwd passes them) skip
// padding. The spare blocks of the worst-case layout (SPEC section 4) hold
// only padding: at T=16384 K=8 E=128 B=128, 1151 blocks are allocated and
// about 1088 hold tokens.
//
// A block GEMM: the launch passes the ids after block_to_expert (kernel
// argument 4, before the persistent tile counter). A tile whose first slot
// is padding (tileM divides B, tokens fill a block from its first slot)
// gets no K tiles: the producer loads nothing and the consumers take a zero
// accumulator into the one epilogue (the bias, or zero: the computed rows
// up to the sign of zero).

// CHECK-LABEL: func.func @block(
// CHECK:         call @block_matmul_0_launch(%{{.*}}) : (memref<256x256xbf16>, memref<2x128x256xbf16>, memref<2xi32>, memref<256xi32>, memref<256x128xf32>) -> ()
// CHECK:       func.func private @block_matmul_0_launch(
// CHECK-SAME:    counters = 1, pointers = [4, 2, 3]>
// CHECK-LABEL: gpu.func @block_matmul_0(
// CHECK-SAME:      %{{[^:]*}}: !llvm.ptr, %{{[^:]*}}: !llvm.ptr, %[[C:[^:]*]]: !llvm.ptr<1>, %{{[^:]*}}: !llvm.ptr<1>, %[[TOK:[^:]*]]: !llvm.ptr<1>, %[[COUNTER:[^:]*]]: !llvm.ptr<1>) kernel
// The producer thread, per tile: the first slot's token decides its K tiles.
// CHECK:           nvvm.setmaxregister decrease 40
// CHECK:           llvm.atomicrmw add %[[COUNTER]]
// CHECK:           llvm.getelementptr %[[TOK]][
// CHECK-NEXT:      %[[T:.*]] = llvm.load %{{.*}} invariant {alignment = 4 : i64} : !llvm.ptr<1> -> i32
// CHECK:           %[[PAD:.*]] = arith.cmpi slt, %[[T]], %{{.*}} : i32
// CHECK-NEXT:      %[[KT:.*]] = arith.select %[[PAD]], %{{.*}}, %c4 : index
// CHECK:           scf.for %{{.*}} = %{{.*}} to %[[KT]] step
// CHECK:             nvgpu.tma.async.load
// The consumers decide the same, and one epilogue stores either accumulator.
// CHECK:           nvvm.setmaxregister increase 232
// CHECK:           llvm.getelementptr %[[TOK]][
// CHECK:           %[[CPAD:.*]] = arith.cmpi slt
// CHECK-NEXT:      %[[CKT:.*]] = arith.select %[[CPAD]], %{{.*}}, %c4 : index
// CHECK:           %[[NONE:.*]] = arith.cmpi eq, %{{.*}}, %c0_i64 : i64
// CHECK-NEXT:      %[[ACC:.*]] = scf.if %[[NONE]] -> (!llvm.struct<(f32,
// CHECK-NEXT:        llvm.mlir.zero
// CHECK-NEXT:        scf.yield
// CHECK-NEXT:      } else {
// CHECK:             nvvm.wgmma.mma_async
// CHECK:           llvm.extractvalue %[[ACC]][0]
// CHECK-COUNT-32:  llvm.store %{{.*}} {alignment = 8 : i64} : vector<2xf32>, !llvm.ptr<1>
// CHECK-NOT:       llvm.store %{{.*}} : vector<2xf32>, !llvm.ptr<1>
// CHECK:           gpu.return

// One CTA per tile: every thread reads the tile's first token once.
// GRID-LABEL: gpu.func @block_matmul_0(
// GRID-SAME:      %{{[^:]*}}: !llvm.ptr<1>, %[[TOK:[^:]*]]: !llvm.ptr<1>) kernel
// GRID:           gpu.barrier
// GRID:           llvm.getelementptr %[[TOK]][
// GRID:           arith.cmpi slt
// GRID-NEXT:      arith.select
// GRID:           nvvm.setmaxregister decrease 40
func.func @block(%x: tensor<256x256xbf16>, %w: tensor<2x128x256xbf16>,
                 %blk: tensor<2xi32>, %tok: tensor<256xi32>)
    -> tensor<256x128xf32> {
  %r = moe.block_matmul lhs(%x : tensor<256x256xbf16>)
      rhs(%w : tensor<2x128x256xbf16>) experts(%blk : tensor<2xi32>)
      tokens(%tok : tensor<256xi32>) {block_size = 128 : i64}
      -> tensor<256x128xf32>
  return %r : tensor<256x128xf32>
}

// -----

// An expert GEMM: each expert's contraction ends after its last K tile
// (64 slots) that starts at a token. The persistent kernel's shared table
// gains a third row (4 bytes per expert): every block's owner adds the
// number of its two K tiles whose first slot holds a token (i32 loads of
// slots 128 b and 128 b + 64); a tile takes that count as its K tiles.

// CHECK-LABEL: func.func @expert(
// CHECK:         call @expert_matmul_0_launch(%{{.*}}) : (memref<256x128xbf16>, memref<256x128xbf16>, memref<2xi32>, memref<256xi32>, memref<2x128x128xf32>) -> ()
// CHECK-LABEL: gpu.func @expert_matmul_0(
// CHECK-SAME:      %{{[^:]*}}: !llvm.ptr<1>, %[[BLK:[^:]*]]: !llvm.ptr<1>, %[[TOK:[^:]*]]: !llvm.ptr<1>, %{{[^:]*}}: !llvm.ptr<1>) kernel
// CHECK:           llvm.getelementptr %[[BLK]][
// CHECK:           llvm.atomicrmw add %{{.*}}, %c1_i32 monotonic : !llvm.ptr<3>, i32
// CHECK:           %[[B:.*]] = arith.extui %{{.*}} : i32 to i64
// CHECK:           arith.muli %[[B]], %c128_i64 : i64
// CHECK:           llvm.getelementptr %[[TOK]][
// CHECK:           arith.cmpi sge
// CHECK:           %[[S1:.*]] = arith.addi %{{.*}}, %c64_i64 : i64
// CHECK-NEXT:      llvm.getelementptr %[[TOK]][%[[S1]]]
// CHECK:           %[[TILES:.*]] = arith.addi
// The third row starts 2 E words after the counts (196608 + 16).
// CHECK:           %c196624_i64 = arith.constant 196624 : i64
// CHECK:           llvm.atomicrmw add %{{.*}}, %[[TILES]] monotonic : !llvm.ptr<3>, i32
// CHECK:           gpu.return

// One CTA per tile: a third shared counter, summed like the other two.
// GRID-LABEL: gpu.func @expert_matmul_0(
// GRID-SAME:      %{{[^:]*}}: !llvm.ptr<1>, %[[TOK:[^:]*]]: !llvm.ptr<1>) kernel
// GRID:           gpu.block_id z
// GRID:           %[[OWN:.*]] = arith.cmpi eq
// GRID:           scf.if %[[OWN]] -> (i32)
// GRID:             llvm.getelementptr %[[TOK]][
// GRID-COUNT-3:   llvm.atomicrmw add
// GRID-NEXT:      gpu.barrier
func.func @expert(%a: tensor<256x128xbf16>, %b: tensor<256x128xbf16>,
                  %blk: tensor<2xi32>, %tok: tensor<256xi32>)
    -> tensor<2x128x128xf32> {
  %r = moe.expert_matmul lhs(%a : tensor<256x128xbf16>)
      rhs(%b : tensor<256x128xbf16>) experts(%blk : tensor<2xi32>)
      tokens(%tok : tensor<256xi32>) {block_size = 128 : i64}
      -> tensor<2x128x128xf32>
  return %r : tensor<2x128x128xf32>
}
