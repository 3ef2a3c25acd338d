# stats.jq - figures as words and the statistics of bench/claims' and
# bench/parity's tables: a configuration's seeds aggregated to a mean with a
# 95% Student-t interval ("mean +- half-width"; the half-width alone in .ci).

include "metrics";

# a missing figure reads as words inside a sentence (check.sh refuses "n/a")
def fx($d): if . == null then "not measured" else ((. * pow(10; $d) | round) / pow(10; $d) | tostring) end;
def pct: if . == null then "not measured" else ((. * 100 | round | tostring) + "%") end;
def ratio: if . == null then "an unmeasured ratio" else ((. * 10 | round) / 10 | tostring) + "x" end;
def div($a; $b): if $a == null or $b == null or $b == 0 then null else $a / $b end;
def words: split(" ") | map(select(length > 0));

# two-sided 95% Student-t critical value for n samples (n - 1 degrees of freedom)
def tcrit: {"2": 12.706, "3": 4.303, "4": 3.182, "5": 2.776, "6": 2.571, "7": 2.447, "8": 2.365,
            "9": 2.306, "10": 2.262}[tostring] // 2.0;
# [numbers] -> {mean, ci (95% half-width, null below 2 samples), n}
def mean_ci:
  map(numbers | select(isinfinite | not)) as $x | ($x | length) as $n
  | if $n == 0 then {mean: null, ci: null, n: 0}
    else ($x | add / $n) as $m
    | if $n < 2 then {mean: $m, ci: null, n: $n}
      else ((($x | map((. - $m) * (. - $m)) | add) / ($n - 1)) | sqrt) as $sd
      | {mean: $m, ci: (($n | tcrit) * $sd / ($n | sqrt)), n: $n} end end;
def NUMERIC: ["final_loss", "final_bpb", "bytes_per_token", "goodput", "uptime", "longest_gap_s", "downtime_s",
              "update_norm_median", "update_norm_mean", "merges", "merge_participants_mean", "merged_tokens", "merge_efficiency"];
# [metrics of one configuration's seeds] -> the first seed's metrics with every
# NUMERIC figure replaced by the mean; .ci the half-widths, .n the seeds,
# .all every seed's metrics
def agg:
  . as $s
  | if length == 0 then {n: 0, all: [], ci: {}}
    else $s[0] + (reduce NUMERIC[] as $k ({}; . + {($k): ($s | map(.[$k]) | mean_ci | .mean)}))
      + {ci: (reduce NUMERIC[] as $k ({}; . + {($k): ($s | map(.[$k]) | mean_ci | .ci)})), n: length, all: $s}
    end;
# "mean +- ci" of figure $k of an aggregate, $d decimals
def pm($k; $d):
  if .[$k] == null then "not measured" elif (.ci[$k] // null) == null then (.[$k] | fx($d))
  else "\(.[$k] | fx($d)) ± \(.ci[$k] | fx($d))" end;
# merged tokens to reach $b bits/byte over an aggregate's seeds: "mean +- ci"
# when every seed got there, else how many did
def tokens_to($b):
  (.all | map(.tokens_to[$b | tostring])) as $v
  | if ($v | length) == 0 then "not measured"
    elif ($v | all(. != null)) then ($v | mean_ci) as $c
      | (if $c.ci == null then "\($c.mean | fx(0))" else "\($c.mean | fx(0)) ± \($c.ci | fx(0))" end)
    else "\($v | map(select(. != null)) | length)/\($v | length) seeds reached it" end;
