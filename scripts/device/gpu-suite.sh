#!/usr/bin/env bash
# The GPU suite, run ON THE H200 from the repository root with the device
# bundle carried (scripts/build-device-bundle.sh; carry [".bundle"]):
#
#   bash .bundle/run-on-device.sh bash scripts/device/gpu-suite.sh [PART...]
#
# PARTS (default: all of them, in this order):
#   smoke      the CUDA runtime smoke test and the host target from the bundle
#   matrix     every moe-run case of test/Integration/Host/matrix-*.test on
#              the sm90a target (resident: every phase on the GPU; hybrid
#              where the layer has a bias or bf16 GEMMs), with the flags of
#              MATRIX_EXTRA
#   resident   resident (default MMA path) against hybrid (the elementwise
#              phases in host loops; default path, and mma-path bf16 with
#              the activation backward on the host) on several layers,
#              outputs compared bit for bit
#   layers     larger layers on sm90a with every MMA path (bf16-operands,
#              bf16, fp8)
#   weight-reuse  the default (weight-reuse=5: the transposed block GEMMs
#              where each weight element is rounded at most 5 times, which
#              takes most of the matrix's small layers, their slot rows
#              gathered by the GEMMs: swap-gather) against
#              --weight-reuse=0 on every layer of the matrix, outputs
#              compared bit for bit, then racecheck and memcheck on a
#              swapped layer
#   in-place-tiles  the slot roundings of x and dy for P3 and P4 in the
#              operand kernels (--round-reuse=0) through the shared-memory
#              tile (--in-place-tiles) against P3 and P4 rounding them in
#              their registers (--round-reuse=64) and against the column-pair
#              form (the default): bit for bit on the lhs layers and
#              another, then memcheck and racecheck on a partial column
#              tile; and every layer of the matrix with --in-place-tiles
#              (MATRIX_EXTRA) is the matrix part's job
#   in-place-tiles-ncu  at reference shapes 1 and 2 (torch-gen inputs) the
#              ncu time of every kernel, default and --in-place-tiles
#   act-bwd-narrow  --act-bwd-narrow (the activation-backward kernel in
#              128-column CTAs) against the default on the lhs layers:
#              each against R_mx, dx, dWgu, dWd (and the biases' gradients)
#              bit for bit (da's partial sums come in other groups), then
#              memcheck and racecheck
#   act-bwd-narrow-ncu  at reference shapes 1 and 2 (torch-gen inputs) the
#              ncu time of every kernel, default and --act-bwd-narrow
#   k-turns    --k-turns (the consumer warpgroups taking turns each K
#              tile) against the default on three layers, bit for bit,
#              then racecheck (not in the default parts: off by default)
#   both-axes  the default (one operand kernel for both roundings of a
#              value) against --operands-one-axis, outputs compared bit
#              for bit
#   checkpoint-epilogue  the default (P1's kernel reads the bf16 gate/up
#              checkpoint) against --checkpoint-unpacked on checkpoint
#              layers, outputs compared bit for bit, and memcheck
#   dgate-up   --dgate-up-epilogue (P1's epilogue writes [dg|du]'s two MX
#              roundings) against the default (f32 [dg|du] rounded by an
#              operand kernel), outputs compared bit for bit, then memcheck
#              and racecheck
#   persistent  the persistent GEMM kernels (the default) against
#              --grid-gemms (one CTA per tile) on layers with more tiles
#              than SMs, outputs compared bit for bit, then memcheck and
#              racecheck on a layer with more tiles than SMs
#   cluster    GEMMs in clusters of two CTAs along N (cluster_n = 2, TMA
#              multicast of the lhs tile): exact against 16 sampled rows,
#              TFLOPS beside the default config, memcheck and racecheck;
#              layers with --grid-gemms --cluster-gemms bit for bit
#              against --grid-gemms, memcheck and racecheck
#   overlap    P1 in 64-row tiles, two CTAs per SM (--gemm-config-at)
#   evict-first  #moe.gemm_config evict_first_outputs (the epilogue's
#              streams with an L2 evict-first policy) on P1 and P2: bit for
#              bit against the default on four layers, and memcheck
#   evict-first-ncu  at reference shape 1 (torch-gen inputs) each GEMM's
#              ncu time, DRAM bytes and L2 hit rate with evict_first_outputs
#              on P1, P2, the recompute GEMM or all, against the default
#   rhs-codes  #moe.gemm_config rhs_codes on P1 (ping-pong, one CTA per
#              tile) and P2: bitwise equal to the default on five layers,
#              memcheck, racecheck, and the 8192^3 GEMM against 16 rows
#   rhs-codes-ncu  at reference shape 1 (torch-gen inputs) the ncu time of
#              every GEMM and operand kernel with rhs_codes on P1, P2 or
#              both (RHS_CODES_NCU), against the default
#   lhs-codes  --lhs-codes (#moe.gemm_config lhs_codes on the block GEMMs:
#              the lhs rows read as FP8 codes, decoded in the consumers'
#              registers for a register-A wgmma): bitwise equal to the
#              default on seven layers, memcheck, racecheck, and the
#              8192^3 GEMM against 16 rows, both ways
#   lhs-gather  lhs_gather (the default: #moe.gemm_config lhs_gather on
#              the recompute GEMM and P1, x and dy rounded once per token,
#              each lhs row of a tile copied from its token row by the
#              producer warpgroup's cp.async) against --gathered-lhs-copies
#              (the slot rows gathered and rounded by the operand kernel):
#              bitwise equal on seven layers (P1's activation epilogue on
#              one), memcheck and racecheck of the default
#   round-operands  --round-lhs, --round-rhs and --swap-rounded-rhs, each
#              on its own (#moe.gemm_config round_lhs / round_rhs /
#              swap_operands: P3 and P4 gather x and dy through their token
#              ids and round them along the slots, P3 in its consumers'
#              registers, P4 in its producer warpgroup or, transposed, in
#              its consumers') against the
#              default (operand kernels write the rounded slot rows):
#              bitwise equal on eight layers, memcheck and racecheck
#   swap-weights  --swap-weights (#moe.gemm_config swap_operands on the
#              block GEMMs: the raw weight rounded along K in the consumers'
#              registers, the tiles pairs of blocks of one expert): against
#              R_mx on eight layers (moe-run's check), two runs bit for bit
#              on each, memcheck and racecheck
#   swap-weights-ncu  at reference shapes 1 and 2 the ncu time of every
#              kernel, default and --swap-weights (SWAP_SHAPES picks the
#              shapes)
#   tma-store  the default (tma_store) bit for bit against --register-stores
#              on eight layers (partial tiles, biases, checkpoints), and
#              memcheck and racecheck of two layers
#   tma-store-buffers  four chunk buffers beside three stages on every GEMM
#              (--gemm-config-at): bit for bit against the default on a
#              layer, the ncu time of every kernel at both reference shapes
#   store-columns  other tma_store geometries on every GEMM of the layer
#              (--gemm-config-at), each STAGES:BUFFERS:COLUMNS: by default
#              4:4:16 and 4:8:8 (the same 32 KB in narrower chunks); bit
#              for bit against the default on three layers, memcheck and
#              racecheck, then the ncu time of every kernel at both
#              reference shapes (STORE_SHAPES picks them, STORE_VARIANTS
#              the variants, STORE_CHECKS=0 skips the checks)
#   tma-store-ncu  at reference shapes 1 and 2 the ncu time of every
#              kernel, default and --register-stores (TMA_STORE_SHAPES picks
#              the shapes)
#   round-operands-ncu  at reference shapes 1 and 2 the ncu time of every
#              kernel, default, --round-lhs, --round-rhs and --swap-rounded-rhs (ROUND_SHAPES picks the
#              shapes)
#   lhs-gather-ncu  at reference shapes 1 and 2 (torch-gen inputs) the ncu
#              time of every kernel, --gathered-lhs-copies and the default
#              (LHS_GATHER_SHAPES picks the shapes)
#   lhs-codes-ncu  at reference shapes 1 and 2 (torch-gen inputs) the ncu
#              time of every GEMM and operand kernel, default and
#              --lhs-codes (LHS_CODES_SHAPES picks the shapes)
#   raster     tile orders in bands of raster_m M tiles: 8192^3 exact
#              against 16 sampled rows and its ncu kernel time for bands of
#              1, 4, 8 and 16 (one CTA per tile and persistent, 128x256),
#              a layer with P2 in bands bit for bit against the default,
#              and a dense layer (bands by default) against R_mx
#   sanitize   compute-sanitizer memcheck and racecheck on two sm90a layers
#   determinism  two sm90a runs (with MATRIX_EXTRA), outputs compared bit
#              for bit
#   kernels    ncu kernel durations of one layer, both MMA paths
#   p1-prof    ncu of P1's kernel (block_matmul_act) at reference shape 2,
#              default (ping-pong), --grid-gemms, and --grid-gemms
#              --dgate-up-epilogue: duration, instructions,
#              DRAM bytes and the warp stall reasons, one table row each
#   store-prof  ncu's full section set with SASS-level stall sampling of
#              P3 and P2 at reference shape 2, tma_store (the default)
#              and --register-stores, and of P3 at shape 1 (deep-prof's
#              pages and summary)
#   deep-prof  ncu's full section set with SASS-level stall sampling of
#              P1 at reference shape 1 (torch-gen inputs) in two forms
#              (the default ping-pong 128x128, --grid-gemms), of P1's
#              product alone (moe-run --gemm) and torch's bf16 grouped
#              GEMM of that shape, of the operand kernels of x and dy,
#              and of the 8192^3 GEMM alone and in a
#              cluster pair: DRAM bytes read / written, L2 sectors by
#              operation, L2 throughput and the 12 SASS lines with the
#              most stall samples each (reports kept in $SUITE_REPORTS)
#   sass       the SASS instruction mix of the embedded example's kernels on
#              both MMA paths (cuobjdump): the tensor-core instructions
#   refcheck   the torch reference on the GPU against moe-ref, and the
#              torch._grouped_mm bf16 baseline at both reference shapes
#   ref1 ref2  reference shape 1 / 2 (issue 4): seeded inputs (torch-gen),
#              sm90a with the outputs written (--check none: the CPU
#              references would take hours), the outputs against R_mx and
#              R_64 computed by torch in fp64 on the GPU
#   ref1-ncu ref2-ncu  the torch._grouped_mm baseline at that shape, then on the
#              same inputs the ncu durations of the MX GEMM kernels and the
#              time of the whole resident backward (best of 3)
#   ref1-prof ref2-prof  ncu durations of every kernel of the resident
#              backward at that shape, the slowest first
#              (REF_LAYER_EXTRA=,checkpoint=bf16 adds layer options to the
#              ref parts' shape: checkpoint mode)
# Not in the default set: refcheck and the ref parts (the hybrid target
# runs the elementwise phases in single-threaded host loops, 100 s a
# backward at shape 1, so each needs a call of its own), and the
# measurements cluster, raster, evict-first, evict-first-ncu, rhs-codes,
# lhs-codes, lhs-codes-ncu, lhs-gather, lhs-gather-ncu, round-operands,
# round-operands-ncu, tma-store, tma-store-ncu, tma-store-buffers, store-columns,
# rhs-codes-ncu, in-place-tiles, in-place-tiles-ncu, act-bwd-narrow,
# act-bwd-narrow-ncu, p1-prof, deep-prof and store-prof. Prints
# a table last; exit status 0 only if every row passes.
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
out=$(mktemp -d)
rows=()
record() { rows+=("$(printf '%-66s %s' "$1" "$2")"); }
# Runs a command, keeps its log, and records PASS / FAIL with the largest
# rel(R_mx) that moe-run printed.
run() {
  local name=$1; shift
  echo "== $name: $*"
  local status=PASS
  "$@" >"$out/log" 2>&1 || status=FAIL
  cat "$out/log"
  local worst
  # rel(R_mx) is the first number in scientific notation of an output row
  # (moe-run's and torch-check's tables alike).
  worst=$(awk '$1 ~ /^(dx|da|dwgu|dwd|dbgu|dbd)$/ {
                 for (i = 2; i <= NF; ++i)
                   if ($i ~ /^[0-9][.][0-9]+e[-+][0-9]+$/) { v = $i + 0; break }
                 if (v > m) m = v } END { if (m) printf "%.2e", m }' \
            "$out/log")
  record "$name" "$status${worst:+ (max rel R_mx $worst)}"
}

