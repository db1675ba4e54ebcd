//===- Npy.cpp - NumPy .npy file reading and writing ----------------------===//
//
// A small, strict implementation of the .npy format (versions 1.0, 2.0 and
// 3.0 on input, 1.0 or 2.0 on output): the magic string, a little-endian
// header length, a Python dict literal naming dtype, order and shape, then the
// raw C-order data. Only the dtypes of NpyType are accepted; anything the
// reference could misread (big-endian data, Fortran order, short or over-long
// files) is an error that names the file, never a silent conversion.
//
//===----------------------------------------------------------------------===//

#include "moe/Reference/Npy.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>
#include <sys/stat.h>

using namespace moe::ref;

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;
/// numpy aligns the data to 64 bytes; the header is padded to reach it.
constexpr size_t kAlign = 64;

/// Bytes per element of `type`.
size_t elementSize(NpyType type) {
  switch (type) {
  case NpyType::F64:
    return 8;
  case NpyType::F32:
  case NpyType::I32:
    return 4;
  case NpyType::BF16:
    return 2;
  case NpyType::U8:
    return 1;
  }
  return 0;
}

/// The descr written for each type. BF16 uses '<V2', the descr numpy itself
/// writes for an ml_dtypes bfloat16 array, so that files round-trip through
/// np.save / np.load(...).view(ml_dtypes.bfloat16) unchanged.
const char *descrOf(NpyType type) {
  switch (type) {
  case NpyType::F64:
    return "<f8";
  case NpyType::F32:
    return "<f4";
  case NpyType::I32:
    return "<i4";
  case NpyType::BF16:
    return "<V2";
  case NpyType::U8:
    return "|u1";
  }
  return "";
}

/// Maps a descr string to a type; sets `why` when it is not supported.
bool typeOfDescr(const std::string &descr, NpyType &type, std::string &why) {
  if (descr == "<f8") {
    type = NpyType::F64;
  } else if (descr == "<f4") {
    type = NpyType::F32;
  } else if (descr == "<i4") {
    type = NpyType::I32;
  } else if (descr == "|u1" || descr == "<u1") {
    type = NpyType::U8;
  } else if (descr == "<V2" || descr == "|V2" || descr == "bfloat16") {
    type = NpyType::BF16;
  } else if (!descr.empty() && descr[0] == '>') {
    why = "big-endian dtype '" + descr + "' is not supported";
    return false;
  } else {
    why = "unsupported dtype '" + descr +
          "' (expected '<f8', '<f4', '<i4', '|u1' or bfloat16 '<V2')";
    return false;
  }
  return true;
}

/// A cursor over the header's Python dict literal. It accepts what numpy's
/// writers produce (any key order, either quote style, trailing commas,
/// optional 'L' suffixes from Python 2 files) and nothing more.
class HeaderParser {
public:
  explicit HeaderParser(const std::string &text) : text(text) {}

  bool parse(std::string &descr, bool &fortran, std::vector<int64_t> &shape,
             std::string &why) {
    bool haveDescr = false, haveFortran = false, haveShape = false;
    if (!consume('{'))
      return fail(why, "header is not a dict literal");
    while (true) {
      skipSpace();
      if (consume('}'))
        break;
      std::string key;
      if (!parseString(key))
        return fail(why, "expected a quoted key in the header");
      if (!consume(':'))
        return fail(why, "expected ':' after key '" + key + "'");
      if (key == "descr") {
        skipSpace();
        if (!parseString(descr))
          return fail(why, "'descr' is not a plain dtype string (structured "
                           "dtypes are not supported)");
        haveDescr = true;
      } else if (key == "fortran_order") {
        if (!parseBool(fortran))
          return fail(why, "'fortran_order' is not True or False");
        haveFortran = true;
      } else if (key == "shape") {
        if (!parseShape(shape))
          return fail(why, "'shape' is not a tuple of non-negative integers");
        haveShape = true;
      } else {
        return fail(why, "unexpected header key '" + key + "'");
      }
      skipSpace();
      if (consume('}'))
        break;
      if (!consume(','))
        return fail(why, "expected ',' or '}' in the header");
    }
    skipSpace();
    if (pos != text.size())
      return fail(why, "trailing characters after the header dict");
    if (!haveDescr || !haveFortran || !haveShape)
      return fail(why, "header lacks one of 'descr', 'fortran_order', 'shape'");
    return true;
  }

private:
  const std::string &text;
  size_t pos = 0;

