#!/bin/bash
# tests/slurm/slurm_cluster.sh - a real Slurm (Debian's slurm-wlm 22.05 and
# munge) runs the shipped deploy/slurm/chaosloco.sbatch, unchanged, the way
# deploy/README.md says a user submits it.
#
#   slurm_cluster.sh CASE CHAOSLOCO SRCDIR OUTDIR
#
# CASE:
#   one     a one-node cluster; the script's defaults (2 learners on the
#           node, agents on per-task ports 7080 and 7081); every hypothesis
#           must hold (job exit 0)
#   four    four nodes, each a network namespace whose slurmd runs in its own
#           time namespace (CLOCK_MONOTONIC offsets 0, +2 h, +5 min, +1 day:
#           separate machines boot at different times); one learner per node
#           (--ntasks-per-node=1), the killed learner on the +1 day node;
#           every hypothesis must hold
#   broken  the one-node cluster, but the killed learner's restart never
#           rejoins (a `chaosloco` earlier on the PATH runs `sleep 40` in place
#           of the second start of that learner): reintegration must fail (job
#           exit 1), so this test can fail
#
# The whole test runs in its own mount, UTS, network and PID namespaces
# (unshare): its /etc/hosts (node names), its hostname (the controller's),
# its loopback and bridge; every process it starts dies with its PID
# namespace at the latest. The daemons (munged, slurmctld, slurmd) are
# started here and stopped by pid. Exit 77 (ctest: skipped) with the reason
# when it cannot run: not root, a missing Slurm/munge binary (scripts/
# install-deps installs them), no namespaces.
#
# It stays short (about a minute per case under ASan) through the sbatch's
# documented settings (CHAOSLOCO_TRAINING: the experiments' CI model,
# CHAOSLOCO_KILL_AT, CHAOSLOCO_RESTART_MS), which sbatch exports to the job
# from the submitting environment; the script file itself is the shipped one.
set -u
CASE=${1:?case: one, four or broken}
BIN=${2:?chaosloco binary}
SRC=${3:?source directory}
OUT=${4:?output directory}
JOB_LIMIT_S=${CX_SLURM_JOB_LIMIT_S:-420} # the test's bound on one job, s

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }

if [ -z "${CX_SLURM_INNER:-}" ]; then
  [ "$(id -u)" = 0 ] || skip "not root: munged, slurmctld and slurmd run as root here"
  for b in munged slurmctld slurmd sbatch scontrol sinfo squeue scancel unshare ip; do
    command -v "$b" >/dev/null 2>&1 || skip "$b not found (scripts/install-deps installs slurm-wlm and munge)"
  done
  [ -x "$BIN" ] || fail "chaosloco binary $BIN not found"
  unshare --mount --uts --net --pid --fork true 2>/dev/null ||
    skip "no mount/UTS/network/PID namespaces here (unshare failed)"
  if [ "$CASE" = four ]; then
    unshare --time --monotonic 60 --fork true 2>/dev/null ||
      skip "no time namespaces here (unshare --time failed: kernel < 5.6?)"
  fi
  exec unshare --mount --uts --net --pid --fork --mount-proc --kill-child \
    env CX_SLURM_INNER=1 bash "$0" "$@"
fi

# ---- inside the namespaces (PID 1 of its own PID namespace) ----
case $CASE in
  one | broken) NNODES=1 ;;
  four) NNODES=4 ;;
  *) fail "unknown case $CASE (one, four or broken)" ;;
