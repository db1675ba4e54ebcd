# Shared by the device probes (sourced, not run): the environment, torch-gen
# inputs and ncu's per-kernel times.
export PATH=/usr/local/cuda/bin:$PATH PYTHONPATH=$PWD/python

# probe_inputs LAYER DIR: torch-gen's inputs of LAYER (seed 1, generated on
# the GPU as the benchmark's; moe-run's own host-made inputs take minutes at
# shape-1 sizes) into DIR. Fails with a line that says which layer.
probe_inputs() {
  python3 -m moe_crosscheck torch-gen --config "$1" --seed 1 --out "$2" \
    >/dev/null 2>&1 || { echo "torch-gen $1 failed"; return 1; }
}

# kernel_times NAME CSV [MIN_MS]: the kernels of an ncu --csv run with the
# gpu__time_duration.sum metric (--print-units base), each above MIN_MS
# (default 0.05) on a line, then one line "NAME total T ms, GEMMs G ms (S%)"
# (GEMM kernels: the names with "matmul").
kernel_times() {
  grep gpu__time_duration "$2" |
    awk -F'","' -v name="$1" -v min="${3:-0.05}" '
      { gsub(/[",]/, "", $NF); t = $NF / 1e6; s += t
        if ($5 ~ /matmul/) g += t; if (t > min) printf "  %s %.3f\n", $5, t }
      END { printf "%-14s total %.3f ms, GEMMs %.3f ms (%.1f%%)\n", name, s, g,
                   (s > 0 ? 100 * g / s : 0) }'
}

# layer_times LAYER SETS: ncu's kernel times of LAYER (torch-gen inputs)
# with each set of moe-run flags in SETS (| between sets, " " the default),
# then the call's (moe-run --repeat 10, the power cap included).
layer_times() {
  local layer=$1 set args sets tmp
  tmp=$(mktemp -d)
  probe_inputs "$layer" "$tmp/in" || return
  IFS='|' read -r -a sets <<<"$2"
  for set in "${sets[@]}"; do
    read -r -a args <<<"$set"
    timeout 240 ncu --clock-control none --csv --print-units base \
      --metrics gpu__time_duration.sum moe-run --target=sm90a --layer "$layer" \
      --inputs "$tmp/in" --check none "${args[@]}" >"$tmp/ncu.csv" \
      2>"$tmp/ncu.err" || echo "ncu $set failed"
    local name=${set# }
    echo "== $layer ${name:-default}"
    kernel_times "${name:-default}" "$tmp/ncu.csv"
    timeout 120 moe-run --target=sm90a --layer "$layer" --inputs "$tmp/in" \
      --check none "${args[@]}" --repeat 10 --warmup 1 | grep -E "^(gpu|timing)" |
      head -3
  done
  rm -rf "$tmp"
}
