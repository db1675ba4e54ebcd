//===- Npy.h - NumPy .npy file reading and writing ---------------*- C++ -*-===//
//
// The reference's exchange format with outside tools (moe-ref, the Python
// cross-check, later moe-run): .npy version 1.0/2.0 (3.0 read too),
// little-endian, C order. Supported descrs: '<f8', '<f4', '<i4', '|u1' and
// bfloat16. numpy has no bfloat16 descr: np.save of an ml_dtypes.bfloat16
// array writes '<V2' (2-byte opaque records), so BF16 is read from '<V2',
// '|V2' or 'bfloat16' and written as '<V2'; load such a file in Python with
// np.load(path).view(ml_dtypes.bfloat16). Tools write fp64 results as '<f8'.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_REFERENCE_NPY_H
#define MOE_REFERENCE_NPY_H

#include <cstdint>
#include <string>
#include <vector>

namespace moe::ref {

/// Element types the project exchanges (descrs: see the file comment).
enum class NpyType { F64, F32, BF16, I32, U8 };

/// A loaded array: raw little-endian bytes plus dtype and shape.
struct NpyArray {
  NpyType type = NpyType::F64;
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;

  int64_t numElements() const;
  /// Values converted to fp64 (exact for every supported type).
  std::vector<double> toDouble() const;
  /// Values as int32 (I32 arrays; empty for every other type).
  std::vector<int32_t> toInt32() const;
};

/// A file's dtype, shape and the offset of its data, which
/// readNpyHeader has checked to be exactly what the shape needs.
struct NpyHeader {
  NpyType type = NpyType::F64;
  std::vector<int64_t> shape;
  uint64_t dataOffset = 0;
};

/// Bytes per element of `type`.
size_t npyElementSize(NpyType type);

/// Reads and checks the header of `path` without reading its data, for
/// callers that stream the data into their own storage. Fails with the
/// messages of readNpy.
bool readNpyHeader(const std::string &path, NpyHeader &out,
                   std::string &error);

/// Reads `path`. On failure returns false and sets `error` to a message that
/// names the file and what is wrong (missing, bad magic, unsupported dtype,
/// Fortran order, truncated data).
bool readNpy(const std::string &path, NpyArray &out, std::string &error);

/// Writes an array; `data` holds numElements * element size bytes. The
/// header is padded with spaces so the data starts on a 64-byte boundary.
bool writeNpy(const std::string &path, const NpyArray &array,
              std::string &error);

/// Convenience writers converting from fp64 / int32. Every value must be
/// exactly representable in `type` (NaN is, for the float types); otherwise
/// nothing is written and `error` names the first offending index.
bool writeNpy(const std::string &path, const std::vector<double> &values,
              const std::vector<int64_t> &shape, NpyType type,
              std::string &error);
bool writeNpy(const std::string &path, const std::vector<int32_t> &values,
              const std::vector<int64_t> &shape, std::string &error);

} // namespace moe::ref

#endif // MOE_REFERENCE_NPY_H