# ncu durations (ns) of the MX GEMM kernels of one moe-run; records a row.
kernel_times() {
  local name=$1; shift
  echo "== ncu kernel durations: $name"
  # Only the GEMM kernels are profiled: replaying the resident mode's
  # elementwise kernels would save and restore tens of GB per kernel.
  if ncu --clock-control none --metrics gpu__time_duration.sum \
       --kernel-name regex:mx_ --print-units base --csv "$@" >"$out/ncu" 2>&1; then
    grep -E "mx_(block|expert)_matmul" "$out/ncu" |
      awk -F'","' '{ gsub(/[",]/, "", $NF); print $5, $NF " ns" }' |
      tee "$out/ncu-times"
    record "ncu $name" "PASS ($(awk '{ s += $2 } END { printf "%.1f us", s / 1000 }' \
      "$out/ncu-times") in MX GEMM kernels)"
  else
    tail -20 "$out/ncu"
    record "ncu $name" FAIL
  fi
}

# ncu durations of every GEMM and operand kernel of one resident backward
# of LAYER on the inputs in INPUTS (moe-run ARGS...): one line per kernel
# (ms) and the total; records a row; the CSV goes to SUITE_REPORTS as
# NAME.csv (NAME without '=': such files do not come back from the device
# tool).
layer_kernel_times() {  # LABEL NAME LAYER INPUTS ARGS...
  local label=$1 name=${2//=/} layer=$3 inputs=$4 summary
  shift 4
  echo "== $label: ncu"
  timeout 300 ncu --clock-control none --kernel-name regex:'matmul|mx_operand' \
    --csv --metrics gpu__time_duration.sum --print-units base \
    moe-run --target=sm90a --layer "$layer" --inputs "$inputs" \
    --check none "$@" >"$out/kernels.csv" 2>&1
  [ -n "${SUITE_REPORTS:-}" ] && cp "$out/kernels.csv" "$SUITE_REPORTS/$name.csv"
  summary=$(grep gpu__time_duration "$out/kernels.csv" |
    awk -F'","' '{ gsub(/[",]/, "", $NF); printf "%s %.3f\n", $5, $NF / 1e6; s += $NF }
                 END { if (s) printf "total %.3f ms\n", s / 1e6 }')
  echo "$summary"
  record "$label" \
    "$([ -n "$summary" ] && echo "PASS ($(echo "$summary" | tail -1))" || echo FAIL)"
}

parts=("$@")
[ ${#parts[@]} -eq 0 ] &&
  parts=(smoke matrix weight-reuse resident both-axes checkpoint-epilogue dgate-up persistent overlap layers sanitize
         determinism kernels sass)
export PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH}
want() { printf '%s\n' "${parts[@]}" | grep -qx "$1"; }

echo "== $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
small=T=256,H=256,I=128,E=2,K=1,B=128
partial=T=90,H=32,I=64,E=8,K=2,B=128,quant=e5m2

# Compares the .npy outputs of two runs bit for bit (all but SKIP) and
# records a row.
compare() {  # DIR_A DIR_B LABEL [SKIP]
  local diff=0 f
  for f in "$1"/*.npy; do
    [ -n "${4:-}" ] && [ "$(basename "$f")" = "$4" ] && continue
    cmp -s "$f" "$2/$(basename "$f")" ||
      { diff=$((diff + 1)); echo "differs: $(basename "$f")"; }
  done
  python3 - "$1" "$2" <<'PY' || true
import sys, pathlib
import numpy as np
a, b = map(pathlib.Path, sys.argv[1:3])
for f in sorted(a.glob("*.npy")):
  x, y = np.load(f), np.load(b / f.name)
  if x.dtype.kind == "V" or x.dtype == np.uint16:
      x, y = x.view(np.uint16), y.view(np.uint16)
  n = int((x.view(np.uint8) != y.view(np.uint8)).reshape(x.size, -1).any(1).sum())
  print(f"{f.name}: {n}/{x.size} elements differ")
PY
  if [ $diff -eq 0 ]; then
    record "$3" PASS
  else
    record "$3" "FAIL ($diff outputs differ)"
  fi
}

# Runs each LAYER with FLAG and with the default, and compares the outputs
# bit for bit (all but the file `skip`, when set).
# Both runs also take the flags of the array `base` (empty by default).
base=()
skip=""
# The flag that leaves LAYER's last expert without tokens where moe-run
# allows it (more experts than top_k, not dense), nothing otherwise.
empty_expert() {  # LAYER
  local e k
  e=$(sed -n 's/.*\bE=\([0-9]*\).*/\1/p' <<<"$1")
  k=$(sed -n 's/.*\bK=\([0-9]*\).*/\1/p' <<<"$1")
  if [[ $1 != *dense=on* && -n $e && -n $k && $e -gt $k ]]; then
    echo --empty-experts 1
  fi
}
bitwise_against() {  # FLAG LABEL LAYER...
  local flag=$1 label=$2 layer empty
  shift 2
  for layer in "$@"; do
    read -r -a empty <<<"$(empty_expert "$layer")"
    # (Under a time limit: a ring stage that never fills would hang.)
    run "sm90a resident $flag ${base[*]} $layer" timeout 300 moe-run \
      --target=sm90a "$flag" "${base[@]}" --layer "$layer" "${empty[@]}" \
      --outputs "$out/single"
    run "sm90a resident ${base[*]} $layer" timeout 300 moe-run --target=sm90a \
      "${base[@]}" --layer "$layer" "${empty[@]}" --outputs "$out/both"
    compare "$out/single" "$out/both" "$label, bitwise: $layer" "$skip"
    rm -rf "$out/single" "$out/both"
  done
}

# The layers on which a block-GEMM lhs variant (lhs-codes, lhs-gather) is
# compared bit for bit with the default: both modes, e5m2, K tiles of an
# odd count, partial tiles, a bias, clamps, affinity on H.
lhs_layers=("$small" "$partial" T=1024,H=1024,I=512,E=8,K=2,B=128
            T=512,H=512,I=160,E=4,K=2,B=128,quant=e5m2,affinity=on_h
            T=300,H=256,I=96,E=4,K=2,B=128,checkpoint=bf16,bias=on
            "$small,act=geglu,clamp_gate=:0.5,clamp_up=-0.75:,bias=on"
            T=4096,H=1024,I=512,E=8,K=2,B=128,checkpoint=bf16)

# memcheck and racecheck of a layer with an empty expert, with FLAG.
sanitize_with() {  # [FLAG]
  local tool
  for tool in memcheck racecheck; do
    run "compute-sanitizer $tool ${1:-(default)}" timeout 300 compute-sanitizer \
      --tool $tool --error-exitcode 1 moe-run --target=sm90a ${1:+"$1"} \
      --layer T=1024,H=512,I=256,E=8,K=2,B=128 --empty-experts 1 --check none
  done
}

# bitwise_against for each LAYER with each config of the array p1_configs
# on P1 (GEMM 1, or 0 with a checkpoint: no recompute GEMM) and p2_config
# on P2 (the GEMM after it); LABEL names the configs' option.
p1_p2_bitwise() {  # LABEL LAYER...
  local label=$1 layer cfg p1
  shift
  for layer in "$@"; do
    p1=1
    [ "${layer#*checkpoint=}" != "$layer" ] && p1=0
    for cfg in "${p1_configs[@]}"; do
      bitwise_against "--gemm-config-at=$p1=$cfg" \
        "P1 $label == the default P1" "$layer"
    done
    bitwise_against "--gemm-config-at=$((p1 + 1))=$p2_config" \
      "P2 $label == the default P2" "$layer"
  done
}

if want smoke; then
  run "runtime smoke (moe-cuda-smoke)" moe-cuda-smoke
  run "host: embedded example" moe-run examples/blockwise_bwd.mlir
fi

if want matrix; then
  # The host matrix's command lines, as the lit tests run them.
  mapfile -t cases < <(grep -h "RUN: moe-run --layer" \
      test/Integration/Host/matrix-*.test |
    sed -e 's/.*RUN: moe-run //' -e 's/ | FileCheck.*//' | sort -u)
  # MATRIX_EXTRA: flags for every run (e.g. --lhs-codes).
  for c in "${cases[@]}"; do
    # shellcheck disable=SC2086
    run "sm90a ${MATRIX_EXTRA:+$MATRIX_EXTRA }${c% --opt-level 0}" \
      moe-run --target=sm90a ${MATRIX_EXTRA:-} $c
  done
fi

if want resident; then
  # The same layer through three runs: resident on the default path (the
  # GEMM operands rounded to their MX values on the GPU, bf16 wgmma on
  # them, P1's kernel with the activation backward of its moe.fused
  # region); hybrid on the same kernels with the other elementwise phases
  # in host loops (every output bitwise: GPU elementwise lowering against
  # the host's); hybrid on the bf16-dequantization kernels (the operands
  # quantized in host loops, dequantized in the kernel, the activation
  # backward in host loops). The last multiplies the same bf16 values in
  # the same k16 order, so every output but da agrees bitwise; da sums
  # <dA, h> per GEMM tile in the fused epilogue and in 32 lanes on the host
  # (docs/numerics.md), so it is compared to 1e-6.
  for layer in "$small" "$partial" "$small,act=geglu,clamp_gate=:0.5,clamp_up=-0.75:" \
      T=512,H=512,I=256,E=4,K=2,B=128,quant=e5m2,affinity=on_h,dx_accumulate=bf16 \
      T=1024,H=1024,I=512,E=8,K=2,B=128; do
    for mode in resident hybrid hybrid-bf16; do
      args=(--gpu-mode "${mode%-bf16}")
      [ $mode = hybrid-bf16 ] && args+=(--mma-path bf16)
      run "sm90a $mode $layer" moe-run --target=sm90a "${args[@]}" \
        --layer "$layer" --empty-experts 1 --outputs "$out/$mode"
      grep "^gpu:" "$out/log"
    done
    compare "$out/resident" "$out/hybrid" "resident == hybrid bitwise: $layer"
    compare "$out/resident" "$out/hybrid-bf16" \
      "resident == hybrid-bf16 bitwise but da: $layer" da.npy
    python3 - "$out/resident/da.npy" "$out/hybrid-bf16/da.npy" <<'PY' &&
import sys
import numpy as np
x, y = (np.load(f).astype(np.float64) for f in sys.argv[1:3])
rel = np.linalg.norm(x - y) / max(np.linalg.norm(y), 1e-300)
print(f"da: resident vs hybrid-bf16 rel {rel:.3e}")
sys.exit(0 if rel <= 1e-6 else 1)
PY
      record "resident ~ hybrid-bf16 da (rel <= 1e-6): $layer" PASS ||
      record "resident ~ hybrid-bf16 da (rel <= 1e-6): $layer" FAIL
    rm -rf "$out/resident" "$out/hybrid" "$out/hybrid-bf16"
  done
fi

if want persistent; then
  # A persistent GEMM computes each tile whole, with the same products in
  # the same order as one CTA per tile, so the same bits (P1's ping-pong
  # warpgroup issues each 64-row half's wgmmas as a cooperative one does).
  # The larger layers have more tiles than SMs in their block and expert
  # GEMMs; the last two give each of P1's ping-pong warpgroups several
  # tiles (about 8 and 4 per CTA), with and without a checkpoint.
  bitwise_against --grid-gemms "persistent == grid GEMMs" \
    "$small" "$partial" T=1024,H=1024,I=512,E=8,K=2,B=128 \
    T=4096,H=1024,I=256,E=4,K=2,B=128 \
    T=4096,H=1024,I=512,E=8,K=2,B=128,checkpoint=bf16 \
    "$small,act=geglu,clamp_gate=:0.5,clamp_up=-0.75:,bias=on" \
    T=16384,H=256,I=512,E=4,K=2,B=128 \
    T=16384,H=256,I=256,E=4,K=2,B=128,checkpoint=bf16
  # 136 tiles of P2 on 132 CTAs: four of them take a second tile from the
  # counter; then P1 at about 4 tiles per CTA (2 per ping-pong warpgroup).
  for racy in T=4096,H=512,I=256,E=4,K=2,B=128 \
      T=16384,H=256,I=256,E=2,K=2,B=128; do
    for tool in memcheck racecheck; do
      run "compute-sanitizer $tool persistent $racy" compute-sanitizer \
        --tool "$tool" --error-exitcode 1 moe-run --target=sm90a \
        --layer "$racy" --check none
    done
  done
fi
if want cluster; then
  # Clusters of two CTAs along N (#moe.gemm_config cluster_n = 2, hand-set;
  # test/Conversion/MoeToNVGPU/cluster-gemm.mlir): rank 0 multicasts the
  # shared lhs tile into both CTAs. Each GEMM's 16 sampled rows against the
  # exact MX product, and its TFLOPS beside the default config's: a block
  # GEMM, an expert GEMM (K-major operands), 8192^3 at 128x128 and 128x256;
  # then memcheck and racecheck.
  c128='#moe.gemm_config<mma = bf16_operands, tile = [128, 128, 64], mma_shape = [64, 128, 16], stages = 6, warpgroups = [1, 2], registers = [40, 232], cluster_n = 2>'
  c256='#moe.gemm_config<mma = bf16_operands, tile = [128, 256, 64], mma_shape = [64, 256, 16], stages = 4, warpgroups = [1, 2], registers = [40, 232], cluster_n = 2>'
  for spec in M=8192,N=1024,K=1024,G=2 M=1024,N=512,K=4096,G=4,kind=expert \
      M=8192,N=8192,K=8192,G=1; do
    run "gemm $spec default config" moe-run --target=sm90a --gemm "$spec"
    run "gemm $spec cluster_n 2, 128x128" moe-run --target=sm90a \
      --gemm "$spec" --gemm-config "$c128"
  done
  run "gemm 8192^3 cluster_n 2, 128x256" moe-run --target=sm90a \
    --gemm M=8192,N=8192,K=8192,G=1 --gemm-config "$c256"
  for tool in memcheck racecheck; do
    run "compute-sanitizer $tool cluster_n 2" compute-sanitizer --tool "$tool" \
      --error-exitcode 1 moe-run --target=sm90a --gemm M=2048,N=512,K=512,G=2 \
      --gemm-config "$c128"
  done
  # Whole layers with every GEMM of one CTA per tile (--grid-gemms) in
  # pairs where its N tiles pair up (--cluster-gemms): each tile computed
  # as one CTA computes it alone, so the same bits; P1 with its epilogue
  # (both activations, clamps, bias, a checkpoint) among them.
  base=(--grid-gemms)
  bitwise_against --cluster-gemms "cluster pairs == one CTA per tile" \
    "$small" T=1024,H=1024,I=512,E=8,K=2,B=128 \
    T=4096,H=1024,I=512,E=8,K=2,B=128,checkpoint=bf16 \
    "$small,act=geglu,clamp_gate=:0.5,clamp_up=-0.75:,bias=on" \
    T=4096,H=512,I=384,E=4,K=2,B=128
  base=()
  for tool in memcheck racecheck; do
    run "compute-sanitizer $tool --grid-gemms --cluster-gemms" \
      compute-sanitizer --tool "$tool" --error-exitcode 1 moe-run \
      --target=sm90a --grid-gemms --cluster-gemms \
      --layer T=4096,H=512,I=256,E=4,K=2,B=128 --check none
  done
fi
if want raster; then
  for form in "" ", persistent = true"; do
    for g in 1 4 8 16; do
      cfg="#moe.gemm_config<mma = bf16_operands, tile = [128, 256, 64], mma_shape = [64, 256, 16], stages = 4, warpgroups = [1, 2], registers = [40, 232]$form, raster_m = $g>"
      [ "$g" = 1 ] && cfg="#moe.gemm_config<mma = bf16_operands, tile = [128, 256, 64], mma_shape = [64, 256, 16], stages = 4, warpgroups = [1, 2], registers = [40, 232]$form>"
      run "gemm 8192^3 128x256${form:+ persistent} raster_m $g" moe-run \
        --target=sm90a --gemm M=8192,N=8192,K=8192,G=1 --gemm-config "$cfg"
      kernel_ns=$(ncu --clock-control none --metrics gpu__time_duration.sum \
          --print-units base --csv --kernel-name regex:matmul moe-run \
          --target=sm90a --gemm M=8192,N=8192,K=8192,G=1 --check none \
          --gemm-config "$cfg" 2>&1 | grep gpu__time_duration | tail -1 |
        awk -F'","' '{ gsub(/[",]/, "", $NF); print $NF }')
      echo "raster: 8192^3${form:+ persistent} raster_m $g: ${kernel_ns:-?} ns"
      record "ncu 8192^3 128x256${form:+ persistent} raster_m $g" \
        "$([ -n "$kernel_ns" ] && echo PASS || echo FAIL) (${kernel_ns:-?} ns)"
    done
  done
  bitwise_against "--gemm-config-at=2=#moe.gemm_config<mma = bf16_operands, tile = [128, 256, 64], mma_shape = [64, 256, 16], stages = 4, warpgroups = [1, 2], registers = [40, 232], persistent = true, raster_m = 8>" \
    "P2 in bands of 8 == the default P2" T=16384,H=1024,I=512,E=8,K=2,B=128
  # A dense layer's block GEMMs take bands of 16 by default (ping-pong P1
  # included): against R_mx.
  run "dense layer, block GEMMs in bands of 16" moe-run --target=sm90a \
    --layer T=8192,H=2048,I=1024,E=1,K=1,B=128,dense=on
fi
# The configs of the evict-first parts: P1 (ping-pong), P2 and the
# recompute GEMM as the table picks them, with evict_first_outputs.
pp='#moe.gemm_config<mma = bf16_operands, tile = [128, 128, 64], mma_shape = [64, 128, 16], stages = 6, warpgroups = [1, 2], registers = [24, 240], persistent = true, pingpong = true, evict_first_outputs = true>'
wide='#moe.gemm_config<mma = bf16_operands, tile = [128, 256, 64], mma_shape = [64, 256, 16], stages = 4, warpgroups = [1, 2], registers = [40, 232]'
p2="$wide, persistent = true, evict_first_outputs = true>"
rc="$wide, rhs_n_major = true, evict_first_outputs = true>"
if want evict-first; then
  # #moe.gemm_config evict_first_outputs on P1 (ping-pong) and P2: the same
  # bits as the default on layers of both modes, and memcheck.
  p1_configs=("$pp") p2_config=$p2
  p1_p2_bitwise "evict-first outputs" "$small" \
    T=1024,H=1024,I=512,E=8,K=2,B=128 \
    T=512,H=512,I=256,E=4,K=2,B=128,quant=e5m2,affinity=on_h \
    T=4096,H=1024,I=512,E=8,K=2,B=128,checkpoint=bf16
  run "compute-sanitizer memcheck P1 evict-first outputs" compute-sanitizer \
    --tool memcheck --error-exitcode 1 moe-run --target=sm90a \
    "--gemm-config-at=1=$pp" --layer T=1024,H=1024,I=512,E=8,K=2,B=128 \
    --empty-experts 1 --check none
fi
if want evict-first-ncu; then
  # At reference shape 1 (torch-gen inputs) each GEMM kernel's time, DRAM
  # bytes read and written and L2 hit rate with the flag on P1, on P2, on
  # the recompute GEMM, and on all three, against the default.
  shape=T=16384,H=4096,I=1536,E=128,K=8,B=128
  run "torch-gen $shape" python3 -m moe_crosscheck torch-gen \
    --config "$shape" --seed 1 --out "$out/evict-in"
  # EVICT_NCU: which of default, p1, p2, recompute and all to profile.
  for v in ${EVICT_NCU:-default p1 p2 recompute all}; do
    args=()
    case $v in
    default) ;;
    p1) args=("--gemm-config-at=1=$pp") ;;
    p2) args=("--gemm-config-at=2=$p2") ;;
    recompute) args=("--gemm-config-at=0=$rc") ;;
    all) args=("--gemm-config-at=0=$rc" "--gemm-config-at=1=$pp"
               "--gemm-config-at=2=$p2") ;;
    esac
    echo "== evict-first $v: per-GEMM ncu"
    ncu --clock-control none --kernel-name regex:matmul --csv \
      --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct \
      moe-run --target=sm90a --layer "$shape" --inputs "$out/evict-in" \
      --check none "${args[@]}" >"$out/evict.csv" 2>&1
    [ -n "${SUITE_REPORTS:-}" ] && cp "$out/evict.csv" "$SUITE_REPORTS/evict-$v.csv"
    summary=$(python3 - "$out/evict.csv" <<'PY'
import csv, sys
# moe-run's own output lines can split into many CSV fields: only the rows
# of ncu's table (the header's width, a number in the value column) count.
rows = list(csv.reader(open(sys.argv[1])))
head = next((r for r in rows if "Metric Name" in r), None)
if head is None:
    sys.exit(1)
k, n, u, v = (head.index(c) for c in
              ("Kernel Name", "Metric Name", "Metric Unit", "Metric Value"))
out = {}
for r in rows:
    if r is head or len(r) != len(head):
        continue
    try:
        value = float(r[v].replace(",", ""))
    except ValueError:
        continue
    scale = {"nsecond": 1e-6, "usecond": 1e-3, "msecond": 1, "byte": 1e-9,
             "Kbyte": 1e-6, "Mbyte": 1e-3, "Gbyte": 1}.get(r[u], 1)
    out.setdefault(r[k], []).append("%s=%.3f" % (r[n].split("__")[1][:18],
                                                 value * scale))
print("; ".join("%s %s" % (name, " ".join(m)) for name, m in out.items()))
PY
)
    if [ -n "$summary" ]; then
      echo "$summary" | tr ';' '\n'
      record "ncu shape 1 evict-first $v" "PASS"
    else
      tail -5 "$out/evict.csv"
      record "ncu shape 1 evict-first $v" FAIL
    fi
  done
