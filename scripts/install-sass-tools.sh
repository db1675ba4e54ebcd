#!/usr/bin/env bash
# cuobjdump and nvdisasm for this machine (the CUDA toolkit here has ptxas
# but no disassembler): NVIDIA's pinned PyPI wheels, into .tools/sass of
# the checkout (ignored by git). bench/sass_mix.py and the benchmark's SASS
# mix find them there, so a kernel's SASS can be read and counted on a CPU
# machine before any device time is spent on it.
#   bash scripts/install-sass-tools.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dest=$root/.tools/sass
version=13.5.37
if [ -x "$dest/nvidia/cu13/bin/cuobjdump" ] && [ -x "$dest/nvidia/cu13/bin/nvdisasm" ]; then
  echo "install-sass-tools: $dest/nvidia/cu13/bin (already there)"
  exit 0
fi
python3 -m pip install --quiet --no-deps --target "$dest" \
  "nvidia-cuda-cuobjdump==$version" "nvidia-cuda-nvdisasm==$version"
chmod +x "$dest"/nvidia/cu13/bin/*
echo "install-sass-tools: $dest/nvidia/cu13/bin"
