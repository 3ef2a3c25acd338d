#!/bin/bash
# tests/deploy/kubelet_run.sh - run deploy/k8s/ as a kubelet would, without a
# cluster, and judge the harness Job's verdict.
#
#   kubelet_run.sh CHAOSLOCO SRCDIR OUTDIR
#
# Every object of deploy/k8s/ is "applied" at once, as `kubectl apply -f
# deploy/k8s/` does, with the Secrets made by the real `chaosloco secrets
# --learners N --out DIR` (N: the StatefulSet's replicas). kubelet_plan.py
# turns the manifests into pods (a StatefulSet's pods with the pod-index
# label, the Deployment's, the Job's) and lays out their volumes the way
# kubelet does (Secret and ConfigMap volumes as ..data symlinks into a
# timestamped directory, modes from defaultMode, group fsGroup; emptyDir,
# PVCs as directories); this script then gives each pod
#
#   * a network and UTS namespace (a "pause" process holds them) with a veth
#     to a bridge: its own address, as a CNI would;
#   * its init containers one after another, each to exit 0, then its
#     containers; each container in a mount namespace of its own with its
#     volumeMounts, the pod's /etc/hosts and, with readOnlyRootFilesystem,
#     everything else read-only, running the command and args ($(VAR)
#     expanded from its env, fieldRef included) as runAsUser/runAsGroup with
#     fsGroup, no_new_privs and no capabilities; `chaosloco` on the PATH is
#     the build's binary, standing in for the image's;
#   * restarts: a main container that exits is restarted as its pod's
#     restartPolicy says, after kubelet's back-off (10 s doubling to 300 s);
#   * readiness: the readiness probes (httpGet, tcpSocket) run from the node's
#     network every second; a ready pod's Service names (the headless
#     learner Service's POD.SERVICE, the syncer Service's name) are added to
#     the hosts file every pod sees, as cluster DNS publishes ready endpoints.
#
# The test passes when the harness Job's container exits 0 (every
# hypothesis of the ConfigMap's experiment held) and its junit.xml has no
# failure. Exit 77 (ctest: skipped) with the reason when it cannot run: not
# root, no namespaces, no overlayfs, a missing tool.
#
# Duration. The manifests' experiment (the default model, 2000 steps, the
# kill at merge 150) takes far longer than CI allows on a small box; the test
# runs the short CI variant by default, without touching deploy/k8s/: the
# syncer gets the experiments' CI model as flags appended to its args (later
# flags win) and --steps 8000, so that the harness's horizon ends the run
# (kubelet_plan.py --short); the experiment is the ConfigMap's, unchanged.
# About 100 s under ASan. CX_KUBELET_FULL=1 runs the manifests exactly as
# shipped (give it CX_KUBELET_LIMIT_S, s, to match).
#
# Not emulated: the API server (admission, unknown fields), the image (its
# user, its files: the host's /bin/sh and install stand in), seccomp, cgroup
# limits (requests, limits, sizeLimit only for Memory emptyDirs), container
# Job retries (the harness's pod runs once; restartPolicy Never), the
# Service's virtual IP (its name resolves to the pod), a pod's own hosts
# entry, NetworkPolicy, node spreading.
set -u
BIN=${1:?chaosloco binary}
SRC=${2:?source directory}
OUT=${3:?output directory}
LIMIT_S=${CX_KUBELET_LIMIT_S:-480} # s: the test's bound on the harness Job
SUBNET=10.79.0

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }

if [ -z "${CX_KUBELET_INNER:-}" ]; then
  [ "$(id -u)" = 0 ] || skip "not root: the pods' namespaces, mounts and users need root"
  for b in unshare nsenter setpriv ip python3 curl mount install timeout; do
    command -v "$b" >/dev/null 2>&1 || skip "$b not found"
  done
  [ -x "$BIN" ] || fail "chaosloco binary $BIN not found"
  unshare --mount --uts --net --pid --fork true 2>/dev/null ||
    skip "no mount/UTS/network/PID namespaces here (unshare failed)"
  exec unshare --mount --uts --net --pid --fork --mount-proc --kill-child \
    env CX_KUBELET_INNER=1 bash "$0" "$@"
fi

# ---- inside the namespaces (PID 1 of its own PID namespace): the node ----
S=$OUT/kubelet
rm -rf "$S"
mkdir -p "$S/bin" "$S/secrets" "$S/ovl" || fail "cannot make $S"
S=$(cd "$S" && pwd -P)
chmod 0755 "$S"
PIDS=()  # every container and pause process, stopped in reverse order
# main containers, by index: launcher script, pause pid, pod, restartPolicy,
# pid, start time (s), next restart (s, empty while running), back-off (s),
# restarts
CSCRIPT=() CPAUSE=() CPOD=() CPOLICY=() CPID=() CSTART=() CNEXT=() CBACKOFF=() CRESTARTS=()

