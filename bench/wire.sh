#!/usr/bin/env bash
# wire.sh - bytes on the wire per trained token and resilience of the
# training modes, measured on real processes over loopback.
#
#   bench/wire.sh [BUILD_DIR]          (default build-wire-rel)
#
# Part 1: LEARNERS (2) learners x STEPS inner steps each, same model and
#   tokens, in ddp, diloco (H=24, H=100) and decoupled (f32, bf16, int8,
#   int4, int2); bytes = tensor payload bytes in + out at the syncer (its
#   bytes counters: contributions up, fragments / delta chains down),
#   divided by the tokens trained; final eval loss beside each, and the
#   downstream answers: delta chains, full fragments, fallbacks (full pulls
#   because the kept deltas did not reach back or a delta check failed).
#   CONFIGS="mode:enc:H ..." picks a subset.
# Part 2: 4 learners (each with --slowdown SLOWDOWN, so that four fit on
#   two cores and stopping one does not speed up the others) for WALL
#   seconds; learner 3 is SIGSTOPped from WALL/3 to 2*WALL/3. Reports the longest gap between two merges and goodput =
#   merged tokens of the faulted run / merged tokens of a fault-free run of
#   the same mode and duration (measured in the same invocation).
# Prints markdown tables. Needs curl. Every process is stopped on exit.
set -euo pipefail
BUILD=${1:-build-wire-rel}
BIN=${CHAOSLOCO_BIN:-$BUILD/chaosloco}
STEPS=${STEPS:-600}
LEARNERS=${LEARNERS:-2}
CONFIGS=${CONFIGS:-"ddp:f32:24 diloco:f32:24 diloco:f32:100 decoupled:f32:24 decoupled:bf16:24 decoupled:int8:24 decoupled:int4:24 decoupled:int2:24"}
WALL=${WALL:-15}
SLOWDOWN=${SLOWDOWN:-4} # part 2: learners sleep 3/4 of each step, so 4 fit on 2 cores without contention
MODEL=(--hidden 128 --batch 16 --eval-tokens 4096)
[[ -x $BIN ]] || { echo "wire.sh: $BIN not found" >&2; exit 64; }
command -v curl >/dev/null || { echo "wire.sh: needs curl" >&2; exit 1; }
WORK=$(mktemp -d /tmp/chaosloco-wire-XXXXXX)
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill -CONT "$p" 2>/dev/null || true; kill "$p" 2>/dev/null || true; done
    for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
    rm -rf "$WORK"
}
trap cleanup EXIT

field() { sed -n "s/.*\"$1\":\([0-9.eE+-]*\).*/\1/p" | head -1; }

start_syncer() { # dir args... -> sets URL SPID
    local dir=$1; shift
    "$BIN" syncer --listen 127.0.0.1:0 --state-dir "$dir/s" --checkpoint-every 0 --model mlp --data synthetic "$@" 2>"$dir/syncer.log" &
    SPID=$!
    PIDS+=("$SPID")
    for _ in $(seq 200); do [[ -s $dir/s/listen.addr ]] && break; sleep 0.05; done
    URL="http://$(cat "$dir/s/listen.addr")"
}
start_learners() { # dir n [learner flags...] -> LP array
    local dir=$1 n=$2
    shift 2
    LP=()
    for ((i = 0; i < n; i++)); do
        "$BIN" learner --syncer "$URL" --id "$i" --state-dir "$dir/l$i" \
            --credential-file "$dir/s/credentials/learner-$i.cred" "$@" 2>"$dir/l$i.log" &
        LP+=($!)
        PIDS+=($!)
    done
}
final_status() { # waits for the eval to cover every merge
    local st
    for _ in $(seq 100); do
        st=$(curl -s "$URL/v1/status")
        local m em
        m=$(sed -n 's/.*"merges":\([0-9]*\),"tokens_merged".*/\1/p' <<<"$st")
        em=$(sed -n 's/.*"eval":{[^}]*"merges":\([0-9]*\).*/\1/p' <<<"$st")
        [[ $m == "$em" ]] && break
        sleep 0.1
    done
    echo "$st"
}

