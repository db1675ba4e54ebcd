#!/usr/bin/env bash
# Runs moe-run under a sweep of `ulimit -v` limits (KiB) and prints one line
# per run: the limit, the exit status and "signal" when the run ended by a
# signal (status > 128), which must never happen (issue 13). Status 127 is
# the dynamic loader failing to map moe-run's libraries at the smallest
# limits, before moe-run runs at all.
# Usage: ulimit-sweep.sh LAYER LIMIT...
layer=$1
shift
for limit in "$@"; do
  (ulimit -v "$limit" && exec moe-run --layer "$layer" --cache-dir "") \
    > /dev/null 2>&1
  rc=$?
  if [ "$rc" -gt 128 ]; then
    echo "limit $limit status $rc signal"
  else
    echo "limit $limit status $rc"
  fi
done
