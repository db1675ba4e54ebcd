//===- EntryPointListTest.cpp - MOE_CUDA_RUNTIME_FUNCTIONS is complete ----===//
//
// The X-macro list of CudaRuntime.h, through which a JIT host registers the
// runtime's addresses, names each exported function once: 23 mgpu* entry
// points (the declarations test/Runtime/CUDA pins) and the seven functions
// of the host API (exported-symbols.test counts 30 exports).
//
//===----------------------------------------------------------------------===//

#include "moe/Runtime/CudaRuntime.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

namespace {

struct Entry {
  std::string name;
  void *address;
};

std::vector<Entry> entries() {
  return {
#define MOE_ENTRY(name) {#name, reinterpret_cast<void *>(&name)},
      MOE_CUDA_RUNTIME_FUNCTIONS(MOE_ENTRY)
#undef MOE_ENTRY
  };
}

TEST(CudaRuntimeEntryPoints, ListNamesEveryExportOnce) {
  std::set<std::string> names;
  int mgpu = 0;
  for (const Entry &entry : entries()) {
    EXPECT_NE(entry.address, nullptr) << entry.name;
    EXPECT_TRUE(names.insert(entry.name).second) << entry.name;
    mgpu += entry.name.rfind("mgpu", 0) == 0;
  }
  EXPECT_EQ(names.size(), 30u);
  EXPECT_EQ(mgpu, 23);
  EXPECT_EQ(names.count("mgpuTensorMapEncodeTiledMemref"), 1u);
  EXPECT_EQ(names.count("moeCudaRuntimeReset"), 1u);
}

} // namespace