  static bool fail(std::string &why, const std::string &message) {
    why = message;
    return false;
  }

  void skipSpace() {
    while (pos < text.size() && (text[pos] == ' ' || text[pos] == '\t' ||
                                 text[pos] == '\n' || text[pos] == '\r'))
      ++pos;
  }

  bool consume(char c) {
    skipSpace();
    if (pos < text.size() && text[pos] == c) {
      ++pos;
      return true;
    }
    return false;
  }

  bool parseString(std::string &out) {
    skipSpace();
    if (pos >= text.size() || (text[pos] != '\'' && text[pos] != '"'))
      return false;
    char quote = text[pos++];
    size_t end = text.find(quote, pos);
    if (end == std::string::npos)
      return false;
    out = text.substr(pos, end - pos);
    pos = end + 1;
    return true;
  }

  bool parseBool(bool &out) {
    skipSpace();
    if (text.compare(pos, 4, "True") == 0) {
      out = true;
      pos += 4;
      return true;
    }
    if (text.compare(pos, 5, "False") == 0) {
      out = false;
      pos += 5;
      return true;
    }
    return false;
  }

  bool parseShape(std::vector<int64_t> &shape) {
    shape.clear();
    if (!consume('('))
      return false;
    while (true) {
      skipSpace();
      if (consume(')'))
        return true;
      if (pos >= text.size() || text[pos] < '0' || text[pos] > '9')
        return false;
      int64_t value = 0;
      while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') {
        if (value > (std::numeric_limits<int64_t>::max() - 9) / 10)
          return false;
        value = value * 10 + (text[pos++] - '0');
      }
      if (pos < text.size() && text[pos] == 'L')
        ++pos;
      shape.push_back(value);
      skipSpace();
      if (consume(')'))
        return true;
      if (!consume(','))
        return false;
    }
  }
};

/// A shape as a Python tuple literal: "()", "(3,)", "(2, 3)".
std::string shapeString(const std::vector<int64_t> &shape) {
  std::string out = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    out += std::to_string(shape[i]);
    if (shape.size() == 1 || i + 1 < shape.size())
      out += shape.size() == 1 ? "," : ", ";
  }
  return out + ")";
}

/// Product of the dimensions, or -1 when it overflows int64.
int64_t elementCount(const std::vector<int64_t> &shape) {
  int64_t count = 1;
  for (int64_t dim : shape) {
    if (dim < 0)
      return -1;
    if (dim != 0 && count > std::numeric_limits<int64_t>::max() / dim)
      return -1;
    count *= dim;
  }
  return count;
}

/// A little-endian unsigned integer of `bytes` (2 or 4) bytes.
uint32_t readLE(const uint8_t *p, int bytes) {
  uint32_t value = 0;
  for (int i = bytes - 1; i >= 0; --i)
    value = (value << 8) | p[i];
  return value;
}

/// Unaligned little-endian loads and stores (the host is little-endian).
template <typename T> T load(const uint8_t *p) {
  T value;
  std::memcpy(&value, p, sizeof(T));
  return value;
}

template <typename T> void store(uint8_t *p, T value) {
  std::memcpy(p, &value, sizeof(T));
}

} // namespace

int64_t NpyArray::numElements() const { return elementCount(shape); }

std::vector<double> NpyArray::toDouble() const {
  size_t size = elementSize(type);
  size_t count = data.size() / size;
  std::vector<double> out(count);
  for (size_t i = 0; i < count; ++i) {
    const uint8_t *p = data.data() + i * size;
    switch (type) {
    case NpyType::F64:
      out[i] = load<double>(p);
      break;
    case NpyType::F32:
      out[i] = load<float>(p);
      break;
    case NpyType::I32:
      out[i] = load<int32_t>(p);
      break;
    case NpyType::U8:
      out[i] = *p;
      break;
    case NpyType::BF16: {
      uint32_t bits = static_cast<uint32_t>(load<uint16_t>(p)) << 16;
      out[i] = load<float>(reinterpret_cast<const uint8_t *>(&bits));
      break;
    }
    }
  }
  return out;
}

std::vector<int32_t> NpyArray::toInt32() const {
  if (type != NpyType::I32)
    return {};
  std::vector<int32_t> out(data.size() / 4);
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = load<int32_t>(data.data() + 4 * i);
  return out;
}

size_t moe::ref::npyElementSize(NpyType type) { return elementSize(type); }

