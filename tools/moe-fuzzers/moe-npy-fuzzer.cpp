//===- moe-npy-fuzzer.cpp - libFuzzer harness of the .npy reader ----------===//
//
// Fuzzes moe::ref::readNpy, which reads every tensor moe-run and moe-ref
// take from users. The reader works on paths (moe-run streams large files),
// so each input is written to a private temporary file first. Beyond not
// crashing: an accepted file holds exactly the bytes its shape needs, and
// writing it back gives a file that reads to the same array.
//
//===----------------------------------------------------------------------===//
#include "moe/Reference/Npy.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unistd.h>

namespace {

/// A temporary file that lives as long as the process.
struct TempFile {
  std::string path;
  explicit TempFile(const char *stem) {
    const char *dir = std::getenv("TMPDIR");
    std::string pattern = std::string(dir && *dir ? dir : "/tmp") + "/" +
                          stem + "-XXXXXX";
    int fd = mkstemp(pattern.data());
    if (fd < 0) {
      std::perror("moe-npy-fuzzer: mkstemp");
      std::abort();
    }
    close(fd);
    path = pattern;
  }
  ~TempFile() { std::remove(path.c_str()); }
};

[[noreturn]] void fail(const char *what, const std::string &detail) {
  std::fprintf(stderr, "moe-npy-fuzzer: %s: %s\n", what, detail.c_str());
  std::abort();
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static TempFile input("moe-npy-fuzz-in"), output("moe-npy-fuzz-out");
  FILE *file = std::fopen(input.path.c_str(), "wb");
  if (!file || std::fwrite(data, 1, size, file) != size || std::fclose(file))
    fail("cannot write", input.path);

  moe::ref::NpyArray array;
  std::string error;
  if (!moe::ref::readNpy(input.path, array, error)) {
    if (error.rfind(input.path, 0) != 0)
      fail("error does not name the file", error);
    return 0;
  }
  if (array.numElements() < 0 ||
      array.data.size() != static_cast<size_t>(array.numElements()) *
                               moe::ref::npyElementSize(array.type))
    fail("accepted a file whose data does not match its shape", error);
  std::vector<double> values = array.toDouble();
  if (values.size() != array.data.size() / moe::ref::npyElementSize(array.type))
    fail("toDouble size", std::to_string(values.size()));

  if (!moe::ref::writeNpy(output.path, array, error))
    fail("cannot write back an accepted array", error);
  moe::ref::NpyArray again;
  if (!moe::ref::readNpy(output.path, again, error))
    fail("cannot read back a written array", error);
  if (again.type != array.type || again.shape != array.shape ||
      again.data != array.data)
    fail("round trip changed the array", output.path);
  return 0;
}
