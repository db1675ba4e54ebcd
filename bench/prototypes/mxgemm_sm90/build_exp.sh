#!/usr/bin/env bash
# Timing experiments listed in exps.txt ("name generator-flags"; kernels that skip work give
# wrong results on purpose) -> out/exp/<name>.{cubin,info,ptx}
set -euo pipefail
cd "$(dirname "$0")"
export PATH=/usr/lib/llvm-22/bin:$PATH
PIPE=$(cat out/pipeline.txt)
rm -rf out/exp; mkdir -p out/exp
while read -r name flags; do
  [ -z "$name" ] && continue
  python3 gen_mxgemm.py --name $name $flags -o out/exp/$name.mlir
  python3 gen_mxgemm.py --name $name $flags --info > out/exp/$name.info
  mlir-opt out/exp/$name.mlir --pass-pipeline="$PIPE" -o out/exp/$name.bin.mlir
  python3 extract_ptx.py out/exp/$name.bin.mlir out/exp/$name.ptx
  /usr/local/cuda/bin/ptxas -arch=sm_90a -v out/exp/$name.ptx -o out/exp/$name.cubin 2>&1 | grep -E "C75|spill" | sed "s/^/$name: /"
  rm out/exp/$name.mlir out/exp/$name.bin.mlir
done < exps.txt
