# table.jq - bench/claims' table: one row per claim of DESIGN.md section 9,
# the paper's figure beside ours and the settings, from OUT/data/runs.json
# (every run's metrics.json, keyed by run name NAME@sK[/MODE], K the seed) and
# OUT/data/simulate.json. A configuration's figures are the mean over its
# seeds with a 95% Student-t interval ("mean +- half-width"; the half-width
# alone is in .ci). `table` builds claims.json; `markdown` renders it.

include "metrics";
include "stats";

# bench/claims --only: is section $s selected (every row below starts with
# that guard), and the section a row's claim belongs to ("1" holds row 0, "2"
# row 2b, "4" row 4b; row 4c is "sim")
def want($s; $only): $only == "" or ($only | split(",") | index([$s]) != null);
def section: capture("^(?<n>[0-9]+[a-z]?)\\.").n | {"0": "1", "2b": "2", "4b": "4", "4c": "sim"}[.] // .;
def selected($only): section as $s | want($s; $only);

def table:
  $runs[0] as $R
  # every seed's metrics of configuration $n ("NAME" or "NAME/MODE"); run($n)
  # aggregated; completed($n) aggregated over the seeds that ran to their end
  # (a run a stop condition interrupted after seconds, or one aborted, would
  # stand for a whole run); aborted($n) counts the others
  | def seeds_of($n):
      ($n | split("/")) as $p
      | ("^" + $p[0] + "@s[0-9]+" + (if ($p | length) > 1 then "/" + $p[1] else "" end) + "$") as $re
      | [$R | to_entries[] | select(.key | test($re)) | .value];
  def run($n): seeds_of($n) | agg;
  def ended_early: .status == "interrupted" or .status == "aborted";
  def completed($n): seeds_of($n) | map(select(ended_early | not)) | agg;
  def aborted($n): seeds_of($n) | map(select(ended_early)) | length;
  ($qms | words) as $QM
  | ($encs | words) as $EN
  | ($slow | words) as $SG
  | ($pms | words) as $PM
  | ($rms | words) as $RM
  | ($sim[0].results // []) as $S
  | [
      # ---- 0. the noise floor: one configuration, two seeds ----
      (select(want("1"; $only)) | run("quality-m\($QM[0])/decoupled") as $aa
       | ($aa.all | map(.final_bpb)) as $v
       | {claim: "0. A/A: the same configuration, another seed",
          paper: "(none: the noise floor every difference below is read against)",
          ours: (if ($v | length) >= 2 and $v[0] != null and $v[1] != null
                 then "final bits/byte seed 11 \($v[0] | fx(3)), seed 12 \($v[1] | fx(3)): absolute difference \(($v[0] - $v[1]) | fabs | fx(3)) (\(div((($v[0] - $v[1]) | fabs); $v[0]) * 100 | fx(1))%)"
                      + (if ($v | length) > 2 then "; \($v | length) seeds: \($aa | pm("final_bpb"; 3))" else "" end)
                 else "not measured: fewer than two seeds ran" end),
          settings: "decoupled, claim 1's configuration (M=\($QM[0])), seeds 11 and 12 (harness schedule and training data order/initialisation)",
          model: $model, seeds: ($v | length),
          figures: {seed_bpb: $v, abs_diff: (if ($v | length) >= 2 and $v[0] != null and $v[1] != null then ($v[0] - $v[1] | fabs) else null end)}}),
      # ---- 1. quality parity ----
      (select(want("1"; $only)) | $QM[] as $m
       | [run("quality-m\($m)/ddp"), run("quality-m\($m)/diloco"), run("quality-m\($m)/decoupled")] as [$dp, $dl, $dc]
       | {claim: "1. Quality parity with data-parallel (M=\($m))",
          paper: "text avg 69.8 (Decoupled) vs 70.1 (DP): -0.4% (5B, 1T tokens)",
          ours: ("final held-out bits/byte ddp \($dp | pm("final_bpb"; 3)), diloco \($dl | pm("final_bpb"; 3)), decoupled \($dc | pm("final_bpb"; 3)); decoupled vs ddp "
                 + (div($dc.final_bpb - $dp.final_bpb; $dp.final_bpb) | if . == null then "not comparable (a final loss is missing)" else ((. * 1000 | round) / 10 | tostring) + "%" end)
                 + "; merged tokens to reach " + ([$targets[] as $b | "\($b) bits/byte: ddp \($dp | tokens_to($b)), decoupled \($dc | tokens_to($b))"] | join("; "))),
          settings: "M=\($m), \($tokens / ($m | tonumber) / $tokstep | floor) steps x \($tokstep) tokens per learner (\($tokens) tokens in all), P=4, H=24, K=1, f32",
          model: $model, seeds: ([$dp.n, $dl.n, $dc.n] | min),
          figures: {ddp: $dp.final_bpb, diloco: $dl.final_bpb, decoupled: $dc.final_bpb,
                    ci: {ddp: $dp.ci.final_bpb, diloco: $dl.ci.final_bpb, decoupled: $dc.ci.final_bpb},
                    tokens_to: {ddp: ($dp.all | map(.tokens_to)), decoupled: ($dc.all | map(.tokens_to))}}}),
      # ---- 1b. the decoupled defaults (issue 12): k/M partial-merge scale, outer momentum 0.5 ----
      (select(want("1b"; $only)) | ("quality-m4" | if ($QM | index("4")) then . else "quality-m\($QM[0])" end) as $q
       | [run("\($q)/decoupled"), run("design-noscale"), run("design-mom09")] as [$dc, $ns, $m9]
       | {claim: "1b. Decoupled defaults: k/M partial-merge scale and outer momentum 0.5",
          paper: "(none: the paper merges full rounds; issue 12 asks to keep whichever measures better)",
          ours: ("final held-out bits/byte: defaults (k/M scale, momentum 0.5) \($dc | pm("final_bpb"; 3)); no k/M scale \($ns | pm("final_bpb"; 3)); outer momentum 0.9 \($m9 | pm("final_bpb"; 3)); participants per merge \($dc | pm("merge_participants_mean"; 2)) / \($ns | pm("merge_participants_mean"; 2)) / \($m9 | pm("merge_participants_mean"; 2))"),
          settings: "decoupled M=4, K=1, claim 1's tokens and seeds; one setting changed per variant (partial_scale off; outer_momentum 0.9)",
          model: $model, seeds: ([$dc.n, $ns.n, $m9.n] | min),
          figures: {defaults: $dc.final_bpb, no_scale: $ns.final_bpb, momentum_09: $m9.final_bpb,
                    ci: {defaults: $dc.ci.final_bpb, no_scale: $ns.ci.final_bpb, momentum_09: $m9.ci.final_bpb}}}),
      # ---- 2. bandwidth ----
      (select(want("2"; $only)) | ("quality-m4" | if ($QM | index("4")) then . else "quality-m\($QM[0])" end) as $q
       | [run("\($q)/ddp"), run("\($q)/diloco"), run("\($q)/decoupled")] as [$dp, $dl, $dc]
       | ([$EN[] as $e | {key: $e, value: (run("enc-\($e)").bytes_per_token)}] | from_entries) as $bpt
       | {claim: "2. Bandwidth: bytes on the wire per token",
          paper: "198 -> 0.84 Gbit/s (~236x less than DP)",
          ours: ("bytes/token ddp \($dp.bytes_per_token | fx(0)), diloco \($dl.bytes_per_token | fx(0)) (\(div($dp.bytes_per_token; $dl.bytes_per_token) | ratio) less), decoupled f32 \($dc.bytes_per_token | fx(0)) (\(div($dp.bytes_per_token; $dc.bytes_per_token) | ratio))"
                 + ([$EN[] as $e | ", \($e) \($bpt[$e] | fx(0)) (\(div($dp.bytes_per_token; $bpt[$e]) | ratio))"] | add // "")),
          settings: "decoupled vs ddp vs diloco, M=\($q | ltrimstr("quality-m")), \($tokens) tokens, P=4, H=24, K=1; syncer tensor payload bytes in + out / tokens trained, mean over seeds; encodings shrink upstream and downstream deltas",
          model: $model, seeds: ([$dp.n, $dc.n] | min),
          figures: ({ddp: $dp.bytes_per_token, diloco: $dl.bytes_per_token, f32: $dc.bytes_per_token} + $bpt)}),
      (select(want("2"; $only)) | ([$EN[] as $e | {key: $e, value: run("enc-\($e)")}] | from_entries) as $er
       | run("quality-m4/decoupled") as $f32
       | {claim: "2b. int4 outer gradients are lossless, 2-bit is not",
          paper: "int4 55.3 vs 55.4 (f32); 2-bit 42.6",
          ours: ("final held-out bits/byte f32 \($f32 | pm("final_bpb"; 3))" + ([$EN[] as $e | ", \($e) \($er[$e] | pm("final_bpb"; 3))"] | add // "")),
          settings: "decoupled M=4, \($tokens) tokens, P=4, H=24, K=1; blockwise-scaled encodings with upstream error feedback (int2: the ternary code, 2.5 bits/value; q2: 2.25 bits/value)",
          model: $model, seeds: ([$f32.n] + [$EN[] as $e | $er[$e].n] | min),
          figures: ({f32: $f32.final_bpb} + ($er | map_values(.final_bpb)) + {ci: ({f32: $f32.ci.final_bpb} + ($er | map_values(.ci.final_bpb)))})}),
      # ---- 3. slow links ----
      (select(want("3"; $only)) | $SG[] as $g
       | [run("slow-\($g)g/ddp"), run("slow-\($g)g/decoupled"), run("slow-\($g)g-f32")] as [$dp, $dc, $d32]
       | (run("quality-m4/ddp").eval_curve // [] | first_at_bpb($slowtarget) | if . then .[3] else null end) as $ddp_steps
       | (if ($dp.merges // 0) > 1 then $dp.merge_span_s / ($dp.merges - 1) else null end) as $ddp_spstep
       | ([$dp.all[] | .time_to[$slowtarget | tostring]] | mean_ci) as $tdp
       | ([$dc.all[] | .time_to[$slowtarget | tostring]] | mean_ci) as $tdc
       | ([$d32.all[] | .time_to[$slowtarget | tostring]] | mean_ci) as $t32
       | (if $ddp_steps == null or $ddp_spstep == null then null else $ddp_steps * $ddp_spstep end) as $est
       | ($nparams * 1e9 * ($g | tonumber) / 8 / 12e9 * $nstep / 1000 | round) as $kbs
       | def reached($t; $a): if $t.n == ($a.all | length) and $t.n > 0 then "\($t.mean | fx(1))" + (if $t.ci then " ± \($t.ci | fx(1))" else "" end) + " s" else null end;
       {claim: "3. Faster over slow links (\($g) Gbit/s)",
          paper: "12B over 2-5 Gbit/s: > 20x faster than synchronous",
          ours: ("time to \($slowtarget) bits/byte: decoupled \(reached($tdc; $dc) // "not reached in every seed"); ddp "
                 + (if reached($tdp; $dp) != null then "\(reached($tdp; $dp)): \(div($tdp.mean; $tdc.mean) | ratio) faster"
                    else "not within \($slowtl) s in every seed (\($dp.merges // 0 | fx(0)) steps, \($dp | pm("final_bpb"; 3)) bits/byte)"
                      + (if $tdc.mean != null then ": > \(div($slowtl; $tdc.mean) | ratio) faster" else "" end)
                      # the estimate only from figures that exist; else say which one is missing and why
                      + (if $est != null and $tdc.mean != null
                         then "; at its capped \($ddp_spstep | fx(2)) s/step x the \($ddp_steps) steps it needs uncapped (claim 1 run) ddp would take ~\($est | fx(0)) s: ~\(div($est; $tdc.mean) | ratio)"
                         elif $ddp_spstep == null then "; no estimate of ddp's time: it merged fewer than two steps while capped, so it has no step time"
                         elif $ddp_steps == null then "; no estimate of ddp's time: the claim 1 ddp run never reached \($slowtarget) bits/byte"
                         else "" end) end)
                 + "; decoupled at claim 1 settings (f32, H=24): " + (reached($t32; $d32) // "not reached in every seed (\($d32 | pm("final_bpb"; 3)) bits/byte)")),
          settings: "M=4, every link capped at \($kbs) KB/s both ways = \($g) Gbit/s x \($nparams)/12e9 params x \($nstep) (a 12B step ~1 s vs our measured \($stepms) ms median inner step); decoupled int4 H=96 K=1, ddp f32 gradients; \($slowtl) s per run",
          model: $model, seeds: ([$dp.n, $dc.n, $d32.n] | min),
          figures: {target_bpb: $slowtarget, ddp_s: $tdp.mean, decoupled_s: $tdc.mean, decoupled_f32_h24_s: $t32.mean, ddp_s_per_step: $ddp_spstep, ddp_steps_uncapped: $ddp_steps, ddp_estimate_s: $est, speedup_lower_bound: (if $tdp.mean != null then div($tdp.mean; $tdc.mean) else div($slowtl; $tdc.mean) end), speedup_estimate: (if $tdp.mean != null then div($tdp.mean; $tdc.mean) else div($est; $tdc.mean) end), rate_kbs: $kbs}}),
      # ---- 4. goodput and downtime under Poisson kills ----
      (select(want("4"; $only)) | [["ddp", "poisson-dp/ddp", "poisson-dp-ref/ddp"],
        ["ddp-elastic", "poisson-dp/ddp-elastic", "poisson-dp-ref/ddp-elastic"]]
       + [$PM[] as $m | ["decoupled M=\($m)", "poisson-m\($m)", "poisson-m\($m)-ref"]]
       | map({name: .[0], f: completed(.[1]), r: completed(.[2]), aborted: (aborted(.[1]) + aborted(.[2]))})) as $P
      | ({claim: "4. Goodput under Poisson failures (real runs)",
          paper: "88% (M=8) vs 58% elastic DP vs 27% DP at 1.2M chips",
          ours: ("goodput with kills / without (same mode, same length): "
                 + ([$P[] | "\(.name) \(div(.f.goodput; .r.goodput) | pct)"] | join(", "))
                 + ([$P[] | select(.aborted > 0) | "\(.name) \(.aborted)"] as $ab
                    | if ($ab | length) > 0
                      then "; runs that ended early (a stop condition or an abort), left out: " + ($ab | join(", ")) else "" end)),
          settings: "job MTBF \($pj) s (each of M units: M x \($pj) s), SIGKILL + restart after 1.5 s, \($ptl) s per run, ddp/ddp-elastic on 4 units, every learner padded to 1/M duty (slowdown M) so a kill frees no shared CPU, P=4, H=24, K=1; goodput = harness goodput (compute time of merged steps / allocated learner time)",
          figures: ([$P[] | {key: .name, value: {faulted: .f.goodput, reference: .r.goodput, relative: div(.f.goodput; .r.goodput), kills: ([.f.faults[]? | select(.type == "kill")] | length)}}] | from_entries)},
         {claim: "4b. Zero global downtime",
          paper: "uptime ~100% for M >= 4",
          ours: ("uptime (share of time outside merge gaps > 2 s) / longest merge gap: "
                 + ([$P[] | "\(.name) \(.f.uptime | pct) / \(.f.longest_gap_s | fx(1)) s"] | join(", "))),
          settings: "the faulted runs of row 4; ddp and ddp-elastic merge once per averaged step",
          figures: ([$P[] | {key: .name, value: {uptime: .f.uptime, longest_gap_s: .f.longest_gap_s, downtime_s: .f.downtime_s}}] | from_entries)}),
      (select(want("sim"; $only)) | [$S[] | select(.chips == 1200000)] as $s12
       | ($s12 | map(select(.mode == "dp"))[0].goodput) as $a
       | ($s12 | map(select(.mode == "elastic"))[0].goodput) as $b
       | ($s12 | map(select(.mode == "decoupled" and .learners == 8))[0].goodput) as $c
       | {claim: "4c. Goodput at cluster scale (chaosloco simulate)",
          paper: "Table 1, 1.2M chips: M=8 88%, elastic DP 58%, DP 27%",
          ours: "1.2M chips: M=8 \($c | pct), elastic DP \($b | pct), DP \($a | pct)",
          settings: "chaosloco simulate --trials \($trials): per-chip MTBF 1 year, 30 days; restart/checkpoint/re-shard/recovery fitted on the DP and elastic rows only (docs/simulate.md)",
          model: "chaosloco simulate (no training)", seeds: $trials,
          figures: {dp: $a, elastic: $b, decoupled_m8: $c}}),
      # ---- 5. heterogeneous learners ----
      (select(want("5"; $only)) | [{name: "K=M", r: run("straggle-km")}, {name: "K=1", r: run("straggle-k1")},
        {name: "K=1+grace", r: run("straggle-k1grace")}] as $V
       | run("straggle-ref") as $ref
       | {claim: "5. Heterogeneous learners (one x1.18 slower, 10% jitter)",
          paper: "K=1 + grace: 100% goodput, quality kept",
          ours: ("goodput vs no straggler / final bits/byte: "
                 + ([$V[] | "\(.name) \(div(.r.goodput; $ref.goodput) | pct) / \(.r | pm("final_bpb"; 3))"] | join(", "))
                 + "; no straggler \($ref | pm("final_bpb"; 3))"),
          settings: "decoupled M=4, \($ssteps) steps per learner, learner 3 straggled (agent straggle fault, 500 ms period), every learner padded to 1/4 duty (slowdown 4), P=4, H=24; K=1 without grace: grace_cap_ms 0",
          figures: ([$V[] | {key: .name, value: {goodput: .r.goodput, relative: div(.r.goodput; $ref.goodput), final_loss: .r.final_loss, merges: .r.merges}}] | from_entries + {reference: {goodput: $ref.goodput, final_loss: $ref.final_loss}})}),
      # ---- 6. RDA vs plain averaging ----
      (select(want("6"; $only)) | [$RM[] as $m | {m: $m, rda: run("merge-rda-m\($m)"), mean: run("merge-mean-m\($m)")}] as $G
       | {claim: "6. RDA vs plain averaging as M grows",
          paper: "RDA keeps the merged update's norm as M grows (no figure in DESIGN.md section 9)",
          ours: ("median merged update norm rda / mean (final bits/byte rda / mean): "
                 + ([$G[] | "M=\(.m) \(.rda | pm("update_norm_median"; 3)) / \(.mean | pm("update_norm_median"; 3)) (\(.rda | pm("final_bpb"; 3)) / \(.mean | pm("final_bpb"; 3)))"] | join(", "))),
          settings: "decoupled, K=M (every merge averages M contributions), \($tokens) tokens in all, P=4, H=24, token weights",
          figures: ([$G[] | {key: "M=\(.m)", value: {rda_norm: .rda.update_norm_median, mean_norm: .mean.update_norm_median, rda_loss: .rda.final_loss, mean_loss: .mean.final_loss, rda_participants: .rda.merge_participants_mean, mean_participants: .mean.merge_participants_mean}}] | from_entries)})
    ] as $rows
  | {generated: $when, mode: (if $short == "1" then "short" else "full" end), host: $host,
     elapsed_s: $elapsed, failed_runs: ($failed | words), only: $only,
     model: $model, seeds: $seeds, targets_bpb: $targets,
     rows: ($rows | map(. + {model: (.model // $model), seeds: (.seeds // $seeds)})),
     simulate: $S,
     runs: ($R | with_entries(.value |= del(.eval_curve)))};

def cell: tostring | gsub("\\|"; "/") | gsub("\n"; " ");

def markdown:
  "## Claims (\(.mode) mode, \(.generated), \(.elapsed_s) s, \(.host))",
  "",
  "Model: \(.model); \(.seeds) seed(s) per configuration; figures are means with a 95% Student-t interval (mean ± half-width) where two or more seeds ran.",
  "",
  "| claim | paper | ours | settings |",
  "|---|---|---|---|",
  (.rows[] | "| \(.claim | cell) | \(.paper | cell) | \(.ours | cell) | \(.settings | cell) |"),
  "",
  "### Runs",
  "",
  "| run | mode | M | final bits/byte | bytes/token | goodput | longest merge gap s | uptime | merges | participants/merge | median update norm | kills | rejects | exit |",
  "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
  (.runs | to_entries[] | .key as $k | .value
   | "| \($k) | \(.mode) | \(.learners) | \(.final_bpb | fx(3)) | \(.bytes_per_token | fx(0)) | \(.goodput | fx(3)) | \(.longest_gap_s | fx(2)) | \(.uptime | pct) | \(.merges) | \(.merge_participants_mean | fx(2)) | \(.update_norm_median | fx(3)) | \([.faults[]? | select(.type == "kill")] | length) | \(.rejects | to_entries | map("\(.key) \(.value)") | join(", ") | if . == "" then "-" else . end) | \(.exit // "-") |"),
  "",
  (select((.simulate | length) > 0) |
    "### chaosloco simulate (goodput %, ours [paper])",
    "",
    "| row | " + ([.simulate[].chips] | unique | map(tostring) | join(" | ")) + " |",
    "|---|" + ([.simulate[].chips] | unique | map("---") | join("|")) + "|",
    (.simulate | group_by(.mode + (.learners | tostring))[] | sort_by(.chips)
     | "| \(.[0].mode)\(if .[0].mode == "decoupled" then " M=\(.[0].learners)" else "" end) | "
       + (map("\(.goodput * 1000 | round / 10)" + (if .paper_goodput != null then " [\(.paper_goodput * 100 | round)]" else "" end)) | join(" | ")) + " |"),
    ""),
  (if (.failed_runs | length) > 0 then "Runs with a harness error: \(.failed_runs | join(", "))" else empty end);
