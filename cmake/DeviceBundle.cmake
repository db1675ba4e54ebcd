#===- cmake/DeviceBundle.cmake - self-contained binaries for the GPU box ---===#
#
# MOE_DEVICE_BUNDLE=ON builds moe-run, libMoeJIT.so, moe-opt, moe-cuda-smoke,
# moe-ref and libmoe_cuda_runtime.so so that they run on a machine without LLVM,
# MLIR or a matching libstdc++ (the H200 box, shared/DEVICE.md): they may
# need only glibc, libz and libzstd. scripts/build-device-bundle.sh uses it
# in its own build directory; normal and CI builds never include this file.
#
#   exported MLIR targets --INTERFACE_LINK_LIBRARIES "LLVM;MLIR"-->
#       LLVM -> static component archives (MOE_DEVICE_LLVM_COMPONENTS)
#       MLIR -> dropped (its static archives are named by their users)
#   project targets (llvm_add_library / add_llvm_executable)
#       LLVM_LINK_LLVM_DYLIB=OFF -> static component archives
#   every link: -static-libstdc++ -static-libgcc -Wl,--as-needed,--gc-sections
#   RPATH: $ORIGIN/../lib (bin/ and lib/ side by side in the bundle)
#
# Included from the top level after find_package(MLIR) and before the
# subdirectories; the RPATH fix-ups of targets that set their own run at the
# end of the top-level directory (cmake_language(DEFER)).
#
#===------------------------------------------------------------------------===#

if(NOT MOE_ENABLE_COMPILER)
  message(FATAL_ERROR "MOE_DEVICE_BUNDLE needs MOE_ENABLE_COMPILER=ON")
endif()

# The LLVM components the project's MLIR libraries reach: the host JIT
# (ORC, X86 code generation), the NVPTX back end behind gpu-module-to-binary,
# and the IR utilities the translations use. Their own dependencies follow
# from LLVMExports.cmake, so only the roots are named.
set(MOE_DEVICE_LLVM_COMPONENTS
  Support Core Analysis TransformUtils Passes IPO Linker BitWriter BitReader
  IRReader AsmParser MC MCParser Target TargetParser Demangle Object
  FrontendOpenMP FrontendOffloading
  ExecutionEngine OrcJIT OrcTargetProcess OrcShared JITLink RuntimeDyld
  PerfJITEvents
  NVPTXCodeGen NVPTXDesc NVPTXInfo
  X86CodeGen X86AsmParser X86Desc X86Info)
llvm_map_components_to_libnames(MOE_DEVICE_LLVM_LIBS
  ${MOE_DEVICE_LLVM_COMPONENTS})

# Debian's static LLVMSupport names zstd::libzstd_shared; LLVM's own
# Findzstd may not have defined it.
if(NOT TARGET zstd::libzstd_shared)
  add_library(zstd::libzstd_shared INTERFACE IMPORTED)
  set_target_properties(zstd::libzstd_shared PROPERTIES
    INTERFACE_LINK_LIBRARIES zstd)
endif()

# Exported MLIR targets: swap the LLVM dylib for the static archives and
# drop the MLIR dylib.
get_directory_property(_moe_imported IMPORTED_TARGETS)
foreach(_moe_target IN LISTS _moe_imported)
  get_target_property(_moe_type ${_moe_target} TYPE)
  if(NOT _moe_type STREQUAL "STATIC_LIBRARY" AND
     NOT _moe_type STREQUAL "INTERFACE_LIBRARY")
    continue()
  endif()
  get_target_property(_moe_libs ${_moe_target} INTERFACE_LINK_LIBRARIES)
  if(NOT _moe_libs)
    continue()
  endif()
  if(NOT "LLVM" IN_LIST _moe_libs AND NOT "MLIR" IN_LIST _moe_libs)
    continue()
  endif()
  set(_moe_new_libs)
  foreach(_moe_lib IN LISTS _moe_libs)
    if(_moe_lib STREQUAL "LLVM")
      list(APPEND _moe_new_libs ${MOE_DEVICE_LLVM_LIBS})
    elseif(NOT _moe_lib STREQUAL "MLIR")
      list(APPEND _moe_new_libs ${_moe_lib})
    endif()
  endforeach()
  list(REMOVE_DUPLICATES _moe_new_libs)
  set_target_properties(${_moe_target} PROPERTIES
    INTERFACE_LINK_LIBRARIES "${_moe_new_libs}")
endforeach()

# The project's own LLVM-style targets link the components they name.
set(LLVM_LINK_LLVM_DYLIB OFF)

# Every link: no libstdc++/libgcc_s at run time, no unused DT_NEEDED (the
# static LLVMSupport names libz3, which the JIT never reaches), and no
# unreachable sections (libMoeJIT.so: 89 MB -> 66 MB stripped).
string(APPEND CMAKE_EXE_LINKER_FLAGS
  " -static-libstdc++ -static-libgcc -Wl,--as-needed -Wl,--gc-sections")
string(APPEND CMAKE_SHARED_LINKER_FLAGS
  " -static-libstdc++ -static-libgcc -Wl,--as-needed -Wl,--gc-sections")

# The bundle keeps bin/ and lib/ side by side, as the build tree does.
set(CMAKE_BUILD_WITH_INSTALL_RPATH ON)
set(CMAKE_INSTALL_RPATH "$ORIGIN/../lib")

# Targets that set INSTALL_RPATH themselves (MoeJIT names LLVM's library
# directory for the CMake package) get the bundle's instead.
function(moe_device_bundle_rpaths)
  foreach(_moe_target MoeJIT moe-run moe-opt moe-cuda-smoke moe-ref
                      moe_cuda_runtime)
    if(TARGET ${_moe_target})
      set_target_properties(${_moe_target} PROPERTIES
        INSTALL_RPATH "$ORIGIN/../lib")
    endif()
  endforeach()
endfunction()
cmake_language(DEFER DIRECTORY ${CMAKE_SOURCE_DIR}
  CALL moe_device_bundle_rpaths)