bool moe::ref::readNpyHeader(const std::string &path, NpyHeader &out,
                             std::string &error) {
  auto fail = [&](const std::string &why) {
    error = path + ": " + why;
    return false;
  };
  // A directory opens as a stream on Linux and fails only at the read.
  struct stat status;
  if (::stat(path.c_str(), &status) == 0 && S_ISDIR(status.st_mode))
    return fail("is a directory, not a .npy file");
  std::ifstream file(path, std::ios::binary);
  if (!file)
    return fail("cannot open file");
  // The size first, so that a truncated or over-long file is caught before
  // anyone reads gigabytes of its data.
  file.seekg(0, std::ios::end);
  std::streamoff end = file.tellg();
  file.seekg(0);
  if (!file || end < 0)
    return fail("read error");
  uint64_t fileSize = static_cast<uint64_t>(end);
  uint8_t prelude[kMagicLen + 2 + 4] = {};
  file.read(reinterpret_cast<char *>(prelude),
            std::min<uint64_t>(fileSize, sizeof(prelude)));
  if (file.bad())
    return fail("read error");
  if (fileSize < kMagicLen + 2 || std::memcmp(prelude, kMagic, kMagicLen) != 0)
    return fail("not a .npy file (bad magic)");
  int major = prelude[6];
  int lenBytes = major == 1 ? 2 : 4;
  if (major < 1 || major > 3)
    return fail("unsupported .npy version " + std::to_string(major) + "." +
                std::to_string(prelude[7]));
  size_t preludeLen = kMagicLen + 2 + lenBytes;
  if (fileSize < preludeLen)
    return fail("truncated header");
  size_t headerLen = readLE(prelude + kMagicLen + 2, lenBytes);
  if (fileSize - preludeLen < headerLen)
    return fail("truncated header");
  std::string header(headerLen, '\0');
  file.clear();
  file.seekg(static_cast<std::streamoff>(preludeLen));
  file.read(header.data(), static_cast<std::streamsize>(headerLen));
  if (!file)
    return fail("read error");

  std::string descr, why;
  bool fortran = false;
  std::vector<int64_t> shape;
  HeaderParser parser(header);
  if (!parser.parse(descr, fortran, shape, why))
    return fail("malformed header: " + why);
  NpyType type;
  if (!typeOfDescr(descr, type, why))
    return fail(why);
  if (fortran)
    return fail("fortran_order True is not supported (save a C-order array)");
  int64_t count = elementCount(shape);
  size_t size = elementSize(type);
  if (count < 0 || static_cast<uint64_t>(count) >
                       std::numeric_limits<uint64_t>::max() / size)
    return fail("shape " + shapeString(shape) + " is too large");
  uint64_t want = static_cast<uint64_t>(count) * size;
  uint64_t have = fileSize - preludeLen - headerLen;
  if (have < want)
    return fail("truncated data: shape " + shapeString(shape) + " of " + descr +
                " needs " + std::to_string(want) + " bytes, file has " +
                std::to_string(have));
  if (have > want)
    return fail(std::to_string(have - want) +
                " unexpected bytes after the data of shape " +
                shapeString(shape));

  out.type = type;
  out.shape = std::move(shape);
  out.dataOffset = preludeLen + headerLen;
  return true;
}

bool moe::ref::readNpy(const std::string &path, NpyArray &out,
                       std::string &error) {
  NpyHeader header;
  if (!readNpyHeader(path, header, error))
    return false;
  std::ifstream file(path, std::ios::binary);
  file.seekg(static_cast<std::streamoff>(header.dataOffset));
  std::vector<uint8_t> data(static_cast<size_t>(elementCount(header.shape)) *
                            elementSize(header.type));
  file.read(reinterpret_cast<char *>(data.data()),
            static_cast<std::streamsize>(data.size()));
  if (!file) {
    error = path + ": read error";
    return false;
  }
  out.type = header.type;
  out.shape = std::move(header.shape);
  out.data = std::move(data);
  return true;
}

