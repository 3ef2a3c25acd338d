# metrics.jq - the figures bench/claims reads out of one run directory.
#
#   jq -n --slurpfile ev RUN/syncer/events.jsonl --slurpfile sum RUN/summary.json \
#         --slurpfile faults RUN/faults.json --argjson targets '[5.0, 4.5]' --argjson T 64 \
#         -L bench/claims.d 'include "metrics"; metrics'
#
# $ev: every syncer event (docs/api.md), $sum: [summary.json] (or [{}] for a run
# made without the harness), $faults: [faults.json] (or [[]]), $targets:
# held-out bits/byte whose first crossing is reported (tokens_to, time_to),
# $T: bytes per counted token (the syncer counts a gpt example of T
# predictions as one token, docs/training.md "Tokens": pass the context T;
# 1 for the mlp), so every token figure here is in bytes of text.
# Times are seconds since the syncer's first "start" event (CLOCK_MONOTONIC).

def mean: if length > 0 then add / length else null end;

# first eval curve point [t, loss, tokens, merges] at or below $bpb bits/byte, else null
def first_at_bpb($bpb): map(select(.[1] / (2 | log) <= $bpb)) | .[0];

# gaps (ms) between consecutive merges
def gaps: [range(1; length) as $i | .[$i] - .[$i - 1]];

def metrics:
  ($ev // []) as $e
  | ($sum[0] // {}) as $s
  | (($faults // [[]])[0] // []) as $f
  | ([$e[] | select(.type == "start")][0].t_mono_ms // 0) as $t0
  | [$e[] | select(.type == "merge")] as $m
  | [$e[] | select(.type == "eval" and (.loss | type) == "number" and .loss >= 0) | .tokens *= ($T // 1)] as $evals
  | ([$m[].t_mono_ms] | gaps) as $g
  | (if ($m | length) > 1 then ($m[-1].t_mono_ms - $m[0].t_mono_ms) else 0 end) as $span
  | ([$g[] | select(. > 2000)] | add // 0) as $down
  | [$e[] | select(.type == "join")] as $joins
  | {
      mode: ($s.mode // ([$e[] | select(.type == "start")][0].mode)),
      learners: ($s.learners // ([$e[] | select(.type == "start")][0].learners)),
      final_loss: ($evals | if length > 0 then .[-1].loss else null end),
      final_bpb: ($evals | if length > 0 then .[-1].loss / (2 | log) else null end),
      eval_curve: [$evals[] | [((.t_mono_ms - $t0) / 1000), .loss, .tokens, .merges]],
      # per target (bits/byte, as a string key): merged tokens and s at the first crossing
      tokens_to: ([$evals[] | [((.t_mono_ms - $t0) / 1000), .loss, .tokens, .merges]] as $c
                  | [($targets // [])[] as $b | {key: ($b | tostring), value: ($c | first_at_bpb($b) | if . then .[2] else null end)}] | from_entries),
      time_to: ([$evals[] | [((.t_mono_ms - $t0) / 1000), .loss, .tokens, .merges]] as $c
                | [($targets // [])[] as $b | {key: ($b | tostring), value: ($c | first_at_bpb($b) | if . then .[0] else null end)}] | from_entries),
      merged_tokens: ($evals | if length > 0 then .[-1].tokens else null end),
      merges: ($m | length),
      merge_participants_mean: ([$m[] | .participants | length] | mean),
      update_norm_mean: ([$m[] | .update_norm | numbers] | mean),
      update_norm_median: ([$m[] | .update_norm | numbers] | sort | if length > 0 then .[length / 2 | floor] else null end),
      merge_span_s: ($span / 1000),
      longest_gap_s: (($g | max // 0) / 1000),
      downtime_s: ($down / 1000),
      uptime: (if $span > 0 then 1 - $down / $span else null end),
      contributions: ([$e[] | select(.type == "contribution")] | length),
      contribution_bytes: ([$e[] | select(.type == "contribution") | .bytes | numbers] | add // 0),
      # reject events are aggregated per reason per second: .count says how many each stands for
      rejects: ([$e[] | select(.type == "reject") | {reason, n: (.count // 1)}] | group_by(.reason) | map({key: .[0].reason, value: (map(.n) | add)}) | from_entries),
      joins: ($joins | length),
      goodput: $s.goodput,
      merge_efficiency: $s.merge_efficiency,
      bytes_per_token: (if $s.bytes_per_token then $s.bytes_per_token / ($T // 1) else null end),
      harness_longest_merge_gap_s: $s.longest_merge_gap_s,
      duration_s: $s.duration_s,
      status: $s.status,
      # fault windows; a kill lasts until the learner's next join
      faults: [$f[] | .learner as $l | .record
               | select(.state != "failed" and .started_mono_ms != null)
               | .started_mono_ms as $st
               | (.ended_mono_ms // ($st + .duration_ms)) as $en
               | (if .type == "kill" or .type == "preempt"
                  then ([$joins[] | select(.learner == $l and .t_mono_ms >= $st) | .t_mono_ms][0] // $en)
                  else $en end) as $healed
               | {type, learner: $l, start: (($st - $t0) / 1000), end: (($healed - $t0) / 1000)}]
    };
