#!/usr/bin/env bash
# plots.sh OUT - bench/claims' plots, drawn by gnuplot (SVG) from OUT/data/runs.json,
# OUT/data/simulate.json and OUT/claims.json:
#   loss_faults.svg          eval loss of the Poisson-kill runs, each kill shaded until the rejoin
#   loss_parity.svg          eval loss against merged tokens, ddp vs diloco vs decoupled (claim 1)
#   loss_slowlinks.svg       eval loss against time with every link capped (claim 3)
#   goodput_vs_failure_rate.svg  simulate: goodput against the cluster's failure rate, the
#                            paper's Table 1 points, and the real runs' goodput (claim 4)
#   bytes_per_token.svg      bytes on the wire per token by mode and encoding (claim 2)
#   update_norm.svg          merged update norm, RDA vs mean, against M (claim 6)
set -euo pipefail
OUT=$1
R=$OUT/data/runs.json
P=$OUT/plots
W=$OUT/data/plot
mkdir -p "$P" "$W"
term() { echo "set terminal svg size ${1:-960},${2:-640} dynamic enhanced font 'Helvetica,12' background rgb 'white'"; }

runs() { jq -r "$1" "$R"; } # jq over runs.json
curve() { # RUN FILE: "t bits/byte tokens" lines
    jq -r --arg n "$1" '.[$n].eval_curve // [] | .[] | "\(.[0]) \(.[1] / (2 | log)) \(.[2] // 0)"' "$R" >"$2"
}

