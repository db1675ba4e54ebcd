// RUN: moe-opt %s -split-input-file -verify-diagnostics -moe-alloc-hooks | FileCheck %s

// The libc allocation functions of a lowered module become the hooks; the
// calls follow the declarations.

// CHECK-LABEL: module @libc
// CHECK-DAG:   llvm.func @_mlir_memref_to_llvm_alloc(i64) -> !llvm.ptr
// CHECK-DAG:   llvm.func @_mlir_memref_to_llvm_aligned_alloc(i64, i64) -> !llvm.ptr
// CHECK-DAG:   llvm.func @_mlir_memref_to_llvm_free(!llvm.ptr)
// CHECK-NOT:   @malloc
// CHECK-NOT:   @aligned_alloc
// CHECK-NOT:   @free
// CHECK:       llvm.call @_mlir_memref_to_llvm_alloc(%{{.*}}) : (i64) -> !llvm.ptr
// CHECK:       llvm.call @_mlir_memref_to_llvm_aligned_alloc(%{{.*}}, %{{.*}}) : (i64, i64) -> !llvm.ptr
// CHECK:       llvm.call @_mlir_memref_to_llvm_free(%{{.*}}) : (!llvm.ptr) -> ()
module @libc {
  llvm.func @malloc(i64) -> !llvm.ptr
  llvm.func @aligned_alloc(i64, i64) -> !llvm.ptr
  llvm.func @free(!llvm.ptr)
  llvm.func @f(%n: i64) {
    %p = llvm.call @malloc(%n) : (i64) -> !llvm.ptr
    %q = llvm.call @aligned_alloc(%n, %n) : (i64, i64) -> !llvm.ptr
    llvm.call @free(%p) : (!llvm.ptr) -> ()
    llvm.return
  }
}

// -----

// Both spellings declared (finalize-memref-to-llvm's generic functions and
// gpu-to-llvm's malloc): one declaration of each hook stays.

// CHECK-LABEL: module @both
// CHECK-COUNT-1: llvm.func @_mlir_memref_to_llvm_alloc(i64) -> !llvm.ptr
// CHECK-NOT:   @malloc
// CHECK:       llvm.call @_mlir_memref_to_llvm_alloc(%{{.*}})
// CHECK:       llvm.call @_mlir_memref_to_llvm_alloc(%{{.*}})
module @both {
  llvm.func @malloc(i64) -> !llvm.ptr
  llvm.func @_mlir_memref_to_llvm_alloc(i64) -> !llvm.ptr
  llvm.func @f(%n: i64) {
    %p = llvm.call @malloc(%n) : (i64) -> !llvm.ptr
    %q = llvm.call @_mlir_memref_to_llvm_alloc(%n) : (i64) -> !llvm.ptr
    llvm.return
  }
}

// -----

// A module that defines malloc itself keeps it: its calls would not reach
// the hook.

module @defined {
  // expected-error @+1 {{moe-alloc-hooks: the module defines 'malloc' itself; its calls cannot be routed to '_mlir_memref_to_llvm_alloc'}}
  llvm.func @malloc(%n: i64) -> !llvm.ptr {
    %p = llvm.mlir.zero : !llvm.ptr
    llvm.return %p : !llvm.ptr
  }
}
