# table.jq - bench/claims' table: one row per claim of DESIGN.md section 9,
# the paper's figure beside ours and the settings, from OUT/data/runs.json
# (every run's metrics.json, keyed by run name) and OUT/data/simulate.json.
# `table` builds claims.json; `markdown` renders it.

include "metrics";

def fx($d): if . == null then "n/a" else ((. * pow(10; $d) | round) / pow(10; $d) | tostring) end;
def pct: if . == null then "n/a" else ((. * 100 | round | tostring) + "%") end;
def ratio: if . == null then "n/a" else ((. * 10 | round) / 10 | tostring) + "x" end;
def div($a; $b): if $a == null or $b == null or $b == 0 then null else $a / $b end;
def words: split(" ") | map(select(length > 0));

def table:
  $runs[0] as $R
  | def run($n): $R[$n] // {};
  ($qms | words) as $QM
  | ($encs | words) as $EN
  | ($slow | words) as $SG
  | ($pms | words) as $PM
  | ($rms | words) as $RM
  | ($sim[0].results // []) as $S
  | [
      # ---- 1. quality parity ----
      ($QM[] as $m
       | [run("quality-m\($m)/ddp"), run("quality-m\($m)/diloco"), run("quality-m\($m)/decoupled")] as [$dp, $dl, $dc]
       | {claim: "1. Quality parity with data-parallel (M=\($m))",
          paper: "text avg 69.8 (Decoupled) vs 70.1 (DP): -0.4% (5B, 1T tokens)",
          ours: ("final eval loss (nats) ddp \($dp.final_loss | fx(3)), diloco \($dl.final_loss | fx(3)), decoupled \($dc.final_loss | fx(3)); decoupled vs ddp "
                 + (div($dc.final_loss - $dp.final_loss; $dp.final_loss) | if . == null then "n/a" else ((. * 1000 | round) / 10 | tostring) + "%" end)),
          settings: "M=\($m), \($tokens / ($m | tonumber) / 16 | floor) steps x 16 tokens per learner (\($tokens) tokens in all), P=4, H=24, K=1, f32, seed 11",
          figures: {ddp: $dp.final_loss, diloco: $dl.final_loss, decoupled: $dc.final_loss}}),
      # ---- 2. bandwidth ----
      (("quality-m4" | if ($QM | index("4")) then . else "quality-m\($QM[0])" end) as $q
       | [run("\($q)/ddp"), run("\($q)/diloco"), run("\($q)/decoupled")] as [$dp, $dl, $dc]
       | ([$EN[] as $e | {key: $e, value: (run("enc-\($e)").bytes_per_token)}] | from_entries) as $bpt
       | {claim: "2. Bandwidth: bytes on the wire per token",
          paper: "198 -> 0.84 Gbit/s (~236x less than DP)",
          ours: ("bytes/token ddp \($dp.bytes_per_token | fx(0)), diloco \($dl.bytes_per_token | fx(0)) (\(div($dp.bytes_per_token; $dl.bytes_per_token) | ratio) less), decoupled f32 \($dc.bytes_per_token | fx(0)) (\(div($dp.bytes_per_token; $dc.bytes_per_token) | ratio))"
                 + ([$EN[] as $e | ", \($e) \($bpt[$e] | fx(0)) (\(div($dp.bytes_per_token; $bpt[$e]) | ratio))"] | add // "")),
          settings: "decoupled vs ddp vs diloco, M=\($q | ltrimstr("quality-m")), \($tokens) tokens, P=4, H=24, K=1; syncer tensor payload bytes in + out / tokens trained; encodings shrink upstream and downstream deltas",
          figures: ({ddp: $dp.bytes_per_token, diloco: $dl.bytes_per_token, f32: $dc.bytes_per_token} + $bpt)}),
      (([$EN[] as $e | {key: $e, value: (run("enc-\($e)").final_loss)}] | from_entries) as $fl
       | run("quality-m4/decoupled").final_loss as $f32
       | {claim: "2b. int4 outer gradients are lossless, 2-bit is not",
          paper: "int4 55.3 vs 55.4 (f32); 2-bit 42.6",
          ours: ("final eval loss f32 \($f32 | fx(3))" + ([$EN[] as $e | ", \($e) \($fl[$e] | fx(3))"] | add // "")),
          settings: "decoupled M=4, \($tokens) tokens, P=4, H=24, K=1; blockwise-scaled encodings; int2 run without the harness (its validator accepts f32..int4 only)",
          figures: ({f32: $f32} + $fl)}),
      # ---- 3. slow links ----
      ($SG[] as $g
       | [run("slow-\($g)g/ddp"), run("slow-\($g)g/decoupled"), run("slow-\($g)g-f32")] as [$dp, $dc, $d32]
       | (run("quality-m4/ddp").eval_curve // [] | map(select(.[1] <= $slowtarget)) | .[0][3]) as $ddp_steps
       | (if ($dp.merges // 0) > 1 then $dp.merge_span_s / ($dp.merges - 1) else null end) as $ddp_spstep
       | ($dp.eval_curve // [] | time_to($slowtarget)) as $tdp
       | ($dc.eval_curve // [] | time_to($slowtarget)) as $tdc
       | ($d32.eval_curve // [] | time_to($slowtarget)) as $t32
       | (if $ddp_steps == null or $ddp_spstep == null then null else $ddp_steps * $ddp_spstep end) as $est
       | ($nparams * 1e9 * ($g | tonumber) / 8 / 12e9 * $nstep / 1000 | round) as $kbs
       | {claim: "3. Faster over slow links (\($g) Gbit/s)",
          paper: "12B over 2-5 Gbit/s: > 20x faster than synchronous",
          ours: ("time to eval loss \($slowtarget): decoupled \($tdc | fx(1)) s; ddp "
                 + (if $tdp != null then "\($tdp | fx(1)) s: \(div($tdp; $tdc) | ratio) faster"
                    else "not within \($slowtl) s (\($dp.merges // 0) steps, loss \($dp.final_loss | fx(3))): > \(div($slowtl; $tdc) | ratio) faster; at its capped \($ddp_spstep | fx(2)) s/step x the \($ddp_steps // "n/a") steps it needs uncapped (claim 1 run) ddp would take ~\($est | fx(0)) s: ~\(div($est; $tdc) | ratio)" end)
                 + "; decoupled at claim 1 settings (f32, H=24): " + (if $t32 != null then "\($t32 | fx(1)) s" else "not reached (loss \($d32.final_loss | fx(3)))" end)),
          settings: "M=4, every link capped at \($kbs) KB/s both ways = \($g) Gbit/s x \($nparams)/12e9 params x \($nstep) (12B step ~1 s vs ~10 ms here, assumed); decoupled int4 H=96 K=1, ddp f32 gradients; \($slowtl) s per run",
          figures: {target: $slowtarget, ddp_s: $tdp, decoupled_s: $tdc, decoupled_f32_h24_s: $t32, ddp_s_per_step: $ddp_spstep, ddp_steps_uncapped: $ddp_steps, ddp_estimate_s: $est, speedup_lower_bound: (if $tdp != null then div($tdp; $tdc) else div($slowtl; $tdc) end), speedup_estimate: (if $tdp != null then div($tdp; $tdc) else div($est; $tdc) end), rate_kbs: $kbs}}),
      # ---- 4. goodput and downtime under Poisson kills ----
      ([{name: "ddp", f: run("poisson-dp/ddp"), r: run("poisson-dp-ref/ddp")},
        {name: "ddp-elastic", f: run("poisson-dp/ddp-elastic"), r: run("poisson-dp-ref/ddp-elastic")}]
       + [$PM[] as $m | {name: "decoupled M=\($m)", f: run("poisson-m\($m)"), r: run("poisson-m\($m)-ref")}]) as $P
      | ({claim: "4. Goodput under Poisson failures (real runs)",
          paper: "88% (M=8) vs 58% elastic DP vs 27% DP at 1.2M chips",
          ours: ("goodput with kills / without (same mode, same length): "
                 + ([$P[] | "\(.name) \(div(.f.goodput; .r.goodput) | pct)"] | join(", "))),
          settings: "job MTBF \($pj) s (each of M units: M x \($pj) s), SIGKILL + restart after 3 s, \($ptl) s per run, ddp/ddp-elastic on 4 units, every learner padded to 1/M duty (slowdown M) so a kill frees no shared CPU, P=4, H=24, K=1; goodput = harness goodput (compute time of merged steps / allocated learner time)",
          figures: ([$P[] | {key: .name, value: {faulted: .f.goodput, reference: .r.goodput, relative: div(.f.goodput; .r.goodput), kills: ([.f.faults[]? | select(.type == "kill")] | length)}}] | from_entries)},
         {claim: "4b. Zero global downtime",
          paper: "uptime ~100% for M >= 4",
          ours: ("uptime (share of time outside merge gaps > 2 s) / longest merge gap: "
                 + ([$P[] | "\(.name) \(.f.uptime | pct) / \(.f.longest_gap_s | fx(1)) s"] | join(", "))),
          settings: "the faulted runs of row 4; ddp and ddp-elastic merge once per averaged step",
          figures: ([$P[] | {key: .name, value: {uptime: .f.uptime, longest_gap_s: .f.longest_gap_s, downtime_s: .f.downtime_s}}] | from_entries)}),
      ([$S[] | select(.chips == 1200000)] as $s12
       | ($s12 | map(select(.mode == "dp"))[0].goodput) as $a
       | ($s12 | map(select(.mode == "elastic"))[0].goodput) as $b
       | ($s12 | map(select(.mode == "decoupled" and .learners == 8))[0].goodput) as $c
       | {claim: "4c. Goodput at cluster scale (chaosloco simulate)",
          paper: "Table 1, 1.2M chips: M=8 88%, elastic DP 58%, DP 27%",
          ours: "1.2M chips: M=8 \($c | pct), elastic DP \($b | pct), DP \($a | pct)",
          settings: "chaosloco simulate --trials \($trials): per-chip MTBF 1 year, 30 days; restart/checkpoint/re-shard/recovery fitted on the DP and elastic rows only (docs/simulate.md)",
          figures: {dp: $a, elastic: $b, decoupled_m8: $c}}),
      # ---- 5. heterogeneous learners ----
      ([{name: "K=M", r: run("straggle-km")}, {name: "K=1", r: run("straggle-k1")},
        {name: "K=1+grace", r: run("straggle-k1grace")}] as $V
       | run("straggle-ref") as $ref
       | {claim: "5. Heterogeneous learners (one x1.18 slower, 10% jitter)",
          paper: "K=1 + grace: 100% goodput, quality kept",
          ours: ("goodput vs no straggler / final loss: "
                 + ([$V[] | "\(.name) \(div(.r.goodput; $ref.goodput) | pct) / \(.r.final_loss | fx(3))"] | join(", "))
                 + "; no straggler \($ref.final_loss | fx(3))"),
          settings: "decoupled M=4, \($ssteps) steps per learner, learner 3 straggled (agent straggle fault, 500 ms period), every learner padded to 1/4 duty (slowdown 4), P=4, H=24; K=1 without grace: grace_cap_ms 0",
          figures: ([$V[] | {key: .name, value: {goodput: .r.goodput, relative: div(.r.goodput; $ref.goodput), final_loss: .r.final_loss, merges: .r.merges}}] | from_entries + {reference: {goodput: $ref.goodput, final_loss: $ref.final_loss}})}),
      # ---- 6. RDA vs plain averaging ----
      ([$RM[] as $m | {m: $m, rda: run("merge-rda-m\($m)"), mean: run("merge-mean-m\($m)")}] as $G
       | {claim: "6. RDA vs plain averaging as M grows",
          paper: "RDA keeps the merged update's norm as M grows (no figure in DESIGN.md section 9)",
          ours: ("median merged update norm rda / mean (final loss rda / mean): "
                 + ([$G[] | "M=\(.m) \(.rda.update_norm_median | fx(3)) / \(.mean.update_norm_median | fx(3)) (\(.rda.final_loss | fx(3)) / \(.mean.final_loss | fx(3)))"] | join(", "))),
          settings: "decoupled, K=M (every merge averages M contributions), \($tokens) tokens in all, P=4, H=24, token weights",
          figures: ([$G[] | {key: "M=\(.m)", value: {rda_norm: .rda.update_norm_median, mean_norm: .mean.update_norm_median, rda_loss: .rda.final_loss, mean_loss: .mean.final_loss, rda_participants: .rda.merge_participants_mean, mean_participants: .mean.merge_participants_mean}}] | from_entries)})
    ] as $rows
  | {generated: $when, mode: (if $short == "1" then "short" else "full" end), host: $host,
     elapsed_s: $elapsed, failed_runs: ($failed | words),
     rows: $rows,
     simulate: $S,
     runs: ($R | with_entries(.value |= del(.eval_curve)))};

def cell: tostring | gsub("\\|"; "/") | gsub("\n"; " ");

def markdown:
  "## Claims (\(.mode) mode, \(.generated), \(.elapsed_s) s, \(.host))",
  "",
  "| claim | paper | ours | settings |",
  "|---|---|---|---|",
  (.rows[] | "| \(.claim | cell) | \(.paper | cell) | \(.ours | cell) | \(.settings | cell) |"),
  "",
  "### Runs",
  "",
  "| run | mode | M | final loss | bytes/token | goodput | longest merge gap s | uptime | merges | participants/merge | median update norm | kills | rejects | exit |",
  "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
  (.runs | to_entries[] | .key as $k | .value
   | "| \($k) | \(.mode) | \(.learners) | \(.final_loss | fx(3)) | \(.bytes_per_token | fx(0)) | \(.goodput | fx(3)) | \(.longest_gap_s | fx(2)) | \(.uptime | pct) | \(.merges) | \(.merge_participants_mean | fx(2)) | \(.update_norm_median | fx(3)) | \([.faults[]? | select(.type == "kill")] | length) | \(.rejects | to_entries | map("\(.key) \(.value)") | join(", ") | if . == "" then "-" else . end) | \(.exit // "-") |"),
  "",
  "### chaosloco simulate (goodput %, ours [paper])",
  "",
  "| row | " + ([.simulate[].chips] | unique | map(tostring) | join(" | ")) + " |",
  "|---|" + ([.simulate[].chips] | unique | map("---") | join("|")) + "|",
  (.simulate | group_by(.mode + (.learners | tostring))[] | sort_by(.chips)
   | "| \(.[0].mode)\(if .[0].mode == "decoupled" then " M=\(.[0].learners)" else "" end) | "
     + (map("\(.goodput * 1000 | round / 10)" + (if .paper_goodput != null then " [\(.paper_goodput * 100 | round)]" else "" end)) | join(" | ")) + " |"),
  "",
  (if (.failed_runs | length) > 0 then "Runs with a harness error: \(.failed_runs | join(", "))" else empty end);
