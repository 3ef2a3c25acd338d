#!/usr/bin/env bash
# ckpt.sh - what learner checkpoints cost the inner loop.
#
#   bench/ckpt.sh [BUILD_DIR]          (default build/rel, a Release build)
#
# One learner (M=1, decoupled, the MLP on the synthetic corpus: short steps,
# so a checkpoint's cost shows) trains for WALL seconds, then gets SIGTERM;
# its step count is read from the syncer's status (the learner's final
# heartbeat). Runs alternate between --learner-checkpoint-every EVERY
# (default 100) and 0 (no periodic checkpoint), REPS times each. Prints the
# steps of every run, their means and the ratio mean(with) / mean(without):
# 1.0 means checkpoints cost nothing. The syncer does not checkpoint
# (--checkpoint-every 0) so that only the learner's cost is measured.
# Beside it: steps per CPU-second of the whole learner process (all its
# threads, the checkpoint writer included, read from /proc before the
# SIGTERM), which a loaded box disturbs far less than steps per wall second.
# Needs curl. Every process is stopped on exit.
set -euo pipefail
BUILD=${1:-build/rel}
BIN=${CHAOSLOCO_BIN:-$BUILD/chaosloco}
WALL=${WALL:-10}
REPS=${REPS:-3}
EVERY=${EVERY:-100}
MODEL=(--model mlp --data synthetic)
[[ -x $BIN ]] || { echo "ckpt.sh: $BIN not found" >&2; exit 64; }
command -v curl >/dev/null || { echo "ckpt.sh: needs curl" >&2; exit 1; }
[[ $WALL =~ ^[0-9]+$ && $WALL -gt 0 ]] || { echo "ckpt.sh: WALL must be a positive integer (seconds)" >&2; exit 64; }
[[ $REPS =~ ^[0-9]+$ && $REPS -gt 0 ]] || { echo "ckpt.sh: REPS must be a positive integer" >&2; exit 64; }
[[ $EVERY =~ ^[0-9]+$ && $EVERY -gt 0 ]] || { echo "ckpt.sh: EVERY must be a positive integer (steps)" >&2; exit 64; }
WORK=$(mktemp -d /tmp/chaosloco-ckpt-XXXXXX)
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
    rm -rf "$WORK"
}
trap cleanup EXIT

# one run: $1 = learner checkpoint interval (0 = none); prints its steps
run() {
    local every=$1 dir
    dir=$(mktemp -d "$WORK/run-XXXXXX")
    OPENBLAS_NUM_THREADS=1 "$BIN" syncer --listen 127.0.0.1:0 --state-dir "$dir/s" --mode decoupled \
        --learners 1 --steps 100000000 --checkpoint-every 0 --eval-every-ms 5000 \
        --learner-checkpoint-every "$every" "${MODEL[@]}" 2>"$dir/syncer.log" &
    local spid=$!
    PIDS+=("$spid")
    for _ in $(seq 200); do [[ -s $dir/s/listen.addr ]] && break; sleep 0.05; done
    [[ -s $dir/s/listen.addr ]] || { echo "ckpt.sh: syncer did not start" >&2; cat "$dir/syncer.log" >&2; exit 1; }
    local url="http://$(cat "$dir/s/listen.addr")"
    OPENBLAS_NUM_THREADS=1 "$BIN" learner --syncer "$url" --id 0 --state-dir "$dir/l0" 2>"$dir/l0.log" &
    local lpid=$!
    PIDS+=("$lpid")
    sleep "$WALL"
    local ticks
    ticks=$(awk '{ print $14 + $15 }' "/proc/$lpid/stat")
    kill -TERM "$lpid"
    wait "$lpid" || true
    local steps
    steps=$(curl -sf "$url/v1/status" | sed -n 's/.*"learners": *\[{[^]]*"step": *\([0-9]*\).*/\1/p' | head -1)
    kill -TERM "$spid"
    wait "$spid" || true
    [[ -n $steps ]] || { echo "ckpt.sh: no step count in the status" >&2; exit 1; }
    grep -h "background checkpoints" "$dir/l0.log" | sed 's/.*INFO [^ ]* /  # /' >&2 || true
    echo "$steps $ticks"
}

HZ=$(getconf CLK_TCK)
with=() without=() wcpu=() ocpu=()
for ((r = 0; r < REPS; r++)); do
    read -r s t <<<"$(run "$EVERY")"
    with+=("$s")
    wcpu+=("$(awk -v s="$s" -v t="$t" -v hz="$HZ" 'BEGIN { printf "%.0f", s / (t / hz) }')")
    read -r s t <<<"$(run 0)"
    without+=("$s")
    ocpu+=("$(awk -v s="$s" -v t="$t" -v hz="$HZ" 'BEGIN { printf "%.0f", s / (t / hz) }')")
done
mean() { awk '{ s += $1; n++ } END { printf "%.1f", s / n }' <<<"$(printf '%s\n' "$@")"; }
mw=$(mean "${with[@]}") mo=$(mean "${without[@]}")
cw=$(mean "${wcpu[@]}") co=$(mean "${ocpu[@]}")
echo "| learner checkpoints | steps in ${WALL} s (each run) | mean | steps per learner CPU-s (each run) | mean |"
echo "|---|---|---|---|---|"
echo "| every $EVERY steps | ${with[*]} | $mw | ${wcpu[*]} | $cw |"
echo "| none | ${without[*]} | $mo | ${ocpu[*]} | $co |"
awk -v a="$mw" -v b="$mo" -v c="$cw" -v d="$co" \
    'BEGIN { printf "\nratio of steps (with / without): %.3f; of steps per CPU-s: %.3f\n", a / b, c / d }'
