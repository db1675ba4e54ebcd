#!/usr/bin/env bash
# Runs a command with the moe-mlir device bundle (scripts/build-device-bundle.sh)
# on the GPU machine:
#
#   bash .bundle/run-on-device.sh CMD [ARGS...]
#
# Next to moe-device.tar.xz (the copy in .bundle/), it first unpacks the
# bundle into ${MOE_BUNDLE_ROOT:-/tmp}/moe-device; inside the unpacked bundle
# (the copy in the tarball) it uses that folder. Either way it puts the
# bundle's bin/ first on PATH, exports MOE_BUNDLE_DIR, prints the bundle's
# commit, and runs CMD in the current directory (the working tree).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [ $# -eq 0 ]; then
  echo "usage: $0 CMD [ARGS...]" >&2
  exit 2
fi
if [ -x "$here/bin/moe-run" ]; then
  bundle=$here
else
  tarball=$here/moe-device.tar.xz
  [ -f "$tarball" ] || { echo "run-on-device: $tarball not found" >&2; exit 2; }
  root=${MOE_BUNDLE_ROOT:-/tmp}
  rm -rf "$root/moe-device"
  tar -xJf "$tarball" -C "$root"
  bundle=$root/moe-device
fi
echo "run-on-device: $(sed -n 's/^commit: //p' "$bundle/BUILD-INFO") from $bundle" >&2
export PATH="$bundle/bin:$PATH" MOE_BUNDLE_DIR="$bundle"
exec "$@"
