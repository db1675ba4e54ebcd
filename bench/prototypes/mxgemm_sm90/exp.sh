#!/usr/bin/env bash
# timing experiments on the H200 (see build_exp.sh); prints one RESULT line per kernel
cd "$(dirname "$0")"
export PATH=/usr/local/cuda/bin:$PATH
nvcc -O2 -std=c++17 -o /tmp/drv driver.cu -lcuda || exit 1
for f in out/exp/*.info; do n=$(basename $f .info)
  sm=$(sed -n 's/.*smem_bytes=\([0-9]*\).*/\1/p' $f); th=$(sed -n 's/.*threads=\([0-9]*\).*/\1/p' $f)
  timeout 30 /tmp/drv --module out/exp/$n.cubin --kernel $n --smem $sm --threads $th --M 4096 --N 4096 --K 4096 --check-rows 16 --iters 20 | sed "s/^RESULT/$n/"
done
