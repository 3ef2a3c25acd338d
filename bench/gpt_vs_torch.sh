#!/usr/bin/env bash
# gpt_vs_torch.sh - the gpt learner step (forward + backward + clip + AdamW)
# of chaosloco (bench_gpt) against PyTorch CPU on the identical model, batch
# and thread count, for the default gpt, the issue's reference shape and a
# larger one, at 1 and 2 threads. Per shape it prints both figures at each
# thread count, chaosloco against PyTorch's BEST figure over the thread
# counts (Debian's PyTorch 1.13 is often slower with 2 threads than with 1 on
# 2 vCPUs), chaosloco's own 2-thread/1-thread ratio, and chaosloco's GFLOP/s
# beside raw sgemm on the same linear-layer shapes.
#
#   bench/gpt_vs_torch.sh [BUILD_DIR]      (default build-gpt-rel; SECONDS_PER=2, ROUNDS=1)
#
# ROUNDS=R repeats every (shape, threads, side) measurement R times,
# interleaved (chaosloco, PyTorch, chaosloco, ...), and keeps each one's best:
# on a shared machine the load moves between runs. Needs Debian's
# python3-torch, for this benchmark only (never in scripts/test):
# `scripts/install-deps --bench`, or INSTALL=1 here.
set -euo pipefail
BUILD=${1:-build-gpt-rel}
SECS=${SECONDS_PER:-2}
ROUNDS=${ROUNDS:-1}
PY=${PYTHON:-/usr/bin/python3} # Debian's python3-torch lives there, not in a pyenv
HERE=$(cd "$(dirname "$0")" && pwd)
if [[ ${INSTALL:-0} == 1 ]]; then
  "$HERE/../scripts/install-deps" --bench
fi
"$PY" -c 'import torch' 2>/dev/null || {
  echo "gpt_vs_torch.sh: needs python3-torch (scripts/install-deps --bench, or INSTALL=1)" >&2
  exit 64
}
[[ -x $BUILD/bench/bench_gpt ]] || {
  cmake -S "$HERE/.." -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$BUILD" -j2 --target bench_gpt >/dev/null
}
SHAPES=("--T 64 --C 128 --H 512 --L 4 --NH 4 --B 8"     # the default gpt
        "--T 128 --C 128 --H 512 --L 4 --NH 4 --B 8"    # the issue's PyTorch figure
        "--T 128 --C 256 --H 1024 --L 6 --NH 8 --B 8")  # larger
num() { sed -E "s#.*$1.*#\\1#" <<<"$2"; }
max() { awk -v a="$1" -v b="$2" 'BEGIN{print (a > b ? a : b)}'; }
div() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.2f", a / b}'; }
echo "| model | threads | chaosloco tokens/s | PyTorch tokens/s | chaosloco / PyTorch best | step GFLOP/s | sgemm GFLOP/s |"
echo "|---|---:|---:|---:|---:|---:|---:|"
for s in "${SHAPES[@]}"; do
  declare -A C P G S
  for th in 1 2; do C[$th]=0; P[$th]=0; done
  for ((r = 0; r < ROUNDS; r++)); do
    for th in 1 2; do
      c=$(OPENBLAS_NUM_THREADS=$th "$BUILD/bench/bench_gpt" --threads "$th" --seconds "$SECS" $s)
      p=$(OMP_NUM_THREADS=$th "$PY" "$HERE/gpt_torch.py" --threads "$th" --seconds "$SECS" $s)
      ct=$(num ': ([0-9]+) tokens' "$c")
      pt=$(num ': ([0-9]+) tokens' "$p")
      if (( ct > C[$th] )); then
        C[$th]=$ct
        G[$th]=$(num 'tokens/s, ([0-9.]+) GFLOP' "$c")
        S[$th]=$(num '\(step\), ([0-9.]+) GFLOP' "$c")
      fi
      (( pt > P[$th] )) && P[$th]=$pt
      name=$(sed -E 's/.*gpt (L=.*B=[0-9]+) params=([0-9]+).*/\1 (\2 params)/' <<<"$c")
    done
  done
  pbest=$(max "${P[1]}" "${P[2]}")
  for th in 1 2; do
    echo "| $name | $th | ${C[$th]} | ${P[$th]} | $(div "${C[$th]}" "$pbest") | ${G[$th]} | ${S[$th]} |"
  done
  echo "| $name | 2 vs 1 | $(div "${C[2]}" "${C[1]}")x | $(div "${P[2]}" "${P[1]}")x | best $(div "$(max "${C[1]}" "${C[2]}")" "$pbest") | | |"
  unset C P G S
done
