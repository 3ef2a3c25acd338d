#!/bin/bash
# tests/deploy/image_build.sh - build deploy/Containerfile with buildah, from
# a Debian base made here (no container registry), and check the image as a
# user of it would.
#
#   image_build.sh SRCDIR
#
# Steps, each bounded by `timeout`:
#
#   1. the base: `debootstrap --variant=minbase bookworm` from the mirror
#      this machine's apt uses (/etc/apt/sources.list.d/*.sources or
#      /etc/apt/sources.list; deb.debian.org when neither names one),
#      straight into a `buildah from scratch` container, committed under the
#      name the Containerfile's FROM uses (docker.io/library/debian:
#      bookworm-slim), so that `--pull=never` finds it and nothing is pulled;
#   2. `buildah build --isolation chroot --pull=never -f deploy/Containerfile`
#      on SRCDIR as it is (its .containerignore applies); the build stage
#      fetches Debian's packages and, through cmake, uPlot from the npm
#      registry;
#   3. the image: its configured user is 10001:10001, its OCI labels
#      description and base.name are set; `chaosloco --help` and
#      `chaosloco syncer --help` run in a container of it (as that user);
#      `ldd` finds every library of the binary and of the disk-fault shim;
#      /bin/sh, install, the fortunes corpus and libfaketime are there; no
#      compiler (gcc, cc, cpp, cmake, make, nodejs, npm) and no -dev
#      package is installed; the apt lists are gone;
#   4. a real run as UID 10001 inside the image: a syncer (the experiments'
#      small CI model, one learner, a few steps) and one learner, which must
#      finish its steps; the syncer must have merged.
#
# Everything lives in one temporary directory under ${TMPDIR:-/var/tmp}
# (outside the source tree, which is the build context): containers-storage
# with the vfs driver (plain directories: no overlay mounts to leak, and it
# works wherever buildah does) and its run root, pointed to by a
# storage.conf of its own, so the host's container storage is never read or
# written. The script runs in a mount namespace of its own: whatever
# debootstrap or buildah mount there dies with it. On every exit the trap
# removes the containers and images it made and the directory; the
# directory of a run killed outright (SIGKILL: ctest's TIMEOUT) is removed by
# the next run, once its process (named in its pid file) is gone.
#
# The machine's own CAs (/usr/local/share/ca-certificates, a TLS-intercepting
# egress proxy's for instance) are bound into the build's RUN steps, so the
# build stage's npm trusts what this machine trusts; the Containerfile knows
# nothing of it.
#
# Exit 0: the image builds and checks out. 1: it does not (the reason
# printed). 77 (ctest: skipped), with the reason: not root, buildah,
# debootstrap, curl or unshare missing, the Debian mirror or the npm
# registry unreachable.
#
# Duration: 5.5 to 9 min on 2 cores (327 to 544 s measured, the machine's
# load 4 to 8): the debootstrap 1.5 min, the build stage's packages (131 MB
# with nodejs and npm) and the Release build most of the rest.
set -u
SRC=${1:?source directory}
SUITE=bookworm
BASE=docker.io/library/debian:bookworm-slim # deploy/Containerfile's ARG BASE
IMAGE=localhost/chaosloco:test
NPM_REGISTRY=https://registry.npmjs.org/

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }
say() { echo "[$(date +%T)] $*"; }