# ---- loss curves with fault windows (claim 4) ----
mapfile -t PR < <(runs 'keys[] | select(test("^poisson-(dp@s1/|m[0-9]+@s1$)"))')
if [[ ${#PR[@]} -gt 0 ]]; then
    {
        term 960 $((220 * ${#PR[@]} + 60))
        echo "set output '$P/loss_faults.svg'"
        echo "set multiplot layout ${#PR[@]},1 title 'Held-out bits/byte under Poisson kills (seed 11) (shaded: a learner down, from the kill to its rejoin)'"
        echo "set ylabel 'held-out bits/byte'; set grid; set key top right"
        for i in "${!PR[@]}"; do
            n=${PR[$i]}
            curve "$n" "$W/curve-f$i.dat"
            echo "unset object"
            jq -r --arg n "$n" '.[$n].faults // [] | .[] | "set object rect from \(.start), graph 0 to \(.end), graph 1 fc rgb \"#e4572e\" fs transparent solid 0.18 noborder"' "$R"
            [[ $i == $((${#PR[@]} - 1)) ]] && echo "set xlabel 's since the syncer started'"
            kills=$(jq -r --arg n "$n" '[.[$n].faults // [] | .[] | select(.type == "kill")] | length' "$R")
            echo "plot '$W/curve-f$i.dat' using 1:2 with lines lw 2 lc rgb '#1f77b4' title '$n ($kills kills)'"
        done
        echo "unset multiplot"
    } >"$W/loss_faults.gp"
    gnuplot "$W/loss_faults.gp"
fi

# One curve per run of a group, on one plot: overlay FILE TAG TITLE XCOL XLABEL RUN...
overlay() {
    local name=$1 tag=$2 title=$3 xcol=$4 xlabel=$5
    shift 5
    [[ $# -gt 0 ]] || return 0
    local runs=("$@")
    {
        term
        echo "set output '$P/$name.svg'"
        echo "set title '$title'"
        echo "set xlabel '$xlabel'; set ylabel 'held-out bits/byte'; set grid; set key top right"
        printf 'plot '
        for i in "${!runs[@]}"; do
            curve "${runs[$i]}" "$W/curve-$tag$i.dat"
            [[ $i == 0 ]] || printf ', '
            printf "'%s' using %d:2 with lines lw 2 title '%s'" "$W/curve-$tag$i.dat" "$xcol" "${runs[$i]}"
        done
        echo
    } >"$W/$name.gp"
    gnuplot "$W/$name.gp"
}

# ---- loss parity (claim 1) ----
mapfile -t QR < <(runs 'keys[] | select(startswith("quality-") and test("@s1/"))')
overlay loss_parity q 'Quality parity at equal tokens: held-out bits/byte against merged tokens (seed 11)' \
    3 'tokens merged into the global model' "${QR[@]}"

# ---- slow links (claim 3) ----
mapfile -t SR < <(runs 'keys[] | select(startswith("slow-") and test("@s1(/|$)"))')
overlay loss_slowlinks s 'Every learner link capped (bandwidth toxic): held-out bits/byte against time (seed 11)' \
    1 's since the syncer started' "${SR[@]}"

# ---- goodput vs failure rate (claim 4) ----
# simulate: failures per hour of the whole cluster = chips / (MTBF 1 year = 8766 h)
jq -r '.results[] | select(.mode == "dp") | "\(.chips / 8766) \(.goodput * 100) \(if .paper_goodput == null then "NaN" else .paper_goodput * 100 end)"' \
    "$OUT/data/simulate.json" | sort -g >"$W/sim-dp.dat"
jq -r '.results[] | select(.mode == "elastic") | "\(.chips / 8766) \(.goodput * 100) \(if .paper_goodput == null then "NaN" else .paper_goodput * 100 end)"' \
    "$OUT/data/simulate.json" | sort -g >"$W/sim-elastic.dat"
mapfile -t SM < <(jq -r '[.results[] | select(.mode == "decoupled") | .learners] | unique[]' "$OUT/data/simulate.json")
for m in "${SM[@]}"; do
    jq -r --argjson m "$m" '.results[] | select(.mode == "decoupled" and .learners == $m) | "\(.chips / 8766) \(.goodput * 100) \(if .paper_goodput == null then "NaN" else .paper_goodput * 100 end)"' \
        "$OUT/data/simulate.json" | sort -g >"$W/sim-m$m.dat"
done
jq -r '.results[] | select(.paper_goodput != null) | "\(.chips / 8766) 0 \(.paper_goodput * 100)"' \
    "$OUT/data/simulate.json" >"$W/sim-paper.dat"
jq -r '.rows[] | select(.claim | startswith("4. ")) | .figures | to_entries[] | "\"\(.key)\" \((.value.relative // 0) * 100) \((.value.faulted // 0) * 100)"' \
    "$OUT/claims.json" >"$W/real-goodput.dat"
{
    term 1200 560
    echo "set output '$P/goodput_vs_failure_rate.svg'"
    echo "set multiplot layout 1,2 title 'Goodput under failures'"
    echo "set title 'chaosloco simulate (lines) and the paper''s Table 1 (points)'"
    echo "set logscale x; set xlabel 'cluster failures per hour (chips / 1-year MTBF)'; set ylabel 'goodput %'"
    echo "set yrange [0:100]; set grid; set key bottom left"
    printf "plot '%s' using 1:2 with linespoints lw 2 pt 7 lc rgb '#d62728' title 'DP'" "$W/sim-dp.dat"
    printf ", '%s' using 1:2 with linespoints lw 2 pt 7 lc rgb '#ff7f0e' title 'elastic DP'" "$W/sim-elastic.dat"
    colors=('#9467bd' '#2ca02c' '#1f77b4' '#17becf' '#8c564b' '#e377c2')
    for i in "${!SM[@]}"; do
        printf ", '%s' using 1:2 with linespoints lw 2 pt 7 lc rgb '%s' title 'decoupled M=%s'" \
            "$W/sim-m${SM[$i]}.dat" "${colors[$((i % 6))]}" "${SM[$i]}"
    done
    printf ", '%s' using 1:3 with points pt 6 ps 2 lw 2 lc rgb 'black' title 'paper, Table 1'" "$W/sim-paper.dat"
    echo
    echo "unset logscale x; set title 'Real runs: Poisson kills (job MTBF fixed, see claims.md)'"
    echo "set xlabel ''; set ylabel 'goodput %'; set style data histograms; set style histogram clustered gap 1"
    echo "set style fill solid 0.8 border -1; set boxwidth 0.9; set xtics rotate by -20; set key top right"
    echo "plot '$W/real-goodput.dat' using 2:xtic(1) title 'with kills / without (same mode)', '' using 3 title 'with kills, absolute'"
    echo "unset multiplot"
} >"$W/goodput.gp"
[[ ! -s $W/sim-dp.dat ]] || gnuplot "$W/goodput.gp" # nothing to draw: the claim was not run (--only)

# ---- bytes per token (claim 2) ----
jq -r '.rows[] | select(.claim | startswith("2. ")) | .figures | to_entries[] | select(.value != null) | "\"\(.key)\" \(.value)"' \
    "$OUT/claims.json" >"$W/bpt.dat"
{
    term
    echo "set output '$P/bytes_per_token.svg'"
    echo "set title 'Bytes on the wire per trained token (syncer payload in + out), by mode and encoding'"
    echo "set ylabel 'bytes / token (log)'; set logscale y; set grid y; set style fill solid 0.8 border -1"
    echo "set boxwidth 0.7; set yrange [10:*]; set xtics ('' 0)"
    echo "plot '$W/bpt.dat' using 0:2:xtic(1) with boxes lc rgb '#1f77b4' notitle, '' using 0:2:(sprintf('%.0f', \$2)) with labels offset 0,1 notitle"
} >"$W/bpt.gp"
[[ ! -s $W/bpt.dat ]] || gnuplot "$W/bpt.gp" # nothing to draw: the claim was not run (--only)

# ---- merged update norm (claim 6) ----
jq -r '.rows[] | select(.claim | startswith("6. ")) | .figures | to_entries[] | "\(.key | ltrimstr("M=")) \(.value.rda_norm // "NaN") \(.value.mean_norm // "NaN")"' \
    "$OUT/claims.json" | sort -g >"$W/norm.dat"
{
    term
    echo "set output '$P/update_norm.svg'"
    echo "set title 'Median merged update norm, K = M (every merge averages M contributions)'"
    echo "set xlabel 'learners M'; set ylabel 'update norm'; set logscale x 2; set grid; set key top right"
    echo "set xrange [1.5:12]"
    echo "plot '$W/norm.dat' using 1:2 with linespoints lw 2 pt 7 title 'RDA', '' using 1:3 with linespoints lw 2 pt 5 title 'plain (weighted) mean'"
} >"$W/norm.gp"
[[ ! -s $W/norm.dat ]] || gnuplot "$W/norm.gp" # nothing to draw: the claim was not run (--only)
