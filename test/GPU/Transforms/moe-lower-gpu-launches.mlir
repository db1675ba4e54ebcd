// RUN: moe-opt %S/../../Conversion/MoeToNVGPU/Inputs/mx-block-matmul.mlir -convert-moe-to-nvgpu=mma-path=bf16 -moe-lower-gpu-launches | FileCheck %s
// RUN: moe-opt %S/../../Conversion/MoeToNVGPU/Inputs/mx-block-matmul.mlir -convert-moe-to-nvgpu=mma-path=bf16 -moe-lower-gpu-launches=device-arguments=1 | FileCheck %s --check-prefix=DEV
// RUN: moe-opt %S/../../Conversion/MoeToNVGPU/Inputs/mx-block-matmul.mlir -convert-moe-to-nvgpu="tma-store=false" -moe-lower-gpu-launches=device-arguments=1 | FileCheck %s --check-prefix=OPS
// RUN: moe-opt %s -split-input-file -moe-lower-gpu-launches -verify-diagnostics

// The launch function of the MX block GEMM of
// test/Conversion/MoeToNVGPU/Inputs/mx-block-matmul.mlir
// (M = 256, Nout = 128, K = 256, E = 2) gets its body: one stream, a device
// buffer per argument (inputs copied in), the TMA descriptors of the two
// code operands over ui8 views ([M, K] and [E * Nout, K], box 128 x 128),
// the launch with the record's grid, block and dynamic shared memory, the
// result copied back, every buffer freed, the stream synchronized.

// CHECK-LABEL: func.func @mx_gemm(
// CHECK:         call @mx_block_matmul_0_launch(
//
// CHECK-LABEL: func.func private @mx_block_matmul_0_launch(
// CHECK-SAME:      %[[LQ:[^:]*]]: memref<256x256xf8E4M3FN>, %[[LS:[^:]*]]: memref<256x8xf8E8M0FNU>, %[[RQ:[^:]*]]: memref<2x128x256xf8E4M3FN>, %[[RS:[^:]*]]: memref<2x128x8xf8E8M0FNU>, %[[BLK:[^:]*]]: memref<2xi32>, %[[OUT:[^:]*]]: memref<256x128xf32>) {
// CHECK-NOT:     moe.gpu_launch
// CHECK:         %[[T0:.*]] = gpu.wait async
// CHECK:         %[[DLQ:.*]], %[[T1:.*]] = gpu.alloc async [%[[T0]]] () : memref<65536xi8>
// CHECK:         %[[VLQ:.*]] = memref.view %[[DLQ]][%{{.*}}][] : memref<65536xi8> to memref<256x256xf8E4M3FN>
// CHECK:         %[[T2:.*]] = gpu.memcpy async [%[[T1]]] %[[VLQ]], %[[LQ]] : memref<256x256xf8E4M3FN>, memref<256x256xf8E4M3FN>
// CHECK:         %[[DLS:.*]], %{{.*}} = gpu.alloc async [%[[T2]]] () : memref<2048xi8>
// CHECK:         gpu.memcpy async {{.*}}, %[[LS]]
// CHECK:         %[[DRQ:.*]], %{{.*}} = gpu.alloc async [%{{.*}}] () : memref<65536xi8>
// CHECK:         gpu.memcpy async {{.*}}, %[[RQ]]
// CHECK:         %[[DRS:.*]], %{{.*}} = gpu.alloc async [%{{.*}}] () : memref<2048xi8>
// CHECK:         gpu.memcpy async {{.*}}, %[[RS]]
// CHECK:         %[[DBLK:.*]], %{{.*}} = gpu.alloc async [%{{.*}}] () : memref<8xi8>
// CHECK:         gpu.memcpy async {{.*}}, %[[BLK]] : memref<2xi32>, memref<2xi32>
// The result is not copied in.
// CHECK:         %[[DOUT:.*]], %[[TA:.*]] = gpu.alloc async [%{{.*}}] () : memref<131072xi8>
// CHECK-NOT:     gpu.memcpy
// CHECK:         %[[UA:.*]] = memref.view %[[DLQ]][%{{.*}}][] : memref<65536xi8> to memref<256x256xui8>
// CHECK:         %[[CA:.*]] = memref.cast %[[UA]] : memref<256x256xui8> to memref<*xui8>
// CHECK:         %[[MA:.*]] = nvgpu.tma.create.descriptor %[[CA]] box[%c128{{.*}}, %c128{{.*}}] : memref<*xui8> -> <tensor = memref<128x128xi8, 3>, swizzle = swizzle_128b, l2promo = l2promo_256b, oob = zero, interleave = none>
// CHECK:         %[[PA:.*]] = builtin.unrealized_conversion_cast %[[MA]] : {{.*}} to !llvm.ptr
// CHECK:         %[[UB:.*]] = memref.view %[[DRQ]][%{{.*}}][] : memref<65536xi8> to memref<256x256xui8>
// CHECK:         %[[CB:.*]] = memref.cast %[[UB]]
// CHECK:         %[[MB:.*]] = nvgpu.tma.create.descriptor %[[CB]] box
// CHECK:         %[[PB:.*]] = builtin.unrealized_conversion_cast %[[MB]] : {{.*}} to !llvm.ptr
// CHECK:         memref.extract_aligned_pointer_as_index %[[DLS]]
// CHECK:         %[[SA:.*]] = llvm.inttoptr %{{.*}} : i64 to !llvm.ptr<1>
// CHECK:         memref.extract_aligned_pointer_as_index %[[DRS]]
// CHECK:         %[[SB:.*]] = llvm.inttoptr
// CHECK:         memref.extract_aligned_pointer_as_index %[[DOUT]]
// CHECK:         %[[C:.*]] = llvm.inttoptr
// CHECK:         memref.extract_aligned_pointer_as_index %[[DBLK]]
// CHECK:         %[[E:.*]] = llvm.inttoptr
// CHECK-DAG:     %[[SMEM:.*]] = arith.constant 230496 : i32
// CHECK-DAG:     %[[C512:.*]] = arith.constant 512 : index
// CHECK-DAG:     %[[C2:.*]] = arith.constant 2 : index
// CHECK:         %[[TL:.*]] = gpu.launch_func async [%[[TA]]] @moe_kernels::@mx_block_matmul_0 blocks in (%{{.*}}, %[[C2]], %{{.*}}) threads in (%[[C512]], %{{.*}}, %{{.*}}) dynamic_shared_memory_size %[[SMEM]] args(%[[PA]] : !llvm.ptr, %[[PB]] : !llvm.ptr, %[[SA]] : !llvm.ptr<1>, %[[SB]] : !llvm.ptr<1>, %[[C]] : !llvm.ptr<1>, %[[E]] : !llvm.ptr<1>)
// CHECK:         %[[VOUT:.*]] = memref.view %[[DOUT]][%{{.*}}][] : memref<131072xi8> to memref<256x128xf32>
// CHECK:         %[[TC:.*]] = gpu.memcpy async [%[[TL]]] %[[OUT]], %[[VOUT]]
// CHECK:         %[[F0:.*]] = gpu.dealloc async [%[[TC]]] %[[DLQ]]
// CHECK-COUNT-5: gpu.dealloc async
// CHECK:         gpu.wait [%{{.*}}]
// CHECK-NEXT:    return

