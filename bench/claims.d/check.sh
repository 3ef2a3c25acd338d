#!/usr/bin/env bash
# check.sh OUT - is bench/claims' output well-formed? Exit 0 yes, 1 no (every
# problem printed). Checks: claims.json parses, has the expected claims (all,
# or the ones bench/claims --only ran), every row has non-empty
# claim/paper/ours/settings/model, seeds >= 1 and at least one finite figure,
# and no "n/a" in its text (a missing figure is said in words);
# claims.csv is the same rows, RFC 4180-quoted, 4 fields each; claims.md has the
# header and one table line per row with 4 cells; every plot is a complete SVG
# with drawn data; every run has metrics with a finite final loss.
set -uo pipefail
OUT=$1
bad=0
fail() { echo "claims check: $*" >&2; bad=1; }

J=$OUT/claims.json
if ! jq -e 'type == "object" and (.rows | type == "array")' "$J" >/dev/null 2>&1; then
    fail "$J does not parse or has no rows"
    exit 1
fi
n=$(jq '.rows | length' "$J")
ONLY=$(jq -r '.only // ""' "$J") # bench/claims --only: the claims and plots to expect
for c in "0. " "1. " "1b. " "2. " "2b. " "3. " "4. " "4b. " "4c. " "5. " "6. "; do
    jq -e -L "$(dirname "$0")" --arg c "$c" --arg only "$ONLY" 'include "table";
        ($c | selected($only) | not) or ([.rows[] | select(.claim | startswith($c))] | length >= 1)' "$J" >/dev/null ||
        fail "claims.json: no row for claim '$c'"
done
jq -r '(.rows | to_entries[] | .key as $i | .value
    | (["claim", "paper", "ours", "settings"][] as $k | select((.[$k] | type) != "string" or .[$k] == "")
       | "row \($i): \($k) missing or empty"),
      (select([.figures | .. | numbers | select(isinfinite | not)] | length == 0)
       | "row \($i) (\(.claim)): no finite figure (every run behind it failed?)"),
      (select((.model | type) != "string" or .model == "" or ((.seeds | type) != "number") or .seeds < 1)
       | "row \($i) (\(.claim)): no model or seeds"),
      (select(.ours | test("\\bn/a\\b"))
       | "row \($i) (\(.claim)): \"n/a\" in its text (table.jq must say what is missing and why)")),
    (.runs | to_entries[] | select((.value.final_loss | type) != "number") | "run \(.key): no final eval loss")' \
    "$J" >"$OUT/data/check.txt"
while IFS= read -r line; do fail "$line"; done <"$OUT/data/check.txt"

# CSV: header + n rows, each exactly 4 quoted fields
C=$OUT/claims.csv
[[ $(head -1 "$C") == '"claim","paper","ours","settings"' ]] || fail "$C: bad header"
[[ $(wc -l <"$C") -eq $((n + 1)) ]] || fail "$C: $(wc -l <"$C") lines, expected $((n + 1))"
q='"([^"]|"")*"'
bad_lines=$(grep -cvE "^$q,$q,$q,$q\$" "$C")
[[ $bad_lines == 0 ]] || fail "$C: $bad_lines lines are not 4 quoted fields"

# Markdown: header, separator, n rows of 4 cells
M=$OUT/claims.md
grep -qx '| claim | paper | ours | settings |' "$M" || fail "$M: no table header"
rows=$(awk '/^\| claim \| paper \| ours \| settings \|$/ {t = 1; next}
            t && /^\|---/ {next}
            t && /^\|/ {n++; c = gsub(/\|/, "|"); if (c != 5) badc++; next}
            t {t = 0}
            END {print n + 0, badc + 0}' "$M")
[[ ${rows% *} -eq $n ]] || fail "$M: ${rows% *} table rows, expected $n"
[[ ${rows#* } -eq 0 ]] || fail "$M: ${rows#* } rows without exactly 4 cells"

# plots: complete SVGs with at least one drawn path
plots=0
for ps in loss_faults:4 loss_parity:1 loss_slowlinks:3 goodput_vs_failure_rate:sim bytes_per_token:2 update_norm:6; do
    p=${ps%:*}
    [[ -z $ONLY || ,$ONLY, == *,${ps#*:},* ]] || continue
    plots=$((plots + 1))
    f=$OUT/plots/$p.svg
    if [[ ! -s $f ]]; then
        fail "$f missing or empty"
        continue
    fi
    head -c 200 "$f" | grep -q '<?xml\|<svg' || fail "$f: not SVG"
    tail -c 20 "$f" | grep -q '</svg>' || fail "$f: truncated (no </svg>)"
    grep -q '<path' "$f" || fail "$f: nothing drawn"
done
[[ $bad == 0 ]] && echo "claims check: ok ($n rows, csv, md, json, $plots plots)"
exit "$bad"
