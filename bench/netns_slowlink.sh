#!/usr/bin/env bash
# bench/netns_slowlink.sh - claim 3 ("faster over slow links") measured two
# ways on the same model and link rate: every learner's link capped by the
# agent proxy's bandwidth toxic (as bench/claims does), and every learner in
# its own network namespace with its link shaped by the kernel (tc tbf,
# topology.network kind netns). ddp and decoupled (int4, H=96, K=1) each way,
# one seed: four runs of at most TL seconds of training.
#
#   bench/netns_slowlink.sh [--build DIR] [--out DIR] [--rate-kbs R] [--time-limit S] [--target NATS]
#
#   --build DIR       build directory holding chaosloco (default build-claims;
#                     or set CHAOSLOCO_BIN)
#   --out DIR         output directory (default out/netns-slowlink-<UTC time>)
#   --rate-kbs R      link rate in KB/s (1 KB = 1000 B) per direction (default
#                     112: 2 Gbit/s scaled as in docs/results.md, claim 3)
#   --time-limit S    s of training per run (default 45, as claim 3's table)
#   --target NATS     eval loss whose first crossing is timed (default 3.5)
#
# The template is bench/claims.d/slowlink.json (the MLP on the synthetic
# corpus, M=4, decoupled int4 H=96 K=1; ddp sends f32 gradients every step).
# The netns variant drops its bandwidth fault and sets topology.network
# {kind: netns, regions: 5, rate_mbit: R x 8 / 1000}: the syncer and each
# learner in its own region, so every learner's link is shaped both ways.
# Needs root (namespaces), jq. Prints one line per run: variant, mode,
# time to the target (s since the syncer started, or "not reached"), final
# eval loss, steps trained (inner steps of learner 0), merges.
set -euo pipefail

SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=build-claims
OUT=
RATE=112
TL=45
TARGET=3.5
while [[ $# -gt 0 ]]; do
    case $1 in
    --build) BUILD=$2; shift ;;
    --out) OUT=$2; shift ;;
    --rate-kbs) RATE=$2; shift ;;
    --time-limit) TL=$2; shift ;;
    --target) TARGET=$2; shift ;;
    --help | -h) sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "netns_slowlink: unknown argument '$1' (see --help)" >&2; exit 64 ;;
    esac
    shift
done
BIN=${CHAOSLOCO_BIN:-$BUILD/chaosloco}
[[ -x $BIN ]] || { echo "netns_slowlink: $BIN is not an executable" >&2; exit 64; }
command -v jq >/dev/null || { echo "netns_slowlink: needs jq" >&2; exit 1; }
[[ $(id -u) == 0 ]] || { echo "netns_slowlink: needs root (network namespaces)" >&2; exit 1; }
OUT=${OUT:-out/netns-slowlink-$(date -u +%Y%m%dT%H%M%SZ)}
[[ -e $OUT ]] && { echo "netns_slowlink: $OUT already exists" >&2; exit 64; }
mkdir -p "$OUT"
export OPENBLAS_NUM_THREADS=1

T=$SRC/bench/claims.d/slowlink.json
jq --argjson r "$RATE" '.title += " (proxy toxic, \($r) KB/s)" | .method[0].params.rate = $r' "$T" >"$OUT/toxic.json"
jq --argjson r "$RATE" '.title += " (netns + tbf, \($r) KB/s)" | del(.method)
    | .topology.network = {kind: "netns", regions: 5, rate_mbit: ($r * 8 / 1000)}
    | .verify = [{hypothesis: "versions_monotonic"}]' "$T" >"$OUT/netns.json"

printf '%-7s %-10s %-14s %-10s %-8s %s\n' variant mode "t_to_${TARGET}_s" final_loss steps merges
for variant in toxic netns; do
    for mode in ddp decoupled; do
        run=$OUT/$variant-$mode
        rc=0
        "$BIN" run "$OUT/$variant.json" --mode "$mode" --time-limit "$TL" --out "$run" >"$run.log" 2>&1 || rc=$?
        ev=$run/syncer/events.jsonl
        [[ -f $ev ]] || { echo "netns_slowlink: $run has no syncer events (exit $rc, see $run.log)" >&2; exit 1; }
        jq -rs --arg v "$variant" --arg m "$mode" --argjson target "$TARGET" --arg rc "$rc" '
            ([.[] | select(.type == "start")][0].t_mono_ms) as $t0
            | [.[] | select(.type == "eval" and (.loss | type) == "number")] as $e
            | ([$e[] | select(.loss <= $target)][0]) as $hit
            | [$v, $m,
               (if $hit then ((($hit.t_mono_ms - $t0) / 1000) * 100 | round / 100 | tostring) else "not reached" end),
               ($e[-1].loss // null | if . then (. * 1000 | round / 1000 | tostring) else "-" end),
               ([.[] | select(.type == "heartbeat" and .learner == 0) | .step] | max // 0 | tostring),
               ([.[] | select(.type == "merge")] | length | tostring)]
            | "\(.[0])\t\(.[1])\t\(.[2])\t\(.[3])\t\(.[4])\t\(.[5])\t(exit \($rc))"' "$ev" |
            awk -F'\t' '{ printf "%-7s %-10s %-14s %-10s %-8s %s %s\n", $1, $2, $3, $4, $5, $6, $7 }'
    done
done
echo "runs in $OUT"