// With device arguments (the resident pipeline) the kernel works on the
// arguments themselves: no buffer, no copy; each TMA descriptor covers its
// argument seen as ui8 [rows, last dimension] through a memref descriptor
// built over the aligned pointer. The launch replaces the call, as a
// synchronous gpu.launch_func without a stream of its own (the caller's
// moe-gpu-async-region queues it on the caller's stream), and the launch
// function is gone.
// DEV-LABEL: func.func @mx_gemm(
// DEV:         %[[LQ:.*]] = bufferization.to_buffer %arg0
// DEV:         %[[LS:.*]] = bufferization.to_buffer %arg1
// DEV:         %[[RQ:.*]] = bufferization.to_buffer %arg2
// DEV:         %[[RS:.*]] = bufferization.to_buffer %arg3
// DEV:         %[[BLK:.*]] = bufferization.to_buffer %arg4
// DEV:         %[[OUT:.*]] = memref.alloc() : memref<256x128xf32>
// DEV-NOT:     call
// DEV-NOT:     gpu.wait
// DEV-NOT:     gpu.alloc
// DEV-NOT:     gpu.memcpy
// DEV:         %[[AQ:.*]] = memref.extract_aligned_pointer_as_index %[[LQ]]
// DEV:         %[[PQ:.*]] = llvm.inttoptr %{{.*}} : i64 to !llvm.ptr
// DEV:         %[[D0:.*]] = llvm.mlir.poison : !llvm.struct<(ptr, ptr, i64, array<2 x i64>, array<2 x i64>)>
// DEV:         llvm.insertvalue %[[PQ]], %[[D0]][0]
// DEV:         %[[D7:.*]] = llvm.insertvalue %{{.*}}[4, 1]
// DEV:         %[[UQ:.*]] = builtin.unrealized_conversion_cast %[[D7]] : !llvm.struct<(ptr, ptr, i64, array<2 x i64>, array<2 x i64>)> to memref<256x256xui8>
// DEV:         %[[CQ:.*]] = memref.cast %[[UQ]] : memref<256x256xui8> to memref<*xui8>
// DEV:         nvgpu.tma.create.descriptor %[[CQ]]
// DEV:         memref.extract_aligned_pointer_as_index %[[RQ]]
// DEV:         to memref<256x256xui8>
// DEV:         nvgpu.tma.create.descriptor
// DEV:         memref.extract_aligned_pointer_as_index %[[LS]]
// DEV:         memref.extract_aligned_pointer_as_index %[[RS]]
// DEV:         memref.extract_aligned_pointer_as_index %[[OUT]]
// DEV:         memref.extract_aligned_pointer_as_index %[[BLK]]
// DEV-NOT:     gpu.wait
// DEV:         gpu.launch_func @moe_kernels::@mx_block_matmul_0 blocks in
// DEV-NOT:     gpu.memcpy
// DEV-NOT:     gpu.dealloc
// DEV-NOT:     gpu.wait
// DEV:         bufferization.to_tensor %[[OUT]]
// DEV-NEXT:    return
// DEV-NOT:     func.func private @mx_block_matmul_0_launch

