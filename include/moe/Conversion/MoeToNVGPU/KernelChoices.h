//===- KernelChoices.h - the kernel choices a pass was given ---*- C++ -*-===//
//
// The kernel choices of moe/Pipelines/KernelChoices.def as one struct, with
// the table's defaults, and the way a pass reads them from its options: by
// field name, so moe-gpu-kernel-config and convert-moe-to-nvgpu cannot pass
// them to selectGemmConfig in different orders, and a new choice is one
// entry in the table plus its option in Passes.td.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_CONVERSION_MOETONVGPU_KERNELCHOICES_H
#define MOE_CONVERSION_MOETONVGPU_KERNELCHOICES_H

#include <cstdint>

namespace mlir::moe {

/// Every kernel choice of KernelChoices.def (what each one chooses is said
/// there), at the table's default unless a pass sets it.
struct KernelChoices {
#define MOE_KERNEL_CHOICE(FIELD, TYPE, OPTION, DEFAULT, PASSES, DESC)          \
  TYPE FIELD = DEFAULT;
#include "moe/Pipelines/KernelChoices.def"
};

/// The passes that take a choice: the PASSES column of KernelChoices.def as
/// bits.
namespace kernel_choice_passes {
inline constexpr unsigned Config = 1;
inline constexpr unsigned Convert = 2;
inline constexpr unsigned ConfigAndConvert = Config | Convert;
} // namespace kernel_choice_passes

/// The choices `pass` was given: each entry of KernelChoices.def that names
/// `passBit` (kernel_choice_passes::Config or Convert) from the pass option
/// of the same name, the others at their defaults. The pass's options are
/// protected members of its ODS base, so the pass befriends this function.
template <unsigned passBit, typename PassT>
KernelChoices kernelChoicesOf(const PassT &pass) {
  KernelChoices choices;
#define MOE_KERNEL_CHOICE(FIELD, TYPE, OPTION, DEFAULT, PASSES, DESC)          \
  if constexpr ((kernel_choice_passes::PASSES & passBit) != 0)                 \
    choices.FIELD = pass.FIELD;
#include "moe/Pipelines/KernelChoices.def"
  return choices;
}

} // namespace mlir::moe

#endif // MOE_CONVERSION_MOETONVGPU_KERNELCHOICES_H
