#!/usr/bin/env bash
# The transposed block GEMMs at both reference shapes (docs/sm90a-kernels.md,
# twenty-fifth session): ncu's kernel times and the call with the default
# (weight-reuse 5: shape 1 swaps, shape 2 not), --swap-weights (the weights
# rounded in the block GEMMs' registers, their producers copying the slot
# rows of x and dy through the token ids) and --swap-weights
# --swap-slot-copies (those slot rows from an operand kernel's copies).
# One device call (~6 minutes):
#   bash .bundle/run-on-device.sh bash scripts/device/probes/swap-shapes.sh
set -uo pipefail
source "$(dirname "$0")/common.sh"

sets=" |--swap-weights|--swap-weights --swap-slot-copies"
layer_times T=16384,H=4096,I=1536,E=128,K=8,B=128 "$sets"
layer_times T=24576,H=1536,I=256,E=128,K=8,B=128 "$sets"
