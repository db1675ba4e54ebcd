#!/usr/bin/env bash
# Builds the bundle that runs on the GPU machine (docs: shared/DEVICE.md):
# moe-run, libMoeJIT.so, moe-opt, moe-cuda-smoke, moe-ref (the torch
# reference is checked against it there) and libmoe_cuda_runtime.so linked
# with static LLVM/MLIR/libstdc++ (cmake/DeviceBundle.cmake) in their own
# build directory, stripped, packed with xz -6 into
# .bundle/moe-device.tar.xz next to .bundle/run-on-device.sh.
#
#   scripts/build-device-bundle.sh [--no-opt] [--no-check]
#     --no-opt    leave moe-opt out (about 10 MB compressed less)
#     --no-check  skip the run of the unpacked bundle on this machine
#   env: BUILD_DIR (build-device), JOBS (2), BUNDLE_MAX_MB (60)
#
# Fails when a bundled file needs a shared library other than glibc's, libz
# and libzstd, a glibc newer than the GPU machine's 2.39, or a path of this
# build tree; or when the bundle exceeds BUNDLE_MAX_MB; or when the unpacked
# bundle's moe-run does not pass on examples/blockwise_bwd.mlir here.
#
# On the GPU machine, with `.bundle` in the run's carry list:
#   bash .bundle/run-on-device.sh moe-run examples/blockwise_bwd.mlir
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

WITH_OPT=1
CHECK=1
for arg in "$@"; do
  case "$arg" in
  --no-opt) WITH_OPT=0 ;;
  --no-check) CHECK=0 ;;
  *) echo "usage: $0 [--no-opt] [--no-check]" >&2; exit 2 ;;
  esac
done

BUILD_DIR=${BUILD_DIR:-build-device}
JOBS=${JOBS:-2}
BUNDLE_MAX_MB=${BUNDLE_MAX_MB:-60}
OUT_DIR=$ROOT/.bundle
TARBALL=$OUT_DIR/moe-device.tar.xz
NAME=moe-device
# What the GPU machine has (shared/DEVICE.md): glibc 2.39, libz, libzstd.
ALLOWED_NEEDED=" libc.so.6 libm.so.6 libpthread.so.0 libdl.so.2 librt.so.1 \
ld-linux-x86-64.so.2 libz.so.1 libzstd.so.1 "
# Libraries of the bundle itself, found through RUNPATH $ORIGIN/../lib.
BUNDLED_NEEDED=" libMoeJIT.so libmoe_cuda_runtime.so "
ORIGIN_RUNPATH="\$ORIGIN/../lib"
MAX_GLIBC=2.39

die() { echo "build-device-bundle: error: $*" >&2; exit 1; }
step() { echo "== $* =="; }

start=$(date +%s)

step "configure $BUILD_DIR (MOE_DEVICE_BUNDLE=ON)"
linker=()
if command -v ld.lld >/dev/null; then
  # Static LLVM links take minutes with ld.bfd and seconds with lld.
  linker=(-DLLVM_USE_LINKER=lld)
fi
cmake -G Ninja -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release \
  -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
  -DPython3_EXECUTABLE="${PYTHON:-$(command -v python3)}" \
  -DMOE_ENABLE_TESTS=OFF -DMOE_DEVICE_BUNDLE=ON "${linker[@]}" >/dev/null

targets=(moe-run MoeJIT moe-cuda-smoke moe-ref moe_cuda_runtime)
((WITH_OPT)) && targets+=(moe-opt)
step "build ${targets[*]} (ninja -j$JOBS)"
ninja -C "$BUILD_DIR" -j"$JOBS" "${targets[@]}"
built=$(date +%s)

step "stage and strip"
STAGE=$BUILD_DIR/bundle-stage
rm -rf "$STAGE"
mkdir -p "$STAGE/$NAME/bin" "$STAGE/$NAME/lib" "$STAGE/$NAME/examples"
B=$STAGE/$NAME
bins=(moe-run moe-cuda-smoke moe-ref)
((WITH_OPT)) && bins+=(moe-opt)
for t in "${bins[@]}"; do
  cp "$BUILD_DIR/bin/$t" "$B/bin/"
  strip "$B/bin/$t"
done
for l in libMoeJIT.so libmoe_cuda_runtime.so; do
  cp "$BUILD_DIR/lib/$l" "$B/lib/"
  strip --strip-unneeded "$B/lib/$l"
