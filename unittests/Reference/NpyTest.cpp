//===- NpyTest.cpp - tests of the .npy reader and writer ------------------===//
//
// Round trips for every supported dtype, the exact bytes of a header (padding
// to 64 bytes, as numpy writes it), files as numpy and ml_dtypes write them
// (hand-built byte strings), and every error path of the reader and writer.
//
//===----------------------------------------------------------------------===//

#include "moe/Reference/Npy.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>

using namespace moe::ref;

namespace {

/// A per-test file path in the temporary directory, removed at teardown.
class NpyFile : public ::testing::Test {
protected:
  std::string path;

  void SetUp() override {
    const ::testing::TestInfo *info =
        ::testing::UnitTest::GetInstance()->current_test_info();
    path = ::testing::TempDir() + "npytest_" + info->name() + ".npy";
  }
  void TearDown() override { std::remove(path.c_str()); }

  std::string readBytes() const {
    std::ifstream file(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(file)),
                       std::istreambuf_iterator<char>());
  }
  void writeBytes(const std::string &bytes) const {
    std::ofstream file(path, std::ios::binary | std::ios::trunc);
    file.write(bytes.data(), bytes.size());
  }

  /// A version 1.0 file with the given dict, padded like numpy, then `data`.
  void writeV1(const std::string &dict, const std::string &data) const {
    std::string header = dict;
    while ((10 + header.size() + 1) % 64 != 0)
      header.push_back(' ');
    header.push_back('\n');
    std::string bytes("\x93NUMPY\x01\x00", 8);
    bytes.push_back(static_cast<char>(header.size() & 0xFF));
    bytes.push_back(static_cast<char>(header.size() >> 8));
    writeBytes(bytes + header + data);
  }

  /// Reads `path`, expects failure, and returns the message.
  std::string readError() const {
    NpyArray array;
    std::string error;
    EXPECT_FALSE(readNpy(path, array, error));
    return error;
  }
};

std::string bytesOf(const void *p, size_t n) {
  return std::string(static_cast<const char *>(p), n);
}

