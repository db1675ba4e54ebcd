// The pipelines' alloc-hooks option (the JIT sets it): every host
// allocation of the lowered module goes through the hooks, also in the GPU
// pipelines, where gpu-to-llvm lowers host allocations with malloc itself.
// Without the option the module calls malloc and free (mlir-runner).
// RUN: moe-opt %moe_src/examples/blockwise_bwd.mlir --pass-pipeline='builtin.module(moe-host-pipeline{alloc-hooks=1})' | FileCheck %s --check-prefix=HOOKS
// RUN: moe-opt %moe_src/examples/blockwise_bwd.mlir --pass-pipeline='builtin.module(moe-gpu-hybrid-pipeline{alloc-hooks=1 format=isa})' | FileCheck %s --check-prefix=HOOKS
// RUN: moe-opt %moe_src/examples/blockwise_bwd.mlir --pass-pipeline='builtin.module(moe-gpu-pipeline{alloc-hooks=1 format=isa})' | FileCheck %s --check-prefix=RESIDENT
// RUN: moe-opt %moe_src/examples/blockwise_bwd.mlir --pass-pipeline='builtin.module(moe-host-pipeline)' | FileCheck %s --check-prefix=LIBC

// HOOKS-NOT: @malloc
// HOOKS-NOT: @free(
// HOOKS:     llvm.call @_mlir_memref_to_llvm_alloc
// HOOKS-NOT: @malloc
// HOOKS-NOT: @free(

// The resident pipeline allocates on the device only.
// RESIDENT-NOT: @malloc
// RESIDENT:     llvm.func @moe_layer_bwd
// RESIDENT-NOT: @malloc

// LIBC:      llvm.call @malloc
// LIBC-NOT:  @_mlir_memref_to_llvm
