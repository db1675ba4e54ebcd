//===- BlockScaleLayoutsTest.cpp - Blackwell scale-factor layout tests ----===//
//
// Holds the closed forms of BlockScaleLayouts.h to formulations written out
// here independently, element for element:
//   - CuTe layouts, copied as shape:stride from CUTLASS and evaluated by the
//     small evaluator below (SfKMajorAtom, tile_to_shape, tmem_sf_frg, the
//     SM80/SM120 ALayout/BLayout/CLayout/SFALayout/SFBLayout);
//   - the PTX ISA's fragment formulas for mma.m16n8k32 (a_i, b_i, c_i);
//   - bit-field unions that mirror CUTLASS's descriptor structs;
//   - Triton's linear-layout bases and DeepGEMM's index transform;
//   - the constants of the ptxas-verified kernels of issue 12 (sm_100a
//     tcgen05 tile, sm_120a mma.sync), copied from their PTX.
// Each map is also checked to be a bijection on its domain.
//
//===----------------------------------------------------------------------===//

#include "moe/Conversion/MoeToNVGPU/BlockScaleLayouts.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

using namespace mlir::moe::blockscale;

namespace {

/// One mode of a CuTe layout, flattened: (size, stride) pairs, the first
/// fastest (CuTe's colexicographic order).
using CuteMode = std::vector<std::pair<int64_t, int64_t>>;

/// The offset that a CuTe mode gives a one-dimensional coordinate.
int64_t evalMode(int64_t coord, const CuteMode &mode) {
  int64_t offset = 0;
  for (auto [size, stride] : mode) {
    offset += (coord % size) * stride;
    coord /= size;
  }
  return offset;
}

/// Counts how often each value in [0, size) is hit; a bijection hits each once.
class HitCounter {
public:
  explicit HitCounter(int64_t size) : hits(size, 0) {}
  void hit(int64_t value) {
    ASSERT_GE(value, 0);
    ASSERT_LT(value, static_cast<int64_t>(hits.size()));
    ++hits[value];
  }
  void expectEachOnce() const {
    for (size_t i = 0; i < hits.size(); ++i)
      EXPECT_EQ(hits[i], 1) << "value " << i;
  }

private:
  std::vector<int> hits;
};

//===----------------------------------------------------------------------===//
// sm_100a: the scale-factor atom and the global layout
//===----------------------------------------------------------------------===//

// CUTLASS sm100_blockscaled_layout.hpp: SfKMajorAtom =
// ((32,4),(SFVec=32,4)):((16,4),(0,1)), over (row, K element).
TEST(SfAtom, MatchesCutlassSfKMajorAtom) {
  const CuteMode rowMode = {{32, 16}, {4, 4}};
  const CuteMode kMode = {{32, 0}, {4, 1}};
  for (int64_t row = 0; row < 128; ++row)
    for (int64_t k = 0; k < 128; ++k)
      ASSERT_EQ(sfAtomByte(row, k / 32),
                evalMode(row, rowMode) + evalMode(k, kMode))
          << "row " << row << " k " << k;
}

TEST(SfAtom, BijectionAndInverse) {
  HitCounter counter(kSfAtomBytes);
  for (int64_t row = 0; row < kSfAtomRows; ++row)
    for (int64_t kb = 0; kb < kSfAtomKBlocks; ++kb) {
      int64_t byte = sfAtomByte(row, kb);
      counter.hit(byte);
      EXPECT_EQ(sfAtomCoord(byte), (SfCoord{row, kb}));
    }
  counter.expectEachOnce();
}

// Spot values of the formula the sm_100a tile kernel's comment states:
// byte = (r%32)*16 + (r/32)*4 + kb.
TEST(SfAtom, SpotValues) {
  EXPECT_EQ(sfAtomByte(0, 0), 0);
  EXPECT_EQ(sfAtomByte(0, 3), 3);
  EXPECT_EQ(sfAtomByte(32, 0), 4);
  EXPECT_EQ(sfAtomByte(1, 0), 16);
  EXPECT_EQ(sfAtomByte(127, 3), 31 * 16 + 3 * 4 + 3);
  EXPECT_EQ(sfAtomCoord(511), (SfCoord{127, 3}));
  EXPECT_EQ(sfAtomCoord(20), (SfCoord{33, 0}));
}

// CuTe tile_to_shape(SfAtom, (M, K), Step<_2,_1>): the atom repeated along K
// first (stride 512), then along M (stride 512 * atoms along K).
TEST(SfGlobal, MatchesTileToShape) {
  for (auto [rows, kBlocks] : std::vector<std::pair<int64_t, int64_t>>{
           {128, 4}, {256, 32}, {384, 16}, {200, 6}, {1, 1}, {130, 9}}) {
    int64_t rowTiles = (rows + 127) / 128, kTiles = (kBlocks + 3) / 4;
    const CuteMode rowMode = {{32, 16}, {4, 4}, {rowTiles, 512 * kTiles}};
    const CuteMode kMode = {{32, 0}, {4, 1}, {kTiles, 512}};
    EXPECT_EQ(sfGlobalBytes(rows, kBlocks), rowTiles * kTiles * 512);
    for (int64_t row = 0; row < rowTiles * 128; ++row)
      for (int64_t kb = 0; kb < kTiles * 4; ++kb)
        ASSERT_EQ(sfGlobalByte(row, kb, rows, kBlocks),
                  evalMode(row, rowMode) + evalMode(32 * kb, kMode))
            << rows << "x" << kBlocks << " row " << row << " kb " << kb;
  }
}

TEST(SfGlobal, BijectionAndInverse) {
  for (auto [rows, kBlocks] : std::vector<std::pair<int64_t, int64_t>>{
           {256, 32}, {200, 6}, {1024, 16}}) {
    HitCounter counter(sfGlobalBytes(rows, kBlocks));
    for (int64_t row = 0; row < sfPaddedRows(rows); ++row)
      for (int64_t kb = 0; kb < sfPaddedKBlocks(kBlocks); ++kb) {
        int64_t byte = sfGlobalByte(row, kb, rows, kBlocks);
        counter.hit(byte);
        ASSERT_EQ(sfGlobalCoord(byte, rows, kBlocks), (SfCoord{row, kb}));
      }
    counter.expectEachOnce();
  }
}

// DeepGEMM impls/sm100_fp8_fp4_mega_moe.cuh builds the same layout from an
// MN-major int32 array of 4 packed K-blocks per row: word
// (idx & ~127) + (idx & 31) * 4 + ((idx >> 5) & 3) for row idx. With one group
// of 4 K-blocks the two layouts coincide byte for byte.
TEST(SfGlobal, MatchesDeepGemmTransform) {
  for (int64_t row = 0; row < 512; ++row)
    for (int64_t kb = 0; kb < 4; ++kb) {
      int64_t word = (row & ~int64_t{127}) + (row & 31) * 4 + ((row >> 5) & 3);
      ASSERT_EQ(sfGlobalByte(row, kb, 512, 4), word * 4 + kb);
    }
}

// The report's worked formula with 8 K-blocks: row 130, K-block 5 is in atom
// (1, 1) = index 1 * 2 + 1, at (130 % 32) * 16 + (130 / 32 % 4) * 4 + 1.
TEST(SfGlobal, SpotValues) {
  EXPECT_EQ(sfGlobalByte(130, 5, 256, 8), 3 * 512 + 2 * 16 + 0 * 4 + 1);
  EXPECT_EQ(sfGlobalByte(0, 4, 128, 8), 512);
  EXPECT_EQ(sfGlobalByte(128, 0, 256, 8), 1024);
  EXPECT_EQ(sfPaddedKBlocks(5), 8);
  EXPECT_EQ(sfPaddedRows(129), 256);
}

//===----------------------------------------------------------------------===//
// sm_100a: tensor memory
//===----------------------------------------------------------------------===//

/// A tensor-memory byte as one number: lane, then column, then byte.
int64_t tmemKey(const TmemByte &cell, int64_t columns) {
  return (cell.lane * columns + cell.column) * 4 + cell.byte;
}

// tcgen05.cp .32x128b .warpx4 (PTX ISA): 32 lanes x 128 bits, multicast to
// the 4 warps' lane quarters. One atom fills 128 lanes x 4 columns x 4 bytes
// with each byte of the atom in 4 places.
TEST(Tcgen05Cp, BijectionAndInverse) {
  HitCounter counter(128 * 4 * 4);
  for (int64_t byte = 0; byte < kSfAtomBytes; ++byte)
    for (int64_t quarter = 0; quarter < kTmemLaneQuarters; ++quarter) {
      TmemByte cell = tcgen05CpDestination(byte, quarter);
      counter.hit(tmemKey(cell, 4));
      EXPECT_EQ(tcgen05CpSource(cell), byte);
      EXPECT_EQ(cell.lane / 32, quarter);
    }
  counter.expectEachOnce();
}

TEST(Tcgen05Cp, SpotValues) {
  // Line 1 (bytes 16..31) goes to lane 1 (and 33, 65, 97); byte 21 is byte 1
  // of column 1.
  EXPECT_EQ(tcgen05CpDestination(21, 0), (TmemByte{1, 1, 1}));
  EXPECT_EQ(tcgen05CpDestination(21, 3), (TmemByte{97, 1, 1}));
  EXPECT_EQ(tcgen05CpDestination(511, 2), (TmemByte{95, 3, 3}));
}

// The MMA's contract composed with the copy: an atom written by sfAtomByte
// and copied by tcgen05.cp lands where the MMA reads row m, K-block kb. This
// is the check that the kernel generator's two index computations agree.
TEST(Tcgen05ScaleFactors, AtomCopyFeedsTheMma) {
  for (int64_t row = 0; row < 128; ++row)
    for (int64_t kb = 0; kb < 4; ++kb)
      for (int64_t quarter = 0; quarter < 4; ++quarter)
        ASSERT_EQ(tcgen05CpDestination(sfAtomByte(row, kb), quarter),
                  tcgen05ScaleFactorByte(row, kb, 128, quarter))
            << "row " << row << " kb " << kb << " quarter " << quarter;
}

// CUTLASS mma_traits_sm100_frag.hpp tmem_sf_frg: the SFA atom
// (((32, MN/32), 4), (VS, NSF)) : (((1, 512), 32), (0, 128)) with MN = 128,
// over tensor memory as (128 lanes : 1-byte columns): offset o is lane
// o % 128 and byte column o / 128.
TEST(Tcgen05ScaleFactors, MatchesCutlassTmemSfFrg) {
  const CuteMode rowMode = {{32, 1}, {4, 512}};
  for (int64_t row = 0; row < 128; ++row)
    for (int64_t kb = 0; kb < 4; ++kb)
      for (int64_t quarter = 0; quarter < 4; ++quarter) {
        int64_t offset = evalMode(row, rowMode) + 32 * quarter + 128 * kb;
        int64_t byteColumn = offset / 128;
        ASSERT_EQ(tcgen05ScaleFactorByte(row, kb, 128, quarter),
                  (TmemByte{offset % 128, byteColumn / 4, byteColumn % 4}));
      }
}

// Across K: the next 4 K-blocks take the next rowsPadded / 32 columns; the
// scale-factor id is the byte.
TEST(Tcgen05ScaleFactors, KGroupsAndSfId) {
  EXPECT_EQ(tcgen05ScaleFactorByte(5, 4, 128, 0), (TmemByte{5, 4, 0}));
  EXPECT_EQ(tcgen05ScaleFactorByte(200, 7, 256, 1), (TmemByte{40, 8 + 6, 3}));
  HitCounter counter(32 * 16 * 4);
  for (int64_t col = 0; col < 256; ++col)
    for (int64_t kb = 0; kb < 8; ++kb) {
      TmemByte cell = tcgen05ScaleFactorByte(col, kb, 256, 0);
      counter.hit(tmemKey(cell, 16));
      EXPECT_EQ(cell.byte, tcgen05SfId(kb));
    }
  counter.expectEachOnce();
  EXPECT_EQ(tcgen05SfId(0), 0);
  EXPECT_EQ(tcgen05SfId(6), 2);
}

//===----------------------------------------------------------------------===//
// sm_100a: descriptors
//===----------------------------------------------------------------------===//

// The idesc immediates of the ptxas-verified tile kernel (M = N = 128, e4m3,
// K-major, sf id = kb for A and B).
TEST(Tcgen05InstrDescriptor, VerifiedKernelConstants) {
  const uint32_t expected[] = {0x08A00000, 0x28A00010, 0x48A00020, 0x68A00030};
  for (int64_t kb = 0; kb < 4; ++kb) {
    Tcgen05BlockScaledShape shape;
    shape.aSfId = shape.bSfId = tcgen05SfId(kb);
    EXPECT_EQ(tcgen05InstrDescriptor(shape), expected[kb]) << "kb " << kb;
  }
}

/// CUTLASS mma_sm100_desc.hpp UMMA::InstrDescriptorBlockScaled, field for
/// field (GCC and Clang allocate bit-fields from the low bit on x86-64).
union CutlassInstrDescriptorBlockScaled {
  uint32_t desc;
  struct {
    uint16_t sparseId2 : 2, sparseFlag : 1, : 1, bSfId : 2, : 1, aFormat : 3,
        bFormat : 3, aNegate : 1, bNegate : 1, aMajor : 1;
    uint16_t bMajor : 1, nDim : 6, scaleFormat : 1, mDim : 5, aSfId : 2,
        kSize : 1;
  } f;
};

TEST(Tcgen05InstrDescriptor, MatchesCutlassBitFields) {
  for (int64_t m : {128, 256})
    for (int64_t n = 8; n <= 256; n += 8)
      for (int fmt = 0; fmt < 4; ++fmt)
        for (int major = 0; major < 4; ++major)
          for (int64_t sf = 0; sf < 16; ++sf) {
            Tcgen05BlockScaledShape shape;
            shape.m = m;
            shape.n = n;
            shape.aFormat =
                fmt & 1 ? MxElementFormat::E5M2 : MxElementFormat::E4M3;
            shape.bFormat =
                fmt & 2 ? MxElementFormat::E5M2 : MxElementFormat::E4M3;
            shape.transposeA = major & 1;
            shape.transposeB = major & 2;
            shape.aSfId = sf % 4;
            shape.bSfId = sf / 4;
            CutlassInstrDescriptorBlockScaled expected;
            expected.desc = 0;
            expected.f.bSfId = sf / 4;
            expected.f.aFormat = fmt & 1;
            expected.f.bFormat = (fmt >> 1) & 1;
            expected.f.aMajor = major & 1;
            expected.f.bMajor = (major >> 1) & 1;
            expected.f.nDim = n >> 3;
            expected.f.scaleFormat = 1; // UE8M0
            expected.f.mDim = m >> 4;
            expected.f.aSfId = sf % 4;
            ASSERT_EQ(tcgen05InstrDescriptor(shape), expected.desc)
                << "m " << m << " n " << n << " fmt " << fmt << " major "
                << major << " sf " << sf;
          }
}

// Single fields at the PTX ISA's bit positions (Table 46: B SF id 4-5, atype
// 7-9, btype 10-12, transpose 15/16, N>>3 17-22, scale type 23, M>>7 27-28,
// A SF id 29-30).
TEST(Tcgen05InstrDescriptor, PtxBitPositions) {
  const uint32_t base = 0x08A00000; // M = N = 128, e4m3, ue8m0
  Tcgen05BlockScaledShape shape;
  shape.aFormat = MxElementFormat::E5M2;
  EXPECT_EQ(tcgen05InstrDescriptor(shape), base | (1u << 7));
  shape = {};
  shape.bFormat = MxElementFormat::E5M2;
  EXPECT_EQ(tcgen05InstrDescriptor(shape), base | (1u << 10));
  shape = {};
  shape.transposeA = true;
  EXPECT_EQ(tcgen05InstrDescriptor(shape), base | (1u << 15));
  shape = {};
  shape.transposeB = true;
  EXPECT_EQ(tcgen05InstrDescriptor(shape), base | (1u << 16));
  shape = {};
  shape.n = 256;
  EXPECT_EQ(tcgen05InstrDescriptor(shape), 0x08800000u | (32u << 17));
  shape = {};
  shape.m = 256;
  EXPECT_EQ(tcgen05InstrDescriptor(shape), 0x10A00000u);
  shape = {};
  shape.aSfId = 3;
  EXPECT_EQ(tcgen05InstrDescriptor(shape), base | (3u << 29));
  shape = {};
  shape.bSfId = 2;
  EXPECT_EQ(tcgen05InstrDescriptor(shape), base | (2u << 4));
}

// The descriptors of the ptxas-verified tile kernel: A and B SW128 K-major
// (LBO 16 B, SBO 1024 B) at shared offsets 0 and 16384; the scale atoms
// SWIZZLE_NONE (LBO 0, SBO 128 B) at 32768 and 33280.
TEST(Tcgen05SmemDescriptor, VerifiedKernelConstants) {
  EXPECT_EQ(tcgen05SmemDescriptor(0, 16, 1024, SmemSwizzle::Swizzle128B),
            0x4000404000010000ull);
  EXPECT_EQ(tcgen05SmemDescriptor(16384, 16, 1024, SmemSwizzle::Swizzle128B),
            0x4000404000010000ull | (16384 >> 4));
  EXPECT_EQ(tcgen05SmemDescriptor(32768, 0, 128, SmemSwizzle::None),
            0x0000400800000000ull | (32768 >> 4));
  EXPECT_EQ(tcgen05SmemDescriptor(33280, 0, 128, SmemSwizzle::None),
            0x0000400800000000ull | (33280 >> 4));
  // The K advance of the kernel: +32 bytes of start address is desc + 2.
  for (uint32_t step = 1; step < 4; ++step)
    EXPECT_EQ(
        tcgen05SmemDescriptor(32 * step, 16, 1024, SmemSwizzle::Swizzle128B),
        0x4000404000010000ull + 2 * step);
}

/// CUTLASS mma_sm100_desc.hpp UMMA::SmemDescriptor, field for field.
union CutlassSmemDescriptor {
  uint64_t desc;
  struct {
    uint16_t startAddress : 14, : 2;
    uint16_t leadingByteOffset : 14, : 2;
    uint16_t strideByteOffset : 14, version : 2;
    uint8_t : 1, baseOffset : 3, lboMode : 1, : 3;
    uint8_t : 5, layoutType : 3;
  } f;
};

TEST(Tcgen05SmemDescriptor, MatchesCutlassBitFields) {
  const SmemSwizzle swizzles[] = {
      SmemSwizzle::None, SmemSwizzle::Swizzle128BBase32B,
      SmemSwizzle::Swizzle128B, SmemSwizzle::Swizzle64B,
      SmemSwizzle::Swizzle32B};
  const uint8_t codes[] = {0, 1, 2, 4, 6};
  for (int s = 0; s < 5; ++s)
    for (uint32_t addr : {0u, 16u, 1024u, 0x3fff0u})
      for (uint32_t lbo : {0u, 16u, 4096u, 0x3fff0u})
        for (uint32_t sbo : {0u, 128u, 1024u, 0x3fff0u}) {
          CutlassSmemDescriptor expected;
          expected.desc = 0;
          expected.f.startAddress = addr >> 4;
          expected.f.leadingByteOffset = lbo >> 4;
          expected.f.strideByteOffset = sbo >> 4;
          expected.f.version = 1;
          expected.f.layoutType = codes[s];
          ASSERT_EQ(tcgen05SmemDescriptor(addr, lbo, sbo, swizzles[s]),
                    expected.desc);
        }
}

// CuTe Swizzle<3,4,3> on the row-major offset o = 128 row + k: bits 4-6 XOR
// bits 7-9. Also the copy loop of the verified kernel: 16-byte chunk c of row
// r goes to r * 128 + ((c ^ r % 8) << 4).
TEST(Sw128KMajor, MatchesSwizzleAndKernel) {
  HitCounter counter(128 * 128);
  for (int64_t row = 0; row < 128; ++row)
    for (int64_t k = 0; k < 128; ++k) {
      int64_t offset = row * 128 + k;
      int64_t swizzled = offset ^ ((offset & 0x380) >> 3);
      int64_t kernel = row * 128 + (((k / 16) ^ (row % 8)) << 4) + k % 16;
      int64_t byte = sw128KMajorByte(row, k);
      ASSERT_EQ(byte, swizzled);
      ASSERT_EQ(byte, kernel);
      counter.hit(byte);
    }
  counter.expectEachOnce();
}

//===----------------------------------------------------------------------===//
// sm_120a: mma.sync m16n8k32 fragments
//===----------------------------------------------------------------------===//

// PTX ISA, "Matrix Fragments for mma.m16n8k32" (8-bit A): element a_i,
// i = 4 * reg + byte; row = groupID for i < 4 or 8 <= i < 12, else groupID + 8;
// col = threadID_in_group * 4 + (i & 3), + 16 for i >= 8.
TEST(MmaSyncFragments, AMatchesPtxFormulaAndCute) {
  // CUTLASS SM80_16x8x32 TN ALayout ((4,8),(4,2,2)):((64,1),(16,8,256)) over
  // M16 x K32, column-major (m + 16 k).
  const CuteMode thr = {{4, 64}, {8, 1}};
  const CuteMode val = {{4, 16}, {2, 8}, {2, 256}};
  HitCounter counter(16 * 32);
  for (int64_t lane = 0; lane < 32; ++lane)
    for (int64_t reg = 0; reg < 4; ++reg)
      for (int64_t byte = 0; byte < 4; ++byte) {
        int64_t i = 4 * reg + byte, group = lane >> 2, thread = lane % 4;
        int64_t row = (i < 4 || (i >= 8 && i < 12)) ? group : group + 8;
        int64_t col = thread * 4 + (i & 3) + (i >= 8 ? 16 : 0);
        MatrixCoord element = mmaSyncAElement(lane, reg, byte);
        EXPECT_EQ(element, (MatrixCoord{row, col}));
        int64_t cute = evalMode(lane, thr) + evalMode(i, val);
        EXPECT_EQ(element, (MatrixCoord{cute % 16, cute / 16}));
        EXPECT_EQ(mmaSyncASlot(row, col), (FragmentSlot{lane, reg, byte}));
        counter.hit(row * 32 + col);
      }
  counter.expectEachOnce();
}

// PTX ISA (8-bit B): b_i, i = 4 * reg + byte; row (k) = threadID_in_group * 4
// + (i & 3), + 16 for i >= 4; col = groupID.
TEST(MmaSyncFragments, BMatchesPtxFormulaAndCute) {
  // CUTLASS BLayout ((4,8),(4,2)):((32,1),(8,128)) over N8 x K32 (n + 8 k).
  const CuteMode thr = {{4, 32}, {8, 1}};
  const CuteMode val = {{4, 8}, {2, 128}};
  HitCounter counter(32 * 8);
  for (int64_t lane = 0; lane < 32; ++lane)
    for (int64_t reg = 0; reg < 2; ++reg)
      for (int64_t byte = 0; byte < 4; ++byte) {
        int64_t i = 4 * reg + byte;
        int64_t k = (lane % 4) * 4 + (i & 3) + (i >= 4 ? 16 : 0);
        int64_t col = lane >> 2;
        MatrixCoord element = mmaSyncBElement(lane, reg, byte);
        EXPECT_EQ(element, (MatrixCoord{k, col}));
        int64_t cute = evalMode(lane, thr) + evalMode(i, val);
        EXPECT_EQ(element, (MatrixCoord{cute / 8, cute % 8}));
        EXPECT_EQ(mmaSyncBSlot(k, col), (FragmentSlot{lane, reg, byte}));
        counter.hit(k * 8 + col);
      }
  counter.expectEachOnce();
}

// PTX ISA (C/D, f32): c_i; row = groupID for i < 2, else groupID + 8;
// col = threadID_in_group * 2 + (i & 1).
TEST(MmaSyncFragments, CMatchesPtxFormulaAndCute) {
  // CUTLASS SM80_16x8_Row ((4,8),(2,2)):((32,1),(16,8)) over M16 x N8.
  const CuteMode thr = {{4, 32}, {8, 1}};
  const CuteMode val = {{2, 16}, {2, 8}};
  HitCounter counter(16 * 8);
  for (int64_t lane = 0; lane < 32; ++lane)
    for (int64_t reg = 0; reg < 4; ++reg) {
      int64_t row = (lane >> 2) + (reg < 2 ? 0 : 8);
      int64_t col = (lane % 4) * 2 + (reg & 1);
      MatrixCoord element = mmaSyncCElement(lane, reg);
      EXPECT_EQ(element, (MatrixCoord{row, col}));
      int64_t cute = evalMode(lane, thr) + evalMode(reg, val);
      EXPECT_EQ(element, (MatrixCoord{cute % 16, cute / 16}));
      EXPECT_EQ(mmaSyncCSlot(row, col), (FragmentSlot{lane, reg, 0}));
      counter.hit(row * 8 + col);
    }
  counter.expectEachOnce();
}

TEST(MmaSyncFragments, SpotValues) {
  // Lane 5: groupID 1, threadID_in_group 1.
  EXPECT_EQ(mmaSyncAElement(5, 0, 2), (MatrixCoord{1, 6}));
  EXPECT_EQ(mmaSyncAElement(5, 3, 0), (MatrixCoord{9, 20}));
  EXPECT_EQ(mmaSyncBElement(5, 1, 3), (MatrixCoord{23, 1}));
  EXPECT_EQ(mmaSyncCElement(31, 3), (MatrixCoord{15, 7}));
}

//===----------------------------------------------------------------------===//
// sm_120a: scale operands of block_scale.scale_vec::1X
//===----------------------------------------------------------------------===//

/// The row of a lane's A scale in Triton's getSM120DotScaledScaleLayout: lane
/// bases {8,0},{0,0},{1,0},{2,0},{4,0} (lane bit b adds base b).
int64_t tritonScaleARow(int64_t lane) {
  const int64_t bases[] = {8, 0, 1, 2, 4};
  int64_t row = 0;
  for (int bit = 0; bit < 5; ++bit)
    if (lane & (1 << bit))
      row ^= bases[bit];
  return row;
}

/// The column of a lane's B scale in the same function: bases
/// {0,0},{0,0},{1,0},{2,0},{4,0}.
int64_t tritonScaleBCol(int64_t lane) {
  const int64_t bases[] = {0, 0, 1, 2, 4};
  int64_t col = 0;
  for (int bit = 0; bit < 5; ++bit)
    if (lane & (1 << bit))
      col ^= bases[bit];
  return col;
}

// CUTLASS mma_traits_sm120.hpp SFALayout ((2,2,8),32):((8,0,1),16) over
// M16 x K32 (m + 16 k), value 0: the row a lane's scale belongs to; its 0
// stride replicates it over lane bit 1, which thread-id selects.
TEST(MmaSyncScales, AMatchesCutlassAndTriton) {
  const CuteMode thr = {{2, 8}, {2, 0}, {8, 1}};
  for (int64_t threadId = 0; threadId < 2; ++threadId)
    for (int64_t byteId = 0; byteId < 4; ++byteId) {
      HitCounter counter(16);
      for (int64_t row = 0; row < 16; ++row) {
        LaneByte source = mmaSyncScaleASource(row, {byteId, threadId});
        EXPECT_EQ(source.byte, byteId);
        EXPECT_EQ(evalMode(source.lane, thr) % 16, row);
        EXPECT_EQ(tritonScaleARow(source.lane), row);
        EXPECT_EQ((source.lane >> 1) & 1, threadId);
        EXPECT_EQ(mmaSyncScaleARowOfLane(source.lane, threadId), row);
        counter.hit(row);
      }
      counter.expectEachOnce();
      int supplying = 0;
      for (int64_t lane = 0; lane < 32; ++lane)
        if (std::optional<int64_t> row =
                mmaSyncScaleARowOfLane(lane, threadId)) {
          ++supplying;
          EXPECT_EQ(mmaSyncScaleASource(*row, {byteId, threadId}).lane, lane);
        }
      EXPECT_EQ(supplying, 16);
    }
  // Spot values of the formula 4 (r % 8) + 2 tid + r / 8.
  EXPECT_EQ(mmaSyncScaleASource(0, {0, 0}), (LaneByte{0, 0}));
  EXPECT_EQ(mmaSyncScaleASource(8, {0, 0}), (LaneByte{1, 0}));
  EXPECT_EQ(mmaSyncScaleASource(9, {2, 1}), (LaneByte{7, 2}));
}

// CUTLASS SFBLayout ((4,8),32):((0,1),8) over N8 x K32: column lane / 4,
// replicated over lane % 4, which thread-id selects.
TEST(MmaSyncScales, BMatchesCutlassAndTriton) {
  const CuteMode thr = {{4, 0}, {8, 1}};
  for (int64_t threadId = 0; threadId < 4; ++threadId)
    for (int64_t byteId = 0; byteId < 4; ++byteId) {
      HitCounter counter(8);
      for (int64_t col = 0; col < 8; ++col) {
        LaneByte source = mmaSyncScaleBSource(col, {byteId, threadId});
        EXPECT_EQ(source.byte, byteId);
        EXPECT_EQ(evalMode(source.lane, thr) % 8, col);
        EXPECT_EQ(tritonScaleBCol(source.lane), col);
        EXPECT_EQ(source.lane % 4, threadId);
        EXPECT_EQ(mmaSyncScaleBColOfLane(source.lane, threadId), col);
        counter.hit(col);
      }
      counter.expectEachOnce();
      int supplying = 0;
      for (int64_t lane = 0; lane < 32; ++lane)
        if (mmaSyncScaleBColOfLane(lane, threadId))
          ++supplying;
      EXPECT_EQ(supplying, 8);
    }
  EXPECT_EQ(mmaSyncScaleBSource(3, {1, 2}), (LaneByte{14, 1}));
}

// The kernels' packing (every lane holds the scale CUTLASS assigns it) serves
// every selector: whichever lane the hardware reads holds the right row or
// column. With the ptxas-verified kernel's selectors {0, 0} and the scale in
// byte 0, lane l supplies row (l >> 2) + 8 (l & 1) and column l >> 2.
TEST(MmaSyncScales, PackingServesEverySelector) {
  for (int64_t threadId = 0; threadId < 2; ++threadId)
    for (int64_t row = 0; row < 16; ++row)
      EXPECT_EQ(
          mmaSyncPackedScaleARow(mmaSyncScaleASource(row, {0, threadId}).lane),
          row);
  for (int64_t threadId = 0; threadId < 4; ++threadId)
    for (int64_t col = 0; col < 8; ++col)
      EXPECT_EQ(
          mmaSyncPackedScaleBCol(mmaSyncScaleBSource(col, {0, threadId}).lane),
          col);
  for (int64_t lane = 0; lane < 32; ++lane) {
    EXPECT_EQ(mmaSyncPackedScaleARow(lane), (lane >> 2) + 8 * (lane & 1));
    EXPECT_EQ(mmaSyncPackedScaleBCol(lane), lane >> 2);
  }
}

} // namespace