fi
# The rhs_codes configs: P1 ping-pong and one CTA per tile, P2 persistent
# 128x256, as moe-gpu-kernel-config's rhs-codes picks them.
pprc='#moe.gemm_config<mma = bf16_operands, tile = [128, 128, 64], mma_shape = [64, 128, 16], stages = 6, dequant_stages = 2, warpgroups = [1, 2], registers = [40, 232], persistent = true, pingpong = true, rhs_codes = true>'
gridrc='#moe.gemm_config<mma = bf16_operands, tile = [128, 128, 64], mma_shape = [64, 128, 16], stages = 6, dequant_stages = 2, warpgroups = [1, 2], registers = [40, 232], rhs_codes = true>'
p2rc='#moe.gemm_config<mma = bf16_operands, tile = [128, 256, 64], mma_shape = [64, 256, 16], stages = 4, dequant_stages = 2, warpgroups = [1, 2], registers = [40, 232], persistent = true, rhs_codes = true>'
if want rhs-codes; then
  # #moe.gemm_config rhs_codes (the weight read as FP8 codes, dequantized
  # by the producer warpgroup) gives the default's bf16 values in the same
  # MMA order: the same bits, on layers of both modes, e5m2 and partial N
  # tiles, and with --rhs-codes (every GEMM it applies to; pre-quantized
  # weights keep the operand kernel); memcheck and racecheck.
  bitwise_against --rhs-codes "--rhs-codes == the default" "$small" \
    T=512,H=256,I=128,E=4,K=2,B=128,weights=mx,checkpoint=bf16 \
    T=300,H=256,I=96,E=4,K=2,B=128,checkpoint=bf16,bias=on
  p1_configs=("$pprc" "$gridrc") p2_config=$p2rc
  p1_p2_bitwise rhs_codes "$small" T=1024,H=1024,I=512,E=8,K=2,B=128 \
    T=512,H=512,I=160,E=4,K=2,B=128,quant=e5m2,affinity=on_h \
    T=4096,H=1024,I=512,E=8,K=2,B=128,checkpoint=bf16
  for tool in memcheck racecheck; do
    run "compute-sanitizer $tool P1 and P2 rhs_codes" compute-sanitizer \
      --tool $tool --error-exitcode 1 moe-run --target=sm90a \
      "--gemm-config-at=1=$pprc" "--gemm-config-at=2=$p2rc" \
      --layer T=1024,H=512,I=256,E=8,K=2,B=128 --empty-experts 1 --check none
  done
  for flag in "" --rhs-codes; do
    run "gemm 8192^3${flag:+ $flag}" moe-run --target=sm90a \
      --gemm M=8192,N=8192,K=8192,G=1 --repeat 10 --warmup 2 $flag
  done
