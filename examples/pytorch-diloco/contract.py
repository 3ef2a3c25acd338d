"""contract.py - a small reference library for chaosloco's telemetry contract
(docs/telemetry.md), for a Python trainer's coordinator.

What it is: the parts of the contract that do not depend on the training
algorithm: the event log (seq, t_real, t_mono_ms, type; appended to
<state-dir>/events.jsonl, one line per event, and served as GET
/v1/events: the same file is the contract's file form, which the harness
tails), the end of a file-form run (<state-dir>/end, end_requested), the
credentials of a run (the files `chaosloco run` makes in RUN/credentials,
checked the way chaosloco's syncer checks them) and
<state-dir>/listen.addr. What it is not: an HTTP server or a trainer;
coordinator.py wires these into its own.

Standard library only.
"""

import datetime
import hmac
import json
import os
import re
import stat
import threading
import time


def sleep(seconds):
    """time.sleep that works under libfaketime: chaosloco's agent preloads it
    into every unit (for the clock fault), and there Python 3.11's
    time.sleep (clock_nanosleep with TIMER_ABSTIME on CLOCK_MONOTONIC)
    fails with EINVAL. A timed wait on a lock is not affected."""
    if seconds > 0:
        threading.Event().wait(seconds)


def mono_ms():
    """CLOCK_MONOTONIC in ms (the contract's t_mono_ms). Another host's
    clock differs by its boot time: the harness maps these onto its own
    from the stamp every HTTP answer carries (stamp(), STAMP_HEADER); the
    file form, which has no answers, must run on the harness's host."""
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1_000_000


# The header that carries this process's clock on every HTTP answer
# (docs/telemetry.md, "Time"); its value is stamp().
STAMP_HEADER = "X-Chaosloco-Mono-Ms"


def stamp():
    """CLOCK_MONOTONIC in ms with microseconds, taken as the answer is
    written: "12345.678" (the same clock as mono_ms())."""
    return "%.3f" % (time.clock_gettime_ns(time.CLOCK_MONOTONIC) / 1e6)


