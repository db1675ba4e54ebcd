// Runs the host lowering (A) and the GPU-form slot ops lowered for the CPU
// (B) on the same inputs, with a valid routing layout built by the
// documented rule, and compares every output bit for bit.
// Shape from -DT= -DH= -DI= -DE= -DK= (B = 128).
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef T
#define T 256
#define H 256
#define I 128
#define E 4
#define K 2
#endif
#define BS 128
#define NB (((T * K - (E - 1)) + BS - 1) / BS + E - 1)
#define S (NB * BS)

#define DESC(rank)                                                             \
  struct {                                                                     \
    void *alloc, *align;                                                       \
    int64_t off, size[rank], stride[rank];                                     \
  }
typedef DESC(1) D1;
typedef DESC(2) D2;
typedef DESC(3) D3;
typedef DESC(4) D4;

#define ARGS D2 *, D2 *, D1 *, D4 *, D3 *, D1 *, D1 *, D2 *, D1 *, D4 *, D3 *
void _mlir_ciface_moe_layer_bwd(ARGS);
void _mlir_ciface_moe_layer_bwd_B(ARGS);

static uint64_t rs = 0x9E3779B97F4A7C15ull;
static uint64_t nxt(void) {
  rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17;
  return rs;
}
static double uni(void) { return (nxt() >> 11) * (1.0 / 9007199254740992.0); }
static double gauss(void) {
  return sqrt(-2.0 * log(uni() + 1e-300)) * cos(6.283185307179586 * uni());
}
static uint16_t bf16(float f) {  // RNE
  uint32_t b;
  memcpy(&b, &f, 4);
  return (uint16_t)((b + 0x7FFF + ((b >> 16) & 1)) >> 16);
}

static void set(void *d, void *p, int rank, const int64_t *sizes) {
  int64_t *q = (int64_t *)((char *)d + 2 * sizeof(void *));
  ((void **)d)[0] = p; ((void **)d)[1] = p;
  q[0] = 0;
  int64_t st = 1;
  for (int r = rank - 1; r >= 0; --r) {
    q[1 + r] = sizes[r];
    q[1 + rank + r] = st;
    st *= sizes[r];
  }
}

int main(void) {
  static uint16_t x[T * H], dy[T * H], wgu[E * H * 2 * I], wd[E * I * H];
  static float aff[T * E];
  static int32_t tok[S], blk[NB];
  for (int i = 0; i < T * H; ++i) x[i] = bf16(gauss()), dy[i] = bf16(gauss());
  for (int i = 0; i < E * H * 2 * I; ++i) wgu[i] = bf16(0.1 * gauss());
  for (int i = 0; i < E * I * H; ++i) wd[i] = bf16(0.1 * gauss());
  for (int i = 0; i < T * E; ++i) aff[i] = (float)uni();
  // Routing: K distinct experts per token; experts ascending, their tokens
  // ascending in consecutive blocks, padding -1, spare blocks to E-1.
  static unsigned char routed[T][E];
  memset(routed, 0, sizeof routed);
  for (int t = 0; t < T; ++t)
    for (int k = 0; k < K;) {
      int e = nxt() % E;
      if (!routed[t][e]) routed[t][e] = 1, ++k;
    }
  int n = 0;
  for (int e = 0; e < E; ++e) {
    int s = n * BS, any = 0;
    for (int t = 0; t < T; ++t)
      if (routed[t][e]) tok[s++] = t, any = 1;
    if (!any) continue;
    int end = (s + BS - 1) / BS * BS;
    for (; s < end; ++s) tok[s] = -1;
    for (; n < end / BS; ++n) blk[n] = e;
  }
  for (; n < NB; ++n) {
    blk[n] = E - 1;
    for (int s = n * BS; s < (n + 1) * BS; ++s) tok[s] = -1;
  }

  static uint16_t dxA[T * H], dxB[T * H];
  static float daA[T * E], daB[T * E], dwguA[E * H * 2 * I],
      dwguB[E * H * 2 * I], dwdA[E * I * H], dwdB[E * I * H];
  D2 dX, dDY, oDX;
  D1 dA, dTok, dBlk, oDA;
  D4 dWgu, oDwgu;
  D3 dWd, oDwd;
  int64_t sTH[] = {T, H}, sTE[] = {T * E}, sWgu[] = {E, H, 2, I},
          sWd[] = {E, I, H}, sS[] = {S}, sN[] = {NB};
  set(&dX, x, 2, sTH); set(&dDY, dy, 2, sTH); set(&dA, aff, 1, sTE);
  set(&dWgu, wgu, 4, sWgu); set(&dWd, wd, 3, sWd);
  set(&dTok, tok, 1, sS); set(&dBlk, blk, 1, sN);
  for (int v = 0; v < 2; ++v) {
    set(&oDX, v ? dxB : dxA, 2, sTH);
    set(&oDA, v ? daB : daA, 1, sTE);
    set(&oDwgu, v ? dwguB : dwguA, 4, sWgu);
    set(&oDwd, v ? dwdB : dwdA, 3, sWd);
    (v ? _mlir_ciface_moe_layer_bwd_B : _mlir_ciface_moe_layer_bwd)(
        &dX, &dDY, &dA, &dWgu, &dWd, &dTok, &dBlk, &oDX, &oDA, &oDwgu, &oDwd);
  }
  long d1 = 0, d2 = 0, d3 = 0, d4 = 0, nz = 0;
  for (int i = 0; i < T * H; ++i) d1 += dxA[i] != dxB[i], nz += dxA[i] != 0;
  for (int i = 0; i < T * E; ++i) d2 += memcmp(&daA[i], &daB[i], 4) != 0;
  for (int i = 0; i < E * H * 2 * I; ++i) d3 += memcmp(&dwguA[i], &dwguB[i], 4) != 0;
  for (int i = 0; i < E * I * H; ++i) d4 += memcmp(&dwdA[i], &dwdB[i], 4) != 0;
  printf("T=%d H=%d I=%d E=%d K=%d N=%d S=%d: differing elements dx %ld/%d "
         "(nonzero %ld), da %ld/%d, dwgu %ld, dwd %ld\n",
         T, H, I, E, K, NB, S, d1, T * H, nz, d2, T * E, d3, d4);
  return d1 || d2 || d3 || d4;
}
