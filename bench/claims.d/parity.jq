# parity.jq - bench/parity's table from OUT/data/runs.json (every run's
# metrics.json keyed by name: parity-mM@sK/diloco, parity-mM@sK/decoupled,
# parity-mM-ddp-lrRATE@sK (RATE one of $lrs), parity-mM-avg@sK/diloco and
# parity-mM-avg@sK/decoupled). `parity` builds parity.json; `markdown`
# renders it.

include "metrics";
include "stats";

# {seed K (string): value} of figure $k over the runs whose name matches $re
def by_seed($R; $re; $k):
  [$R | to_entries[] | select(.key | test($re)) | {key: (.key | capture("@s(?<s>[0-9]+)").s), value: .value[$k]}]
  | from_entries;

# per-seed differences a - b over the seeds both have, as mean_ci, in bits/byte
def paired($a; $b): [$a | keys[] as $s | select($b[$s] != null and $a[$s] != null) | $a[$s] - $b[$s]] | mean_ci;

def parity:
  $runs[0] as $R
  | ($lrs | words) as $LR
  | def cfg($re): [$R | to_entries[] | select(.key | test($re)) | .value] | agg;
  {generated: $when, elapsed_s: $elapsed, host: $host, model: $model, seeds: $seeds, tokens: $tokens, H: $H,
   eval_every_ms: $eval_ms, failed_runs: ($failed | words),
   rows: [($ms | words)[] as $m
     | ("^parity-m\($m)@s[0-9]+/") as $cmp
     | [$LR[] as $lr | ("^parity-m\($m)-ddp-lr\($lr | gsub("\\."; "\\."))@s[0-9]+$") as $re
        | cfg($re) + {name: "ddp, inner lr \($lr)", lr: ($lr | tonumber), re: $re}] as $ddp
     | ($ddp | map(select(.final_bpb != null)) | min_by(.final_bpb) // $ddp[0]) as $best
     | (cfg($cmp + "diloco$") + {name: "diloco (synchronous, H=\($H))", re: ($cmp + "diloco$")}) as $dl
     | (cfg($cmp + "decoupled$") + {name: "decoupled (K=1, H=\($H))", re: ($cmp + "decoupled$")}) as $dc
     | ("^parity-m\($m)-avg@s[0-9]+/") as $avg
     | (cfg($avg + "diloco$") + {name: "diloco, plain averaging", re: ($avg + "diloco$")}) as $dla
     | (cfg($avg + "decoupled$") + {name: "decoupled, plain averaging", re: ($avg + "decoupled$")}) as $dca
     | by_seed($R; $best.re; "final_bpb") as $b
     | {M: ($m | tonumber),
        configs: [($ddp + [$dl, $dc, $dla, $dca])[] | {name, lr, n, final_bpb, ci: .ci.final_bpb,
                   seeds_bpb: (.all | map(.final_bpb)), merge_efficiency, participants: .merge_participants_mean,
                   tokens_to}],
        best_ddp: $best.name,
        ddp_aa: ($b | [.[]] | if length >= 2 then (.[0] - .[1] | fabs) else null end),
        decoupled_vs_ddp: paired(by_seed($R; $dc.re; "final_bpb"); $b),
        diloco_vs_ddp: paired(by_seed($R; $dl.re; "final_bpb"); $b),
        averaging_vs_ddp: {diloco: paired(by_seed($R; $dla.re; "final_bpb"); $b),
                           decoupled: paired(by_seed($R; $dca.re; "final_bpb"); $b)},
        decoupled_vs_ddp_pct: (if $dc.final_bpb == null or $best.final_bpb == null then null
                               else div($dc.final_bpb - $best.final_bpb; $best.final_bpb) end),
        decoupled_merge_efficiency: $dc.merge_efficiency}]};

def signed($d): if . == null then "not measured" elif . >= 0 then "+" + fx($d) else fx($d) end;
def diff($d): if .mean == null then "not measured" elif .ci == null then (.mean | signed($d))
              else "\(.mean | signed($d)) ± \(.ci | fx($d))" end;

def markdown:
  "## Parity (bench/parity, \(.generated), \(.elapsed_s) s, \(.host))",
  "",
  "Model: \(.model); \(.tokens) bytes of text per configuration; H=\(.H) (P=4); evals at least \(.eval_every_ms) ms apart and once at the end; \(.seeds) seed(s); mean ± 95% Student-t interval.",
  "",
  (.rows[] |
    "### M=\(.M)",
    "",
    "| configuration | final held-out bits/byte | per seed | merge efficiency |",
    "|---|---|---|---|",
    (.configs[] | "| \(.name) | \(if .ci == null then (.final_bpb | fx(3)) else "\(.final_bpb | fx(3)) ± \(.ci | fx(3))" end) | \(.seeds_bpb | map(fx(3)) | join(", ")) | \(.merge_efficiency | fx(3)) |"),
    "",
    "Best ddp: \(.best_ddp); its A/A spread (seeds 11 and 12): \(.ddp_aa | fx(3)) bits/byte.",
    "Paired by seed against it: decoupled \(.decoupled_vs_ddp | diff(3)) bits/byte (\(if .decoupled_vs_ddp_pct == null then "not measured" else (.decoupled_vs_ddp_pct * 100 | signed(1)) + "%" end)), diloco \(.diloco_vs_ddp | diff(3)) bits/byte; with plain averaging decoupled \(.averaging_vs_ddp.decoupled | diff(3)), diloco \(.averaging_vs_ddp.diloco | diff(3)) bits/byte.",
    ""),
  (if (.failed_runs | length) > 0 then "Runs with a harness error: \(.failed_runs | join(", "))" else empty end);
