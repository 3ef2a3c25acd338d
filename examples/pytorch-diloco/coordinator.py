#!/usr/bin/python3
"""coordinator.py - the outer loop of a small DiLoCo trainer in PyTorch, and
an implementation of chaosloco's telemetry contract (docs/telemetry.md).

It is not chaosloco's syncer: it has its own learner protocol (below), its
own outer synchronisation and its own checkpoint. What it shares with the
syncer is only what the harness reads: GET /v1/status, GET /v1/events,
POST /v1/end, <state-dir>/listen.addr and the run's credentials. With
--telemetry file it implements the contract's file form instead: no
/v1/* routes; the harness tails the event file (--events-file) and ends
the run by writing <state-dir>/end.

Outer synchronisation (one model-wide fragment, id 0; round r collects the
outer gradients computed from version r):

    collecting --every live learner sent its outer gradient of round r--> merge
    collecting --deadline after the round's first arrival, >= quorum--> merge
               (deadline: --round-deadline-ms, or half the time the first
               arrival took from the round's start if longer)
    merge: mean outer gradient g; m = mu m + g; theta -= lr (g + mu m)
           (SGD with Nesterov momentum, lr 0.7, mu 0.9); version r+1; eval

A live learner is one that joined, has not left and was heard from within
--heartbeat-timeout-ms (else it is dropped: a drop event; a later request
makes it live again). An outer gradient from another version than the
current one is refused (409, reject event reason stale_version); the learner
pulls the new parameters and goes on.

Learner protocol (JSON unless said; each needs that learner's credential):

    POST /diloco/join       {"learner", "incarnation": last, "step"} ->
                            {"learner", "incarnation", "version", "H", "n_params", "merges"}
    GET  /diloco/params?newer_than=V&wait_ms=T   headers X-Learner, X-Incarnation ->
                            200 float32 LE parameters, X-Version; 204 still at version V after
                            T ms (a V above the current version is answered at once)
    POST /diloco/outer-gradient   float32 LE delta = theta_base - theta_local, headers
                            X-Learner, X-Incarnation, X-Base-Version, X-Tokens, X-Steps -> 202
    POST /diloco/heartbeat  {"learner", "incarnation", "step", "train_loss", "tokens",
                            "step_ms", "t_real_ms"} -> {"ok": true, "end": bool}
    POST /diloco/leave      {"learner", "incarnation"}

The checkpoint (<state-dir>/coordinator.pt, written atomically after merges
at most every --checkpoint-every-ms and on SIGTERM) holds the parameters,
the momentum, the version, the merge count and every learner's incarnation,
so a restart continues where it stopped and seq continues from events.jsonl.
"""

import argparse
import io
import ipaddress
import json
import math
import os
import signal
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import contract  # noqa: E402
import tinylm  # noqa: E402

MAX_WAIT_MS = 30000


class Learner:
    def __init__(self, lid):
        self.id = lid
        self.incarnation = 0  # the current incarnation, 0 = never joined
        self.state = "absent"  # active | absent | left
        self.step = 0  # inner steps (heartbeat)
        self.tokens = 0  # cumulative tokens trained (heartbeat)
        self.train_loss = None  # nats, heartbeat
        self.step_ms = 0.0  # ms per inner step, heartbeat
        self.clock_skew_ms = 0  # its realtime minus ours, ms
        self.last_seen = 0  # mono ms of its last request
        self.last_hb_event = 0  # mono ms of its last heartbeat event (<= 1 per s)
        self.accepted = 0  # outer gradients accepted
        self.rejected = 0  # refused

    def json(self, now):
        return {
            "id": self.id,
            "state": self.state,
            "incarnation": self.incarnation,
            "step": self.step,
            "tokens": self.tokens,
            "train_loss": self.train_loss,
            "step_ms": self.step_ms,
            "clock_skew_ms": self.clock_skew_ms,
            "last_seen_s": (now - self.last_seen) / 1000.0 if self.last_seen else None,
            "contributions": {"accepted": self.accepted, "rejected": self.rejected},
        }