// On the default path the GEMM reads bf16 operands: each descriptor covers
// the rows' bytes, ui8 [rows, 2 * K] (the lhs [256, 256] bf16 and the rhs
// [2 * 128, 256] bf16 that the operand kernels wrote). The operand kernels
// (here: dequantizing the codes with their scales) take global pointers
// only.
// OPS-LABEL: func.func @mx_gemm(
// OPS-NOT:     nvgpu.tma.create.descriptor
// OPS:         gpu.launch_func @moe_kernels::@mx_operand_0 {{.*}} args({{.*}} : !llvm.ptr<1>, {{.*}} : !llvm.ptr<1>, {{.*}} : !llvm.ptr<1>)
// OPS-NOT:     nvgpu.tma.create.descriptor
// OPS:         gpu.launch_func @moe_kernels::@mx_operand_1
// OPS:         to memref<256x512xui8>
// OPS:         nvgpu.tma.create.descriptor
// OPS:         to memref<256x512xui8>
// OPS:         nvgpu.tma.create.descriptor
// OPS:         gpu.launch_func @moe_kernels::@block_matmul_2

// -----

// expected-error @below {{moe.gpu_launch must be a #moe.gpu_launch attribute, got {kernel = @k}}}
func.func private @bad_record(memref<4xf32>, memref<4xf32>)
    attributes {moe.gpu_launch = {kernel = @k}}

// -----

// expected-error @below {{a moe.gpu_launch function must be a declaration taking static identity-layout memrefs (inputs, then the result) and returning nothing}}
func.func private @bad_signature(memref<?xf32>, memref<4xf32>)
    attributes {moe.gpu_launch = #moe.gpu_launch<kernel = @m::@k,
                  grid = [1, 1, 1], block = [128, 1, 1], pointers = [0, 1]>}

// -----

// expected-error @below {{a moe.gpu_launch function must be a declaration taking static identity-layout memrefs (inputs, then the result) and returning nothing}}
func.func private @pointer_out_of_range(memref<4xf32>, memref<4xf32>)
    attributes {moe.gpu_launch = #moe.gpu_launch<kernel = @m::@k,
                  grid = [1, 1, 1], block = [128, 1, 1], pointers = [0, 2]>}

// -----

// expected-error @below {{a moe.gpu_launch function must be a declaration taking static identity-layout memrefs (inputs, then the result) and returning nothing}}
func.func private @map_out_of_range(memref<128x128xi8>, memref<4xf32>)
    attributes {moe.gpu_launch = #moe.gpu_launch<kernel = @m::@k,
                  grid = [1, 1, 1], block = [128, 1, 1],
                  tensor_maps = [2 : !nvgpu.tensormap.descriptor<tensor = memref<128x128xi8, 3>, swizzle = swizzle_128b, l2promo = l2promo_256b, oob = zero, interleave = none>],
                  pointers = [1]>}

// -----

// expected-error @below {{the moe.gpu_launch record's 3 results exceed the function's 2 arguments}}
func.func private @too_many_results(memref<4xf32>, memref<4xf32>)
    attributes {moe.gpu_launch = #moe.gpu_launch<kernel = @m::@k,
                  grid = [1, 1, 1], block = [128, 1, 1], pointers = [0, 1],
                  results = 3>}

// -----

// A TMA descriptor covers one-byte codes, two-byte bf16 values and
// four-byte f32 results only.
// expected-error @below {{tensor map argument #0 must have one-, two- or four-byte elements, got 'memref<128x128xf64>'}}
func.func private @wide_map(memref<128x128xf64>, memref<4xf32>)
    attributes {moe.gpu_launch = #moe.gpu_launch<kernel = @m::@k,
                  grid = [1, 1, 1], block = [128, 1, 1],
                  tensor_maps = [0 : !nvgpu.tensormap.descriptor<tensor = memref<128x128xi8, 3>, swizzle = swizzle_128b, l2promo = l2promo_256b, oob = zero, interleave = none>],
                  pointers = [1]>}

// -----

// The box's rank is that of the view of the argument: its leading
// dimensions collapse into the first, so a box cannot have more.
// expected-error @below {{tensor map argument #0 of rank 2 cannot be viewed with a box of rank 3}}
func.func private @deep_box(memref<128x128xf32>, memref<4xf32>)
    attributes {moe.gpu_launch = #moe.gpu_launch<kernel = @m::@k,
                  grid = [1, 1, 1], block = [128, 1, 1],
                  tensor_maps = [0 : !nvgpu.tensormap.descriptor<tensor = memref<1x64x128xi8, 3>, swizzle = swizzle_128b, l2promo = l2promo_256b, oob = zero, interleave = none>],
                  pointers = [1]>}