done
cp examples/*.mlir "$B/examples/"
cp scripts/device/run-on-device.sh "$B/"
{
  echo "moe-mlir device bundle"
  echo "commit: $(git rev-parse HEAD 2>/dev/null || echo unknown)$(
    git diff --quiet HEAD 2>/dev/null || echo ' (working tree modified)')"
  echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -n)"
  echo "compiler: $(c++ --version | head -1)"
  echo "llvm: $(/usr/lib/llvm-22/bin/llvm-config --version 2>/dev/null || echo 22)"
  echo "files:"
  (cd "$B" && find bin lib -type f -printf '  %p %s\n' | sort)
} >"$B/BUILD-INFO"

step "check dependencies"
bad=0
for f in "$B"/bin/* "$B"/lib/*.so; do
  rel=${f#"$B"/}
  mapfile -t needed < <(readelf -d "$f" |
    sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
  runpath=$(readelf -d "$f" | sed -n 's/.*(\(RUNPATH\|RPATH\)).*\[\(.*\)\]/\2/p')
  for n in "${needed[@]}"; do
    if [[ $BUNDLED_NEEDED == *" $n "* ]]; then
      [ -f "$B/lib/$n" ] || { echo "  $rel: needs $n, not in lib/"; bad=1; }
      [ "$runpath" = "$ORIGIN_RUNPATH" ] ||
        { echo "  $rel: needs $n but its RUNPATH is '$runpath'"; bad=1; }
    elif [[ $ALLOWED_NEEDED != *" $n "* ]]; then
      echo "  $rel: needs $n (not on the GPU machine)"
      bad=1
    fi
  done
  glibc=$(objdump -T "$f" | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' |
    sort -uV | tail -1)
  if [ -n "$glibc" ] &&
     [ "$(printf '%s\n%s\n' "$glibc" "$MAX_GLIBC" | sort -V | tail -1)" != "$MAX_GLIBC" ]; then
    echo "  $rel: needs GLIBC_$glibc > $MAX_GLIBC"
    bad=1
  fi
  if objdump -T "$f" | grep -qE 'GLIBCXX_|CXXABI_|GCC_[0-9]'; then
    echo "  $rel: imports libstdc++/libgcc_s symbols"
    bad=1
  fi
  if grep -qaF -e "$ROOT/" "$f"; then
    echo "  $rel: holds a path of this tree ($ROOT)"
    bad=1
  fi
  echo "  $rel: $(stat -c %s "$f") bytes; NEEDED: ${needed[*]}; RUNPATH: ${runpath:-none}; GLIBC <= ${glibc:-none}"
done
((bad == 0)) || die "the bundle needs what the GPU machine lacks (above)"

step "pack $TARBALL (xz -6)"
mkdir -p "$OUT_DIR"
tar -C "$STAGE" --sort=name --owner=0 --group=0 --numeric-owner \
  --mtime=@0 -cf - "$NAME" | xz -6 -T1 >"$TARBALL.tmp"
mv "$TARBALL.tmp" "$TARBALL"
cp scripts/device/run-on-device.sh "$OUT_DIR/run-on-device.sh"
size=$(stat -c %s "$TARBALL")
echo "  $(basename "$TARBALL"): $size bytes ($((size / 1048576)) MiB)"
((size <= BUNDLE_MAX_MB * 1048576)) ||
  die "bundle is $size bytes, over BUNDLE_MAX_MB=$BUNDLE_MAX_MB MiB"

if ((CHECK)); then
  step "check the unpacked bundle here (LD_LIBRARY_PATH unset)"
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  # The command the GPU machine runs, unpacking into a scratch folder.
  env -u LD_LIBRARY_PATH MOE_BUNDLE_ROOT="$tmp" \
    bash "$OUT_DIR/run-on-device.sh" moe-run examples/blockwise_bwd.mlir |
    tee "$tmp/run.txt" | tail -3
  [ "$(tail -1 "$tmp/run.txt")" = "moe-run: PASS" ] ||
    die "the bundle's moe-run did not pass on examples/blockwise_bwd.mlir"
  # The unpacked folder alone: its own examples, libraries found by RUNPATH.
  (cd "$tmp/$NAME" && env -u LD_LIBRARY_PATH bin/moe-run \
    examples/blockwise_bwd.mlir) >"$tmp/run2.txt"
  [ "$(tail -1 "$tmp/run2.txt")" = "moe-run: PASS" ] ||
    die "moe-run in the unpacked folder did not pass"
  env -u LD_LIBRARY_PATH ldd "$tmp/$NAME"/bin/* "$tmp/$NAME"/lib/*.so |
    tee "$tmp/ldd.txt"
  ! grep -q 'not found' "$tmp/ldd.txt" ||
    die "unresolved libraries in the unpacked bundle"
  env -u LD_LIBRARY_PATH "$tmp/$NAME/bin/moe-cuda-smoke" --emit-ptx \
    >"$tmp/smoke.ptx" || die "the bundle's moe-cuda-smoke does not start"
  grep -q '\.entry' "$tmp/smoke.ptx" ||
    die "the bundle's moe-cuda-smoke printed no PTX"
  if ((WITH_OPT)); then
    env -u LD_LIBRARY_PATH "$tmp/$NAME/bin/moe-opt" \
      "$tmp/$NAME/examples/blockwise_bwd.mlir" >/dev/null ||
      die "the bundle's moe-opt does not parse the example"
  fi
fi

end=$(date +%s)
echo "build-device-bundle: $TARBALL ($size bytes); build $((built - start)) s, total $((end - start)) s"
echo "on the GPU machine (carry .bundle): bash .bundle/run-on-device.sh CMD [ARGS...]"