esac
# s: each node's CLOCK_MONOTONIC offset (case four); CX_SLURM_OFFSETS="0 0 0 0"
# runs the same four nodes on one clock
read -ra OFFSETS <<<"${CX_SLURM_OFFSETS:-0 7200 300 86400}"
((${#OFFSETS[@]} == 4)) || fail "CX_SLURM_OFFSETS: four offsets wanted, got '${CX_SLURM_OFFSETS:-}'"
S=$OUT/slurm-$CASE
rm -rf "$S"
mkdir -p "$S/ctld" "$S/submit" "$S/bin" "$S"/spool-cxn{0,1,2,3} || fail "cannot make $S"
chmod 0711 "$S" # munged wants its socket's directory searchable by all
S=$(cd "$S" && pwd -P)
PIDS=() # every daemon started here, stopped in reverse order

say() { echo "[$(date +%T)] $*"; }
stop_all() {
  local i p
  if [ -n "${JOB:-}" ]; then
    scancel "$JOB" 2>/dev/null
    for _ in $(seq 1 60); do
      squeue -h -j "$JOB" 2>/dev/null | grep -q . || break
      sleep 1
    done
  fi
  for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do
    p=${PIDS[$i]}
    kill -TERM "$p" 2>/dev/null || continue
    for _ in $(seq 1 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null
    wait "$p" 2>/dev/null
  done
}
show_logs() {
  local f
  for f in "$S"/slurmctld.log "$S"/slurmd-*.log "$S"/submit/slurm-*.out "$S"/submit/chaosloco-*/logs/*.log; do
    [ -f "$f" ] || continue
    echo "---- ${f#"$S"/} (last 25 lines)"
    tail -n 25 "$f"
  done
}
finish() {
  local rc=$?
  trap - EXIT
  stop_all
  if ((rc == 0)); then
    rm -rf "$S"
  else
    show_logs
    echo "(state, logs and the run directory kept in $S)"
  fi
  exit $rc
}
trap finish EXIT
trap 'exit 2' TERM INT

ip link set lo up || fail "cannot bring up lo"
# the bridge the nodes of case four hang on; in case one it is the address
# that getaddrinfo(AI_ADDRCONFIG), as Slurm binds its ports, wants besides lo
ip link add cxbr type bridge && ip addr add 10.77.0.1/24 dev cxbr && ip link set cxbr up ||
  fail "cannot make the bridge cxbr"
hostname cxctl || fail "cannot set the hostname"

# ---- addresses and names: the controller is cxctl, the nodes cxn0.. ----
{
  echo "127.0.0.1 localhost"
  if ((NNODES == 1)); then
    echo "127.0.0.1 cxctl cxn0"
  else
    echo "10.77.0.1 cxctl"
    for ((i = 0; i < NNODES; i++)); do echo "10.77.0.$((10 + i)) cxn$i"; done
  fi
} >"$S/hosts"
mount --bind "$S/hosts" /etc/hosts || fail "cannot bind-mount $S/hosts on /etc/hosts"
CTL_ADDR=127.0.0.1
((NNODES > 1)) && CTL_ADDR=10.77.0.1

# ---- munge ----
head -c 1024 /dev/urandom >"$S/munge.key" && chmod 0400 "$S/munge.key"
munged -F --force --socket="$S/munge.sock" --key-file="$S/munge.key" --pid-file="$S/munged.pid" \
  --log-file="$S/munged.log" --seed-file="$S/munged.seed" >/dev/null 2>&1 &
PIDS+=($!)
for _ in $(seq 1 100); do [ -S "$S/munge.sock" ] && break; sleep 0.1; done
[ -S "$S/munge.sock" ] || fail "munged made no socket (log: $S/munged.log)"

# ---- slurm.conf ----
{
  cat <<CONF
ClusterName=cxtest
SlurmctldHost=cxctl($CTL_ADDR)
SlurmctldPort=6817
SlurmdPort=6818
AuthType=auth/munge
AuthInfo=socket=$S/munge.sock
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$S/ctld
SlurmdSpoolDir=$S/spool-%n
SlurmctldPidFile=$S/slurmctld.pid
SlurmdPidFile=$S/slurmd-%n.pid
SlurmctldLogFile=$S/slurmctld.log
SlurmdLogFile=$S/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SlurmdParameters=config_overrides
SchedulerType=sched/builtin
ReturnToService=2
MpiDefault=none
MailProg=/bin/true
KillWait=30
CONF
  for ((i = 0; i < NNODES; i++)); do
    addr=127.0.0.1
    ((NNODES > 1)) && addr=10.77.0.$((10 + i))
    echo "NodeName=cxn$i NodeAddr=$addr CPUs=4 RealMemory=8192 State=UNKNOWN"
  done
  echo "PartitionName=cx Nodes=ALL Default=YES MaxTime=INFINITE State=UP"
} >"$S/slurm.conf"
echo "CgroupPlugin=autodetect" >"$S/cgroup.conf"
export SLURM_CONF=$S/slurm.conf

# -D: in the foreground (its pid is $!); it logs to SlurmctldLogFile too
slurmctld -D -c -f "$S/slurm.conf" >/dev/null 2>&1 &
PIDS+=($!)

# ---- the nodes: one slurmd each (case four: its own net and time namespace) ----
if ((NNODES == 1)); then
  slurmd -D -N cxn0 -f "$S/slurm.conf" >/dev/null 2>&1 &
  PIDS+=($!)
else
  for ((i = 0; i < NNODES; i++)); do
    # the node's shell waits (bounded) for its veth end, configures it and
    # becomes slurmd; its CLOCK_MONOTONIC is OFFSETS[i] s ahead
    unshare --net --time --monotonic "${OFFSETS[$i]}" --fork bash -c '
      for _ in $(seq 1 100); do ip link show eth0 >/dev/null 2>&1 && break; sleep 0.1; done
      ip link set lo up && ip addr add 10.77.0.$((10 + '"$i"'))/24 dev eth0 && ip link set eth0 up &&
        ip route add default via 10.77.0.1 || exit 1
      exec slurmd -D -N cxn'"$i"' -f "'"$S/slurm.conf"'"' >/dev/null 2>&1 &
    PIDS+=($!)
    pid=$!
    # unshare(2) may not have run yet (a loaded box): moving the veth end
    # before would leave it in this namespace; wait (bounded) for the new one
    for _ in $(seq 1 100); do
      [ "$(readlink "/proc/$pid/ns/net" 2>/dev/null)" != "$(readlink /proc/self/ns/net)" ] && break
      sleep 0.05
    done
    ip link add "cxv$i" type veth peer name "cxv${i}p" &&
      ip link set "cxv${i}p" netns "$pid" && ip link set "cxv$i" master cxbr && ip link set "cxv$i" up &&
      nsenter --net --target "$pid" ip link set "cxv${i}p" name eth0 ||
      fail "cannot give node cxn$i its veth"
  done
fi

# ---- wait (bounded) until every node is idle ----
for _ in $(seq 1 120); do
  idle=$(sinfo -h -N -o '%N %T' 2>/dev/null | grep -c ' idle$')
  ((idle == NNODES)) && break
  sleep 0.5
done
((idle == NNODES)) || { sinfo -N 2>&1; fail "only $idle of $NNODES nodes idle after 60 s"; }
say "cluster up: $NNODES node(s)"
if ((NNODES > 1)); then # stop each slurmd itself, not its unshare
  for ((i = 0; i < NNODES; i++)); do
    p=$(cat "$S/slurmd-cxn$i.pid" 2>/dev/null) && [ -n "$p" ] && PIDS+=("$p")
  done
fi
if ((NNODES > 1)); then
  # the node's clocks really differ: its slurmd's CLOCK_MONOTONIC
  for ((i = 0; i < NNODES; i++)); do
    p=$(cat "$S/slurmd-cxn$i.pid" 2>/dev/null)
    [ -n "$p" ] && say "cxn$i monotonic offset: $(awk '/monotonic/ {print $2}' "/proc/$p/timens_offsets" 2>/dev/null) s"
  done
fi

# ---- PATH: chaosloco (case broken: a wrapper that never lets the restart rejoin) ----
if [ "$CASE" = broken ]; then
  # learner 1 (the last, the one killed) started a second time runs `sleep
  # 40`: its agent supervises a process that never joins the syncer again and
  # then exits 0 like a learner at its end (one that never ended would hold
  # the harness until its time bound)
  cat >"$S/bin/chaosloco" <<WRAP
#!/bin/bash
if [ "\${1:-}" = learner ] && [[ " \$* " == *" --id 1 "* ]]; then
  if [ -e "$S/bin/learner-1-started" ]; then exec sleep 40; fi
  : >"$S/bin/learner-1-started"
fi
exec "$BIN" "\$@"
WRAP
  chmod 0755 "$S/bin/chaosloco"
else
  ln -s "$BIN" "$S/bin/chaosloco"
fi
export PATH=$S/bin:$PATH

# ---- the short CI variant: the sbatch's documented settings ----
export CHAOSLOCO_TRAINING='{"model": "gpt", "data": "fortunes", "mode": "decoupled", "quorum": 1, "fragments": 4, "H": 24, "steps": 400, "eval_every_ms": 500, "learner_checkpoint_every": 100, "context": 32, "embed": 32, "hidden": 128, "layers": 2, "heads": 2, "inner_lr": 0.008, "eval_tokens": 512}'
export CHAOSLOCO_KILL_AT=${CX_SLURM_KILL_AT:-40}
export CHAOSLOCO_RESTART_MS=3000
export CHAOSLOCO_TIME_LIMIT=$((JOB_LIMIT_S - 60))
export OPENBLAS_NUM_THREADS=1

# ---- submit, as deploy/README.md says ----
SB_ARGS=()
[ "$CASE" = four ] && SB_ARGS=(--nodes=4 --ntasks-per-node=1)
cd "$S/submit" || fail "no $S/submit"
JOB=$(sbatch --parsable "${SB_ARGS[@]}" "$SRC/deploy/slurm/chaosloco.sbatch") || fail "sbatch refused the script"
JOB=${JOB%%;*}
say "job $JOB submitted (sbatch ${SB_ARGS[*]} deploy/slurm/chaosloco.sbatch)"
state=
for ((t = 0; t < JOB_LIMIT_S; t += 2)); do
  state=$(scontrol -o show job "$JOB" 2>/dev/null | grep -o 'JobState=[A-Z_]*' | cut -d= -f2)
  case $state in PENDING | RUNNING | CONFIGURING | COMPLETING | SUSPENDED | '') sleep 2 ;; *) break ;; esac
done
exitcode=$(scontrol -o show job "$JOB" 2>/dev/null | grep -o ' ExitCode=[0-9:]*' | cut -d= -f2)
say "job $JOB: $state, ExitCode=$exitcode"
case $state in COMPLETED | FAILED) ;; *) fail "job $JOB did not end within $JOB_LIMIT_S s (state $state)" ;; esac
JOB_DONE=$JOB
JOB=

RUN_DIR=$S/submit/chaosloco-$JOB_DONE
JOURNAL=$RUN_DIR/run/journal.json
[ -f "$JOURNAL" ] || fail "no journal at $JOURNAL"
JUNIT=$RUN_DIR/run/junit.xml
[ -f "$JUNIT" ] || fail "no $JUNIT"

# ---- graceful shutdown through Slurm: the logs say so ----
grep -q 'final checkpoint written' "$RUN_DIR/logs/syncer.log" ||
  fail "the syncer's log has no end-of-run checkpoint (logs/syncer.log)"
nl=$(ls "$RUN_DIR"/logs/agent-*.log | wc -l)
for f in "$RUN_DIR"/logs/agent-*.log; do
  grep -q 'agent stopped' "$f" || fail "${f#"$RUN_DIR"/} has no 'agent stopped' line"
done

case $CASE in
  one | four)
    [ "$exitcode" = 0:0 ] || fail "job exit $exitcode, 0:0 wanted (every hypothesis holding)"
    ! grep -q '<failure' "$JUNIT" || fail "a hypothesis deviated ($JUNIT)"
    ;;
  broken)
    [ "$exitcode" = 1:0 ] || fail "job exit $exitcode, 1:0 wanted (a hypothesis deviating)"
    grep -A2 'name="reintegration' "$JUNIT" | grep -q '<failure' || fail "reintegration did not fail ($JUNIT)"
    ;;
esac
say "ok: $CASE, $nl learners, job exit $exitcode"
