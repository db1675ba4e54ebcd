#!/usr/bin/env bash
# Installs what moe-mlir needs to build and test, and checks the CUDA toolkit.
# Idempotent: silent when everything is present. Debian 12 (bookworm); the
# LLVM/MLIR 22 packages come from bookworm-security.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(
  llvm-22-dev libmlir-22-dev mlir-22-tools llvm-22-tools
  libzstd-dev zlib1g-dev libxml2-dev libffi-dev libncurses-dev
  cmake ninja-build g++ ccache libgtest-dev python3
  # The sanitize preset (scripts/sanitize.sh): clang with ASan, UBSan and
  # libFuzzer.
  clang-22 libclang-rt-22-dev
)

die() { echo "setup: error: $*" >&2; exit 1; }

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
    missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null || die "need root (or sudo) to install: ${missing[*]}"
    SUDO=sudo
  fi
  $SUDO apt-get update -qq || die "apt-get update failed"
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null ||
    die "apt-get install failed for: ${missing[*]} (llvm-22/mlir-22 come from bookworm-security; is it in the apt sources?)"
fi
[ -f /usr/lib/llvm-22/lib/cmake/mlir/MLIRConfig.cmake ] ||
  die "MLIR 22 CMake package missing at /usr/lib/llvm-22/lib/cmake/mlir"

# Python packages of the independent cross-check, pinned.
PYTHON=${PYTHON:-$(command -v python3)}
if ! "$PYTHON" - <<'PY' 2>/dev/null
import sys, importlib.metadata as md
pins = [l.split("==") for l in open("python/requirements.txt") if "==" in l]
sys.exit(0 if all(md.version(n.strip()) == v.strip() for n, v in pins) else 1)
PY
then
  echo "setup: installing python/requirements.txt into $PYTHON"
  "$PYTHON" -m pip install -q --disable-pip-version-check -r python/requirements.txt ||
    die "pip install -r python/requirements.txt failed"
fi
# torch for the Python package's torch tests (MoEMLP); MOE_SKIP_TORCH=1
# leaves it out (those tests then report UNSUPPORTED).
if [ "${MOE_SKIP_TORCH:-0}" != 1 ] &&
   ! "$PYTHON" -c 'import sys, importlib.metadata as md
pins = [l.split("==") for l in open("python/requirements-torch.txt") if "==" in l]
sys.exit(0 if all(md.version(n.strip()).split("+")[0] == v.strip() for n, v in pins) else 1)' 2>/dev/null
then
  echo "setup: installing python/requirements-torch.txt into $PYTHON (~4.7 GB)"
  "$PYTHON" -m pip install -q --disable-pip-version-check -r python/requirements-torch.txt ||
    die "pip install -r python/requirements-torch.txt failed"
fi

# The CUDA toolkit: ptxas and fatbinary serialize GPU code, cuda.h declares
# the driver API the runtime library loads at run time.
CUDA_ROOT=${CUDA_ROOT:-/usr/local/cuda}
for f in bin/ptxas bin/fatbinary include/cuda.h; do
  [ -e "$CUDA_ROOT/$f" ] || die "CUDA toolkit incomplete: $CUDA_ROOT/$f not found (set CUDA_ROOT)"
done