bool moe::ref::writeNpy(const std::string &path, const NpyArray &array,
                        std::string &error) {
  int64_t count = elementCount(array.shape);
  if (count < 0 || array.data.size() !=
                       static_cast<uint64_t>(count) * elementSize(array.type)) {
    error = path + ": data size " + std::to_string(array.data.size()) +
            " bytes does not match shape " + shapeString(array.shape);
    return false;
  }
  std::string dict =
      std::string("{'descr': '") + descrOf(array.type) +
      "', 'fortran_order': False, 'shape': " + shapeString(array.shape) + ", }";
  // Pad with spaces so that magic, version, length, dict and the closing
  // newline end on a 64-byte boundary, as numpy does.
  size_t lenBytes = 2;
  size_t total = kMagicLen + 2 + lenBytes + dict.size() + 1;
  if ((total + kAlign - 1) / kAlign * kAlign - kMagicLen - 2 - lenBytes >
      0xFFFF) {
    lenBytes = 4;
    total = kMagicLen + 2 + lenBytes + dict.size() + 1;
  }
  size_t padded = (total + kAlign - 1) / kAlign * kAlign;
  dict.append(padded - total, ' ');
  dict.push_back('\n');
  size_t headerLen = dict.size();

  std::string prelude(kMagic, kMagicLen);
  prelude.push_back(lenBytes == 2 ? 1 : 2);
  prelude.push_back(0);
  for (size_t i = 0; i < lenBytes; ++i)
    prelude.push_back(static_cast<char>((headerLen >> (8 * i)) & 0xFF));

  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  if (!file) {
    error = path + ": cannot open file for writing";
    return false;
  }
  file.write(prelude.data(), prelude.size());
  file.write(dict.data(), dict.size());
  file.write(reinterpret_cast<const char *>(array.data.data()),
             array.data.size());
  file.close();
  if (!file) {
    error = path + ": write error";
    return false;
  }
  return true;
}

bool moe::ref::writeNpy(const std::string &path,
                        const std::vector<double> &values,
                        const std::vector<int64_t> &shape, NpyType type,
                        std::string &error) {
  NpyArray array;
  array.type = type;
  array.shape = shape;
  int64_t count = elementCount(shape);
  if (count < 0 || static_cast<uint64_t>(count) != values.size()) {
    error = path + ": " + std::to_string(values.size()) +
            " values do not match shape " + shapeString(shape);
    return false;
  }
  size_t size = elementSize(type);
  array.data.resize(values.size() * size);
  // Every conversion must be exact: a value the type cannot hold is a bug in
  // the caller, and rounding it here would hide that.
  for (size_t i = 0; i < values.size(); ++i) {
    double v = values[i];
    uint8_t *p = array.data.data() + i * size;
    bool exact = true;
    switch (type) {
    case NpyType::F64:
      store<double>(p, v);
      break;
    case NpyType::F32: {
      float f = static_cast<float>(v);
      exact = std::isnan(v) || static_cast<double>(f) == v;
      store<float>(p, f);
      break;
    }
    case NpyType::BF16: {
      float f = static_cast<float>(v);
      uint32_t bits = load<uint32_t>(reinterpret_cast<const uint8_t *>(&f));
      exact = std::isnan(v) ||
              (static_cast<double>(f) == v && (bits & 0xFFFF) == 0);
      if (std::isnan(v))
        bits |= 0x00400000; // keep a NaN a NaN once the low half is dropped
      store<uint16_t>(p, static_cast<uint16_t>(bits >> 16));
      break;
    }
    case NpyType::I32:
      exact = v >= -2147483648.0 && v <= 2147483647.0 && std::trunc(v) == v;
      store<int32_t>(p, exact ? static_cast<int32_t>(v) : 0);
      break;
    case NpyType::U8:
      exact = v >= 0 && v <= 255 && std::trunc(v) == v;
      *p = exact ? static_cast<uint8_t>(v) : 0;
      break;
    }
    if (!exact) {
      std::ostringstream os;
      os.precision(17);
      os << path << ": value " << v << " at index " << i
         << " is not representable as " << descrOf(type);
      error = os.str();
      return false;
    }
  }
  return writeNpy(path, array, error);
}

bool moe::ref::writeNpy(const std::string &path,
                        const std::vector<int32_t> &values,
                        const std::vector<int64_t> &shape, std::string &error) {
  NpyArray array;
  array.type = NpyType::I32;
  array.shape = shape;
  int64_t count = elementCount(shape);
  if (count < 0 || static_cast<uint64_t>(count) != values.size()) {
    error = path + ": " + std::to_string(values.size()) +
            " values do not match shape " + shapeString(shape);
    return false;
  }
  array.data.resize(values.size() * 4);
  for (size_t i = 0; i < values.size(); ++i)
    store<int32_t>(array.data.data() + 4 * i, values[i]);
  return writeNpy(path, array, error);
}
