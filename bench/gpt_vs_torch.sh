#!/usr/bin/env bash
# gpt_vs_torch.sh - the gpt learner step (forward + backward + clip + AdamW)
# of chaosloco (bench_gpt) against PyTorch CPU on the identical model, batch
# and thread count, for the default-candidate gpt and a larger one, at 1 and
# 2 threads; prints both figures, the ratio, and chaosloco's GFLOP/s beside
# raw sgemm on the same linear-layer shapes.
#
#   bench/gpt_vs_torch.sh [BUILD_DIR]      (default build-gpt-rel; SECONDS_PER=2)
#
# Installs Debian's python3-torch for this benchmark only (never in
# scripts/test): `INSTALL=1 bench/gpt_vs_torch.sh` runs apt-get first.
set -euo pipefail
BUILD=${1:-build-gpt-rel}
SECS=${SECONDS_PER:-2}
PY=${PYTHON:-/usr/bin/python3} # Debian's python3-torch lives there, not in a pyenv
HERE=$(cd "$(dirname "$0")" && pwd)
if [[ ${INSTALL:-0} == 1 ]]; then
  sudo apt-get install -y --no-install-recommends python3-torch
fi
"$PY" -c 'import torch' 2>/dev/null || { echo "gpt_vs_torch.sh: needs python3-torch (INSTALL=1)" >&2; exit 64; }
[[ -x $BUILD/bench/bench_gpt ]] || {
  cmake -S "$HERE/.." -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$BUILD" -j2 --target bench_gpt >/dev/null
}
SHAPES=("--T 64 --C 128 --H 512 --L 4 --NH 4 --B 8"     # default candidate
        "--T 128 --C 128 --H 512 --L 4 --NH 4 --B 8"    # the issue's PyTorch figure
        "--T 128 --C 256 --H 1024 --L 6 --NH 8 --B 8")  # larger
echo "| model | threads | chaosloco tokens/s | PyTorch tokens/s | ratio | step GFLOP/s | sgemm GFLOP/s |"
echo "|---|---:|---:|---:|---:|---:|---:|"
for s in "${SHAPES[@]}"; do
  for th in 1 2; do
    c=$(OPENBLAS_NUM_THREADS=$th "$BUILD/bench/bench_gpt" --threads "$th" --seconds "$SECS" $s)
    p=$(OMP_NUM_THREADS=$th "$PY" "$HERE/gpt_torch.py" --threads "$th" --seconds "$SECS" $s)
    ct=$(sed -E 's/.*: ([0-9]+) tokens.*/\1/' <<<"$c")
    pt=$(sed -E 's/.*: ([0-9]+) tokens.*/\1/' <<<"$p")
    gf=$(sed -E 's/.*tokens\/s, ([0-9.]+) GFLOP.*/\1/' <<<"$c")
    sg=$(sed -E 's/.*\(step\), ([0-9.]+) GFLOP.*/\1/' <<<"$c")
    name=$(sed -E 's/.*gpt (L=.*B=[0-9]+) params=([0-9]+).*/\1 (\2 params)/' <<<"$c")
    echo "| $name | $th | $ct | $pt | $(awk -v a="$ct" -v b="$pt" 'BEGIN{printf "%.2f", a/b}') | $gf | $sg |"
  done
done