fi
if want rhs-codes-ncu; then
  # At reference shape 1 (torch-gen inputs) the ncu time of every GEMM and
  # operand kernel, default and with rhs_codes on P1, on P2 and on both
  # (--rhs-codes).
  shape=T=16384,H=4096,I=1536,E=128,K=8,B=128
  run "torch-gen $shape" python3 -m moe_crosscheck torch-gen \
    --config "$shape" --seed 1 --out "$out/rc-in"
  for v in ${RHS_CODES_NCU:-default p1 p2 both}; do
    args=()
    case $v in
    default) ;;
    p1) args=("--gemm-config-at=1=$pprc") ;;
    p2) args=("--gemm-config-at=2=$p2rc") ;;
    both) args=(--rhs-codes) ;;
    esac
    layer_kernel_times "ncu shape 1 rhs-codes $v" "rhs-codes-$v" "$shape" \
      "$out/rc-in" "${args[@]}"
  done
fi
if want lhs-codes; then
  # #moe.gemm_config lhs_codes gives the MMAs the default's bf16 values in
  # the same order (decoded from the codes in registers instead of read
  # from a bf16 tile): the same bits, on layers of both modes, e5m2, K
  # tiles of an odd count, partial tiles, a bias, clamps; memcheck and
  # racecheck. Each run under a time limit: a barrier mismatch would hang.
  bitwise_against --lhs-codes "--lhs-codes == the default" "${lhs_layers[@]}"
  sanitize_with --lhs-codes
  for flag in "" --lhs-codes; do
    run "gemm 8192^3${flag:+ $flag}" timeout 120 moe-run --target=sm90a \
      --gemm M=8192,N=8192,K=8192,G=1 --repeat 10 --warmup 2 $flag
  done
