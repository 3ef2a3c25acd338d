#!/usr/bin/env bash
# syncer_restart.sh - how soon a restarted syncer (default model, decoupled,
# restored from the checkpoint its SIGTERM wrote) answers GET /v1/status,
# and when its first eval is logged (issue 27 item 4).
#
#   bench/syncer_restart.sh BIN LABEL      (work dir /tmp/rbrestart-LABEL)
BIN=$1; D=/tmp/rbrestart-$2; rm -rf $D; mkdir -p $D
export OPENBLAS_NUM_THREADS=1
$BIN syncer --insecure-no-auth --listen 127.0.0.1:0 --state-dir $D/s --mode decoupled --learners 4 --steps 600 > $D/1.log 2>&1 &
P=$!; for i in $(seq 600); do [ -s $D/s/listen.addr ] && break; sleep 0.1; done
kill -TERM $P; wait $P
rm -f $D/s/listen.addr
t0=$(date +%s.%N)
$BIN syncer --insecure-no-auth --listen 127.0.0.1:0 --state-dir $D/s --mode decoupled --learners 4 --steps 600 > $D/2.log 2>&1 &
P=$!; for i in $(seq 3000); do [ -s $D/s/listen.addr ] && curl -sf http://$(cat $D/s/listen.addr)/v1/status >/dev/null && break; sleep 0.02; done
t1=$(date +%s.%N)
for i in $(seq 600); do grep -q "eval loss" $D/2.log && break; sleep 0.1; done
t2=$(date +%s.%N)
kill -TERM $P; wait $P
echo "$2: restart answered status after $(echo "$t1 - $t0" | bc) s; its eval logged after $(echo "$t2 - $t0" | bc) s; restored: $(grep -c 'restored checkpoint' $D/2.log)"
