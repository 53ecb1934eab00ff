#!/usr/bin/env bash
# The GPU proof in one call (benchmarks/GPU.md): bash benchmarks/gpu.sh OUT [--dry-run]
# Installs nothing: on the GPU machine, `source .gpu/setup.sh` first (../shared/tools/gpu-payload builds .gpu/).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: benchmarks/gpu.sh OUT [--dry-run]}; shift
python3 -c 'import ray, optuna, pydantic' 2>/dev/null || { echo "gpu.sh: ray/optuna/pydantic missing: source .gpu/setup.sh first" >&2; exit 2; }
exec python3 benchmarks/gpu.py "$out" "$@"