say() { echo "[$(date +%T)] $*"; }
stop_all() {
  local i p
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
  for f in "$S"/logs/*.log; do
    [ -f "$f" ] || continue
    echo "---- ${f#"$S"/} (last 25 lines)"
    tail -n 25 "$f"
  done
}
# unmount_all: the overlays on /etc, /run and /var, then every tmpfs under
# $S, deepest first (all in this test's mount namespace, which dies with it
# anyway; this lets $S be removed)
unmount_all() {
  local t
  for t in /var /run /etc; do
    awk -v t="$t" -v u="upperdir=$S/ovl/" '$5 == t && index($0, u) {f = 1} END {exit !f}' \
      /proc/self/mountinfo && umount "$t"
  done
  awk -v s="$S" '$5 == s || index($5, s "/") == 1 {print $5}' /proc/self/mountinfo | sort -r |
    while read -r t; do umount "$t"; done
}
finish() {
  local rc=$?
  trap - EXIT
  stop_all
  if ((rc == 0)); then
    unmount_all
    rm -rf "$S"
  else
    show_logs
    echo "(volumes, scripts and logs kept in $S)"
  fi
  exit $rc
}
trap finish EXIT
trap 'exit 2' TERM INT

# ---- the node's network: a bridge the pods hang on ----
ip link set lo up || fail "cannot bring up lo"
ip link add cxkbr type bridge && ip addr add "$SUBNET.1/24" dev cxkbr && ip link set cxkbr up ||
  fail "cannot make the bridge cxkbr"

# ---- the image's directories: /etc, /run and /var get an overlay (in this
# mount namespace only) so that mount points such as /etc/chaosloco/... can
# be made without touching the host ----
mount -t tmpfs -o mode=0755 tmpfs "$S/ovl" || fail "cannot mount a tmpfs on $S/ovl"
for d in etc run var; do
  mkdir -p "$S/ovl/$d.up" "$S/ovl/$d.work"
  mount -t overlay overlay -o "lowerdir=/$d,upperdir=$S/ovl/$d.up,workdir=$S/ovl/$d.work" "/$d" ||
    skip "no overlayfs on /$d here"
done

# ---- the image: chaosloco on the PATH is the build's ----
ln -s "$BIN" "$S/bin/chaosloco"
setpriv --reuid=10001 --regid=10001 --clear-groups test -x "$S/bin/chaosloco" ||
  skip "UID 10001 cannot run $BIN (a parent directory closed to others?)"

# ---- step 2 of deploy/README.md: the Secrets ----
NREP=$(python3 -c '
import json, sys
print(json.load(open(sys.argv[1]))["spec"].get("replicas", 1))' "$SRC/deploy/k8s/learner-statefulset.json") ||
  fail "cannot read the StatefulSet's replicas"
"$BIN" secrets --learners "$NREP" --out "$S/secrets" >"$S/secrets.log" 2>&1 ||
  { cat "$S/secrets.log"; fail "chaosloco secrets --learners $NREP --out failed"; }

# ---- step 3: apply deploy/k8s/ (the plan: pods, volumes, containers) ----
SHORT=--short
[ "${CX_KUBELET_FULL:-0}" = 1 ] && SHORT=
python3 "$SRC/tests/deploy/kubelet_plan.py" "$SRC/deploy/k8s" "$S/secrets" "$S" "$SUBNET" $SHORT ||
  fail "the manifests cannot be executed (kubelet_plan.py above)"
mkdir -p "$S/logs"

# start_pod INDEX NAME IP: the pod's namespaces, veth, init containers (each
# must exit 0 within 60 s) and its containers (in the background)
start_pod() {
  local n=$1 pod=$2 ip=$3 d=$S/pods/$2 p c name rc
  while read -r m; do mkdir -p "$m" || fail "pod $pod: cannot make the mount point $m"; done <"$d/mountpoints"
  unshare --net --uts sleep 100000 &
  p=$!
  PIDS+=("$p")
  # until it has unshared, $p is still in the node's namespaces (bounded: 10 s)
  for _ in $(seq 1 100); do
    [ "$(readlink "/proc/$p/ns/net")" != "$(readlink /proc/self/ns/net)" ] &&
      [ "$(readlink "/proc/$p/ns/uts")" != "$(readlink /proc/self/ns/uts)" ] && break
    sleep 0.1
  done
  ip link add "cxk$n" type veth peer name "cxk${n}p" &&
    ip link set "cxk${n}p" netns "$p" && ip link set "cxk$n" master cxkbr && ip link set "cxk$n" up &&
    nsenter --net --uts --target "$p" sh -c "
      hostname '$pod' && ip link set lo up && ip link set 'cxk${n}p' name eth0 &&
      ip addr add '$ip/24' dev eth0 && ip link set eth0 up && ip route add default via '$SUBNET.1'" ||
    fail "pod $pod: cannot give it its network namespace"
  for c in "$d"/*-init-*.sh; do
    [ -e "$c" ] || continue
    name=$(basename "$c" .sh)
    timeout -k 5 60 nsenter --net --uts --target "$p" unshare --mount --propagation private \
      bash "$c" >"$S/logs/$pod-$name.log" 2>&1
    rc=$?
    ((rc == 0)) || { cat "$S/logs/$pod-$name.log"; fail "pod $pod: init container $name exited $rc"; }
  done
  for c in "$d"/*-main-*.sh; do
    k=${#CSCRIPT[@]}
    CSCRIPT[$k]=$c
    CPAUSE[$k]=$p
    CPOD[$k]=$pod
    CPOLICY[$k]=$(cat "$d/restart")
    CBACKOFF[$k]=10
    CRESTARTS[$k]=0
    run_container "$k"
    echo "${CPID[$k]}" >"$d/$(basename "$c" .sh).pid"
  done
}

# run_container K: start main container K (in the background)
run_container() {
  local k=$1 name
  name=$(basename "${CSCRIPT[$k]}" .sh)
  nsenter --net --uts --target "${CPAUSE[$k]}" unshare --mount --propagation private \
    bash "${CSCRIPT[$k]}" >>"$S/logs/${CPOD[$k]}-$name.log" 2>&1 &
  CPID[$k]=$!
  CSTART[$k]=$SECONDS
  CNEXT[$k]=
  PIDS+=("${CPID[$k]}")
}

# restart_exited: what kubelet does with an exited main container: restart
# it (restartPolicy Always, or OnFailure after a failure) after a back-off of
# 10 s doubling up to 300 s, reset after 10 min of running
restart_exited() {
  local k rc
  for ((k = 0; k < ${#CSCRIPT[@]}; k++)); do
    [ "${CPOLICY[$k]}" = Never ] && continue
    if [ -z "${CNEXT[$k]}" ]; then
      [ "${CPID[$k]}" = finished ] && continue
      kill -0 "${CPID[$k]}" 2>/dev/null && continue
      wait "${CPID[$k]}"
      rc=$?
      if [ "${CPOLICY[$k]}" = OnFailure ] && ((rc == 0)); then CPID[$k]=finished; continue; fi
      ((SECONDS - CSTART[k] > 600)) && CBACKOFF[$k]=10
      CNEXT[$k]=$((SECONDS + CBACKOFF[k]))
      say "pod ${CPOD[$k]}: $(basename "${CSCRIPT[$k]}" .sh) exited $rc, restart in ${CBACKOFF[$k]} s (CrashLoopBackOff)"
      CBACKOFF[$k]=$((CBACKOFF[k] * 2 > 300 ? 300 : CBACKOFF[k] * 2))
    elif ((SECONDS >= CNEXT[k])); then
      CRESTARTS[$k]=$((CRESTARTS[k] + 1))
      run_container "$k"
    fi
  done
}

# probe IP-ARGS: 0 when the readiness probe passes (as kubelet: HTTP 2xx/3xx)
probe() {
  case $1 in
    none) return 0 ;;
    http) curl -s -o /dev/null --max-time 2 -w '%{http_code}' "http://$2:$3$4" 2>/dev/null | grep -q '^[23]' ;;
    tcp) timeout 2 bash -c "exec 3<>/dev/tcp/$2/$3" 2>/dev/null ;;
    *) return 1 ;;
  esac
}

mapfile -t PODS <"$S/pods.txt"
HARNESS=
for ((n = 0; n < ${#PODS[@]}; n++)); do
  read -r pod ip kind <<<"${PODS[$n]}"
  start_pod "$n" "$pod" "$ip"
  say "pod $pod ($kind) started at $ip"
  [ "$kind" = Job ] && HARNESS=$pod
done
[ -n "$HARNESS" ] || fail "no Job among the manifests: nothing gives a verdict"
HPID=$(cat "$S/pods/$HARNESS"/*-main-*.pid)

# ---- the node's loop: probes, DNS, until the Job's container ends ----
declare -A READY
hrc=
for ((t = 0; t < LIMIT_S; t++)); do
  for ((n = 0; n < ${#PODS[@]}; n++)); do
    read -r pod ip kind <<<"${PODS[$n]}"
    [ -n "${READY[$pod]:-}" ] && continue
    read -r -a pr <"$S/pods/$pod/probe"
    if probe "${pr[@]}"; then
      READY[$pod]=1
      cat "$S/pods/$pod/dns" >>"$S/hosts"
      say "pod $pod ready"
    fi
  done
  restart_exited
  if ! kill -0 "$HPID" 2>/dev/null; then
    wait "$HPID"
    hrc=$?
    break
  fi
  sleep 1
done
[ -n "$hrc" ] || fail "the harness Job did not end within $LIMIT_S s"
say "harness Job pod $HARNESS exited $hrc"

RUN=$(ls -d "$S/pods/$HARNESS"/vol/*/run 2>/dev/null | head -1)
JUNIT=$RUN/junit.xml
((hrc == 0)) || { [ -f "$JUNIT" ] && cat "$JUNIT"; fail "the harness exited $hrc, 0 wanted (every hypothesis holding)"; }
[ -f "$JUNIT" ] || fail "no junit.xml in the harness's run directory ($RUN)"
! grep -q '<failure' "$JUNIT" || fail "a hypothesis deviated ($JUNIT)"
say "ok: ${#PODS[@]} pods, the harness Job's verdict: pass"
