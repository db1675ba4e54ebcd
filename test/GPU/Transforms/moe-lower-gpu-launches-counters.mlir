// A launch record with `counters = 1` (a persistent GEMM's tile counter):
// the launch allocates one i32 on its stream, zeroes it, passes its address
// after the pointers and frees it after the kernel; with device arguments
// the same as synchronous ops around the launch at the call (the caller's
// moe-gpu-async-region queues them on its stream).
// RUN: %moe_obj/bin/moe-run --gemm M=512,N=512,K=256,G=2 --print-layer-ir | moe-opt --moe-gpu-kernel-config="tma-store=false" --convert-moe-to-nvgpu="tma-store=false" | moe-opt -moe-lower-gpu-launches | FileCheck %s
// RUN: %moe_obj/bin/moe-run --gemm M=512,N=512,K=256,G=2 --print-layer-ir | moe-opt --moe-gpu-kernel-config="tma-store=false" --convert-moe-to-nvgpu="tma-store=false" | moe-opt -moe-lower-gpu-launches=device-arguments=1 | FileCheck %s --check-prefix=DEV

// CHECK-LABEL: func.func private @block_matmul_2_launch(
// CHECK:         %[[OUT:.*]], %{{.*}} = gpu.alloc async [%{{.*}}] () : memref<1048576xi8>
// CHECK:         %[[CNT:.*]], %[[TA:.*]] = gpu.alloc async [%{{.*}}] () : memref<1xi32>
// CHECK:         %[[TZ:.*]] = gpu.memset async [%[[TA]]] %[[CNT]], %c0_i32 : memref<1xi32>, i32
// CHECK:         memref.extract_aligned_pointer_as_index %[[CNT]]
// CHECK:         %[[P:.*]] = llvm.inttoptr %{{.*}} : i64 to !llvm.ptr<1>
// CHECK:         gpu.launch_func async [%[[TZ]]] @moe_kernels::@block_matmul_2 {{.*}}, %[[P]] : !llvm.ptr<1>)
// CHECK:         gpu.dealloc async [%{{.*}}] %[[CNT]] : memref<1xi32>
// CHECK:         gpu.wait

// DEV-LABEL: func.func @moe_gemm(
// DEV:         %[[CNT:.*]] = gpu.alloc  () : memref<1xi32>
// DEV-NEXT:    gpu.memset  %[[CNT]], %{{.*}} : memref<1xi32>, i32
// DEV:         memref.extract_aligned_pointer_as_index %[[CNT]]
// DEV:         %[[P:.*]] = llvm.inttoptr %{{.*}} : i64 to !llvm.ptr<1>
// DEV:         gpu.launch_func  @moe_kernels::@block_matmul_2 {{.*}}, %[[P]] : !llvm.ptr<1>)
// DEV-NEXT:    gpu.dealloc  %[[CNT]] : memref<1xi32>