# mirror: the first Debian archive URI apt uses for SUITE
mirror() {
  local f m=
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    m=$(awk -v s="$SUITE" '
      /^[ \t]*$/ { if (u != "" && ok) { print u; exit } u = ""; ok = 0; next }
      tolower($1) == "uris:" { u = $2 }
      tolower($1) == "suites:" { for (i = 2; i <= NF; i++) if ($i == s) ok = 1 }
      END { if (u != "" && ok) print u }' "$f" | head -1)
    [ -n "$m" ] && break
  done
  if [ -z "$m" ] && [ -f /etc/apt/sources.list ]; then
    m=$(awk -v s="$SUITE" '$1 == "deb" { i = 2; if ($2 ~ /^\[/) while ($i !~ /\]$/) i++; if ($2 ~ /^\[/) i++;
          if ($(i + 1) == s) { print $i; exit } }' /etc/apt/sources.list)
  fi
  echo "${m:-http://deb.debian.org/debian}"
}

if [ -z "${CX_IMAGE_INNER:-}" ]; then
  [ "$(id -u)" = 0 ] || skip "not root: debootstrap and buildah's chroot isolation need root"
  for b in buildah debootstrap curl unshare timeout; do
    command -v "$b" >/dev/null 2>&1 || skip "$b not found (scripts/install-deps --test installs it)"
  done
  [ -f "$SRC/deploy/Containerfile" ] || fail "no $SRC/deploy/Containerfile"
  M=$(mirror)
  curl -fsS --max-time 20 -o /dev/null "$M/dists/$SUITE/Release" 2>/dev/null ||
    skip "the Debian mirror $M (from apt's sources) is unreachable: no base, no packages"
  curl -fsS --max-time 20 -o /dev/null "$NPM_REGISTRY" 2>/dev/null ||
    skip "the npm registry $NPM_REGISTRY is unreachable: the build stage's cmake installs uPlot from it"
  unshare --mount --propagation private true 2>/dev/null || skip "no mount namespaces here (unshare failed)"
  exec unshare --mount --propagation private env CX_IMAGE_INNER=1 CX_IMAGE_MIRROR="$M" bash "$0" "$@"
fi

# ---- inside a mount namespace of its own ----
M=$CX_IMAGE_MIRROR
# A run killed with SIGKILL (ctest's timeout) could not clean up: its
# directory (gigabytes of layers) is removed here once its process is gone.
for d in "${TMPDIR:-/var/tmp}"/chaosloco-image.*; do
  [ -f "$d/pid" ] && ! kill -0 "$(cat "$d/pid")" 2>/dev/null && rm -rf "$d"
done
T=$(mktemp -d "${TMPDIR:-/var/tmp}/chaosloco-image.XXXXXX") || fail "cannot make a temporary directory"
echo $$ >"$T/pid"
cat >"$T/storage.conf" <<EOF || fail "cannot write $T/storage.conf"
[storage]
driver = "vfs"
graphroot = "$T/storage"
runroot = "$T/run"
EOF
export CONTAINERS_STORAGE_CONF=$T/storage.conf
# and the same storage named on every command line, so that no buildah
# call here can reach the host's storage whatever the environment says
BH=(buildah --root "$T/storage" --runroot "$T/run" --storage-driver vfs)
export BUILDAH_ISOLATION=chroot
# no registry is ever asked: every name below is fully qualified and pulls
# are refused
export REGISTRIES_CONFIG_PATH=$T/registries.conf
printf 'unqualified-search-registries = []\n' >"$T/registries.conf"

finish() {
  local rc=$? m
  trap - EXIT
  # its containers (unmounted), then its directory: the images go with it
  timeout 120 "${BH[@]}" rm --all >/dev/null 2>&1
  # whatever is still mounted under $T (debootstrap's /proc after a kill),
  # deepest first; this namespace drops the rest when it exits
  awk -v t="$T" '$5 == t || index($5, t "/") == 1 {print $5}' /proc/self/mountinfo | sort -r |
    while read -r m; do umount -l "$m"; done
  rm -rf "$T"
  exit $rc
}
trap finish EXIT
# bounded S CMD...: CMD under `timeout S`, in the background while this
# shell waits for it, so that a TERM or INT to the test stops CMD at once
# (timeout passes the signal on) instead of after CMD ends
CHILD=
bounded() {
  local s=$1 rc
  shift
  timeout -k 10 "$s" "$@" &
  CHILD=$!
  wait "$CHILD"
  rc=$?
  CHILD=
  return $rc
}
# on TERM/INT: stop CMD's whole process group (timeout makes one of its own,
# so debootstrap's dpkg and wget go too) before the EXIT trap removes $T
on_signal() {
  if [ -n "$CHILD" ]; then
    kill -TERM -- "-$CHILD" 2>/dev/null
    for _ in $(seq 1 100); do kill -0 -- "-$CHILD" 2>/dev/null || break; sleep 0.1; done
    kill -KILL -- "-$CHILD" 2>/dev/null
    wait "$CHILD" 2>/dev/null
  fi
  exit 2
}
trap on_signal TERM INT

# containers/image keeps a blob-info cache under /var/lib/containers for
# root, whatever the storage: in this mount namespace that is a directory
# of $T when it exists, and /var/lib is read-only otherwise (the cache then
# stays in memory), so nothing of the host's is written
mkdir -p "$T/blob-info-cache"
if [ -d /var/lib/containers ]; then
  mount --bind "$T/blob-info-cache" /var/lib/containers || fail "cannot hide /var/lib/containers"
else
  mount --bind /var/lib /var/lib && mount -o remount,bind,ro /var/lib /var/lib ||
    fail "cannot make /var/lib read-only in this namespace"
fi

say "mirror $M, storage $T (vfs)"

# ---- 1. the base: debootstrap into a scratch container ----
t0=$SECONDS
ctr=$(timeout 60 "${BH[@]}" from scratch) || fail "buildah from scratch failed"
root=$(timeout 60 "${BH[@]}" mount "$ctr") || fail "buildah mount failed"
bounded 400 debootstrap --variant=minbase "$SUITE" "$root" "$M" >"$T/debootstrap.log" 2>&1 ||
  { tail -n 30 "$T/debootstrap.log"; fail "debootstrap --variant=minbase $SUITE from $M failed"; }
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* "$root"/debootstrap
timeout 60 "${BH[@]}" umount "$ctr" >/dev/null
bounded 300 "${BH[@]}" commit --rm --quiet "$ctr" "$BASE" >/dev/null || fail "buildah commit of the base failed"
say "base $BASE made in $((SECONDS - t0)) s"

# ---- 2. the image ----
t0=$SECONDS
# the machine's own CAs, where Debian's ca-certificates looks for local ones
cas=()
ls /usr/local/share/ca-certificates/ 2>/dev/null | grep -q '\.crt$' &&
  cas=(--volume /usr/local/share/ca-certificates:/usr/local/share/ca-certificates:ro)
bounded 900 "${BH[@]}" build --isolation chroot --pull=never --layers=false "${cas[@]}" \
  -f "$SRC/deploy/Containerfile" -t "$IMAGE" "$SRC" >"$T/build.log" 2>&1 ||
  { tail -n 40 "$T/build.log"; fail "buildah build -f deploy/Containerfile failed"; }
say "image $IMAGE built in $((SECONDS - t0)) s"

# ---- 3. what is in it ----
user=$(timeout 60 "${BH[@]}" inspect --type image --format '{{.OCIv1.Config.User}}' "$IMAGE") ||
  fail "buildah inspect $IMAGE failed"
[ "$user" = 10001:10001 ] || [ "$user" = 10001 ] || fail "the image's user is '$user', not 10001"
for l in description base.name; do
  v=$(timeout 60 "${BH[@]}" inspect --type image \
    --format "{{index .OCIv1.Config.Labels \"org.opencontainers.image.$l\"}}" "$IMAGE")
  [ -n "$v" ] && [ "$v" != "<no value>" ] || fail "the image has no org.opencontainers.image.$l label"
done
ctr=$(timeout 60 "${BH[@]}" from --pull=never --quiet "$IMAGE") || fail "buildah from $IMAGE failed"
# in CTR: run a command in the container as the image's user (bounded)
in_ctr() { timeout 120 "${BH[@]}" run --isolation chroot "$ctr" -- "$@"; }

id=$(in_ctr id -u):$(in_ctr id -g) || fail "cannot run id in the image"
[ "$id" = 10001:10001 ] || fail "a command in the image runs as $id, not 10001:10001"
in_ctr chaosloco --help >"$T/help.txt" 2>&1 || { cat "$T/help.txt"; fail "chaosloco --help failed in the image"; }
grep -q syncer "$T/help.txt" || { cat "$T/help.txt"; fail "chaosloco --help does not list syncer"; }
in_ctr chaosloco syncer --help >"$T/help.txt" 2>&1 ||
  { cat "$T/help.txt"; fail "chaosloco syncer --help failed in the image"; }
for f in /usr/local/bin/chaosloco /usr/local/lib/chaosloco/libchaosloco_diskfault.so; do
  in_ctr ldd "$f" >"$T/ldd.txt" 2>&1 || { cat "$T/ldd.txt"; fail "ldd $f failed in the image"; }
  ! grep -q 'not found' "$T/ldd.txt" || { cat "$T/ldd.txt"; fail "$f misses libraries in the image"; }
done
in_ctr /bin/sh -c 'command -v install >/dev/null' || fail "no install in the image (the init containers need it)"
in_ctr /bin/sh -c 'ls /usr/share/games/fortunes/ | grep -q .' || fail "no fortune files in the image"
in_ctr /bin/sh -c 'ls /usr/lib/*/faketime/libfaketimeMT.so.1 >/dev/null' || fail "no libfaketime in the image"
in_ctr /bin/sh -c 'for c in gcc cc c99 cpp cmake make node nodejs npm; do command -v $c; done; exit 0' \
  >"$T/tools.txt" 2>&1
[ ! -s "$T/tools.txt" ] || { cat "$T/tools.txt"; fail "build tools in the image"; }
in_ctr dpkg-query -W -f '${Package}\n' >"$T/packages.txt" 2>&1 || fail "dpkg-query failed in the image"
grep -E -- '-dev$|^(gcc|cpp)(-[0-9]+)?$|^(cmake|make|nodejs|npm)$' "$T/packages.txt" >"$T/bad.txt" &&
  { cat "$T/bad.txt"; fail "build packages installed in the image"; }
in_ctr /bin/sh -c '! ls /var/lib/apt/lists/ | grep -q _' || fail "apt lists left in the image"
say "image checked: user 10001, chaosloco runs, libraries found, no build tools"

# ---- 4. a real run inside the image, as its user ----
# The experiments' small CI model, one learner, 48 steps (two rounds of each
# fragment at the decoupled defaults); the syncer runs until the learner is
# done, then gets SIGTERM and writes its final checkpoint. A few seconds.
cat >"$T/run.sh" <<'EOF'
set -u
d=$(mktemp -d /var/lib/chaosloco/run.XXXXXX) || exit 1
cd "$d" || exit 1
chaosloco syncer --listen 127.0.0.1:0 --state-dir "$d/syncer" --mode decoupled --learners 1 --quorum 1 \
  --steps 48 --eval-every-ms 500 --context 32 --embed 32 --hidden 128 --layers 2 --heads 2 \
  --eval-tokens 512 >syncer.log 2>&1 &
syncer=$!
i=0
until [ -s syncer/listen.addr ] && [ -s syncer/credentials/learner-0.cred ]; do
  i=$((i + 1))
  [ $i -lt 300 ] && kill -0 $syncer 2>/dev/null || { cat syncer.log; echo "no syncer up"; exit 1; }
  sleep 0.1
done
timeout 90 chaosloco learner --syncer "http://$(cat syncer/listen.addr)" --id 0 --state-dir "$d/learner" \
  --credential-file syncer/credentials/learner-0.cred >learner.log 2>&1
rc=$?
kill -TERM $syncer
i=0
while kill -0 $syncer 2>/dev/null && [ $i -lt 100 ]; do i=$((i + 1)); sleep 0.1; done
kill -KILL $syncer 2>/dev/null
echo "learner exit $rc"
tail -n 5 learner.log
tail -n 5 syncer.log
[ $rc = 0 ] && grep -q 'done: 48 steps' learner.log && grep -q ' merge fragment=' syncer.log &&
  grep -q 'final checkpoint written' syncer.log
EOF
bounded 180 "${BH[@]}" run --isolation chroot "$ctr" -- /bin/sh -c "$(cat "$T/run.sh")" >"$T/run.log" 2>&1 ||
  { cat "$T/run.log"; fail "a syncer and a learner inside the image did not train (log above)"; }
say "a syncer and a learner trained 48 steps inside the image as UID 10001"
exit 0
