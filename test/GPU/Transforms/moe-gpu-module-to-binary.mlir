// moe-gpu-module-to-binary: every gpu.module becomes a gpu.binary of the
// same name in the same place, serialized by its target (here as PTX, and
// as cubins where ptxas is installed); the modules are serialized at the
// same time, the output is the same as one after another.
// RUN: moe-opt %s --moe-gpu-module-to-binary=format=isa | FileCheck %s
// RUN: moe-opt %s --moe-gpu-module-to-binary=format=isa --mlir-disable-threading | FileCheck %s
// RUN: %if ptxas %{ moe-opt %s --moe-gpu-module-to-binary="format=bin toolkit=%cuda_root opts=--split-compile=0" | FileCheck %s --check-prefix=BIN %}
// RUN: not moe-opt %s --moe-gpu-module-to-binary=format=elf 2>&1 | FileCheck %s --check-prefix=FORMAT

// CHECK:       func.func @host
// CHECK:       gpu.binary @first [#gpu.object<#nvvm.target<chip = "sm_90a">, properties = {{.*}}, assembly = "{{.*}}.target sm_90a{{.*}}.entry first_kernel(
// CHECK-NEXT:  gpu.binary @second [#gpu.object<#nvvm.target<chip = "sm_90a">, properties = {{.*}}, assembly = "{{.*}}.entry second_kernel(
// CHECK-NOT:   gpu.module
// BIN:         gpu.binary @first [#gpu.object<#nvvm.target<chip = "sm_90a">, properties = {{.*}}, bin = "\7FELF
// BIN-NEXT:    gpu.binary @second [#gpu.object<#nvvm.target<chip = "sm_90a">, properties = {{.*}}, bin = "\7FELF
// FORMAT:      error: moe-gpu-module-to-binary: unknown format 'elf' (expected isa, bin, fatbin or llvm)
module attributes {gpu.container_module} {
  func.func @host() {
    return
  }
  gpu.module @first [#nvvm.target<chip = "sm_90a">] {
    llvm.func @first_kernel() attributes {nvvm.kernel} {
      llvm.return
    }
  }
  gpu.module @second [#nvvm.target<chip = "sm_90a">] {
    llvm.func @second_kernel() attributes {nvvm.kernel} {
      llvm.return
    }
  }
}

