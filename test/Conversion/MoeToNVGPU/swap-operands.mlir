// RUN: %moe_obj/bin/moe-run --layer T=256,H=256,I=128,E=2,K=2,B=128 --print-layer-ir | moe-opt --moe-decompose-bwd --moe-fuse --moe-gpu-kernel-config="swap-rounded-rhs=true round-reuse=0 weight-reuse=0" > %t.config.mlir
// RUN: FileCheck %s --check-prefix=CONFIG < %t.config.mlir
// RUN: moe-opt %t.config.mlir -convert-moe-to-nvgpu="round-reuse=0 weight-reuse=0" | FileCheck %s
// RUN: not %moe_obj/bin/moe-run --target=sm90a --layer T=256,H=256,I=128,E=2,K=2,B=128 --compile-only --gemm-config-at '2=#moe.gemm_config<mma = bf16_operands, tile = [128, 256, 64], mma_shape = [64, 256, 16], stages = 4, warpgroups = [1, 2], registers = [40, 232], rhs_n_major = true, lhs_m_major = true, persistent = true, swap_operands = true, tma_store = 2>' 2>&1 | FileCheck %s --check-prefix=BLOCK
// REQUIRES: ptxas
// RUN: moe-opt %t.config.mlir --moe-gpu-device-pipeline="chip=sm_90a format=isa toolkit=%cuda_root swap-rounded-rhs=true round-reuse=0 weight-reuse=0" | %python %S/Inputs/extract-ptx.py > %t.layer.ptx
// RUN: FileCheck %s --check-prefix=PTX < %t.layer.ptx
// RUN: %ptxas -arch=sm_90a -v %t.layer.ptx -o %t.layer.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS

// #moe.gemm_config swap_operands (moe-gpu-kernel-config swap-rounded-rhs,
// off by default, docs/sm90a-kernels.md): P4, dWd = (a h)^T
// dy over each expert's slots, whose rhs dy is gathered from token rows and
// rounded along the slots, computes dWd^T = dy^T (a h) instead. dy is the
// kernel's M-major lhs, rounded in the consumers' A-fragment registers as
// P3's x (round_lhs, the table's registers), a h its N-major rhs, and each
// 64 x 32 chunk of a warpgroup's result tile goes out transposed: 32 rows
// of dWd by 64 columns, two TMA boxes of 32 f32.
// CONFIG:     moe.expert_matmul {{.*}}registers = [40, 232], rhs_n_major = true, lhs_m_major = true, persistent = true, tma_store = 2>
// CONFIG:     moe.expert_matmul {{.*}}registers = [40, 232], rhs_n_major = true, lhs_m_major = true, persistent = true, round_lhs = true, swap_operands = true, tma_store = 2>
// CONFIG-NOT: round_rhs

// No operand kernel rounds dy along the slots (x's for P3 comes before
// P3): P4's kernel takes dy [T, H] as its lhs (argument 0), a h rounded by
// the activation backward [S, I] as its rhs (a tensor map), and its result
// map's box is 32 rows of 128 bytes.
// CHECK:       call @act_bwd_operands_{{[0-9]+}}_launch
// CHECK:       call @expert_matmul_9_launch
// CHECK-NOT:   call @mx_operand
// CHECK:       call @expert_matmul_10_launch({{.*}}) : (memref<256x256xbf16>, memref<640x128xbf16>, memref<5xi32>, memref<640xi32>, memref<2x128x256xf32>) -> ()
// CHECK-LABEL: func.func private @expert_matmul_10_launch(
// CHECK-SAME:    tensor_maps = [1 : !nvgpu.tensormap.descriptor<tensor = memref<64x128xi8, 3>, {{.*}}>, 4 : !nvgpu.tensormap.descriptor<tensor = memref<1x32x128xi8, 3>, swizzle = swizzle_128b, {{.*}}>], counters = 1, pointers = [0, 2, 3]>
// CHECK-LABEL: gpu.func @expert_matmul_10(
// CHECK:         nvvm.ldmatrix {{.*}}layout = #nvvm.mma_layout<col>, num = 4
// CHECK:         "fma.rn.bf16x2 $0, $1, $2, $3;"
// CHECK:         wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16
// A chunk: the 16 scalar f32 stores of a thread, the fence, the wait for
// the buffer's earlier store, the warpgroup's barrier, two boxes, one
// group.
// CHECK-COUNT-16: llvm.store %{{.*}}, %{{.*}} {alignment = 4 : i64} : f32, !llvm.ptr<3>
// CHECK-NEXT:    nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// CHECK:         nvvm.cp.async.bulk.wait_group 0 {read}
// CHECK:         nvvm.barrier id
// CHECK:         nvvm.cp.async.bulk.tensor.global.shared.cta
// CHECK:         nvvm.cp.async.bulk.tensor.global.shared.cta
// CHECK-NEXT:    nvvm.cp.async.bulk.commit.group

// A block GEMM's transposed product reads its slot rows K-major, and
// this config has the expert GEMM's N-major rhs.
// BLOCK: error: 'moe.block_matmul' op a block GEMM's transposed product needs the bf16-operands MMA path, tile N two blocks of 128 slots, a bf16 weight MX-rounded along K by round_lhs, K a multiple of the tile K, a K-major rhs, one producer warpgroup, tma_store buffers for its experts' counts, fewer than 65536 blocks and no codes, lhs_gather or round_rhs, got tile N 256 and K = 256

// PTX-LABEL:   .entry expert_matmul_10(
// PTX:         ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16
// PTX:         fma.rn.bf16x2
// PTX:         wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {{{.*}}}, {%r{{[0-9]+}}, %r{{[0-9]+}}, %r{{[0-9]+}}, %r{{[0-9]+}}}, %rd{{[0-9]+}}
// PTX-COUNT-16: st.shared.b32
// PTX:         cp.async.bulk.tensor.3d.global.shared::cta.tile.bulk_group
// PTX-NEXT:    cp.async.bulk.tensor.3d.global.shared::cta.tile.bulk_group
// PTXAS-NOT:   C7512
// PTXAS:       Compiling entry function 'expert_matmul_10' for 'sm_90a'
// PTXAS-NEXT:  Function properties for expert_matmul_10
// PTXAS-NEXT:  0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
