/*===- moe-c/MoeMLIR.h - the C API of moe-mlir ---------------------*- C -*-===*\
|*                                                                            *|
|* A C interface over the JIT API of moe/JIT/MoeJIT.h, for bindings (the     *|
|* Python package loads it with ctypes) and C programs. It lives in the same *|
|* shared library, libMoeJIT.so.                                             *|
|*                                                                            *|
|*   MoeCompiler *c = moeCompilerCreate(NULL);                                *|
|*   MoeCompileOptions o;                                                     *|
|*   moeCompileOptionsInit(&o);                                               *|
|*   MoeExecutable *e = moeCompileLayer(c, "T=256,H=256,I=128,E=4,K=2", &o);  *|
|*   if (!e) fprintf(stderr, "%s\n", moeGetLastError());                      *|
|*   ... moeExecutableRun(e, inputs, 7, outputs, 4, NULL) ...                 *|
|*   moeExecutableDestroy(e);                                                 *|
|*   moeCompilerDestroy(c);                                                   *|
|*                                                                            *|
|* Errors: a function that fails returns NULL (constructors) or a non-zero   *|
|* status, and moeGetLastError() gives the message of the last failure on   *|
|* the calling thread (valid until that thread's next failing call). Every  *|
|* check of the C++ API holds: nothing is written on error.                 *|
|* Executables are reference-counted by the C++ API: destroying the          *|
|* compiler leaves them usable.                                              *|
\*===----------------------------------------------------------------------===*/
#ifndef MOE_C_MOEMLIR_H
#define MOE_C_MOEMLIR_H

#include <stdint.h>

#if defined(_WIN32)
#define MOE_C_EXPORT
#else
#define MOE_C_EXPORT __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

/** Element types, as moe::jit::DType. */
typedef enum MoeDType {
  MOE_DTYPE_BF16 = 0,
  MOE_DTYPE_F32 = 1,
  MOE_DTYPE_I32 = 2,
  MOE_DTYPE_F8E4M3FN = 3,
  MOE_DTYPE_F8E5M2 = 4,
  MOE_DTYPE_F8E8M0FNU = 5,
  /** Not a type: makes the enum 32 bits wide, so that the library can
   *  reject any other value a caller passes without undefined behaviour. */
  MOE_DTYPE_MAX_ENUM = 0x7fffffff
} MoeDType;

/** Compilation targets, as moe::jit::Target. */
typedef enum MoeTarget {
  MOE_TARGET_HOST = 0,
  MOE_TARGET_SM90A = 1,
  /** sm_100a, compile-verified only (docs/numerics.md). */
  MOE_TARGET_SM100A = 2,
  /** sm_120a, compile-verified only (docs/numerics.md). */
  MOE_TARGET_SM120A = 3,
  /** Not a target (see MOE_DTYPE_MAX_ENUM). */
  MOE_TARGET_MAX_ENUM = 0x7fffffff
} MoeTarget;

/** Options of one compilation (moe::jit::CompileOptions); strings may be
 *  NULL for the default. Fill with moeCompileOptionsInit first. */
typedef struct MoeCompileOptions {
  MoeTarget target;
  /** Run moe-fuse before lowering (host). */
  int32_t fuse;
  /** LLVM optimization level, 0..3. */
  int32_t optLevel;
  /** Function to run; NULL: the module's one public function. */
  const char *entry;
  /** sm90a: "fp8", "bf16" or "bf16-operands"; NULL: the chip's default. */
  const char *mmaPath;
  /** sm90a: "resident" or "hybrid"; NULL: resident. */
  const char *gpuMode;
  /** Buffer name in diagnostics. */
  const char *sourceName;
  /** GPU targets: kernel choices as comma-separated OPTION=value pairs of
   *  moe/Pipelines/KernelChoices.def ("weight-reuse=2,swap-weights=true");
   *  NULL: the defaults. An unknown option or a bad value fails the
   *  compile (moe::jit::setKernelChoices). */
  const char *kernelChoices;
} MoeCompileOptions;

/** One caller-owned buffer: data, element type and shape (rank dims). */
typedef struct MoeTensor {
  void *data;
  MoeDType dtype;
  int32_t rank;
  const int64_t *shape;
} MoeTensor;

typedef struct MoeCompiler MoeCompiler;
typedef struct MoeExecutable MoeExecutable;

/** The message of the calling thread's last failure ("" if none). */
MOE_C_EXPORT const char *moeGetLastError(void);

/** The defaults of moe::jit::CompileOptions: host, fuse, optLevel 2. */
MOE_C_EXPORT void moeCompileOptionsInit(MoeCompileOptions *options);

/** Checks kernel choices' text (MoeCompileOptions.kernelChoices) without
 *  compiling: 0 when moe::jit::setKernelChoices takes it, else non-zero
 *  with the reason in moeGetLastError(). */
MOE_C_EXPORT int32_t moeCheckKernelChoices(const char *kernelChoices);

