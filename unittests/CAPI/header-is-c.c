/* The C API's header is C: this file is compiled as C11 and linked
 * against libMoeJIT.so (unittests/CAPI/CMakeLists.txt), and the program
 * exits 0 when the defaults and an error message come through. */
#include "moe-c/MoeMLIR.h"

#include <stdio.h>
#include <string.h>

int main(void) {
  MoeCompileOptions options;
  moeCompileOptionsInit(&options);
  MoeCompiler *compiler = moeCompilerCreate(NULL);
  MoeExecutable *exe = moeCompileLayer(compiler, "T=0", &options);
  int ok = options.target == MOE_TARGET_HOST && exe == NULL &&
           strlen(moeGetLastError()) > 0;
  moeCompilerDestroy(compiler);
  printf("%s\n", moeGetLastError());
  return ok ? 0 : 1;
}