class Coordinator:
    def __init__(self, args):
        self.args = args
        self.mu = threading.Condition()
        self.ev = contract.EventLog(args.state_dir, path=args.events_file)
        self.creds = contract.CredentialStore(args.credentials_dir) if args.credentials_dir else None
        text = tinylm.read_corpus(args.data)
        _, heldout = tinylm.split(text)
        self.heldout = tinylm.as_tensor(heldout)
        self.eval_model = tinylm.new_model(args.seed)
        self.params = tinylm.flat(self.eval_model)
        self.momentum = torch.zeros_like(self.params)
        self.n = self.params.numel()
        self.version = 0
        self.merges = 0
        self.tokens_merged = 0
        self.learners = [Learner(i) for i in range(args.learners)]
        self.round = {}  # learner id -> contribution of the open round
        self.first_arrival = 0  # mono ms of the open round's first outer gradient, 0 none
        self.bytes_in = 0
        self.bytes_out = 0
        self.accepted = 0
        self.rejected = 0
        self.rejected_by_reason = {}
        self.start_mono = contract.mono_ms()
        self.last_merge = 0  # mono ms
        self.longest_gap = 0  # ms between two merges
        self.recent = []  # last merges for /v1/status
        self.eval = None  # the last eval
        self.eval_due = True
        self.last_eval = 0
        self.ckpt_due = False
        self.last_ckpt = 0
        self.generation = 0
        self.ended = None  # (reason, mono ms)
        self.stopping = False
        restored = self.restore()
        self.ev.emit(
            "start",
            mode="diloco",
            trainer="pytorch-diloco",
            restored=restored,
            start_state="restored" if restored else "fresh",
            merges=self.merges,
            versions=[self.version],
            learners=args.learners,
            n_params=self.n,
        )

    # ---- checkpoint ----

    def ckpt_path(self):
        return os.path.join(self.args.state_dir, "coordinator.pt")

    def restore(self):
        if not os.path.exists(self.ckpt_path()):
            return False
        c = torch.load(self.ckpt_path())
        if c["params"].numel() != self.n:
            raise SystemExit("checkpoint %s is of another model" % self.ckpt_path())
        self.params = c["params"]
        self.momentum = c["momentum"]
        self.version = c["version"]
        self.merges = c["merges"]
        self.tokens_merged = c["tokens_merged"]
        self.generation = c["generation"]
        for lid, inc in c["incarnations"].items():
            if lid < len(self.learners):
                self.learners[lid].incarnation = inc
        return True

    def checkpoint(self):
        """Snapshot under the lock, write outside it."""
        with self.mu:
            self.generation += 1
            c = {
                "params": self.params.clone(),
                "momentum": self.momentum.clone(),
                "version": self.version,
                "merges": self.merges,
                "tokens_merged": self.tokens_merged,
                "generation": self.generation,
                "incarnations": {l.id: l.incarnation for l in self.learners},
            }
            self.ckpt_due = False
            self.last_ckpt = contract.mono_ms()
        buf = io.BytesIO()
        torch.save(c, buf)
        contract.write_atomic(self.ckpt_path(), buf.getvalue())
        self.ev.emit("checkpoint", merges=c["merges"], bytes=len(buf.getvalue()), generation=c["generation"])

    # ---- outer synchronisation (mu held) ----

    def live(self):
        return [l for l in self.learners if l.state == "active"]

    def seen(self, l, now):
        l.last_seen = now
        if l.state == "absent" and l.incarnation > 0:
            l.state = "active"

    def deadline_ms(self):
        """How long a round waits for the rest after its first outer gradient:
        --round-deadline-ms, or half of what the first one took from the
        round's start (the last merge) if that is longer, so that a slower
        machine (or a CPU hog) stretches the wait with the work instead of
        turning every round into a deadline merge."""
        took = self.first_arrival - self.last_merge if self.last_merge else 0
        return max(self.args.round_deadline_ms, took // 2)

    def round_check(self, now):
        if not self.round:
            return
        waiting = [l.id for l in self.live() if l.id not in self.round]
        if not waiting:
            self.merge("all", now)
        elif now - self.first_arrival >= self.deadline_ms() and len(self.round) >= self.args.quorum:
            self.merge("deadline", now)

    def merge(self, trigger, now):
        contribs = sorted(self.round.values(), key=lambda c: c["learner"])
        g = torch.stack([c["delta"] for c in contribs]).mean(dim=0)
        mu, lr = self.args.outer_momentum, self.args.outer_lr
        self.momentum.mul_(mu).add_(g)
        self.params.sub_(lr * (g + mu * self.momentum))  # Nesterov
        self.version += 1
        self.merges += 1
        tokens = sum(c["tokens"] for c in contribs)
        self.tokens_merged += tokens
        w = 1.0 / len(contribs)
        parts = [
            {
                "learner": c["learner"],
                "incarnation": c["incarnation"],
                "weight": w,
                "tokens": c["tokens"],
                "steps": c["steps"],
                "base_version": c["base_version"],
            }
            for c in contribs
        ]
        self.ev.emit(
            "merge",
            fragment=0,
            version=self.version,
            participants=parts,
            tokens=tokens,
            trigger=trigger,
            mode="diloco",
            update_norm=float(g.norm()),
        )
        if self.last_merge:
            self.longest_gap = max(self.longest_gap, now - self.last_merge)
        self.last_merge = now
        self.recent = (
            self.recent + [{"fragment": 0, "version": self.version, "t_mono_ms": now, "participants": [c["learner"] for c in contribs]}]
        )[-8:]
        self.round = {}
        self.first_arrival = 0
        self.eval_due = True
        self.ckpt_due = True
        self.mu.notify_all()

    def end(self, reason):
        """End the run (mu held): every heartbeat answer says so from now
        on. Returns whether it was already ended."""
        already = self.ended is not None
        if not already:
            self.ended = (reason, contract.mono_ms())
            self.ev.emit("end", reason=reason)
        return already

    def drop_absent(self, now):
        for l in self.learners:
            if l.state == "active" and now - l.last_seen > self.args.heartbeat_timeout_ms:
                l.state = "absent"
                self.ev.emit("drop", learner=l.id, incarnation=l.incarnation, reason="absent", fragment=0)

    def ticker(self):
        while True:
            with self.mu:
                if self.stopping:
                    return
                now = contract.mono_ms()
                if self.args.telemetry == "file" and self.ended is None:
                    reason = contract.end_requested(self.args.state_dir)
                    if reason is not None:
                        self.end(reason)
                self.drop_absent(now)
                self.round_check(now)
                do_eval = self.eval_due and now - self.last_eval >= self.args.eval_every_ms
                snap = self.params.clone() if do_eval else None
                if do_eval:
                    self.eval_due = False
                    self.last_eval = now
                    merges, tokens = self.merges, self.tokens_merged
                do_ckpt = self.ckpt_due and now - self.last_ckpt >= self.args.checkpoint_every_ms
            if do_eval:
                tinylm.load_flat(self.eval_model, snap)
                loss = tinylm.eval_loss(self.eval_model, self.heldout)
                fin = math.isfinite(loss)
                e = {
                    "loss": loss if fin else None,
                    "bpb": loss / math.log(2) if fin else None,
                    "step": merges,
                    "merges": merges,
                    "tokens": tokens,
                }
                self.ev.emit("eval", loss=e["loss"], bpb=e["bpb"], merges=merges, tokens=tokens)
                with self.mu:
                    self.eval = e
            if do_ckpt:
                self.checkpoint()
            contract.sleep(0.05)

    # ---- the contract's reads ----

    def status(self):
        with self.mu:
            now = contract.mono_ms()
            return {
                "trainer": "pytorch-diloco",
                "mode": "diloco",
                "merges": self.merges,
                "tokens_merged": self.tokens_merged,
                "n_params": self.n,
                "eval": self.eval,
                "fragments": [
                    {
                        "id": 0,
                        "version": self.version,
                        "length": self.n,
                        "round": {"state": "collecting" if self.round else "idle", "contributions": len(self.round)},
                    }
                ],
                "learners": [l.json(now) for l in self.learners if l.incarnation > 0],
                "recent_merges": self.recent,
                "bytes": {"in": self.bytes_in, "out": self.bytes_out},
                "contributions": {
                    "accepted": self.accepted,
                    "rejected": self.rejected,
                    "rejected_by_reason": dict(self.rejected_by_reason),
                },
                "longest_merge_gap_ms": self.longest_gap,
                "ms_since_last_merge": now - self.last_merge if self.last_merge else None,
                "uptime_ms": now - self.start_mono,
                "learners_expected": self.args.learners,
                "end": {"reason": self.ended[0], "ms_ago": now - self.ended[1]} if self.ended else None,
            }

    def reject(self, l, inc, reason, detail):
        """Count and log a refused request (mu held)."""
        self.rejected += 1
        self.rejected_by_reason[reason] = self.rejected_by_reason.get(reason, 0) + 1
        if l is not None and 0 <= l < len(self.learners):
            self.learners[l].rejected += 1
        self.ev.emit("reject", learner=l, incarnation=inc, fragment=0, reason=reason, detail=detail, count=1)


def is_loopback_host(host):
    """A Host header naming a loopback address (any port)."""
    if not host:
        return False
    h = host.strip()
    if h.startswith("["):
        h = h[1 : h.find("]")] if "]" in h else h
    elif h.count(":") == 1:
        h = h.split(":")[0]
    if h == "localhost":
        return True
    try:
        return ipaddress.ip_address(h).is_loopback
    except ValueError:
        return False


class HttpError(Exception):
    def __init__(self, status, msg, reason=None, **extra):
        super().__init__(msg)
        self.status, self.msg, self.reason, self.extra = status, msg, reason, extra


def make_handler(co):
    args = co.args

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "pytorch-diloco"

        def log_message(self, fmt, *a):  # the access log would drown the unit log
            pass

        # ---- replies ----

        def reply(self, status, body=b"", ctype="application/json", headers=None):
            if isinstance(body, (dict, list)):
                body = json.dumps(body, allow_nan=False).encode()
            self.send_response(status)
            # the telemetry contract's clock stamp: the harness maps this
            # process's t_mono_ms onto its own clock from it (telemetry.md, "Time")
            self.send_header(contract.STAMP_HEADER, contract.stamp())
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            for k, v in (headers or {}).items():
                self.send_header(k, str(v))
            self.end_headers()
            if body:
                self.wfile.write(body)

        def error(self, e):
            body = {"error": e.msg, "status": e.status}
            if e.reason:
                body["reason"] = e.reason
            body.update(e.extra)
            headers = {}
            if e.status == 401:
                headers["WWW-Authenticate"] = 'Bearer realm="pytorch-diloco"'
            self.reply(e.status, body, headers=headers)

        # ---- requests ----

        def body(self, cap):
            n = int(self.headers.get("Content-Length") or 0)
            if n > cap:
                raise HttpError(413, "body of %d bytes over the cap of %d" % (n, cap))
            return self.rfile.read(n) if n > 0 else b""

        def json_body(self, keys_required, keys_optional=()):
            raw = self.body(1 << 16)
            try:
                b = json.loads(raw) if raw else {}
            except ValueError as x:
                raise HttpError(400, "body: %s" % x)
            if not isinstance(b, dict):
                raise HttpError(400, "body: expected an object")
            for k in b:
                if k not in keys_required and k not in keys_optional:
                    raise HttpError(400, "body: unknown key %s" % k)
            for k in keys_required:
                if k not in b:
                    raise HttpError(400, "body: missing %s" % k)
            return b

        def int_header(self, name, lo, hi):
            v = self.headers.get(name)
            try:
                x = int(v)
            except (TypeError, ValueError):
                raise HttpError(400, "header %s: expected an integer, got %r" % (name, v), reason="bad_header")
            if not lo <= x <= hi:
                raise HttpError(400, "header %s: %d outside %d..%d" % (name, x, lo, hi), reason="bad_header")
            return x

        # ---- access (docs/telemetry.md, Authentication) ----

        def who(self):
            """(kind, learner) of the presented credential, None without one;
            401 for a malformed or unknown one."""
            a = self.headers.get("Authorization")
            if a is None:
                return None
            if not a.startswith("Bearer ") or co.creds is None:
                raise HttpError(401, "malformed Authorization (expected Bearer <credential>)", reason="auth")
            w = co.creds.check(a[len("Bearer ") :].strip())
            if w is None:
                raise HttpError(401, "unknown credential", reason="auth")
            return w

        def need_read(self):
            w = self.who()
            if w is None and co.creds is not None:
                if not (ipaddress.ip_address(self.client_address[0]).is_loopback and is_loopback_host(self.headers.get("Host"))):
                    raise HttpError(401, "a credential is needed off loopback", reason="auth")

        def need_learner(self, lid):
            if co.creds is None:
                return
            w = self.who()
            if w is None:
                raise HttpError(401, "learner routes need the learner's credential", reason="auth")
            if w[0] != "learner" or w[1] != lid:
                raise HttpError(403, "this credential may not act for learner %s" % lid, reason="auth")

        def need_admin(self):
            if co.creds is None:
                return
            w = self.who()
            if w is None:
                raise HttpError(401, "POST /v1/end needs the admin credential", reason="auth")
            if w[0] != "admin":
                raise HttpError(403, "POST /v1/end needs the admin credential", reason="auth")

        def current(self, lid, inc):
            """The learner's record if inc is its current incarnation (mu held)."""
            if not isinstance(lid, int) or not 0 <= lid < len(co.learners):
                raise HttpError(403, "unknown learner %r" % (lid,), reason="unknown_learner")
            l = co.learners[lid]
            if l.incarnation == 0:
                raise HttpError(403, "learner %d never joined" % lid, reason="unknown_learner")
            if inc != l.incarnation:
                raise HttpError(409, "incarnation %r is not the current %d" % (inc, l.incarnation), reason="stale_incarnation")
            return l

        def dispatch(self, method):
            u = urllib.parse.urlsplit(self.path)
            q = dict(urllib.parse.parse_qsl(u.query))
            route = (method, u.path)
            try:
                h = routes.get(route)
                if h is None:
                    raise HttpError(404 if not any(p == u.path for _, p in routes) else 405, "no route %s %s" % route)
                h(self, q)
            except HttpError as e:
                if e.reason == "auth":
                    with co.mu:
                        co.reject(None, None, "auth", e.msg)
                self.error(e)
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True

        def do_GET(self):
            self.dispatch("GET")

        def do_POST(self):
            self.dispatch("POST")

        # ---- the contract ----

        def h_status(self, q):
            self.need_read()
            self.reply(200, co.status())

        def h_events(self, q):
            self.need_read()
            try:
                since = int(q.get("since", "0"))
                limit = int(q.get("limit", "10000"))
            except ValueError:
                raise HttpError(400, "since and limit are integers")
            if since < 0 or not 1 <= limit <= 100000:
                raise HttpError(400, "since >= 0, limit 1..100000")
            self.reply(200, co.ev.since(since, limit).encode(), ctype="application/x-ndjson")

        def h_end(self, q):
            self.need_admin()
            b = self.json_body((), ("reason",))
            reason = b.get("reason", "")
            if not isinstance(reason, str) or len(reason.encode()) >= 128:
                raise HttpError(400, "reason: expected a string of < 128 bytes")
            with co.mu:
                already = co.end(reason)
                ans = {"ended": True, "already": already, "reason": co.ended[0], "merges": co.merges}
            self.reply(200, ans)

        # ---- the learner protocol ----

        def h_join(self, q):
            b = self.json_body(("learner", "incarnation"), ("step",))
            lid, last, step = b["learner"], b["incarnation"], b.get("step", 0)
            if not isinstance(lid, int) or not 0 <= lid < len(co.learners):
                raise HttpError(400, "learner: expected an id in 0..%d" % (len(co.learners) - 1))
            self.need_learner(lid)
            if not isinstance(last, int) or not isinstance(step, int) or last < 0 or step < 0:
                raise HttpError(400, "incarnation and step: expected integers >= 0")
            with co.mu:
                l = co.learners[lid]
                if last > l.incarnation + 1000:
                    raise HttpError(400, "incarnation %d is more than 1000 above the known %d" % (last, l.incarnation))
                l.incarnation = max(l.incarnation, last) + 1
                l.state = "active"
                l.step = step
                l.last_seen = contract.mono_ms()
                co.round.pop(lid, None)  # an older incarnation's outer gradient is void
                co.ev.emit("join", learner=lid, incarnation=l.incarnation, resumed_step=step)
                ans = {
                    "learner": lid,
                    "incarnation": l.incarnation,
                    "version": co.version,
                    "H": args.H,
                    "n_params": co.n,
                    "merges": co.merges,
                }
            self.reply(200, ans)

        def h_params(self, q):
            lid = self.int_header("X-Learner", 0, 1000000)
            self.need_learner(lid)
            inc = self.int_header("X-Incarnation", 1, 1 << 60)
            try:
                newer = int(q.get("newer_than", "-1"))
                wait_ms = min(int(q.get("wait_ms", "0")), MAX_WAIT_MS)
            except ValueError:
                raise HttpError(400, "newer_than and wait_ms are integers")
            deadline = time.monotonic() + wait_ms / 1000.0
            with co.mu:
                l = self.current(lid, inc)
                co.seen(l, contract.mono_ms())
                # Wait while the learner holds the current version. One that
                # holds a newer one than exists (this coordinator restarted
                # from an older checkpoint) gets the current one at once.
                while co.version == newer and not co.stopping:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    co.mu.wait(min(left, 1.0))
                    co.seen(l, contract.mono_ms())
                if co.version == newer:
                    ver = co.version
                    body = None
                else:
                    ver = co.version
                    body = co.params.numpy().tobytes()
                    co.bytes_out += len(body)
                    co.ev.emit("pull", learner=lid, incarnation=inc, fragment=0, version=ver, kind="full", delta_from=-1)
            if body is None:
                self.reply(204, headers={"X-Version": ver})
            else:
                self.reply(200, body, ctype="application/octet-stream", headers={"X-Version": ver})

        def h_outer_gradient(self, q):
            lid = self.int_header("X-Learner", 0, 1000000)
            self.need_learner(lid)
            inc = self.int_header("X-Incarnation", 1, 1 << 60)
            base = self.int_header("X-Base-Version", 0, 1 << 60)
            tokens = self.int_header("X-Tokens", 0, 1 << 40)
            steps = self.int_header("X-Steps", 0, 1 << 30)
            raw = self.body(4 * co.n + (1 << 20))
            with co.mu:
                co.bytes_in += len(raw)
                try:
                    l = self.current(lid, inc)
                    co.seen(l, contract.mono_ms())
                    if len(raw) != 4 * co.n:
                        raise HttpError(400, "body of %d bytes, expected %d" % (len(raw), 4 * co.n), reason="length")
                    delta = torch.frombuffer(bytearray(raw), dtype=torch.float32)
                    if not bool(torch.isfinite(delta).all()):
                        raise HttpError(400, "non-finite values in the outer gradient", reason="nonfinite")
                    if base != co.version:
                        raise HttpError(409, "round %d is closed (current version %d)" % (base, co.version), reason="stale_version", version=co.version)
                except HttpError as e:
                    co.reject(lid, inc, e.reason or "bad_header", e.msg)
                    raise
                co.round[lid] = {"learner": lid, "incarnation": inc, "delta": delta, "tokens": tokens, "steps": steps, "base_version": base}
                if len(co.round) == 1:
                    co.first_arrival = contract.mono_ms()
                co.accepted += 1
                l.accepted += 1
                co.ev.emit(
                    "contribution",
                    learner=lid,
                    incarnation=inc,
                    fragment=0,
                    base_version=base,
                    tokens=tokens,
                    steps=steps,
                    encoding="f32",
                    bytes=len(raw),
                )
                co.round_check(contract.mono_ms())
                ans = {"round": base + 1, "fragment": 0, "version": co.version}
            self.reply(202, ans)

        def h_heartbeat(self, q):
            b = self.json_body(("learner", "incarnation", "step", "train_loss", "tokens", "step_ms", "t_real_ms"))
            lid = b["learner"]
            self.need_learner(lid)
            for k in ("step", "tokens", "t_real_ms"):
                if not isinstance(b[k], int) or b[k] < 0:
                    raise HttpError(400, "%s: expected an integer >= 0" % k)
            for k in ("train_loss", "step_ms"):
                if b[k] is not None and (not isinstance(b[k], (int, float)) or not math.isfinite(b[k]) or b[k] < 0):
                    raise HttpError(400, "%s: expected a finite number >= 0" % k)
            with co.mu:
                l = self.current(lid, b["incarnation"])
                now = contract.mono_ms()
                co.seen(l, now)
                l.step, l.tokens, l.train_loss, l.step_ms = b["step"], b["tokens"], b["train_loss"], b["step_ms"]
                l.clock_skew_ms = b["t_real_ms"] - int(time.time() * 1000)
                # at most one event a second, but every one after the end: a
                # learner's last heartbeat (its final step and tokens) is written
                if now - l.last_hb_event >= 1000 or co.ended is not None:
                    l.last_hb_event = now
                    co.ev.emit(
                        "heartbeat",
                        learner=lid,
                        incarnation=l.incarnation,
                        step=l.step,
                        train_loss=l.train_loss,
                        tokens=l.tokens,
                        step_ms=l.step_ms,
                        clock_skew_ms=l.clock_skew_ms,
                    )
                ended = co.ended is not None
            self.reply(200, {"ok": True, "end": ended})

        def h_leave(self, q):
            b = self.json_body(("learner", "incarnation"))
            self.need_learner(b["learner"])
            with co.mu:
                l = self.current(b["learner"], b["incarnation"])
                l.state = "left"
                co.ev.emit("leave", learner=l.id, incarnation=l.incarnation)
                co.round_check(contract.mono_ms())  # a round waiting for it may be complete
            self.reply(200, {"ok": True})

    routes = {
        ("POST", "/diloco/join"): Handler.h_join,
        ("GET", "/diloco/params"): Handler.h_params,
        ("POST", "/diloco/outer-gradient"): Handler.h_outer_gradient,
        ("POST", "/diloco/heartbeat"): Handler.h_heartbeat,
        ("POST", "/diloco/leave"): Handler.h_leave,
    }
    if args.telemetry == "http":  # the file form serves no /v1/* route: the harness must not need one
        routes[("GET", "/v1/status")] = Handler.h_status
        routes[("GET", "/v1/events")] = Handler.h_events
        routes[("POST", "/v1/end")] = Handler.h_end
    return Handler


def main():
    ap = argparse.ArgumentParser(description="DiLoCo coordinator (PyTorch example; chaosloco telemetry contract)")
    ap.add_argument("--listen", default="127.0.0.1:0", help="HOST:PORT (port 0: any)")
    ap.add_argument("--state-dir", required=True, help="listen.addr, events.jsonl, coordinator.pt")
    ap.add_argument(
        "--telemetry",
        choices=("http", "file"),
        default="http",
        help="the contract's form: http (GET /v1/status, /v1/events, POST /v1/end) or file (the event file "
        "only; the run ends when <state-dir>/end appears)",
    )
    ap.add_argument("--events-file", help="the JSON-lines event file (default <state-dir>/events.jsonl)")
    ap.add_argument("--credentials-dir", help="the run's credentials (admin.cred, learner-<i>.cred); none: no auth")
    ap.add_argument("--learners", type=int, required=True, help="M: learner ids 0..M-1")
    ap.add_argument("--H", type=int, default=20, help="inner steps per outer step (told to learners at join)")
    ap.add_argument("--quorum", type=int, default=1, help="outer gradients a deadline merge needs at least")
    ap.add_argument("--outer-lr", type=float, default=0.7)
    ap.add_argument("--outer-momentum", type=float, default=0.9, help="Nesterov momentum mu")
    ap.add_argument("--round-deadline-ms", type=int, default=2000, help="after a round's first outer gradient (at least)")
    ap.add_argument("--heartbeat-timeout-ms", type=int, default=5000, help="a learner silent this long is dropped")
    ap.add_argument("--eval-every-ms", type=int, default=500, help="at most one eval per this many ms, after merges")
    ap.add_argument("--checkpoint-every-ms", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=1, help="the initial model")
    ap.add_argument("--data", help="a text file instead of Debian's fortunes")
    args = ap.parse_args()
    if args.learners < 1 or args.H < 1 or not 1 <= args.quorum <= args.learners:
        ap.error("--learners >= 1, --H >= 1, --quorum in 1..learners")
    torch.set_num_threads(1)
    os.makedirs(args.state_dir, exist_ok=True)
    host, _, port = args.listen.rpartition(":")
    co = Coordinator(args)
    srv = ThreadingHTTPServer((host.strip("[]"), int(port)), make_handler(co))
    srv.daemon_threads = True
    bound = srv.server_address
    contract.write_listen_addr(args.state_dir, bound[0], bound[1])
    print("coordinator: listening on %s:%d, %d params, version %d" % (bound[0], bound[1], co.n, co.version), flush=True)

    def on_term(sig, frame):
        threading.Thread(target=srv.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    t = threading.Thread(target=co.ticker, daemon=True)
    t.start()
    srv.serve_forever(poll_interval=0.2)
    with co.mu:
        co.stopping = True
        co.mu.notify_all()
    t.join()
    co.checkpoint()
    print("coordinator: stopped at version %d, %d merges" % (co.version, co.merges), flush=True)


if __name__ == "__main__":
    main()
