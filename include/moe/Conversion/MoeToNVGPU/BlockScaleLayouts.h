//===- BlockScaleLayouts.h - MX scale layouts of Blackwell MMAs -*- C++ -*-===//
//
// CPU models of where the native block-scaled MMAs of Blackwell (issue 12)
// expect their operands and E8M0 scale factors, and of the descriptors that
// point them there:
//   - sm_100a, tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale: the
//     512-byte scale-factor atom, its copy into tensor memory by
//     tcgen05.cp.32x128b.warpx4, the global layout of a whole scale tensor,
//     the 32-bit instruction descriptor and the 64-bit shared-memory matrix
//     descriptor;
//   - sm_120a, mma.sync.aligned.m16n8k32...kind::mxf8f6f4.block_scale
//     .scale_vec::1X: the lane/register/byte fragments of A, B and C/D and
//     the lanes that supply the scale of each row of A and column of B.
// No GPU of either kind was available, so these layouts are code with unit
// tests (unittests/Conversion/BlockScaleLayoutsTest.cpp) instead of comments:
// the kernel generators compute their indices with these functions, and the
// tests hold the functions to independent formulations taken from the PTX ISA
// and CUTLASS, element for element.
//
// Sources, cited per function: the PTX ISA 9.0
// (https://docs.nvidia.com/cuda/parallel-thread-execution/, anchors written
// PTX#anchor) and CUTLASS at 7107b05. docs/numerics.md says what these
// instructions compute.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_CONVERSION_MOETONVGPU_BLOCKSCALELAYOUTS_H
#define MOE_CONVERSION_MOETONVGPU_BLOCKSCALELAYOUTS_H

#include <cstdint>
#include <optional>

