// moe-gpu-module-to-binary's errors: a module no target serializes fails
// the pass before any module is serialized. (The unknown format is in
// moe-gpu-module-to-binary.mlir: it is reported on the top module.)
// RUN: moe-opt %s --verify-diagnostics --moe-gpu-module-to-binary=format=isa
module attributes {gpu.container_module} {
  gpu.module @fine [#nvvm.target<chip = "sm_90a">] {
    llvm.func @fine_kernel() attributes {nvvm.kernel} {
      llvm.return
    }
  }
  // expected-error @below {{moe-gpu-module-to-binary: the module has no target attribute to serialize it}}
  gpu.module @untargeted {
    llvm.func @untargeted_kernel() attributes {nvvm.kernel} {
      llvm.return
    }
  }
}