/** A compiler with an in-memory cache and a disk cache in `cacheDir`:
 *  NULL for moe::jit::defaultCacheDir() ($MOE_MLIR_CACHE_DIR, else
 *  ~/.cache/moe-mlir), "" for none. */
MOE_C_EXPORT MoeCompiler *moeCompilerCreate(const char *cacheDir);
MOE_C_EXPORT void moeCompilerDestroy(MoeCompiler *compiler);

/** Compiles a layer given in the spelling of moe::jit::parseLayerDesc
 *  ("T=256,H=256,I=128,E=4,K=2,B=128,quant=e4m3,..."); NULL on error. */
MOE_C_EXPORT MoeExecutable *moeCompileLayer(MoeCompiler *compiler,
                                            const char *layerSpec,
                                            const MoeCompileOptions *options);
/** Compiles MLIR text; NULL on error (located parse and verifier errors). */
MOE_C_EXPORT MoeExecutable *moeCompileModule(MoeCompiler *compiler,
                                             const char *mlirText,
                                             const MoeCompileOptions *options);
MOE_C_EXPORT void moeExecutableDestroy(MoeExecutable *executable);

/** The signature: inputs, then outputs, in argument order. `isOutput`
 *  selects the list; an index out of range gives NULL, -1 or 0 and sets the
 *  last error. */
MOE_C_EXPORT int32_t moeExecutableNumInputs(const MoeExecutable *executable);
MOE_C_EXPORT int32_t moeExecutableNumOutputs(const MoeExecutable *executable);
MOE_C_EXPORT const char *moeExecutableTensorName(const MoeExecutable *executable,
                                                 int32_t isOutput,
                                                 int32_t index);
MOE_C_EXPORT int32_t moeExecutableTensorDType(const MoeExecutable *executable,
                                              int32_t isOutput, int32_t index);
MOE_C_EXPORT int32_t moeExecutableTensorRank(const MoeExecutable *executable,
                                             int32_t isOutput, int32_t index);
MOE_C_EXPORT int64_t moeExecutableTensorDim(const MoeExecutable *executable,
                                            int32_t isOutput, int32_t index,
                                            int32_t dim);
/** "host" or "sm90a", and the GPU mode ("" on the host). */
MOE_C_EXPORT const char *moeExecutableTarget(const MoeExecutable *executable);
MOE_C_EXPORT const char *moeExecutableGpuMode(const MoeExecutable *executable);

/** Executable::run on host buffers: 0 on success. `callSeconds` (may be
 *  NULL) receives RunStats::callSeconds. */
MOE_C_EXPORT int32_t moeExecutableRun(const MoeExecutable *executable,
                                      const MoeTensor *inputs,
                                      int32_t numInputs,
                                      const MoeTensor *outputs,
                                      int32_t numOutputs,
                                      double *callSeconds);
/** Executable::runOnDevice: device buffers, queued on the CUstream `stream`
 *  (NULL: the legacy default stream), no synchronization; 0 on success. */
MOE_C_EXPORT int32_t moeExecutableRunOnDevice(const MoeExecutable *executable,
                                              const MoeTensor *inputs,
                                              int32_t numInputs,
                                              const MoeTensor *outputs,
                                              int32_t numOutputs, void *stream);

/** Routing helpers (moe::jit::buildRouting, maskedAffinities). */

/** N, the blocks of the layout of T tokens, top-K, E experts and block
 *  size B: ceil((T*K - (E-1)) / B) + E - 1, at least 1; -1 (last error
 *  set) for sizes out of range (T, K >= 0; E, B >= 1). */
MOE_C_EXPORT int64_t moeRoutingNumBlocks(int64_t T, int64_t K, int64_t E,
                                         int64_t B);
/** The blocked layout of the top-k indices [T, K] into caller buffers of
 *  N*B and N int32 (N from moeRoutingNumBlocks); 0 on success, nothing
 *  written on error. */
MOE_C_EXPORT int32_t moeBuildRouting(const int32_t *topkIdx, int64_t T,
                                     int64_t K, int64_t E, int64_t B,
                                     int32_t *tokenPositionToId,
                                     int32_t *blockToExpert);
/** The masked affinities [T*E] of the top-k indices and scores [T, K]
 *  into a caller buffer; 0 on success, nothing written on error. */
MOE_C_EXPORT int32_t moeMaskedAffinities(const int32_t *topkIdx,
                                         const float *topkScores, int64_t T,
                                         int64_t K, int64_t E,
                                         float *affinities);

/** MX quantization of a row-major [rows, cols] f32 matrix along its rows
 *  (moe::jit::quantizeMX): element "e4m3" or "e5m2", rule "rceil",
 *  "floor" or "floor_alt"; codes [rows*cols] and scale bytes
 *  [rows*cols/32] into caller buffers; 0 on success, nothing written on
 *  error. */
MOE_C_EXPORT int32_t moeQuantizeMX(const float *values, int64_t rows,
                                   int64_t cols, const char *element,
                                   const char *rule, uint8_t *codes,
                                   uint8_t *scales);

#ifdef __cplusplus
}
#endif

#endif /* MOE_C_MOEMLIR_H */