def iso_now():
    """ISO-8601 UTC with milliseconds, e.g. 2026-12-02T12:01:02.345Z."""
    now = datetime.datetime.now(datetime.timezone.utc)
    return now.strftime("%Y-%m-%dT%H:%M:%S.") + "%03dZ" % (now.microsecond // 1000)


def write_atomic(path, data, mode=0o644):
    """Write bytes to path through a temporary file and rename(2), fsync'ed,
    so a reader (or a restart after SIGKILL) sees the old or the new file,
    never half of one."""
    tmp = "%s.tmp.%d" % (path, os.getpid())
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.rename(tmp, path)


def write_listen_addr(state_dir, host, port):
    """<state-dir>/listen.addr: "HOST:PORT" and a newline, written once the
    socket listens (the harness waits for it, then for GET /v1/status)."""
    write_atomic(os.path.join(state_dir, "listen.addr"), ("%s:%d\n" % (host, port)).encode())


def cut_torn_tail(path):
    """A crash in the middle of an append leaves a last line without its
    newline. Appending after it would glue the next event to it (a line the
    harness refuses as malformed), so cut the file back to the end of its
    last complete line first (the file form's rule, docs/telemetry.md).
    Returns the bytes cut."""
    with open(path, "rb+") as f:
        size = f.seek(0, os.SEEK_END)
        if size == 0:
            return 0
        pos, tail = size, b""
        while pos > 0:  # back to the last newline, a block at a time
            step = min(65536, pos)
            pos -= step
            f.seek(pos)
            tail = f.read(step) + tail
            nl = tail.rfind(b"\n")
            if nl >= 0:
                keep = pos + nl + 1
                break
        else:
            keep = 0
        if keep < size:
            f.truncate(keep)
            f.flush()
            os.fsync(f.fileno())
        return size - keep


class EventLog:
    """The contract's event history: one JSON object per event with seq
    (gapless, continuing across restarts), t_real, t_mono_ms and type first.
    Every event is appended to path (default <state-dir>/events.jsonl) as
    one line, with one write(2) per event, before it is served: that file is
    also the contract's file form. A restart cuts a torn last line and
    reads the file back so seq continues. Thread-safe.

    Memory: at most max_memory events are kept for GET /v1/events; older
    ones are read back from the file when asked for."""

    def __init__(self, state_dir, max_memory=200000, path=None):
        self.path = path or os.path.join(state_dir, "events.jsonl")
        self.mu = threading.Lock()
        self.mem = []  # [(seq, line)] oldest first
        self.max_memory = max_memory
        self.seq = 0
        if os.path.exists(self.path):
            cut_torn_tail(self.path)
            with open(self.path, "rb") as f:
                for raw in f:
                    ev = json.loads(raw)  # every line is complete now: a bad one is a real error
                    s = ev.get("seq")
                    if isinstance(s, int) and s > self.seq:
                        self.seq = s
                        self._keep(s, raw.decode().rstrip("\n"))
        self.fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def _keep(self, seq, line):
        self.mem.append((seq, line))
        if len(self.mem) > self.max_memory:
            del self.mem[: len(self.mem) // 4]

    def emit(self, type_, **fields):
        """Append one event; returns its seq."""
        with self.mu:
            self.seq += 1
            ev = {"seq": self.seq, "t_real": iso_now(), "t_mono_ms": mono_ms(), "type": type_}
            for k, v in fields.items():
                if k not in ev:
                    ev[k] = v
            line = json.dumps(ev, separators=(",", ":"), allow_nan=False)
            os.write(self.fd, (line + "\n").encode())
            self._keep(self.seq, line)
            return self.seq

    def since(self, seq, limit):
        """ndjson text of the events with seq > since, at most limit, oldest
        first."""
        with self.mu:
            if self.mem and seq + 1 >= self.mem[0][0]:
                lo, hi = 0, len(self.mem)
                while lo < hi:  # first index with seq > since
                    mid = (lo + hi) // 2
                    if self.mem[mid][0] <= seq:
                        lo = mid + 1
                    else:
                        hi = mid
                return "".join(l + "\n" for _, l in self.mem[lo : lo + limit])
        out = []
        with open(self.path, "rb") as f:  # older than memory: from the file
            for raw in f:
                try:
                    s = json.loads(raw).get("seq", 0)
                except ValueError:
                    continue
                if s > seq:
                    out.append(raw.decode().rstrip("\n") + "\n")
                    if len(out) >= limit:
                        break
        return "".join(out)


def end_requested(state_dir):
    """The file form's end of a run: the harness writes <state-dir>/end
    ({"reason": "..."} and a newline, atomically) once the run trained
    enough. The reason when the file is there, else None. Poll it at least
    every 500 ms, and at start (it stays after a restart)."""
    try:
        with open(os.path.join(state_dir, "end"), "rb") as f:
            data = f.read(4096)
    except FileNotFoundError:
        return None
    try:
        reason = json.loads(data).get("reason", "")
    except (ValueError, AttributeError):
        reason = ""
    return reason if isinstance(reason, str) else ""


CRED_RE = re.compile(r"^(learner-(0|[1-9][0-9]{0,6})|admin|read)\.([0-9a-f]{64})$")


class CredentialError(Exception):
    pass


def read_credential(path):
    """A credential file as chaosloco writes it ("<principal>.<64 hex>" and a
    newline, mode 0600). A file group or others may access is refused, as
    the syncer refuses it (docs/security.md)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise CredentialError("%s: not a regular file" % path)
        if st.st_mode & 0o077:
            raise CredentialError("%s: mode %o grants group/others access (chmod 600)" % (path, st.st_mode & 0o777))
        text = os.read(fd, 4096).decode().strip()
    finally:
        os.close(fd)
    if not CRED_RE.match(text):
        raise CredentialError("%s: expected <principal>.<64 hex digits>" % path)
    return text


class CredentialStore:
    """Every credential of a run's credentials directory: admin, read and
    learner-<i>. check() compares in constant time and says who it is."""

    def __init__(self, cred_dir):
        self.creds = {}  # credential -> (kind, learner id or -1)
        for name in sorted(os.listdir(cred_dir)):
            if not name.endswith(".cred"):
                continue
            cred = read_credential(os.path.join(cred_dir, name))
            principal = cred.split(".", 1)[0]
            if principal + ".cred" != name:
                raise CredentialError("%s: holds the credential of %s" % (name, principal))
            if principal.startswith("learner-"):
                self.creds[cred] = ("learner", int(principal[len("learner-") :]))
            else:
                self.creds[cred] = (principal, -1)
        if not any(k == "admin" for k, _ in self.creds.values()):
            raise CredentialError("%s: no admin.cred" % cred_dir)

    def check(self, presented):
        """(kind, learner) for a known credential, else None."""
        found = None
        for cred, who in self.creds.items():  # every entry compared: no early exit
            if hmac.compare_digest(cred.encode(), presented.encode()):
                found = who
        return found