TEST_F(NpyFile, NpyRoundTripF64) {
  std::vector<double> values = {1.0,  -2.5,   1e-300, 3.141592653589793,
                                -0.0, 6.02e23};
  std::string error;
  ASSERT_TRUE(writeNpy(path, values, {2, 3}, NpyType::F64, error)) << error;
  NpyArray array;
  ASSERT_TRUE(readNpy(path, array, error)) << error;
  EXPECT_EQ(array.type, NpyType::F64);
  EXPECT_EQ(array.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(array.numElements(), 6);
  std::vector<double> back = array.toDouble();
  ASSERT_EQ(back.size(), values.size());
  for (size_t i = 0; i < values.size(); ++i)
    EXPECT_EQ(std::memcmp(&back[i], &values[i], 8), 0) << i;
}

TEST_F(NpyFile, NpyRoundTripF32) {
  // 0x1p-149 is the smallest fp32 subnormal; NaN must survive as NaN.
  std::vector<double> values = {0.5, -3.25, 0x1p-149, 16777216.0,
                                std::numeric_limits<double>::quiet_NaN()};
  std::string error;
  ASSERT_TRUE(writeNpy(path, values, {5}, NpyType::F32, error)) << error;
  std::string bytes = readBytes();
  EXPECT_NE(bytes.find("'descr': '<f4'"), std::string::npos);
  ASSERT_EQ(bytes.size(), 128u + 5 * 4);
  float third;
  std::memcpy(&third, bytes.data() + 128 + 2 * 4, 4);
  EXPECT_EQ(third, 0x1p-149f);
  NpyArray array;
  ASSERT_TRUE(readNpy(path, array, error)) << error;
  EXPECT_EQ(array.type, NpyType::F32);
  std::vector<double> back = array.toDouble();
  ASSERT_EQ(back.size(), 5u);
  for (size_t i = 0; i < 4; ++i)
    EXPECT_EQ(back[i], values[i]) << i;
  EXPECT_TRUE(std::isnan(back[4]));
}

TEST_F(NpyFile, NpyRoundTripI32) {
  std::vector<int32_t> values = {-1, 0, 7, 2147483647, -2147483647 - 1, 42};
  std::string error;
  ASSERT_TRUE(writeNpy(path, values, {3, 2}, error)) << error;
  std::string bytes = readBytes();
  EXPECT_NE(bytes.find("'descr': '<i4'"), std::string::npos);
  NpyArray array;
  ASSERT_TRUE(readNpy(path, array, error)) << error;
  EXPECT_EQ(array.type, NpyType::I32);
  EXPECT_EQ(array.shape, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(array.toInt32(), values);
  EXPECT_EQ(array.toDouble()[3], 2147483647.0);
  EXPECT_EQ(array.toDouble()[4], -2147483648.0);
}

TEST_F(NpyFile, NpyRoundTripU8) {
  NpyArray out;
  out.type = NpyType::U8;
  out.shape = {4};
  out.data = {0x00, 0x7F, 0x80, 0xFF};
  std::string error;
  ASSERT_TRUE(writeNpy(path, out, error)) << error;
  std::string bytes = readBytes();
  EXPECT_NE(bytes.find("'descr': '|u1'"), std::string::npos);
  EXPECT_NE(bytes.find("'shape': (4,)"), std::string::npos);
  NpyArray array;
  ASSERT_TRUE(readNpy(path, array, error)) << error;
  EXPECT_EQ(array.type, NpyType::U8);
  EXPECT_EQ(array.data, out.data);
  EXPECT_EQ(array.toDouble(), (std::vector<double>{0, 127, 128, 255}));
  EXPECT_TRUE(array.toInt32().empty());
}

TEST_F(NpyFile, NpyRoundTripBF16) {
  // 1.5 = 0x3FC0, -2 = 0xC000, 2^-133 = 0x0001 (smallest bf16 subnormal).
  std::vector<double> values = {1.5, -2.0, 0x1p-133};
  std::string error;
  ASSERT_TRUE(writeNpy(path, values, {1, 3}, NpyType::BF16, error)) << error;
  std::string bytes = readBytes();
  EXPECT_NE(bytes.find("'descr': '<V2'"), std::string::npos);
  ASSERT_EQ(bytes.size(), 128u + 6);
  EXPECT_EQ(bytes.substr(128), std::string("\xC0\x3F\x00\xC0\x01\x00", 6));
  NpyArray array;
  ASSERT_TRUE(readNpy(path, array, error)) << error;
  EXPECT_EQ(array.type, NpyType::BF16);
  EXPECT_EQ(array.toDouble(), values);
}

TEST_F(NpyFile, NpyReadsMlDtypesBFloat16) {
  // What np.save writes for an ml_dtypes.bfloat16 array, and the descr some
  // writers spell out.
  writeV1("{'descr': '<V2', 'fortran_order': False, 'shape': (2,), }",
          std::string("\x80\x3F\x40\xC0", 4));
  NpyArray array;
  std::string error;
  ASSERT_TRUE(readNpy(path, array, error)) << error;
  EXPECT_EQ(array.type, NpyType::BF16);
  EXPECT_EQ(array.toDouble(), (std::vector<double>{1.0, -3.0}));

  writeV1("{'descr': 'bfloat16', 'fortran_order': False, 'shape': (1,), }",
          std::string("\x49\x40", 2));
  ASSERT_TRUE(readNpy(path, array, error)) << error;
  EXPECT_EQ(array.toDouble(), (std::vector<double>{3.140625}));
}

TEST_F(NpyFile, NpyHeaderExactBytes) {
  std::string error;
  ASSERT_TRUE(writeNpy(path, std::vector<double>{1.0, 2.0}, {2, 1},
                       NpyType::F64, error))
      << error;
  std::string bytes = readBytes();
  std::string dict = "{'descr': '<f8', 'fortran_order': False, "
                     "'shape': (2, 1), }";
  // 10 bytes of prelude + 59 of dict + 1 newline exceed 64, so the header
  // is padded to 128 - 10 = 118 = 0x76 bytes, as numpy pads it.
  std::string expected("\x93NUMPY\x01\x00\x76\x00", 10);
  expected += dict + std::string(128 - 10 - dict.size() - 1, ' ') + "\n";
  double one = 1.0, two = 2.0;
  expected += bytesOf(&one, 8) + bytesOf(&two, 8);
  EXPECT_EQ(bytes, expected);
}

TEST_F(NpyFile, NpyHeaderPaddingLongShape) {
  // A 25-D shape pushes the dict past two 64-byte lines: the header grows
  // to the next multiple of 64 and the data still starts aligned.
  std::vector<int64_t> shape(25, 1);
  shape[0] = 3;
  shape[24] = 1000;
  std::vector<double> values(3000);
  for (size_t i = 0; i < values.size(); ++i)
    values[i] = static_cast<double>(i) * 0.25 - 7.0;
  std::string error;
  ASSERT_TRUE(writeNpy(path, values, shape, NpyType::F64, error)) << error;
  std::string bytes = readBytes();
  uint16_t headerLen =
      static_cast<uint8_t>(bytes[8]) | (static_cast<uint8_t>(bytes[9]) << 8);
  EXPECT_EQ((10 + headerLen) % 64, 0);
  EXPECT_EQ(10 + headerLen, 192);
  EXPECT_EQ(bytes[10 + headerLen - 1], '\n');
  EXPECT_EQ(bytes.size(), 192u + 8 * values.size());
  NpyArray array;
  ASSERT_TRUE(readNpy(path, array, error)) << error;
  EXPECT_EQ(array.shape, shape);
  EXPECT_EQ(array.toDouble(), values);
}

TEST_F(NpyFile, NpyScalarAndEmptyShapes) {
  std::string error;
  ASSERT_TRUE(
      writeNpy(path, std::vector<double>{-4.5}, {}, NpyType::F64, error))
      << error;
  EXPECT_NE(readBytes().find("'shape': ()"), std::string::npos);
  NpyArray array;
  ASSERT_TRUE(readNpy(path, array, error)) << error;
  EXPECT_TRUE(array.shape.empty());
  EXPECT_EQ(array.numElements(), 1);
  EXPECT_EQ(array.toDouble(), (std::vector<double>{-4.5}));

  ASSERT_TRUE(writeNpy(path, std::vector<int32_t>{}, {0, 3}, error)) << error;
  ASSERT_TRUE(readNpy(path, array, error)) << error;
  EXPECT_EQ(array.shape, (std::vector<int64_t>{0, 3}));
  EXPECT_EQ(array.numElements(), 0);
}

TEST_F(NpyFile, NpyReadsVersion2AndOtherSpellings) {
  // Version 2.0 (4-byte header length), keys in another order, double
  // quotes, no trailing comma, extra spaces.
  std::string dict =
      "{\"shape\": ( 3 ,), \"fortran_order\": False, \"descr\": \"<i4\"}";
  std::string header = dict;
  while ((12 + header.size() + 1) % 64 != 0)
    header.push_back(' ');
  header.push_back('\n');
  std::string bytes("\x93NUMPY\x02\x00", 8);
  uint32_t len = header.size();
  bytes += bytesOf(&len, 4) + header;
  int32_t values[3] = {5, -6, 7};
  bytes += bytesOf(values, 12);
  writeBytes(bytes);
  NpyArray array;
  std::string error;
  ASSERT_TRUE(readNpy(path, array, error)) << error;
  EXPECT_EQ(array.type, NpyType::I32);
  EXPECT_EQ(array.toInt32(), (std::vector<int32_t>{5, -6, 7}));
}

TEST_F(NpyFile, NpyErrorMissingFile) {
  std::string error = readError();
  EXPECT_NE(error.find(path), std::string::npos) << error;
  EXPECT_NE(error.find("cannot open"), std::string::npos) << error;
}

TEST_F(NpyFile, NpyErrorBadMagic) {
  writeBytes(std::string("\x93NUMPZ\x01\x00\x00\x00", 10));
  std::string error = readError();
  EXPECT_NE(error.find(path), std::string::npos) << error;
  EXPECT_NE(error.find("bad magic"), std::string::npos) << error;
  writeBytes("PK\x03\x04");
  EXPECT_NE(readError().find("bad magic"), std::string::npos);
}

TEST_F(NpyFile, NpyErrorFortranOrder) {
  writeV1("{'descr': '<f8', 'fortran_order': True, 'shape': (1, 1), }",
          std::string(8, '\0'));
  std::string error = readError();
  EXPECT_NE(error.find(path), std::string::npos) << error;
  EXPECT_NE(error.find("fortran_order"), std::string::npos) << error;
}

TEST_F(NpyFile, NpyErrorBigEndian) {
  writeV1("{'descr': '>f8', 'fortran_order': False, 'shape': (1,), }",
          std::string(8, '\0'));
  std::string error = readError();
  EXPECT_NE(error.find(path), std::string::npos) << error;
  EXPECT_NE(error.find("big-endian"), std::string::npos) << error;
}

TEST_F(NpyFile, NpyErrorUnsupportedDtype) {
  writeV1("{'descr': '<i8', 'fortran_order': False, 'shape': (1,), }",
          std::string(8, '\0'));
  std::string error = readError();
  EXPECT_NE(error.find("unsupported dtype '<i8'"), std::string::npos) << error;
  writeV1("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }",
          std::string(4, '\0'));
  EXPECT_NE(readError().find("structured"), std::string::npos);
}

TEST_F(NpyFile, NpyErrorTruncatedData) {
  // Shape (2, 3) of f4 needs 24 bytes; 20 are present.
  writeV1("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }",
          std::string(20, '\x01'));
  std::string error = readError();
  EXPECT_NE(error.find(path), std::string::npos) << error;
  EXPECT_NE(error.find("truncated data"), std::string::npos) << error;
  EXPECT_NE(error.find("needs 24 bytes, file has 20"), std::string::npos)
      << error;
}

TEST_F(NpyFile, NpyErrorTruncatedHeader) {
  writeBytes(std::string("\x93NUMPY\x01\x00\x76\x00{'descr'", 17));
  std::string error = readError();
  EXPECT_NE(error.find("truncated header"), std::string::npos) << error;
}

TEST_F(NpyFile, NpyErrorTrailingBytes) {
  writeV1("{'descr': '|u1', 'fortran_order': False, 'shape': (2,), }",
          std::string(3, '\x05'));
  std::string error = readError();
  EXPECT_NE(error.find("1 unexpected bytes"), std::string::npos) << error;
}

TEST_F(NpyFile, NpyErrorMalformedHeader) {
  writeV1("{'descr': '<f8', 'shape': (1,), }", std::string(8, '\0'));
  EXPECT_NE(readError().find("lacks"), std::string::npos);
  writeV1("{'descr': '<f8', 'fortran_order': False, 'shape': (-1,), }",
          std::string(8, '\0'));
  EXPECT_NE(readError().find("'shape'"), std::string::npos);
  writeV1("{'descr': '<f8', 'fortran_order': 0, 'shape': (1,), }",
          std::string(8, '\0'));
  EXPECT_NE(readError().find("'fortran_order'"), std::string::npos);
  writeBytes(std::string("\x93NUMPY\x04\x00\x00\x00", 10));
  EXPECT_NE(readError().find("unsupported .npy version 4.0"),
            std::string::npos);
}

TEST_F(NpyFile, NpyErrorHugeShape) {
  // The element count overflows; the reader must refuse before allocating.
  writeV1("{'descr': '<f8', 'fortran_order': False, "
          "'shape': (4294967296, 4294967296), }",
          "");
  EXPECT_NE(readError().find("too large"), std::string::npos);
  writeV1("{'descr': '<f8', 'fortran_order': False, 'shape': (1000000000,), }",
          "");
  EXPECT_NE(readError().find("truncated data"), std::string::npos);
}

TEST_F(NpyFile, NpyWriteRejectsInexactValues) {
  std::string error;
  // 0.1 is not an fp32 value; 1 + 2^-8 is fp32 but not bf16.
  EXPECT_FALSE(
      writeNpy(path, std::vector<double>{1.0, 0.1}, {2}, NpyType::F32, error));
  EXPECT_NE(error.find("value 0.10000000000000001 at index 1"),
            std::string::npos)
      << error;
  EXPECT_FALSE(writeNpy(path, std::vector<double>{1.0 + 0x1p-8}, {1},
                        NpyType::BF16, error));
  EXPECT_NE(error.find("index 0"), std::string::npos) << error;
  EXPECT_FALSE(
      writeNpy(path, std::vector<double>{256.0}, {1}, NpyType::U8, error));
  EXPECT_FALSE(
      writeNpy(path, std::vector<double>{2.5}, {1}, NpyType::I32, error));
  EXPECT_FALSE(
      writeNpy(path, std::vector<double>{1.0, 2.0}, {3}, NpyType::F64, error));
  EXPECT_NE(error.find("do not match shape (3,)"), std::string::npos) << error;
  NpyArray bad;
  bad.type = NpyType::I32;
  bad.shape = {2};
  bad.data.resize(7);
  EXPECT_FALSE(writeNpy(path, bad, error));
  EXPECT_NE(error.find("7 bytes"), std::string::npos) << error;
}

TEST_F(NpyFile, NpyWriteErrorNamesFile) {
  std::string bad = ::testing::TempDir() + "no_such_dir_npytest/x.npy";
  std::string error;
  EXPECT_FALSE(writeNpy(bad, std::vector<int32_t>{1}, {1}, error));
  EXPECT_NE(error.find(bad), std::string::npos) << error;
}

} // namespace
