//===- BlockScaleLayouts.cpp - MX scale-factor layouts of Blackwell MMAs --===//
//
// The index arithmetic of the sm_100a and sm_120a block-scaled MMAs, in
// closed form. The header cites the PTX ISA and CUTLASS source of each
// function; unittests/Conversion/BlockScaleLayoutsTest.cpp checks every map
// against CuTe layouts and the PTX ISA wording, written out independently.
//
//===----------------------------------------------------------------------===//
#include "moe/Conversion/MoeToNVGPU/BlockScaleLayouts.h"

#include <cassert>

using namespace mlir::moe;
using namespace mlir::moe::blockscale;

namespace {
[[maybe_unused]] bool inRange(int64_t value, int64_t end) {
  return value >= 0 && value < end;
}

int64_t roundUp(int64_t value, int64_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

/// Bytes of one 16-byte line of an atom: the unit tcgen05.cp .32x128b moves
/// into one lane.
constexpr int64_t kSfLineBytes = 16;
} // namespace

//===----------------------------------------------------------------------===//
// sm_100a: scale factors in shared and global memory
//===----------------------------------------------------------------------===//

int64_t blockscale::sfAtomByte(int64_t row, int64_t kBlock) {
  assert(inRange(row, kSfAtomRows) && inRange(kBlock, kSfAtomKBlocks) &&
         "outside the 128 x 4 atom");
  // Rows r, r+32, r+64, r+96 share the line r: a line is one lane's 4 cells
  // after tcgen05.cp, and the MMA reads row m from lane m % 32, column m / 32.
  return (row % 32) * kSfLineBytes + (row / 32) * kSfAtomKBlocks + kBlock;
}

SfCoord blockscale::sfAtomCoord(int64_t byte) {
  assert(inRange(byte, kSfAtomBytes) && "outside the 512-byte atom");
  int64_t line = byte / kSfLineBytes;
  int64_t inLine = byte % kSfLineBytes;
  return {line + 32 * (inLine / kSfAtomKBlocks), inLine % kSfAtomKBlocks};
}

int64_t blockscale::sfPaddedKBlocks(int64_t kBlocks) {
  assert(kBlocks > 0 && "an operand has at least one K-block");
  return roundUp(kBlocks, kSfAtomKBlocks);
}

int64_t blockscale::sfPaddedRows(int64_t rows) {
  assert(rows > 0 && "an operand has at least one row");
  return roundUp(rows, kSfAtomRows);
}

int64_t blockscale::sfGlobalBytes(int64_t rows, int64_t kBlocks) {
  return sfPaddedRows(rows) * sfPaddedKBlocks(kBlocks);
}

int64_t blockscale::sfGlobalByte(int64_t row, int64_t kBlock, int64_t rows,
                                 int64_t kBlocks) {
  assert(inRange(row, sfPaddedRows(rows)) &&
         inRange(kBlock, sfPaddedKBlocks(kBlocks)) &&
         "outside the padded scale tensor");
  int64_t atomsAlongK = sfPaddedKBlocks(kBlocks) / kSfAtomKBlocks;
  int64_t atom = (row / kSfAtomRows) * atomsAlongK + kBlock / kSfAtomKBlocks;
  return atom * kSfAtomBytes +
         sfAtomByte(row % kSfAtomRows, kBlock % kSfAtomKBlocks);
}

SfCoord blockscale::sfGlobalCoord(int64_t byte, int64_t rows, int64_t kBlocks) {
  assert(inRange(byte, sfGlobalBytes(rows, kBlocks)) &&
         "outside the padded scale tensor");
  int64_t atomsAlongK = sfPaddedKBlocks(kBlocks) / kSfAtomKBlocks;
  int64_t atom = byte / kSfAtomBytes;
  SfCoord inAtom = sfAtomCoord(byte % kSfAtomBytes);
  return {(atom / atomsAlongK) * kSfAtomRows + inAtom.row,
          (atom % atomsAlongK) * kSfAtomKBlocks + inAtom.kBlock};
}

//===----------------------------------------------------------------------===//
// sm_100a: scale factors in tensor memory
//===----------------------------------------------------------------------===//

TmemByte blockscale::tcgen05CpDestination(int64_t atomByte, int64_t quarter) {
  assert(inRange(atomByte, kSfAtomBytes) &&
         inRange(quarter, kTmemLaneQuarters) && "outside the copy");
  int64_t line = atomByte / kSfLineBytes;
  int64_t inLine = atomByte % kSfLineBytes;
  return {line + 32 * quarter, inLine / 4, inLine % 4};
}

int64_t blockscale::tcgen05CpSource(const TmemByte &cell) {
  assert(inRange(cell.lane, 32 * kTmemLaneQuarters) &&
         inRange(cell.column, kSfLineBytes / 4) && inRange(cell.byte, 4) &&
         "outside the 4 columns one copy writes");
  return (cell.lane % 32) * kSfLineBytes + cell.column * 4 + cell.byte;
}

TmemByte blockscale::tcgen05ScaleFactorByte(int64_t row, int64_t kBlock,
                                            int64_t rowsPadded,
                                            int64_t quarter) {
  assert(rowsPadded > 0 && rowsPadded % kSfAtomRows == 0 &&
         inRange(row, rowsPadded) && kBlock >= 0 &&
         inRange(quarter, kTmemLaneQuarters) && "outside the scale region");
  // One 32-bit cell holds 4 K-blocks of one row; the next 4 K-blocks take the
  // next rowsPadded / 32 columns, as CUTLASS stacks them. A kernel that
  // copies each group of 4 into the same columns passes kBlock % 4.
  int64_t columnsPerGroup = rowsPadded / 32;
  return {row % 32 + 32 * quarter,
          (kBlock / kSfAtomKBlocks) * columnsPerGroup + row / 32,
          kBlock % kSfAtomKBlocks};
}

int64_t blockscale::tcgen05SfId(int64_t kBlock) {
  assert(kBlock >= 0 && "a K-block index");
  return kBlock % kSfAtomKBlocks;
}

//===----------------------------------------------------------------------===//
// sm_100a: descriptors
//===----------------------------------------------------------------------===//

uint32_t
blockscale::tcgen05InstrDescriptor(const Tcgen05BlockScaledShape &shape) {
  assert((shape.m == 128 || shape.m == 256) &&
         "block-scaled tcgen05.mma has M = 128 or 256");
  assert(shape.n >= 8 && shape.n <= 256 && shape.n % 8 == 0 &&
         "N is a multiple of 8 in 8..256");
  assert(inRange(shape.aSfId, 4) && inRange(shape.bSfId, 4) &&
         "a scale-factor id is a byte of a 32-bit cell");
  uint32_t desc = 0;
  desc |= static_cast<uint32_t>(shape.bSfId) << 4;
  desc |= static_cast<uint32_t>(shape.aFormat) << 7;
  desc |= static_cast<uint32_t>(shape.bFormat) << 10;
  desc |= static_cast<uint32_t>(shape.transposeA) << 15;
  desc |= static_cast<uint32_t>(shape.transposeB) << 16;
  desc |= static_cast<uint32_t>(shape.n >> 3) << 17;
  // Scale type UE8M0; UE4M3 (0) belongs to kind::mxf4nvf4 only.
  desc |= 1u << 23;
  desc |= static_cast<uint32_t>(shape.m >> 7) << 27;
  desc |= static_cast<uint32_t>(shape.aSfId) << 29;
  return desc;
}

uint64_t blockscale::tcgen05SmemDescriptor(uint32_t startAddr,
                                           uint32_t leadingByteOffset,
                                           uint32_t strideByteOffset,
                                           SmemSwizzle swizzle) {
  // Each field holds 14 bits of a 16-byte unit: 256 KiB of shared memory.
  auto field = [](uint32_t bytes) -> uint64_t {
    assert(bytes % 16 == 0 && bytes < (1u << 18) &&
           "a 16-byte aligned shared-memory offset below 256 KiB");
    return bytes >> 4;
  };
  uint64_t desc = field(startAddr);
  desc |= field(leadingByteOffset) << 16;
  desc |= field(strideByteOffset) << 32;
  // The fixed 0b001 of bits 46-48: the sm_100 descriptor (sm_90's wgmma
  // descriptor has 0 there).
  desc |= uint64_t{1} << 46;
  desc |= static_cast<uint64_t>(swizzle) << 61;
  return desc;
}

int64_t blockscale::sw128KMajorByte(int64_t row, int64_t k) {
  assert(row >= 0 && inRange(k, 128) && "a row of 128 bytes");
  // TMA's 128-byte swizzle XORs address bits 4-6 with bits 7-9, i.e. the
  // chunk with the row inside its 1024-byte atom.
  return (row / 8) * 1024 + (row % 8) * 128 + (((k / 16) ^ (row % 8)) * 16) +
         k % 16;
}

//===----------------------------------------------------------------------===//
// sm_120a: mma.sync m16n8k32 with 8-bit A and B
//===----------------------------------------------------------------------===//

MatrixCoord blockscale::mmaSyncAElement(int64_t lane, int64_t reg,
                                        int64_t byte) {
  assert(inRange(lane, 32) && inRange(reg, 4) && inRange(byte, 4) &&
         "A is 4 registers of 4 bytes per lane");
  int64_t group = lane / 4, thread = lane % 4;
  // Odd registers take the lower 8 rows, registers 2 and 3 the upper 16 K.
  return {group + 8 * (reg % 2), 16 * (reg / 2) + 4 * thread + byte};
}

FragmentSlot blockscale::mmaSyncASlot(int64_t row, int64_t k) {
  assert(inRange(row, kMmaSyncM) && inRange(k, kMmaSyncK) && "outside A");
  return {4 * (row % 8) + (k % 16) / 4, 2 * (k / 16) + row / 8, k % 4};
}

MatrixCoord blockscale::mmaSyncBElement(int64_t lane, int64_t reg,
                                        int64_t byte) {
  assert(inRange(lane, 32) && inRange(reg, 2) && inRange(byte, 4) &&
         "B is 2 registers of 4 bytes per lane");
  return {16 * reg + 4 * (lane % 4) + byte, lane / 4};
}

FragmentSlot blockscale::mmaSyncBSlot(int64_t k, int64_t col) {
  assert(inRange(k, kMmaSyncK) && inRange(col, kMmaSyncN) && "outside B");
  return {4 * col + (k % 16) / 4, k / 16, k % 4};
}

MatrixCoord blockscale::mmaSyncCElement(int64_t lane, int64_t reg) {
  assert(inRange(lane, 32) && inRange(reg, 4) &&
         "C/D is 4 f32 registers per lane");
  return {lane / 4 + 8 * (reg / 2), 2 * (lane % 4) + reg % 2};
}

FragmentSlot blockscale::mmaSyncCSlot(int64_t row, int64_t col) {
  assert(inRange(row, kMmaSyncM) && inRange(col, kMmaSyncN) && "outside C");
  return {4 * (row % 8) + col / 2, 2 * (row / 8) + col % 2, 0};
}

LaneByte blockscale::mmaSyncScaleASource(int64_t row,
                                         const ScaleSelector &selector) {
  assert(inRange(row, kMmaSyncM) && inRange(selector.byteId, 4) &&
         inRange(selector.threadId, 2) &&
         "A selectors: byte 0..3, thread 0..1");
  // Row r's quad is r % 8 (the quad that holds rows g and g+8 of A); within
  // it, lanes 0/1 serve thread-id 0 and lanes 2/3 thread-id 1.
  return {4 * (row % 8) + 2 * selector.threadId + row / 8, selector.byteId};
}

LaneByte blockscale::mmaSyncScaleBSource(int64_t col,
                                         const ScaleSelector &selector) {
  assert(inRange(col, kMmaSyncN) && inRange(selector.byteId, 4) &&
         inRange(selector.threadId, 4) &&
         "B selectors: byte 0..3, thread 0..3");
  return {4 * col + selector.threadId, selector.byteId};
}

std::optional<int64_t> blockscale::mmaSyncScaleARowOfLane(int64_t lane,
                                                          int64_t threadId) {
  assert(inRange(lane, 32) && inRange(threadId, 2) && "a lane, thread 0..1");
  if ((lane / 2) % 2 != threadId)
    return std::nullopt;
  return lane / 4 + 8 * (lane % 2);
}

std::optional<int64_t> blockscale::mmaSyncScaleBColOfLane(int64_t lane,
                                                          int64_t threadId) {
  assert(inRange(lane, 32) && inRange(threadId, 4) && "a lane, thread 0..3");
  if (lane % 4 != threadId)
    return std::nullopt;
  return lane / 4;
}

int64_t blockscale::mmaSyncPackedScaleARow(int64_t lane) {
  assert(inRange(lane, 32) && "a lane");
  return lane / 4 + 8 * (lane % 2);
}

int64_t blockscale::mmaSyncPackedScaleBCol(int64_t lane) {
  assert(inRange(lane, 32) && "a lane");
  return lane / 4;
}