namespace mlir::moe::blockscale {

/// Elements per E8M0 scale factor along K (the MX block, scale_vec::1X).
constexpr int64_t kScaleBlock = 32;

//===----------------------------------------------------------------------===//
// sm_100a: scale factors in shared and global memory
//===----------------------------------------------------------------------===//

/// Rows (of A; columns of B) and K-blocks that one scale-factor atom covers,
/// and its size in bytes (one E8M0 byte per row and K-block).
constexpr int64_t kSfAtomRows = 128;
constexpr int64_t kSfAtomKBlocks = 4;
constexpr int64_t kSfAtomBytes = kSfAtomRows * kSfAtomKBlocks;

/// A row and K-block of a scale-factor tensor (for B: a column and K-block).
struct SfCoord {
  int64_t row;
  int64_t kBlock;
  bool operator==(const SfCoord &other) const {
    return row == other.row && kBlock == other.kBlock;
  }
};

/// The byte of a 512-byte scale-factor atom that holds the scale of `row`
/// (0..127) and `kBlock` (0..3): `(row % 32) * 16 + (row / 32) * 4 + kBlock`.
/// Each 16-byte line holds the 4 K-blocks of rows r, r+32, r+64, r+96, so that
/// one 32-bit tensor-memory cell holds the 4 K-blocks of one row.
/// Source: CUTLASS include/cutlass/detail/sm100_blockscaled_layout.hpp,
/// `Sm1xxBlockScaledBasicChunk::SfKMajorAtom` =
/// ((32,4),(32,4)):((16,4),(0,1)).
int64_t sfAtomByte(int64_t row, int64_t kBlock);

/// The inverse of sfAtomByte: the row and K-block whose scale byte `byte`
/// (0..511) of an atom holds.
SfCoord sfAtomCoord(int64_t byte);

/// The number of K-blocks of a K extent padded as the atoms need it: a
/// multiple of 4.
int64_t sfPaddedKBlocks(int64_t kBlocks);

/// The number of rows padded as the atoms need it: a multiple of 128.
int64_t sfPaddedRows(int64_t rows);

/// Bytes of the global scale-factor tensor of a `rows` x `kBlocks` operand
/// (both padded to whole atoms; padding bytes are never read for real rows).
int64_t sfGlobalBytes(int64_t rows, int64_t kBlocks);

/// The byte offset of the scale of (`row`, `kBlock`) in the global
/// scale-factor tensor of an operand with `rows` rows (M of A, N of B) and
/// `kBlocks` = K / 32 K-blocks. The tensor is a sequence of 512-byte atoms,
/// atom (row / 128, kBlock / 4) at index
/// `(row / 128) * (sfPaddedKBlocks(kBlocks) / 4) + kBlock / 4`: the atoms of
/// one 128-row group are contiguous along K, and the groups follow each other
/// along M. So the 4 K-blocks one tcgen05.cp moves for 128 rows are one
/// contiguous 512-byte copy. `rows` only bounds `row`; the offset does not
/// depend on it.
/// Source: CUTLASS `Sm1xxBlockScaledConfig::tile_atom_to_shape_SFA`
/// (tile_to_shape(SfAtom, (M, K), Step<_2,_1>): K tiled first).
int64_t sfGlobalByte(int64_t row, int64_t kBlock, int64_t rows,
                     int64_t kBlocks);

/// The inverse of sfGlobalByte for the same `rows` and `kBlocks`; rows and
/// K-blocks of the padding come back as they are (>= rows or >= kBlocks).
SfCoord sfGlobalCoord(int64_t byte, int64_t rows, int64_t kBlocks);

//===----------------------------------------------------------------------===//
// sm_100a: scale factors in tensor memory
//===----------------------------------------------------------------------===//

/// A byte of tensor memory: a lane (0..127), a 32-bit column relative to the
/// base column of the region, and a byte of that cell (little-endian, 0..3).
struct TmemByte {
  int64_t lane;
  int64_t column;
  int64_t byte;
  bool operator==(const TmemByte &other) const {
    return lane == other.lane && column == other.column && byte == other.byte;
  }
};

/// Lane quarters of tensor memory; tcgen05.cp .warpx4 writes each copied line
/// into all of them, since "scale factors for A and B matrices need to be
/// duplicated to all 32 lane partitions of tensor memory"
/// (PTX#tcgen05-mma-block-scaling).
constexpr int64_t kTmemLaneQuarters = 4;

/// Where `tcgen05.cp.cta_group::1.32x128b.warpx4 [taddr], desc` puts byte
/// `atomByte` (0..511) of a 512-byte atom that `desc` describes as 32 lines
/// of 16 bytes, in lane quarter `quarter` (0..3). Line r goes to lane
/// `r + 32 * quarter`, its 16 bytes to the 4 cells from `taddr`'s column on,
/// cell j holding bytes 4j..4j+3.
/// Source: PTX#tcgen05-instructions-tcgen05-cp (shape .32x128b, multicast
/// .warpx4); CUTLASS include/cute/arch/copy_sm100.hpp,
/// `SM100_UTCCP_4x32dp128bit_1cta`.
TmemByte tcgen05CpDestination(int64_t atomByte, int64_t quarter);

/// The inverse of tcgen05CpDestination: the atom byte that lands in `cell`
/// (any lane 0..127, column 0..3).
int64_t tcgen05CpSource(const TmemByte &cell);

/// The tensor-memory byte that a block-scaled tcgen05.mma with M = 128 (and,
/// for B, N <= 256) reads for the scale of row `row` (A; column of B) and
/// K-block `kBlock` of the whole K loop, in lane quarter `quarter`, relative
/// to the base column of the scale region. `rowsPadded` is the row extent of
/// the region rounded up to 128 (128 for A; round_up(N, 128) for B): each
/// group of 4 K-blocks takes `rowsPadded / 32` columns.
///   lane = row % 32 + 32 * quarter, column = (kBlock / 4) * (rowsPadded / 32)
///   + row / 32, byte = kBlock % 4 (= the scale-factor id, tcgen05SfId).
/// Source: CUTLASS include/cute/atom/mma_traits_sm100_frag.hpp, `tmem_sf_frg`
/// (SFA atom (((32,MN/32),4),(VS,NSF)):(((1,512),32),(0,128)) over
/// (128 lanes : 1-byte columns)); PTX#tcgen05-mma-scale-factor-a-layout-1x
/// ("SFA_ID specifies the byte offset in the Tensor Memory word").
TmemByte tcgen05ScaleFactorByte(int64_t row, int64_t kBlock, int64_t rowsPadded,
                                int64_t quarter);

/// The scale-factor id (SFA_ID / SFB_ID, 0..3) that the instruction descriptor
/// of the MMA for K-block `kBlock` carries: the byte of the 32-bit cell that
/// holds that K-block. The scale tensor-memory address stays the plain column
/// address (DeepGEMM's form, not CUTLASS's byte index in address bits 30-31).
int64_t tcgen05SfId(int64_t kBlock);

//===----------------------------------------------------------------------===//
// sm_100a: descriptors
//===----------------------------------------------------------------------===//

/// The element formats of kind::mxf8f6f4 that MXFP8 uses, with their
/// descriptor codes (PTX#tcgen05-instruction-descriptor: E4M3 = 0, E5M2 = 1).
enum class MxElementFormat : uint32_t { E4M3 = 0, E5M2 = 1 };

/// The fields of the instruction descriptor of a block-scaled tcgen05.mma.
struct Tcgen05BlockScaledShape {
  MxElementFormat aFormat = MxElementFormat::E4M3;
  MxElementFormat bFormat = MxElementFormat::E4M3;
  /// 128 (cta_group::1) or 256 (cta_group::2).
  int64_t m = 128;
  /// A multiple of 8 in 8..256; the kernels use multiples of 16 (DeepGEMM
  /// asserts N % 16 == 0 at M = 128).
  int64_t n = 128;
  /// false: K-major (the K elements of a row are contiguous); true: MN-major.
  bool transposeA = false;
  bool transposeB = false;
  /// The byte of the scale cells this MMA reads (tcgen05SfId).
  int64_t aSfId = 0;
  int64_t bSfId = 0;
};

/// The 32-bit instruction descriptor of
/// tcgen05.mma.cta_group::N.kind::mxf8f6f4.block_scale with E8M0 scales:
/// bits 4-5 B scale-factor id, 7-9 A format, 10-12 B format, 15/16 transpose
/// A/B, 17-22 N >> 3, 23 scale type (1 = UE8M0), 27-28 M >> 7, 29-30 A
/// scale-factor id; every other bit 0 (dense, no negation).
/// Source: PTX#tcgen05-instruction-descriptor, the table for .kind::mxf8f6f4
/// (Table 46 in PTX ISA 9.0); CUTLASS include/cute/arch/mma_sm100_desc.hpp,
/// `UMMA::InstrDescriptorBlockScaled` (M as M >> 4 at bits 24-28: the same
/// bits for M = 128 and 256).
uint32_t tcgen05InstrDescriptor(const Tcgen05BlockScaledShape &shape);

/// The swizzle modes of a shared-memory matrix descriptor, with their codes
/// for bits 61-63 (3, 5 and 7 are not valid).
enum class SmemSwizzle : uint64_t {
  None = 0,
  Swizzle128BBase32B = 1,
  Swizzle128B = 2,
  Swizzle64B = 4,
  Swizzle32B = 6,
};

/// The 64-bit shared-memory matrix descriptor of tcgen05.mma and tcgen05.cp
/// on sm_100: bits 0-13 start address >> 4, 16-29 leading-dimension byte
/// offset >> 4, 32-45 stride-dimension byte offset >> 4, 46-48 the fixed
/// 0b001 (bit 46: the sm_100 descriptor version), 49-51 base offset 0, 52
/// relative LBO mode, 61-63 swizzle. Addresses and offsets are bytes, 16-byte
/// aligned, below 256 KiB.
/// Source: PTX#tcgen05-shared-memory-descriptor; CUTLASS
/// include/cute/arch/mma_sm100_desc.hpp, `UMMA::SmemDescriptor`
/// (`version_ = 1`) and `UMMA::LayoutType`.
uint64_t tcgen05SmemDescriptor(uint32_t startAddr, uint32_t leadingByteOffset,
                               uint32_t strideByteOffset, SmemSwizzle swizzle);

/// The byte offset of element (`row`, `k`) of an 8-bit K-major operand tile
/// with 128-byte rows in the canonical 128-byte swizzle (what TMA's
/// SWIZZLE_128B writes for a 128-byte inner box): 8-row atoms of 1024 bytes,
/// the 16-byte chunk index XORed with `row % 8`. The descriptor for it is
/// tcgen05SmemDescriptor(base, 16, 1024, SmemSwizzle::Swizzle128B), base
/// 1024-byte aligned.
/// Source: CUTLASS include/cute/atom/mma_traits_sm100.hpp and
/// mma_sm100_desc.hpp, `Layout_K_SW128_Atom` (K-major SW128: ((8,m),(T,2)) in
/// 16-byte units).
int64_t sw128KMajorByte(int64_t row, int64_t k);

//===----------------------------------------------------------------------===//
// sm_120a: mma.sync m16n8k32 with 8-bit A and B
//===----------------------------------------------------------------------===//

/// A place in a warp's fragment: a lane (0..31), a 32-bit register of the
/// operand list, and a byte of it (little-endian; 0 for f32 C/D).
struct FragmentSlot {
  int64_t lane;
  int64_t reg;
  int64_t byte;
  bool operator==(const FragmentSlot &other) const {
    return lane == other.lane && reg == other.reg && byte == other.byte;
  }
};

/// An element of a matrix: for A (16 x 32) (row, k); for B (32 x 8) (k, col);
/// for C/D (16 x 8) (row, col).
struct MatrixCoord {
  int64_t row;
  int64_t col;
  bool operator==(const MatrixCoord &other) const {
    return row == other.row && col == other.col;
  }
};

/// Shapes of mma.sync.aligned.m16n8k32 with 8-bit A and B.
constexpr int64_t kMmaSyncM = 16;
constexpr int64_t kMmaSyncN = 8;
constexpr int64_t kMmaSyncK = 32;

/// The element of A (row-major 16 x 32 e4m3/e5m2) in byte `byte` of register
/// `reg` (0..3) of lane `lane`. With g = lane / 4 and t = lane % 4, register
/// a0 holds A[g][4t..4t+3], a1 A[g+8][4t..], a2 A[g][16+4t..], a3
/// A[g+8][16+4t..], byte j being k = 4t + j (+16).
/// Source: PTX#warp-level-matrix-fragment-mma-16832 (8-bit A); CUTLASS
/// include/cute/atom/mma_traits_sm80.hpp, `SM80_16x8x32_*_TN` ALayout
/// ((4,8),(4,2,2)):((64,1),(16,8,256)), reused by mma_traits_sm120.hpp.
MatrixCoord mmaSyncAElement(int64_t lane, int64_t reg, int64_t byte);

/// The inverse of mmaSyncAElement: the slot that holds A[row][k].
FragmentSlot mmaSyncASlot(int64_t row, int64_t k);

/// The element (k, col) of B (32 x 8, ".col": stored N x K, K contiguous) in
/// byte `byte` of register `reg` (0..1) of lane `lane`: b0 holds
/// B[4t..4t+3][g], b1 B[16+4t..16+4t+3][g].
/// Source: PTX#warp-level-matrix-fragment-mma-16832 (8-bit B); CUTLASS
/// `SM80_16x8x32_*_TN` BLayout ((4,8),(4,2)):((32,1),(8,128)).
MatrixCoord mmaSyncBElement(int64_t lane, int64_t reg, int64_t byte);

/// The inverse of mmaSyncBElement: the slot that holds B[k][col].
FragmentSlot mmaSyncBSlot(int64_t k, int64_t col);

/// The element (row, col) of C/D (16 x 8 f32) in register `reg` (0..3) of
/// lane `lane`: c0, c1 = C[g][2t], C[g][2t+1]; c2, c3 = C[g+8][2t],
/// C[g+8][2t+1].
/// Source: PTX#warp-level-matrix-fragment-mma-16832 (C/D, .f32); CUTLASS
/// `SM80_16x8_Row` ((4,8),(2,2)):((32,1),(16,8)).
MatrixCoord mmaSyncCElement(int64_t lane, int64_t reg);

/// The inverse of mmaSyncCElement: the slot (byte 0) that holds C[row][col].
FragmentSlot mmaSyncCSlot(int64_t row, int64_t col);

/// The selector pair {byte-id, thread-id} of a scale operand of
/// mma.sync...block_scale.scale_vec::1X. ptxas accepts byte-id in 0..3 for
/// both, thread-id in 0..1 for A and 0..3 for B.
struct ScaleSelector {
  int64_t byteId = 0;
  int64_t threadId = 0;
};

/// A byte of a 32-bit register of one lane.
struct LaneByte {
  int64_t lane;
  int64_t byte;
  bool operator==(const LaneByte &other) const {
    return lane == other.lane && byte == other.byte;
  }
};

/// The lane and byte of scale-a-data that supply the scale of A row `row`
/// (0..15) under `selector`: lane `4 * (row % 8) + 2 * threadId + row / 8`,
/// byte `byteId`. A quad holds rows g and g+8, twice: thread-id picks the
/// pair.
/// Source: PTX#warp-level-block-scaling (shapes, selector wording; the lane
/// picture is a figure), CUTLASS include/cute/atom/mma_traits_sm120.hpp
/// SFALayout ((2,2,8),32):((8,0,1),16) (row = 8 * (lane % 2) + lane / 4,
/// replicated over bit 1 of the lane); Triton getSM120DotScaledScaleLayout.
LaneByte mmaSyncScaleASource(int64_t row, const ScaleSelector &selector);

/// The lane and byte of scale-b-data that supply the scale of B column `col`
/// (0..7) under `selector`: lane `4 * col + threadId`, byte `byteId`.
/// Source: as mmaSyncScaleASource; CUTLASS SFBLayout ((4,8),32):((0,1),8)
/// (col = lane / 4, replicated over lane % 4).
LaneByte mmaSyncScaleBSource(int64_t col, const ScaleSelector &selector);

/// The A row whose scale lane `lane` supplies under thread-id `threadId`, or
/// nullopt when that lane supplies none (the inverse of mmaSyncScaleASource).
std::optional<int64_t> mmaSyncScaleARowOfLane(int64_t lane, int64_t threadId);

/// The B column whose scale lane `lane` supplies under thread-id `threadId`,
/// or nullopt (the inverse of mmaSyncScaleBSource).
std::optional<int64_t> mmaSyncScaleBColOfLane(int64_t lane, int64_t threadId);

/// The A row whose scales lane `lane` holds in the kernels' packing: every
/// lane holds `8 * (lane % 2) + lane / 4`, so that both thread-ids find it
/// (CUTLASS's replication) and the kernels always pass thread-id 0. Byte j of
/// the register is K-block 4q + j of a group of 4, selected by byte-id j.
int64_t mmaSyncPackedScaleARow(int64_t lane);

/// The B column whose scales lane `lane` holds in the kernels' packing:
/// `lane / 4`, in all four lanes of the quad.
int64_t mmaSyncPackedScaleBCol(int64_t lane);

} // namespace mlir::moe::blockscale

#endif // MOE_CONVERSION_MOETONVGPU_BLOCKSCALELAYOUTS_H
