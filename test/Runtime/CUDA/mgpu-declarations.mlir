// The declarations that MLIR's gpu-to-llvm and nvgpu TMA lowering emit for
// the host side of a GPU program: every mgpu* function libmoe_cuda_runtime
// implements, with the exact LLVM IR signature. A new MLIR that changes one
// fails here; mgpu-c-signatures.test and exported-symbols.test compile and
// link the same declarations against the library.
//
// RUN: mlir-opt %s -convert-nvgpu-to-nvvm -gpu-to-llvm \
// RUN:   -reconcile-unrealized-casts | mlir-translate --mlir-to-llvmir > %t.ll
// RUN: FileCheck %s < %t.ll
// RUN: grep -c '^declare .*@mgpu' %t.ll | FileCheck %s --check-prefix=COUNT

// COUNT: 23

!desc = !nvgpu.tensormap.descriptor<tensor = memref<64x64xf16, 3>, swizzle = swizzle_128b, l2promo = none, oob = zero, interleave = none>

module attributes {gpu.container_module} {
  // A cubin (`bin`) loads with its size, PTX (`assembly`) through the JIT
  // at the target's optimization level; both unload in a global destructor.
  // CHECK-DAG: declare ptr @mgpuModuleLoad(ptr, i64)
  // CHECK-DAG: declare ptr @mgpuModuleLoadJIT(ptr, i32)
  // CHECK-DAG: declare void @mgpuModuleUnload(ptr)
  // CHECK-DAG: call ptr @mgpuModuleLoad(ptr @cubin_binary, i64 5)
  // CHECK-DAG: call ptr @mgpuModuleLoadJIT(ptr @ptx_binary, i32 {{[0-4]}})
  gpu.binary @cubin [#gpu.object<#nvvm.target<chip = "sm_90a">, bin = "CUBIN">]
  gpu.binary @ptx [#gpu.object<#nvvm.target<chip = "sm_90a">, assembly = "PTX">]

  // CHECK-DAG: declare ptr @mgpuModuleGetFunction(ptr, ptr)
  // CHECK-DAG: declare void @mgpuLaunchKernel(ptr, i64, i64, i64, i64, i64, i64, i32, ptr, ptr, ptr, i64)
  // CHECK-DAG: declare void @mgpuLaunchClusterKernel(ptr, i64, i64, i64, i64, i64, i64, i64, i64, i64, i32, ptr, ptr, ptr)
  func.func @launch(%p: memref<?xf32>, %n: index) {
    %c1 = arith.constant 1 : index
    %smem = arith.constant 1024 : i32
    %t0 = gpu.wait async
    %t1 = gpu.launch_func async [%t0] @cubin::@k blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) dynamic_shared_memory_size %smem args(%p : memref<?xf32>, %n : index)
    %t2 = gpu.launch_func async [%t1] @ptx::@k clusters in (%c1, %c1, %c1) blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%p : memref<?xf32>, %n : index)
    gpu.wait [%t2]
    return
  }

  // CHECK-DAG: declare ptr @mgpuStreamCreate()
  // CHECK-DAG: declare void @mgpuStreamSynchronize(ptr)
  // CHECK-DAG: declare void @mgpuStreamDestroy(ptr)
  // CHECK-DAG: declare ptr @mgpuMemAlloc(i64, ptr, i8)
  // CHECK-DAG: declare void @mgpuMemcpy(ptr, ptr, i64, ptr)
  // CHECK-DAG: declare void @mgpuMemset32(ptr, i32, i64, ptr)
  // CHECK-DAG: declare void @mgpuMemset16(ptr, i16, i64, ptr)
  // CHECK-DAG: declare void @mgpuMemFree(ptr, ptr)
  func.func @memory(%n: index, %h: memref<?xi32>) {
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i16
    %t0 = gpu.wait async
    %m, %t1 = gpu.alloc async [%t0] (%n) : memref<?xi32>
    %t2 = gpu.memcpy async [%t1] %m, %h : memref<?xi32>, memref<?xi32>
    %t3 = gpu.memset async [%t2] %m, %c0 : memref<?xi32>, i32
    %m2, %t4 = gpu.alloc async [%t3] (%n) : memref<?xi16>
    %t5 = gpu.memset async [%t4] %m2, %c1 : memref<?xi16>, i16
    %t6 = gpu.dealloc async [%t5] %m : memref<?xi32>
    %t7 = gpu.dealloc async [%t6] %m2 : memref<?xi16>
    gpu.wait [%t7]
    return
  }