fi
if want lhs-gather; then
  # A row's MX rounding along K is the same whether it is taken before or
  # after the gather, and a padding slot's row arrives as zeros, so the
  # GEMMs get the same bf16 values either way: the same bits, on layers of
  # both modes, empty experts, T*K not a multiple of B, e5m2, affinity on
  # H, a bias, clamps; memcheck and racecheck. Each run under a time
  # limit: a stage whose copies never all arrive would hang.
  bitwise_against --gathered-lhs-copies \
    "lhs_gather (default) == --gathered-lhs-copies" "${lhs_layers[@]}"
  base=(--act-epilogue)
  bitwise_against --gathered-lhs-copies \
    "lhs_gather (default) == --gathered-lhs-copies (act-epilogue)" \
    T=1024,H=1024,I=512,E=8,K=2,B=128
  base=()
  sanitize_with ""
fi
# At the reference shapes (torch-gen inputs; SHAPES, space-separated, else
# both) the ncu time of every kernel of the layer, default and with FLAG.
ncu_against() {  # FLAG [SHAPES]
  local shape v args name=${1#--}
  for shape in ${2:-T=16384,H=4096,I=1536,E=128,K=8,B=128 T=24576,H=1536,I=256,E=128,K=8,B=128}; do
    run "torch-gen $shape" python3 -m moe_crosscheck torch-gen \
      --config "$shape" --seed 1 --out "$out/ncu-in"
    for v in default "$name"; do
      args=()
      [ "$v" = "$name" ] && args=("$1")
      layer_kernel_times "ncu ${shape%%,H*} $v" "$name-$v-${shape%%,H*}" \
        "$shape" "$out/ncu-in" "${args[@]}"
    done
    rm -rf "$out/ncu-in"
  done
}
if want round-operands; then
  # P3 and P4 gather x and dy through their token ids and round them along
  # the slots (P3's consumers in their registers, P4's producer in shared
  # memory) with the operand kernel's builders: the same
  # bf16 values, so the same bits (padding slots and columns past H arrive
  # as zeros; affinity on H leaves P4's dy, times a, to the operand kernel).
  # --swap-rounded-rhs: P4 computes the transposed product and rounds dy
  # in its consumers' registers (swap_operands).
  for flag in --round-lhs --round-rhs --swap-rounded-rhs; do
    bitwise_against $flag "$flag == the default" \
      "${lhs_layers[@]}" T=2048,H=768,I=384,E=16,K=4,B=128,rule=floor_alt
    sanitize_with $flag
    for tool in memcheck racecheck; do
      run "compute-sanitizer $tool $flag $partial" timeout 300 \
        compute-sanitizer --tool $tool --error-exitcode 1 moe-run \
        --target=sm90a $flag --layer "$partial" --empty-experts 3 --check none
    done
  done
fi
if want swap-weights; then
  # The block GEMMs' transposed products sum the same products of the same
  # MX values, transposed: within R_mx's tolerance (bitwise equality with
  # the default is not claimed), and deterministic.
  for layer in "${lhs_layers[@]}" T=2048,H=768,I=384,E=16,K=4,B=128,rule=floor_alt; do
    run "sm90a --swap-weights $layer" timeout 300 moe-run --target=sm90a \
      --swap-weights --layer "$layer" --empty-experts 1 --outputs "$out/single"
    run "sm90a --swap-weights again $layer" timeout 300 moe-run \
      --target=sm90a --swap-weights --layer "$layer" --empty-experts 1 \
      --check none --outputs "$out/both"
    compare "$out/single" "$out/both" "--swap-weights two runs, bitwise: $layer"
    rm -rf "$out/single" "$out/both"
  done
  sanitize_with --swap-weights
fi
if want swap-weights-ncu; then
  ncu_against --swap-weights "${SWAP_SHAPES:-}"
fi
if want tma-store; then
  # The f32 result tile staged through shared memory and stored by TMA
  # (the default) against st.global from the accumulators: the same
  # values at the same places, so the same bits (partial tiles: the TMA
  # clips rows past M, of each expert in the expert GEMMs, and columns past
  # N; biases added before staging).
  bitwise_against --register-stores \
    "tma_store (default) == --register-stores" \
    "${lhs_layers[@]}" T=2048,H=768,I=384,E=16,K=4,B=128,rule=floor_alt \
    T=300,H=96,I=160,E=4,K=2,B=128,bias=on
  sanitize_with
  for tool in memcheck racecheck; do
    run "compute-sanitizer $tool $partial" timeout 300 compute-sanitizer \
      --tool $tool --error-exitcode 1 moe-run --target=sm90a \
      --layer "$partial" --empty-experts 3 --check none
  done
fi
if want tma-store-ncu; then
  ncu_against --register-stores "${TMA_STORE_SHAPES:-}"
fi
# The default kernel configurations of a layer without a checkpoint (GEMM
# 0 the recompute, 1 P1, 2 P2, 3 P3, 4 P4: the reference shapes' rows of
# the kernel table) with STAGES stages, tma_store = BUFFERS and
# store_columns = COLUMNS, as --gemm-config-at flags, one per line.
store_configs() {  # STAGES BUFFERS COLUMNS
  local spec cols=""
  [ "$3" != 32 ] && cols=", store_columns = $3"
  for spec in "0:48, 224], rhs_n_major = true, lhs_gather = true" \
      "1:48, 224], persistent = true, lhs_gather = true" \
      "2:40, 232], persistent = true" \
      "3:40, 232], rhs_n_major = true, lhs_m_major = true, persistent = true" \
      "4:40, 232], rhs_n_major = true, lhs_m_major = true, persistent = true"; do
    echo "--gemm-config-at=${spec%%:*}=#moe.gemm_config<mma = bf16_operands, tile = [128, 256, 64], mma_shape = [64, 256, 16], stages = $1, warpgroups = [1, 2], registers = [${spec#*:}, tma_store = $2$cols>"
  done
}
if want tma-store-buffers; then
  # Four chunk buffers per consumer warpgroup beside three stages, on every
  # GEMM of the layer (the reference shapes' rows of the table, with
  # tma_store = 4 and stages = 3): bit for bit against the default on a
  # layer, then the ncu time of every kernel at both reference shapes.
  mapfile -t four < <(store_configs 3 4 32)
  layer=T=1024,H=1024,I=512,E=8,K=2,B=128
  run "sm90a resident tma_store = 4, 3 stages $layer" timeout 300 moe-run \
    --target=sm90a "${four[@]}" --layer "$layer" --empty-experts 1 \
    --outputs "$out/single"
  run "sm90a resident $layer" timeout 300 moe-run --target=sm90a \
    --layer "$layer" --empty-experts 1 --outputs "$out/both"
  compare "$out/single" "$out/both" "tma_store = 4 == tma_store = 2, bitwise: $layer"
  rm -rf "$out/single" "$out/both"
  for shape in ${TMA_STORE_SHAPES:-T=24576,H=1536,I=256,E=128,K=8,B=128 T=16384,H=4096,I=1536,E=128,K=8,B=128}; do
    run "torch-gen $shape" python3 -m moe_crosscheck torch-gen \
      --config "$shape" --seed 1 --out "$out/ncu-in"
    layer_kernel_times "ncu ${shape%%,H*} default" \
      "tma-store-buffers-default-${shape%%,H*}" "$shape" "$out/ncu-in"
    layer_kernel_times "ncu ${shape%%,H*} tma_store = 4, 3 stages" \
      "tma-store-buffers-four-${shape%%,H*}" "$shape" "$out/ncu-in" "${four[@]}"
    rm -rf "$out/ncu-in"
  done
fi
if want store-columns; then
  # The f32 tile in narrower chunks, more of them in flight in the same
  # shared memory: the same values at the same places, so the same bits
  # (STORE_CHECKS=0: only the ncu times).
  for v in ${STORE_VARIANTS:-4:4:16 4:8:8}; do
    [ "${STORE_CHECKS:-1}" = 0 ] && break
    IFS=: read -r stages buffers cols <<<"$v"
    mapfile -t cfgs < <(store_configs "$stages" "$buffers" "$cols")
    for layer in T=1024,H=1024,I=512,E=8,K=2,B=128 \
        T=300,H=128,I=160,E=4,K=2,B=128,bias=on \
        T=2048,H=768,I=384,E=16,K=4,B=128,rule=floor_alt; do
      run "sm90a resident store $v $layer" timeout 300 moe-run \
        --target=sm90a "${cfgs[@]}" --layer "$layer" --empty-experts 1 \
        --outputs "$out/single"
      run "sm90a resident $layer" timeout 300 moe-run --target=sm90a \
        --layer "$layer" --empty-experts 1 --outputs "$out/both"
      compare "$out/single" "$out/both" \
        "store $v == the default, bitwise: $layer"
      rm -rf "$out/single" "$out/both"
    done
    for tool in memcheck racecheck; do
      run "compute-sanitizer $tool store $v" timeout 300 \
        compute-sanitizer --tool $tool --error-exitcode 1 moe-run \
        --target=sm90a "${cfgs[@]}" --layer T=1024,H=512,I=256,E=8,K=2,B=128 \
        --empty-experts 1 --check none
    done
  done
  for shape in ${STORE_SHAPES:-T=24576,H=1536,I=256,E=128,K=8,B=128 T=16384,H=4096,I=1536,E=128,K=8,B=128}; do
    run "torch-gen $shape" python3 -m moe_crosscheck torch-gen \
      --config "$shape" --seed 1 --out "$out/ncu-in"
    layer_kernel_times "ncu ${shape%%,H*} default" \
      "store-columns-default-${shape%%,H*}" "$shape" "$out/ncu-in"
    for v in ${STORE_VARIANTS:-4:4:16 4:8:8}; do
      IFS=: read -r stages buffers cols <<<"$v"
      mapfile -t cfgs < <(store_configs "$stages" "$buffers" "$cols")
      layer_kernel_times "ncu ${shape%%,H*} store $v" \
        "store-$stages-$buffers-$cols-${shape%%,H*}" "$shape" "$out/ncu-in" \
        "${cfgs[@]}"
    done
    rm -rf "$out/ncu-in"
  done
fi
if want round-operands-ncu; then
  ncu_against --round-lhs "${ROUND_SHAPES:-}"
  ncu_against --round-rhs "${ROUND_SHAPES:-}"
  ncu_against --swap-rounded-rhs "${ROUND_SHAPES:-}"
fi
if want lhs-gather-ncu; then
  ncu_against --gathered-lhs-copies "${LHS_GATHER_SHAPES:-}"
fi
if want lhs-codes-ncu; then
  ncu_against --lhs-codes "${LHS_CODES_SHAPES:-}"
fi
if want overlap; then
  # 64-row tiles compute each row with the same products in the same order
  # as 128-row ones; their padding tiles (first slot padding) are the
  # expert GEMMs' padding K tiles, which neither reads: the same bits.
  # P1 is a layer's GEMM 1, or 0 with a checkpoint (no recompute GEMM).
  two='#moe.gemm_config<mma = bf16_operands, tile = [64, 128, 64], mma_shape = [64, 128, 16], stages = 4, warpgroups = [1, 1], registers = [40, 216], ctas_per_sm = 2>'
  for layer in "$small" "$partial" T=1024,H=1024,I=512,E=8,K=2,B=128 \
      T=512,H=512,I=96,E=4,K=2,B=128,quant=e5m2,rule=floor,affinity=on_h \
      "$small,act=geglu,clamp_gate=:0.5,clamp_up=-0.75:,bias=on" \
      T=4096,H=1024,I=512,E=8,K=2,B=128,checkpoint=bf16 \
      T=300,H=256,I=128,E=4,K=2,B=128,checkpoint=bf16,bias=on; do
    p1=1
    [ "${layer#*checkpoint=}" != "$layer" ] && p1=0
    bitwise_against "--gemm-config-at=$p1=$two" \
      "P1 two CTAs per SM == the default P1" "$layer"
  done
  for tool in memcheck racecheck; do
    run "compute-sanitizer $tool P1 two CTAs per SM $small" compute-sanitizer \
      --tool "$tool" --error-exitcode 1 moe-run --target=sm90a \
      "--gemm-config-at=1=$two" --layer "$small" --empty-experts 1 \
      --check none
  done
fi
if want dgate-up; then
  # P1's epilogue rounds [dg|du] along 2I (a lane quad's blocks) and along
  # the slots (a warp pair's blocks, amaxes through shared memory) with the
  # shared builders: the operand kernel's values, so bit for bit. Partial
  # column tiles (I = 32, 64, 96), e5m2 and FLOOR rules, biases (f32
  # [dg|du] kept for the bias gradient), checkpoints, geglu with clamps.
  # (P1 one CTA per tile: the ping-pong kernel keeps f32 [dg|du].)
  base=(--grid-gemms)
  bitwise_against --dgate-up-epilogue "dgate-up-epilogue == f32 [dg|du]" \
    "$small" "$partial" T=1024,H=1024,I=512,E=8,K=2,B=128 \
    T=512,H=512,I=96,E=4,K=2,B=128,quant=e5m2,rule=floor,affinity=on_h \
    "$small,act=geglu,clamp_gate=:0.5,clamp_up=-0.75:,bias=on" \
    T=4096,H=1024,I=512,E=8,K=2,B=128,checkpoint=bf16 \
    T=256,H=64,I=32,E=4,K=2,B=128,rule=floor_alt
  for tool in memcheck racecheck; do
    run "compute-sanitizer $tool dgate-up $small" compute-sanitizer \
      --tool "$tool" --error-exitcode 1 moe-run --target=sm90a \
      --dgate-up-epilogue --grid-gemms --layer "$small" --empty-experts 1 \
      --check none
  done
  base=()
fi

if want weight-reuse; then
  # The transposed block GEMMs compute the same values in the same k16
  # order as the kernels that read the operand kernels' rounded weights,
  # so every output is compared bit for bit, on every layer of the host
  # matrix (with an empty expert each).
  mapfile -t matrix_layers < <(grep -ho "RUN: moe-run --layer [^ ]*" \
      test/Integration/Host/matrix-*.test | sed -e 's/.*--layer //' | sort -u)
  bitwise_against --weight-reuse=0 "weight-reuse=5 == weight-reuse=0" \
    "${matrix_layers[@]}"
  for tool in racecheck memcheck; do
    run "compute-sanitizer $tool (weight-reuse=5, swapped, gathered)" \
      timeout 300 compute-sanitizer --tool $tool --error-exitcode 1 moe-run \
      --target=sm90a --layer T=512,H=256,I=128,E=4,K=2,B=128,bias=on \
      --empty-experts 1 --check none
  done
fi

if want in-place-tiles; then
  # The operand kernels' in-place rounding along the rows through the
  # shared-memory tile (a column a thread), against P3's and P4's
  # in-register rounding of the same values (round_lhs, bit for bit the
  # operand kernels' conversions) and against the column-pair form: the
  # same bits.
  for layer in "${lhs_layers[@]}" T=2048,H=768,I=384,E=16,K=4,B=128,rule=floor_alt; do
    read -r -a empty <<<"$(empty_expert "$layer")"
    for v in "--round-reuse=0 --in-place-tiles" "--round-reuse=0" \
             "--round-reuse=64"; do
      read -r -a args <<<"$v"
      run "sm90a resident $v $layer" timeout 300 moe-run --target=sm90a \
        "${args[@]}" --layer "$layer" "${empty[@]}" \
        --outputs "$out/${v//[ =-]/}"
    done
    compare "$out/roundreuse0inplacetiles" "$out/roundreuse0" \
      "in-place tiles == column pairs, bitwise: $layer"
    compare "$out/roundreuse0inplacetiles" "$out/roundreuse64" \
      "in-place tiles == in-register slot rounding, bitwise: $layer"
    rm -rf "$out"/roundreuse*
  done
  for tool in memcheck racecheck; do
    run "compute-sanitizer $tool --in-place-tiles $partial" timeout 300 \
      compute-sanitizer --tool $tool --error-exitcode 1 moe-run \
      --target=sm90a --round-reuse=0 --in-place-tiles --layer "$partial" \
      --empty-experts 3 --check none
  done
fi

if want act-bwd-narrow; then
  # The same roundings of the same values, in CTAs of 128 columns; only
  # da's partial sums of <dA, h> group differently.
  skip=da.npy
  bitwise_against --act-bwd-narrow "act-bwd-narrow == default but da" \
    "${lhs_layers[@]}"
  skip=""
  sanitize_with --act-bwd-narrow
fi
if want in-place-tiles-ncu; then
  ncu_against --in-place-tiles
fi
if want act-bwd-narrow-ncu; then
  ncu_against --act-bwd-narrow
fi

if want k-turns; then
  # k_turns only orders the two warpgroups' MMAs (each its own rows, in the
  # same k16 order): every output bit for bit the default, on the layers
  # whose GEMMs round their lhs (all of them below the weight-reuse and
  # round-reuse bounds).
  bitwise_against --k-turns "k-turns == default" \
    T=300,H=256,I=160,E=4,K=2,B=128,bias=on T=1024,H=1024,I=512,E=8,K=2,B=128 \
    T=512,H=512,I=160,E=4,K=2,B=128,quant=e5m2,affinity=on_h
  run "compute-sanitizer racecheck (k-turns)" timeout 300 compute-sanitizer \
    --tool racecheck --error-exitcode 1 moe-run --target=sm90a \
    --layer T=512,H=256,I=128,E=4,K=2,B=128,bias=on --empty-experts 1 \
    --check none --k-turns
fi

if want both-axes; then
  # operands-both-axes (the default): one operand kernel writes both
  # roundings of x, dy,
  # the gate/up weight and [dg|du]; the same values as one kernel each, so
  # every output is compared bit for bit (layers whose columns are
  # multiples of 256 use the new kernels, the others fall back).
  bitwise_against --operands-one-axis "operands-both-axes == one kernel each" \
    "$small" "$partial" T=1024,H=1024,I=512,E=8,K=2,B=128 \
    T=512,H=512,I=256,E=4,K=2,B=128,quant=e5m2,affinity=on_h \
    "$small,act=geglu,clamp_gate=:0.5,clamp_up=-0.75:"
fi

if want checkpoint-epilogue; then
  # P1's kernel reads the checkpoint [N, 2, I, B] and the token ids itself:
  # the same values as the unpacked, masked f32 rows, so bit for bit.
  bitwise_against --checkpoint-unpacked "checkpoint-epilogue == unpacked rows" \
    "$small,checkpoint=bf16" "$partial,checkpoint=bf16" \
    T=1024,H=1024,I=512,E=8,K=2,B=128,checkpoint=bf16 \
    "$small,act=geglu,clamp_gate=:0.5,clamp_up=-0.75:,checkpoint=bf16"
  # Generated checkpoints hold zeros in their padded slots, where the
  # mask cannot be seen: here the padding holds 1.5 + slot / 1024 (bf16),
  # and both paths must still match the references and each other.
  pad=T=1000,H=256,I=256,E=8,K=2,B=128
  run "torch-gen $pad,checkpoint=true" python3 -m moe_crosscheck torch-gen \
    --config "$pad,checkpoint=true" --seed 3 --out "$out/in"
  run "checkpoint padding made non-zero" python3 - "$out/in" <<'PY'
import sys
import numpy as np
d = sys.argv[1]
ids = np.load(f"{d}/token_position_to_id.npy").reshape(-1)
ck = np.load(f"{d}/checkpoint.npy").view(np.uint16)  # [N, 2, I, B] bf16
n, _, i, b = ck.shape
pad = np.flatnonzero(ids < 0)
assert pad.size > 0, "no padded slot"
vals = (1.5 + pad / 1024.0).astype(np.float32).view(np.uint32) >> 16
ck[pad // b, :, :, pad % b] = vals.astype(np.uint16)[:, None, None]
np.save(f"{d}/checkpoint.npy", ck.view("V2"))
print(f"{pad.size} of {ids.size} slots padded, their checkpoint set non-zero")
PY
  run "sm90a resident checkpoint-unpacked $pad,checkpoint=bf16 (non-zero padding)" \
    moe-run --target=sm90a --checkpoint-unpacked --layer "$pad,checkpoint=bf16" \
    --inputs "$out/in" --outputs "$out/single"
  run "sm90a resident $pad,checkpoint=bf16 (non-zero padding)" moe-run \
    --target=sm90a --layer "$pad,checkpoint=bf16" --inputs "$out/in" \
    --outputs "$out/both"
  compare "$out/single" "$out/both" "checkpoint-epilogue == unpacked rows, bitwise: non-zero padding"
  rm -rf "$out/single" "$out/both" "$out/in"
  run "memcheck checkpoint-epilogue T=1024,H=1024,I=512,E=8,K=2,B=128,checkpoint=bf16" \
    compute-sanitizer --tool memcheck --error-exitcode 1 moe-run --target=sm90a \
    --layer T=1024,H=1024,I=512,E=8,K=2,B=128,checkpoint=bf16
fi

if want layers; then
  # The fp8 path is measured, not gated: its FP8 wgmma sums inexactly and
  # misses the 2e-3 gate (docs/results/2026-11-30-sm90a-mma-path.md).
  for path in bf16-operands bf16 fp8; do
    gate=()
    label="sm90a $path"
    if [ $path = fp8 ]; then
      gate=(--tolerance 1)
      label="sm90a fp8 (measured, gate off)"
    fi
    for layer in "$small" "$small,act=geglu" T=512,H=512,I=256,E=4,K=2,B=128 \
        T=1024,H=1024,I=512,E=8,K=2,B=128 \
        T=1024,H=768,I=256,E=8,K=4,B=128,quant=e5m2,affinity=on_h; do
      run "$label $layer" moe-run --target=sm90a --mma-path "$path" \
        "${gate[@]}" --layer "$layer"
    done
  done
fi

if want sanitize; then
  for layer in "$small" "$partial --empty-experts 3"; do
    for tool in memcheck racecheck; do
      echo "== compute-sanitizer --tool $tool (sm90a, $layer)"
      # shellcheck disable=SC2086
      compute-sanitizer --tool "$tool" moe-run --target=sm90a --layer $layer \
        >"$out/$tool" 2>&1
      tail -3 "$out/$tool"
      if grep -qE "(ERROR SUMMARY: 0 errors|RACECHECK SUMMARY: 0 hazards)" \
           "$out/$tool" && grep -q "moe-run: PASS" "$out/$tool"; then
        record "compute-sanitizer $tool $layer" PASS
      else
        record "compute-sanitizer $tool $layer" FAIL
      fi
    done
  done
fi

if want determinism; then
  echo "== determinism: two runs, bitwise"
  layer=T=1024,H=1024,I=512,E=8,K=2,B=128
  same=PASS
  for i in 1 2; do
    # shellcheck disable=SC2086
    moe-run --target=sm90a ${MATRIX_EXTRA:-} --layer "$layer" \
      --outputs "$out/run$i" >/dev/null 2>&1 || same=FAIL
  done
  for f in "$out"/run1/*.npy; do
    cmp -s "$f" "$out/run2/$(basename "$f")" || { same=FAIL; echo "differs: $f"; }
  done
  record "determinism $layer (2 runs, bitwise)" "$same"
fi

if want kernels; then
  layer=T=2048,H=1024,I=512,E=8,K=2,B=128
  # The fp8 run is a measurement: its outputs miss the gate (see layers).
  kernel_times "bf16 $layer" moe-run --target=sm90a --mma-path bf16 \
    --layer "$layer"
  kernel_times "fp8 $layer" moe-run --target=sm90a --mma-path fp8 \
    --tolerance 1 --layer "$layer"
fi

if want p1-prof; then
  # Where P1's epilogue spends its time: the stall reasons per issued
  # instruction of the whole kernel, for the default (ping-pong) kernel,
  # one CTA per tile (--grid-gemms), and that one with the epilogue that
  # rounds [dg|du] itself (docs/results/2026-12-02-dgate-up-epilogue.md).
  metrics=gpu__time_duration.sum,smsp__inst_executed.sum
  metrics+=,dram__bytes_read.sum,dram__bytes_write.sum
  for reason in barrier long_scoreboard short_scoreboard mio_throttle \
      lg_throttle math_pipe_throttle wait not_selected no_instruction \
      branch_resolving membar; do
    metrics+=,smsp__average_warps_issue_stalled_${reason}_per_issue_active.ratio
  done
  for form in default --grid-gemms "--grid-gemms --dgate-up-epilogue"; do
    args=(); [ "$form" = default ] || read -ra args <<<"$form"
    if ncu --clock-control none --kernel-name regex:block_matmul_act \
         --launch-count 1 --metrics "$metrics" --csv moe-run --target=sm90a \
         "${args[@]}" --layer T=24576,H=1536,I=256,E=128,K=8,B=128 \
         --check none >"$out/p1.csv" 2>"$out/p1.err"; then
      summary=$(python3 - "$out/p1.csv" <<'PY'
import csv, sys
# moe-run's own lines come first; the CSV starts at ncu's header row.
rows = list(csv.reader(open(sys.argv[1])))
start = next(i for i, r in enumerate(rows) if "Metric Name" in r)
head = rows[start]
data = [r for r in rows[start + 1:] if len(r) == len(head)]
name, value = head.index("Metric Name"), head.index("Metric Value")
short = lambda m: (m.replace("smsp__average_warps_issue_stalled_", "stall_")
                    .replace("_per_issue_active.ratio", ""))
print(" ".join("%s=%s" % (short(r[name]), r[value]) for r in data))
PY
)
      echo "p1-prof $form: $summary"
      record "ncu P1 shape 2 $form" "PASS ($summary)"
    else
      cat "$out/p1.err"
      record "ncu P1 shape 2 $form" FAIL
    fi
  done
fi

# ncu's full section set with SASS-level stall sampling of the first
# launch after SKIP of the kernels matching KERNEL-REGEX in COMMAND, into
# $reports/NAME.ncu-rep and its details, source (SASS) and raw pages as
# CSV; records the key facts and prints the SASS lines with the most stall
# samples.
reports=${SUITE_REPORTS:-$out/reports}
profile() {  # NAME KERNEL-REGEX SKIP COMMAND...
  local name=$1 regex=$2 skip=$3
  shift 3
  echo "== deep-prof $name: $*"
  if ! ncu --clock-control none --set full --import-source no \
       --kernel-name "regex:$regex" --launch-skip "$skip" --launch-count 1 \
       -f -o "$reports/$name" "$@" >"$out/deep.log" 2>&1; then
    tail -20 "$out/deep.log"
    record "deep-prof $name" FAIL
    return
  fi
  ncu -i "$reports/$name.ncu-rep" --page details --csv >"$reports/$name-details.csv" 2>&1
  ncu -i "$reports/$name.ncu-rep" --page source --print-source sass --csv \
    >"$reports/$name-sass.csv" 2>&1
  ncu -i "$reports/$name.ncu-rep" --page raw --csv >"$reports/$name-raw.csv" 2>&1
  summary=$(python3 - "$reports/$name-details.csv" "$reports/$name-sass.csv" \
      "$reports/$name-raw.csv" <<'PY'
import csv, sys
want = {"Duration", "Elapsed Cycles", "SM Frequency", "DRAM Throughput",
      "L2 Cache Throughput",
      "Compute (SM) Throughput", "L2 Hit Rate", "Issue Slots Busy",
      "No Eligible", "Warp Cycles Per Issued Instruction"}
rows = list(csv.reader(open(sys.argv[1])))
head = next((i for i, r in enumerate(rows) if "Metric Name" in r), None)
facts = []
if head is not None:
  h = rows[head]
  n, v = h.index("Metric Name"), h.index("Metric Value")
  facts = ["%s=%s" % (r[n], r[v]) for r in rows[head + 1:]
           if len(r) > v and r[n] in want]
print(" ".join(facts))
# Bytes by direction and L2 sectors by operation (which bytes are extra).
raw = list(csv.reader(open(sys.argv[3])))
if len(raw) > 2:
  names, units, values = raw[0], raw[1], raw[-1]
  want = ("dram__bytes_read.sum", "dram__bytes_write.sum",
          "lts__t_sectors_srcunit_tex_op_read.sum",
          "lts__t_sectors_srcunit_tex_op_write.sum",
          "lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum",
          "lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum",
          "lts__t_sectors_op_read.sum", "lts__t_sectors_op_write.sum",
          "lts__t_sectors_srcunit_tex.sum", "launch__grid_size",
          "launch__cluster_dim_x", "launch__block_size",
          "launch__registers_per_thread",
          "launch__shared_mem_per_block_dynamic")
  print("  raw: " + " ".join("%s=%s%s" % (n, values[i], units[i])
                             for i, n in enumerate(names) if n in want))
# The SASS lines with the most stall samples, with their top reasons.
rows = list(csv.reader(open(sys.argv[2])))
head = next((i for i, r in enumerate(rows) if "Source" in r), None)
if head is None:
  sys.exit(0)
h = rows[head]
src = h.index("Source")
total = next((i for i, c in enumerate(h)
            if c.startswith("Warp Stall Sampling (All")), None)
if total is None:
  sys.exit(0)
reasons = [i for i, c in enumerate(h) if c.startswith("stall_") or
         c.startswith("smsp__pcsamp_warps_issue_stalled")]
def num(x):
  try:
      return float(x.replace(",", ""))
  except ValueError:
      return 0.0
lines = [r for r in rows[head + 1:] if len(r) > total]
all_samples = sum(num(r[total]) for r in lines) or 1
for r in sorted(lines, key=lambda r: -num(r[total]))[:12]:
  top = sorted(((num(r[i]), h[i]) for i in reasons), reverse=True)[:2]
  print("  %5.1f%% %-60s %s" % (100 * num(r[total]) / all_samples,
        r[src].strip()[:60], " ".join("%s=%g" % (k, v) for v, k in top)))
PY
)
  echo "$summary"
  record "deep-prof $name" "PASS ($(head -1 <<<"$summary"))"
}
deep() {  # NAME KERNEL-REGEX MOE-RUN-ARGS...
  local name=$1 regex=$2
  shift 2
  profile "$name" "$regex" 0 moe-run --target=sm90a "$@" --check none
}
if want store-prof; then
  # Where the GEMMs' epilogue time goes: P3 and P2 (the largest store
  # costs, docs/results/2026-12-04-tma-store.md) with every instruction's
  # stall samples, tma_store (the default) and --register-stores, at
  # reference shape 2, and P3 at shape 1.
  mkdir -p "$reports"
  for shape in T=24576,H=1536,I=256,E=128,K=8,B=128 T=16384,H=4096,I=1536,E=128,K=8,B=128; do
    t=${shape%%,H*}
    run "torch-gen $shape" python3 -m moe_crosscheck torch-gen \
      --config "$shape" --seed 1 --out "$out/deep-in"
    deep "p3-$t" 'expert_matmul_9$' --layer "$shape" --inputs "$out/deep-in"
    if [ "$t" = T=24576 ]; then
      deep "p3-$t-register-stores" 'expert_matmul_9$' --register-stores \
        --layer "$shape" --inputs "$out/deep-in"
      deep "p2-$t" 'block_matmul_7$' --layer "$shape" --inputs "$out/deep-in"
      deep "p2-$t-register-stores" 'block_matmul_7$' --register-stores \
        --layer "$shape" --inputs "$out/deep-in"
    fi
    rm -rf "$out/deep-in"
  done
fi
if want deep-prof; then
  # Why P1 takes the same 3.83-3.86 ms in every form (tile width, ping-pong
  # or not, docs/results/2026-12-02-clusters-and-l2.md), and why a cluster
  # pair is latency-bound: every instruction's stall samples.
  mkdir -p "$reports"
  shape=T=16384,H=4096,I=1536,E=128,K=8,B=128
  run "torch-gen $shape" python3 -m moe_crosscheck torch-gen \
    --config "$shape" --seed 1 --out "$out/deep-in"
  c128='#moe.gemm_config<mma = bf16_operands, tile = [128, 128, 64], mma_shape = [64, 128, 16], stages = 6, warpgroups = [1, 2], registers = [40, 232], cluster_n = 2>'
  g128='#moe.gemm_config<mma = bf16_operands, tile = [128, 128, 64], mma_shape = [64, 128, 16], stages = 6, warpgroups = [1, 2], registers = [40, 232]>'
  torch_deep() {  # NAME SPEC: torch's bf16 GEMM (bench/torch_gemms.py)
    profile "$1" 'cutlass|[Gg]emm|xmma' 2 python3 -c "import sys; sys.path.insert(0, 'bench')
import torch, torch_gemms as t
g = t.parse_gemm('$2'); a, b = t.make_operands(g, 'cuda')
f = t.bf16_gemm(g, a, b, t.group_offsets(g, 'cuda'))
for _ in range(3): f()
torch.cuda.synchronize()"
    ncu -i "$reports/$1.ncu-rep" --page details --csv 2>/dev/null |
      awk -F'","' 'NR == 2 { print "  kernel: " $5 }'
  }
  deep p1-pingpong block_matmul_act --layer "$shape" --inputs "$out/deep-in"
  deep p1-grid block_matmul_act --grid-gemms --layer "$shape" \
    --inputs "$out/deep-in"
  # P1's product alone (moe-run --gemm at P1's shape, the default config)
  # and torch's bf16 grouped GEMM of the same shape: what the epilogue
  # costs, and how the fastest kernel at this shape moves its bytes.
  deep p1-plain matmul --gemm M=131072,N=1536,K=4096,G=128,B=128
  # The operand kernels of x and dy (gathered rows, both roundings):
  # 0.93 ms each at shape 1 for ~2.3 GB, below the DRAM rate.
  deep operand-x 'mx_operand_0$' --layer "$shape" --inputs "$out/deep-in"
  deep operand-dy 'mx_operand_3$' --layer "$shape" --inputs "$out/deep-in"
  torch_deep torch-p1 M=131072,N=1536,K=4096,G=128,B=128
  deep gemm-128x128 matmul --gemm M=8192,N=8192,K=8192,G=1 --gemm-config "$g128"
  deep gemm-cluster-128x128 matmul --gemm M=8192,N=8192,K=8192,G=1 \
    --gemm-config "$c128"
fi

if want sass; then
  for path in bf16 fp8; do
    echo "== SASS of examples/blockwise_bwd.mlir, mma-path=$path"
    if moe-opt examples/blockwise_bwd.mlir --moe-decompose-bwd |
         moe-opt --moe-gpu-device-pipeline="chip=sm_90a format=isa mma-path=$path" |
         python3 test/Conversion/MoeToNVGPU/Inputs/extract-ptx.py \
           >"$out/layer-$path.ptx" &&
       ptxas -arch=sm_90a "$out/layer-$path.ptx" -o "$out/layer-$path.cubin" &&
       cuobjdump -sass "$out/layer-$path.cubin" >"$out/sass-$path"; then
      # Per kernel: how many of each tensor-core (xGMMA) instruction.
      awk '/Function :/ { fn = $3 }
           { for (i = 1; i <= NF; ++i)
               if ($i ~ /^[HQ]GMMA[.]/) { n[fn " " $i]++ } }
           END { for (k in n) print k, n[k] }' "$out/sass-$path" | sort |
        tee "$out/mix-$path"
      record "SASS $path: tensor-core instructions" \
        "PASS ($(awk '{ split($2, p, "."); c[p[1]] += $3 } END {
                    for (k in c) printf "%s %d ", k, c[k] }' "$out/mix-$path"))"
    else
      record "SASS $path: tensor-core instructions" FAIL
    fi
  done
fi

if want refcheck; then
  run "torch R_mx on CUDA vs moe-ref (torch-selfcheck)" \
    python3 -m moe_crosscheck torch-selfcheck --reference cpp \
    --moe-ref "$(command -v moe-ref)" --workdir "$out/tsc" --device cuda
  run "torch._grouped_mm bf16 baseline (bench/torch_baseline.py)" \
    python3 bench/torch_baseline.py
fi

for part in ref1 ref2 ref1-ncu ref2-ncu ref1-prof ref2-prof; do
  want $part || continue
  case $part in
  ref1*) shape=T=16384,H=4096,I=1536,E=128,K=8,B=128 ;;
  *) shape=T=24576,H=1536,I=256,E=128,K=8,B=128 ;;
  esac
  # REF_LAYER_EXTRA: layer options added to the shape (",checkpoint=bf16").
  shape=$shape${REF_LAYER_EXTRA:-}
  d=$out/$part
  # torch-gen spells a checkpoint input checkpoint=true.
  run "torch-gen $shape" python3 -m moe_crosscheck torch-gen \
    --config "${shape/checkpoint=bf16/checkpoint=true}" --seed 1 --out "$d/in"
  if [ "${part%-prof}" != "$part" ]; then
    # Every kernel of the resident backward (one pass per kernel: a single
    # metric needs no replay), the 25 slowest and the total.
    echo "== ncu profile of every kernel: $shape"
    if ncu --clock-control none --metrics gpu__time_duration.sum \
         --print-units base --csv moe-run --target=sm90a --layer "$shape" \
         --inputs "$d/in" --check none >"$out/prof" 2>&1; then
      grep -E '"gpu__time_duration.sum"' "$out/prof" |
        awk -F'","' '{ gsub(/[",]/, "", $NF); print $1 "|" $5, $NF }' |
        sed 's/^"//' | sort -t' ' -k2 -n -r | tee "$out/prof-times" | head -25
      record "ncu every kernel $shape" "PASS ($(awk '{ s += $2; n++ } END {
        printf "%d kernels, %.1f us", n, s / 1000 }' "$out/prof-times"))"
    else
      tail -20 "$out/prof"
      record "ncu every kernel $shape" FAIL
    fi
  elif [ "${part%-ncu}" = "$part" ]; then
    run "sm90a $shape (outputs written)" moe-run --target=sm90a \
      --layer "$shape" --inputs "$d/in" --outputs "$d/out" --check none
    run "sm90a $shape vs R_mx (torch fp64 on the GPU)" \
      python3 -m moe_crosscheck torch-check --inputs "$d/in" \
      --outputs "$d/out" --device cuda --r64
  else
    # The baseline in the same call as the kernels it is compared with.
    run "torch._grouped_mm bf16 backward $shape" \
      python3 bench/torch_baseline.py --layer "$shape"
    kernel_times "sm90a bf16 $shape" moe-run --target=sm90a \
      --layer "$shape" --inputs "$d/in" --check none
    # The whole backward, resident: the call alone (device buffers in,
    # device buffers out), best of 3.
    run "sm90a resident full backward $shape" moe-run --target=sm90a \
      --layer "$shape" --inputs "$d/in" --check none --repeat 3
    record "  full backward $shape" \
      "$(grep '^gpu:' "$out/log" | sed 's/^gpu: //')"
  fi
  rm -rf "$d"
done

echo
echo "================ GPU suite on $(nvidia-smi --query-gpu=name --format=csv,noheader)"
printf '%s\n' "${rows[@]}"
! printf '%s\n' "${rows[@]}" | grep -q FAIL