PART=${PART:-all} # 1, 2 or all
if [[ $PART != 2 ]]; then
echo "## wire: bytes per trained token ($LEARNERS learners x $STEPS steps x batch 16, $(date -u +%F))"
echo
echo "| mode | encoding | bytes in | bytes out | bytes/token | vs first row | final eval loss | down: delta / full / fallbacks |"
echo "|---|---|---|---|---|---|---|---|"
tokens=$((LEARNERS * STEPS * 16))
ddp_bpt=""
for cfg in $CONFIGS; do
    IFS=: read -r mode enc H <<<"$cfg"
    dir=$WORK/$mode-$enc-$H
    mkdir -p "$dir"
    start_syncer "$dir" --mode "$mode" --learners "$LEARNERS" --quorum 1 --steps "$STEPS" --H "$H" --fragments 4 --encoding "$enc" \
        --eval-every-ms 1000 "${MODEL[@]}"
    start_learners "$dir" "$LEARNERS"
    for p in "${LP[@]}"; do wait "$p"; done
    st=$(final_status)
    kill "$SPID"; wait "$SPID" || true
    bin=$(sed -n 's/.*"bytes":{"in":\([0-9]*\).*/\1/p' <<<"$st")
    bout=$(sed -n 's/.*"bytes":{"in":[0-9]*,"out":\([0-9]*\).*/\1/p' <<<"$st")
    loss=$(sed -n 's/.*"eval":{"loss":\([0-9.]*\).*/\1/p' <<<"$st")
    nd=$(sed -n 's/.*"downstream":{[^}]*"delta":\([0-9]*\).*/\1/p' <<<"$st")
    full=$(sed -n 's/.*"downstream":{.*"full":{\([^}]*\)}.*/\1/p' <<<"$st" | tr -d '"' | awk -F'[:,]' '{t=0; for (i=2;i<=NF;i+=2) t+=$i; print t}')
    fb=$(sed -n 's/.*"downstream":{.*"fallbacks":\([0-9]*\).*/\1/p' <<<"$st")
    bpt=$(awk -v a="$bin" -v b="$bout" -v t="$tokens" 'BEGIN{printf "%.1f", (a+b)/t}')
    [[ -z $ddp_bpt ]] && ddp_bpt=$bpt
    ratio=$(awk -v d="$ddp_bpt" -v x="$bpt" 'BEGIN{printf "%.1fx", d/x}')
    label=$mode
    [[ $mode == diloco ]] && label="diloco H=$H"
    down="-"
    [[ $mode != ddp* ]] && down="${nd:-0} / ${full:-0} / ${fb:-0}"
    printf '| %s | %s | %s | %s | %s | %s | %.4f | %s |\n' "$label" "$enc" "$bin" "$bout" "$bpt" "$ratio" "$loss" "$down"
done

fi
if [[ $PART != 1 ]]; then
echo
echo "## resilience: 4 learners (--slowdown $SLOWDOWN), ${WALL} s, learner 3 SIGSTOPped from $((WALL / 3)) s to $((2 * WALL / 3)) s"
echo
echo "| mode | longest merge gap (fault) | longest merge gap (no fault) | merged tokens (fault) | merged tokens (no fault) | goodput |"
echo "|---|---|---|---|---|---|"
for mode in ddp diloco decoupled; do
    declare -A res=()
    for fault in 0 1; do
        dir=$WORK/res-$mode-$fault
        mkdir -p "$dir"
        start_syncer "$dir" --mode "$mode" --learners 4 --quorum 1 --steps 100000000 --H 24 --fragments 4 \
            --eval-every-ms 2000 --heartbeat-timeout-ms 2000 "${MODEL[@]}"
        start_learners "$dir" 4 --slowdown "$SLOWDOWN"
        if ((fault)); then
            sleep $((WALL / 3)); kill -STOP "${LP[3]}"
            sleep $((WALL / 3)); kill -CONT "${LP[3]}"
            sleep $((WALL - 2 * (WALL / 3)))
        else
            sleep "$WALL"
        fi
        st=$(curl -s "$URL/v1/status")
        for p in "${LP[@]}"; do kill "$p" 2>/dev/null || true; done
        for p in "${LP[@]}"; do wait "$p" 2>/dev/null || true; done
        kill "$SPID"; wait "$SPID" || true
        res[gap$fault]=$(sed -n 's/.*"longest_merge_gap_ms":\([0-9]*\).*/\1/p' <<<"$st")
        res[tok$fault]=$(sed -n 's/.*"tokens_merged":\([0-9]*\).*/\1/p' <<<"$st")
    done
    gp=$(awk -v a="${res[tok1]}" -v b="${res[tok0]}" 'BEGIN{ if (b > 0) printf "%.0f%%", 100*a/b; else print "-" }')
    printf '| %s | %s ms | %s ms | %s | %s | %s |\n' "$mode" "${res[gap1]}" "${res[gap0]}" "${res[tok1]}" "${res[tok0]}" "$gp"
    unset res
done
fi