  // Host-shared (managed) memory: no stream, flag 1.
  // CHECK-DAG: call ptr @mgpuMemAlloc(i64 %{{.*}}, ptr null, i8 1)
  func.func @shared(%n: index) -> memref<?xf32> {
    %s = gpu.alloc host_shared (%n) : memref<?xf32>
    return %s : memref<?xf32>
  }

  // Joining two streams records an event on each and makes a third wait.
  // CHECK-DAG: declare ptr @mgpuEventCreate()
  // CHECK-DAG: declare void @mgpuEventRecord(ptr, ptr)
  // CHECK-DAG: declare void @mgpuStreamWaitEvent(ptr, ptr)
  // CHECK-DAG: declare void @mgpuEventDestroy(ptr)
  func.func @join() {
    %a = gpu.wait async
    %b = gpu.wait async
    %c = gpu.wait async [%a, %b]
    gpu.wait [%c]
    return
  }

  // A token that is not a fresh stream is taken for an event.
  // CHECK-DAG: declare void @mgpuEventSynchronize(ptr)
  func.func @wait_token(%t: !gpu.async.token) {
    gpu.wait [%t]
    return
  }

  // CHECK-DAG: declare void @mgpuSetDefaultDevice(i32)
  // CHECK-DAG: declare void @mgpuMemHostRegisterMemRef(i64, ptr, i64)
  // CHECK-DAG: declare void @mgpuMemHostUnregisterMemRef(i64, ptr, i64)
  func.func @host(%h: memref<?x?xf32>, %d: i32) {
    gpu.set_default_device %d
    %u = memref.cast %h : memref<?x?xf32> to memref<*xf32>
    gpu.host_register %u : memref<*xf32>
    gpu.host_unregister %u : memref<*xf32>
    return
  }

  // (rank, ranked descriptor, data type, interleave, swizzle, l2 promotion,
  // oob fill, box dims); f16 is data type 6, swizzle_128b is 3.
  // CHECK-DAG: declare ptr @mgpuTensorMapEncodeTiledMemref(i64, ptr, i64, i64, i64, i64, i64, ptr)
  // CHECK-DAG: call ptr @mgpuTensorMapEncodeTiledMemref(i64 %{{.*}}, ptr %{{.*}}, i64 6, i64 0, i64 3, i64 0, i64 0, ptr %{{.*}})
  func.func @tma(%buf: memref<*xf16>) {
    %c64 = arith.constant 64 : index
    %d = nvgpu.tma.create.descriptor %buf box[%c64, %c64] : memref<*xf16> -> !desc
    return
  }

  // MLIR 22 has no data type for 8-bit floats (nor i8, i16): they arrive as
  // 9 (BFLOAT16), twice the real element size. FP8 tensors must be described
  // as ui8 memrefs, which give 0 (UINT8).
  // CHECK-DAG: call ptr @mgpuTensorMapEncodeTiledMemref(i64 %{{.*}}, ptr %{{.*}}, i64 9, i64 0, i64 0, i64 0, i64 0, ptr %{{.*}})
  // CHECK-DAG: call ptr @mgpuTensorMapEncodeTiledMemref(i64 %{{.*}}, ptr %{{.*}}, i64 0, i64 0, i64 0, i64 0, i64 0, ptr %{{.*}})
  func.func @tma_bytes(%f8: memref<*xf8E4M3FN>, %u8: memref<*xui8>) {
    %c64 = arith.constant 64 : index
    %a = nvgpu.tma.create.descriptor %f8 box[%c64, %c64] : memref<*xf8E4M3FN> -> !nvgpu.tensormap.descriptor<tensor = memref<64x64xf8E4M3FN, 3>, swizzle = none, l2promo = none, oob = zero, interleave = none>
    %b = nvgpu.tma.create.descriptor %u8 box[%c64, %c64] : memref<*xui8> -> !nvgpu.tensormap.descriptor<tensor = memref<64x64xui8, 3>, swizzle = none, l2promo = none, oob = zero, interleave = none>
    return
  }
}
