# lib.sh - what bench/claims and bench/parity share: running chaosloco
# experiments from the templates in this folder, one run directory per
# configuration and seed, each with its metrics.json (metrics.jq).
#
# Sourced after the caller has set: ME (the script's name, for messages), BIN
# (chaosloco), D (this folder), OUT (the output directory, with exp/, runs/ and
# data/), MODEL (JSON merged into topology.training), TARGETS_JSON and TOK_UNIT
# (metrics.jq's $targets and $T), TOKENS and TOK_STEP (steps_for), SEEDS,
# KEEP and RESUME (0 or 1). Defines FAILED_RUNS (runs that hit a harness error,
# NAME:EXIT) and SEED (the current seed, with_seed).

FAILED_RUNS=()
trap 'echo "$ME: interrupted" >&2; exit 2' INT TERM
echo '{}' >"$OUT/data/empty-object.json"
echo '[]' >"$OUT/data/empty-array.json"

log() { printf '%s %s: %s\n' "$(date -u +%H:%M:%S)" "$ME" "$*" >&2; }
# ---- running experiments ----

# mkexp NAME TEMPLATE JQ_FILTER [jq args...] -> OUT/exp/NAME.json, with the
# claims' model (MODEL) and the seed SEED (harness schedule and training)
mkexp() {
    local name=$1 tpl=$2 filter=$3
    shift 3
    jq --argjson model "$MODEL" --argjson seed "$SEED" "$@" \
        ".topology.training += \$model | .seed = \$seed | .topology.training.seed = \$seed | $filter" \
        "$D/$tpl" >"$OUT/exp/$name.json"
    "$BIN" validate "$OUT/exp/$name.json" >/dev/null
}

# metrics RUN_DIR: write RUN_DIR/metrics.json from what the run left
metrics() {
    local r=$1 sum=$1/summary.json faults=$1/faults.json
    [[ -s $sum ]] || sum=$OUT/data/empty-object.json
    [[ -s $faults ]] || faults=$OUT/data/empty-array.json
    jq -n -L "$D" --slurpfile ev "$r/syncer/events.jsonl" --slurpfile sum "$sum" \
        --slurpfile faults "$faults" --argjson targets "$TARGETS_JSON" --argjson T "$TOK_UNIT" 'include "metrics"; metrics' >"$r/metrics.json"
}

# trim RUN_DIR: drop checkpoints and state unless --keep-runs
trim() {
    [[ $KEEP == 1 ]] && return 0
    find "$1" \( -name '*.ckpt*' -o -name 'ckpt*' -o -name token -o -name '*.cred' \) -type f -delete 2>/dev/null || true
}

# done_already RUN_DIR...: with --resume, 0 when every run dir has its metrics;
# their metrics are then recomputed from the events the runs left (the targets
# may have changed), keeping each run's exit code
done_already() {
    [[ $RESUME == 1 ]] || return 1
    local d
    for d in "$@"; do [[ -s $d/metrics.json ]] || return 1; done
    for d in "$@"; do
        jq '{exit} | with_entries(select(.value != null))' "$d/metrics.json" >"$d/exit.json"
        metrics "$d"
        jq -s '.[0] + .[1]' "$d/metrics.json" "$d/exit.json" >"$d/m.json" && mv "$d/m.json" "$d/metrics.json"
        rm -f "$d/exit.json"
    done
    log "resume: keeping ${*#"$OUT/runs/"}"
}

# run NAME TIME_LIMIT [chaosloco run flags...]: run OUT/exp/NAME.json into OUT/runs/NAME
run() {
    local name=$1 tl=$2 rc=0
    shift 2
    done_already "$OUT/runs/$name" && return 0
    rm -rf "$OUT/runs/$name"
    log "run $name --time-limit $tl $*"
    "$BIN" run "$OUT/exp/$name.json" --out "$OUT/runs/$name" --time-limit "$tl" "$@" \
        >"$OUT/runs/$name.log" 2>&1 || rc=$?
    # 0 held, 1 deviated: both are results; 2 aborted (a stop condition): recorded
    if [[ $rc -ge 3 || ! -s $OUT/runs/$name/syncer/events.jsonl ]]; then
        log "run $name failed (exit $rc), see $OUT/runs/$name.log"
        FAILED_RUNS+=("$name:$rc")
        return 0
    fi
    metrics "$OUT/runs/$name"
    jq --argjson rc "$rc" '. + {exit: $rc}' "$OUT/runs/$name/metrics.json" >"$OUT/runs/$name/m.json"
    mv "$OUT/runs/$name/m.json" "$OUT/runs/$name/metrics.json"
    trim "$OUT/runs/$name"
}

# compare NAME MODES [chaosloco compare flags...]: OUT/runs/NAME/<mode>/
compare() {
    local name=$1 modes=$2 rc=0 m dirs=()
    shift 2
    for m in ${modes//,/ }; do dirs+=("$OUT/runs/$name/$m"); done
    done_already "${dirs[@]}" && return 0
    rm -rf "$OUT/runs/$name"
    log "compare $name --modes $modes $*"
    "$BIN" compare "$OUT/exp/$name.json" --modes "$modes" --out "$OUT/runs/$name" "$@" \
        >"$OUT/runs/$name.log" 2>&1 || rc=$?
    for m in ${modes//,/ }; do
        if [[ ! -s $OUT/runs/$name/$m/syncer/events.jsonl ]]; then
            log "compare $name: mode $m has no run (exit $rc), see $OUT/runs/$name.log"
            FAILED_RUNS+=("$name/$m:$rc")
            continue
        fi
        metrics "$OUT/runs/$name/$m"
        trim "$OUT/runs/$name/$m"
    done
    [[ $rc -lt 3 ]] || FAILED_RUNS+=("$name:$rc")
}

steps_for() { echo $((TOKENS / ($1 * TOK_STEP))); } # M -> steps per learner
seeds() { seq 1 "$SEEDS"; }                          # K = 1..SEEDS: run NAME@sK, seed 10 + K
with_seed() { SEED=$((10 + $1)); }
SEED=11

# collect_runs: OUT/data/runs.json, every run's metrics.json keyed by its name
# (NAME@sK or NAME@sK/MODE)
collect_runs() {
    local f name first=1
    {
        echo '{'
        while IFS= read -r -d '' f; do
            name=${f#"$OUT/runs/"}
            name=${name%/metrics.json}
            [[ $first == 1 ]] || echo ','
            first=0
            printf '%s: ' "$(jq -Rn --arg n "$name" '$n')"
            jq -c . "$f"
        done < <(find "$OUT/runs" -name metrics.json -print0 | sort -z)
        echo '}'
    } >"$OUT/data/runs.json"
}
