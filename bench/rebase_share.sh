#!/usr/bin/env bash
# rebase_share.sh - paired runs of two chaosloco builds (issue 27): the share
# of the tokens its learners trained that reached a merge (merge efficiency)
# and the final held-out bits/byte of a fault-free decoupled run, same flags
# and seed for both builds, bounded by steps (never by time).
#
#   bench/rebase_share.sh --base BIN --new BIN [--learners M] [--steps N]
#                         [--seeds LIST] [--out DIR] [-- SYNCER FLAGS...]
#
#   --base BIN    the reference build's chaosloco (e.g. main before issue 27)
#   --new BIN     the build under test
#   --learners M  learners (default 4)
#   --steps N     inner steps per learner (default 600)
#   --seeds LIST  comma-separated seeds (default 1)
#   --out DIR     output directory (default out/rebase-share-<UTC time>)
#   after --       extra syncer flags (default: the small GPT of the
#                 integration tests on fortunes, K=1)
#
# Prints one Markdown row per build and seed: merged tokens, trained tokens
# (the learners' final counts), their ratio, and the last eval's bits/byte
# once it covers every merge. Runs one build at a time; wants jq and curl.
set -euo pipefail
BASE= NEW= M=4 STEPS=600 SEEDS=1 OUT=
EXTRA=(--model gpt --data fortunes --context 32 --embed 32 --hidden 128 --layers 2 --heads 2 --batch 8
    --quorum 1 --eval-tokens 2048)
while [[ $# -gt 0 ]]; do
    case $1 in
    --base) BASE=$2; shift ;;
    --new) NEW=$2; shift ;;
    --learners) M=$2; shift ;;
    --steps) STEPS=$2; shift ;;
    --seeds) SEEDS=$2; shift ;;
    --out) OUT=$2; shift ;;
    --) shift; EXTRA=("$@"); break ;;
    -h | --help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "rebase_share.sh: unknown argument '$1' (see --help)" >&2; exit 64 ;;
    esac
    shift
done
for b in "$BASE" "$NEW"; do
    [[ -x $b ]] || { echo "rebase_share.sh: --base and --new need chaosloco binaries ('$b')" >&2; exit 64; }
done
[[ $M =~ ^[1-9][0-9]*$ && $STEPS =~ ^[1-9][0-9]*$ ]] || { echo "rebase_share.sh: --learners/--steps need whole numbers" >&2; exit 64; }
for t in jq curl; do command -v $t >/dev/null || { echo "rebase_share.sh: needs $t" >&2; exit 64; }; done
OUT=${OUT:-out/rebase-share-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT"
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

one() { # LABEL BIN SEED
    local d=$OUT/$1-seed$3 url i
    rm -rf "$d"
    mkdir -p "$d"
    PIDS=()
    OPENBLAS_NUM_THREADS=1 "$2" syncer --insecure-no-auth --listen 127.0.0.1:0 --state-dir "$d/syncer" \
        --mode decoupled --learners "$M" --steps "$STEPS" --seed "$3" "${EXTRA[@]}" >"$d/syncer.log" 2>&1 &
    PIDS+=($!)
    for i in $(seq 300); do [[ -s $d/syncer/listen.addr ]] && break; sleep 0.2; done
    [[ -s $d/syncer/listen.addr ]] || { echo "rebase_share.sh: $1: the syncer did not listen, see $d/syncer.log" >&2; exit 3; }
    url=http://$(cat "$d/syncer/listen.addr")
    local lp=()
    for ((i = 0; i < M; i++)); do
        OPENBLAS_NUM_THREADS=1 "$2" learner --syncer "$url" --id "$i" --state-dir "$d/learner$i" \
            >"$d/learner$i.log" 2>&1 &
        lp+=($!)
        PIDS+=($!)
    done
    for p in "${lp[@]}"; do wait "$p" || { echo "rebase_share.sh: $1: a learner failed, see $d" >&2; exit 3; }; done
    # the last eval once it covers every merge (bounded: 600 x 0.2 s)
    local st=
    for i in $(seq 600); do
        st=$(curl -sf "$url/v1/status") || true
        [[ -n $st ]] && jq -e '.eval.merges == .merges and .eval.loss != null' >/dev/null <<<"$st" && break
        sleep 0.2
    done
    echo "$st" >"$d/status.json"
    kill "${PIDS[0]}" 2>/dev/null || true
    wait "${PIDS[0]}" 2>/dev/null || true
    jq -r --arg l "$1" --arg s "$3" '([.learners[].tokens] | add) as $t
        | "| \($l) | \($s) | \(.tokens_merged) | \($t) | \(.tokens_merged / $t * 1000 | round / 1000) | \(.eval.loss / (2 | log) * 1000 | round / 1000) |"' \
        "$d/status.json"
}

echo "| build | seed | merged tokens | trained tokens | merged / trained | final bits/byte |"
echo "|---|---:|---:|---:|---:|---:|"
for s in ${SEEDS//,/ }; do
    one base "$BASE" "$s"
    one new "$NEW" "$s"
done
