#!/usr/bin/python3
"""worker.py - one learner of the PyTorch DiLoCo example (see coordinator.py
for the protocol).

    start --load <state-dir>/worker.pt if any--> join (incarnation = the last one
    it had; the coordinator answers a higher one) --> pull the global parameters
    loop: H inner AdamW steps on its own shard --> send the outer gradient
          delta = theta_global - theta_local --> wait for the merged version, adopt it
          --> checkpoint (parameters, AdamW state, step, tokens, data cursor, incarnation)
    end: the heartbeat answer says "end" (the harness's POST /v1/end, or its
         <state-dir>/end file in the file form), or --steps are done --> a last heartbeat, leave, exit 0.  SIGTERM: checkpoint, exit 0.

A killed worker restarted by its agent resumes from its last checkpoint,
joins again (a higher incarnation) and pulls the current global parameters
before it contributes. A heartbeat thread reports progress every second; a
409 on it (another incarnation took over, or the coordinator restarted
without this one) makes the worker join again. Connection errors (a killed
coordinator, a partition through the agent's proxy) are retried.

--break-rejoin is a test option: a worker that resumed from a checkpoint
never sends an outer gradient (it trains, heartbeats and adopts merges), so
an experiment can show that chaosloco's reintegration hypothesis catches a
broken rejoin.
"""

import argparse
import http.client
import io
import json
import os
import signal
import sys
import threading
import time
import urllib.parse

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import contract  # noqa: E402
import tinylm  # noqa: E402


class ConnError(Exception):
    pass


class Client:
    """One keep-alive connection to the coordinator (one per thread)."""

    def __init__(self, url, cred):
        u = urllib.parse.urlsplit(url)
        self.host, self.port = u.hostname, u.port or 80
        self.cred = cred
        self.conn = None

    def call(self, method, path, body=None, headers=None, timeout=10.0):
        h = dict(headers or {})
        if self.cred:
            h["Authorization"] = "Bearer " + self.cred
        if isinstance(body, dict):
            body = json.dumps(body).encode()
            h["Content-Type"] = "application/json"
        elif body is not None:
            h["Content-Type"] = "application/octet-stream"
        try:
            if self.conn is None:
                self.conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
            self.conn.timeout = timeout
            if self.conn.sock is not None:
                self.conn.sock.settimeout(timeout)
            self.conn.request(method, path, body=body, headers=h)
            r = self.conn.getresponse()
            data = r.read()
            return r.status, r, data
        except (OSError, http.client.HTTPException) as x:
            if self.conn is not None:
                self.conn.close()
            self.conn = None
            raise ConnError("%s %s: %s" % (method, path, x))


def jerr(data):
    try:
        return json.loads(data)
    except ValueError:
        return {}


class Worker:
    def __init__(self, args):
        self.args = args
        self.id = args.id
        cred = contract.read_credential(args.credential_file) if args.credential_file else None
        self.main = Client(args.coordinator, cred)
        self.hbc = Client(args.coordinator, cred)
        text = tinylm.read_corpus(args.data)
        train, _ = tinylm.split(text)
        self.data = tinylm.as_tensor(tinylm.shard(train, args.id, args.workers))
        self.model = tinylm.new_model(args.seed)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=args.inner_lr, weight_decay=0.01)
        self.gen = torch.Generator().manual_seed(args.seed * 1000 + args.id)
        self.step = 0  # inner steps trained (all incarnations)
        self.tokens = 0  # tokens trained (all incarnations)
        self.incarnation = 0  # the coordinator's, 0 before the first join (the checkpoint's until the join)
        self.joined = False  # joined in this process: heartbeats only then
        self.version = -1  # version of the global parameters held
        self.H = 1
        self.losses = []  # last inner-step losses, for the heartbeat's train_loss
        self.step_ms = 0.0
        self.end = threading.Event()  # the run was ended (heartbeat answer)
        self.term = threading.Event()  # SIGTERM
        self.rejoin = threading.Event()  # a 409/403 said: join again
        self.restarted = self.load()
        self.slowdown = float(os.environ.get("CHAOSLOCO_SLOWDOWN") or 1)
        self.last_hb = 0.0

    def log(self, msg):
        print("%s worker %d: %s" % (contract.iso_now(), self.id, msg), flush=True)

    # ---- checkpoint ----

    def ckpt_path(self):
        return os.path.join(self.args.state_dir, "worker.pt")

    def load(self):
        if not os.path.exists(self.ckpt_path()):
            return False
        c = torch.load(self.ckpt_path())
        self.model.load_state_dict(c["model"])
        self.opt.load_state_dict(c["opt"])
        self.gen.set_state(c["gen"])
        self.step, self.tokens, self.incarnation = c["step"], c["tokens"], c["incarnation"]
        self.log("resumed from its checkpoint at step %d (incarnation %d)" % (self.step, self.incarnation))
        return True

    def save(self):
        c = {
            "model": self.model.state_dict(),
            "opt": self.opt.state_dict(),
            "gen": self.gen.get_state(),
            "step": self.step,
            "tokens": self.tokens,
            "incarnation": self.incarnation,
        }
        buf = io.BytesIO()
        torch.save(c, buf)
        contract.write_atomic(self.ckpt_path(), buf.getvalue())

    # ---- protocol ----

    def retry(self, what, fn):
        """fn() until it does not raise ConnError; None when the run ends or
        a SIGTERM arrives meanwhile."""
        delay = 0.1
        while not self.term.is_set():
            try:
                return fn()
            except ConnError as x:
                self.log("%s: %s (retrying)" % (what, x))
                contract.sleep(delay)
                delay = min(delay * 2, 1.0)
        return None

    def join(self):
        def once():
            st, _, data = self.main.call("POST", "/diloco/join", {"learner": self.id, "incarnation": self.incarnation, "step": self.step})
            if st != 200:
                raise ConnError("join: HTTP %d %s" % (st, jerr(data).get("error")))
            return json.loads(data)

        ans = self.retry("join", once)
        if ans is None:
            return False
        self.incarnation, self.H = ans["incarnation"], ans["H"]
        self.joined = True
        self.rejoin.clear()
        self.log("joined as incarnation %d (version %d, H %d)" % (self.incarnation, ans["version"], self.H))
        return True

    def hdrs(self, **extra):
        h = {"X-Learner": str(self.id), "X-Incarnation": str(self.incarnation)}
        h.update({k.replace("_", "-"): str(v) for k, v in extra.items()})
        return h

    def pull(self, newer_than=-1, wait_ms=0):
        """Adopt the global parameters if newer than newer_than (waiting up to
        wait_ms). True when adopted, False when nothing newer; raises
        ConnError (also for a 409/403: self.rejoin is set)."""
        inc = self.incarnation
        st, r, data = self.main.call(
            "GET", "/diloco/params?newer_than=%d&wait_ms=%d" % (newer_than, wait_ms), headers=self.hdrs(), timeout=wait_ms / 1000.0 + 10
        )
        if st == 204:
            return False
        if st in (403, 409):
            if inc == self.incarnation:
                self.rejoin.set()
            raise ConnError("pull: HTTP %d %s" % (st, jerr(data).get("error")))
        if st != 200:
            raise ConnError("pull: HTTP %d" % st)
        vec = torch.frombuffer(bytearray(data), dtype=torch.float32)
        tinylm.load_flat(self.model, vec.clone())
        self.version = int(r.getheader("X-Version"))
        return True

    def heartbeat(self):
        inc = self.incarnation
        loss = sum(self.losses) / len(self.losses) if self.losses else None
        body = {
            "learner": self.id,
            "incarnation": inc,
            "step": self.step,
            "train_loss": loss,
            "tokens": self.tokens,
            "step_ms": round(self.step_ms, 3),
            "t_real_ms": int(time.time() * 1000),
        }
        st, _, data = self.hbc.call("POST", "/diloco/heartbeat", body, timeout=5.0)
        self.last_hb = time.monotonic()
        if st in (403, 409) and inc == self.incarnation:  # not if our own join superseded it meanwhile
            self.rejoin.set()
        elif st == 200 and jerr(data).get("end"):
            self.end.set()

    def heartbeats(self):
        while not self.term.is_set():
            if self.joined and not self.rejoin.is_set():
                try:
                    self.heartbeat()
                except ConnError:
                    pass
            contract.sleep(1.0)

    # ---- training ----

    def inner_step(self):
        t0 = time.monotonic()
        pos = torch.randint(0, len(self.data) - tinylm.CONTEXT - 1, (self.args.batch,), generator=self.gen)
        x, y = tinylm.batch_at(self.data, pos)
        loss = torch.nn.functional.cross_entropy(self.model(x), y)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()
        self.step += 1
        self.tokens += self.args.batch
        self.losses = (self.losses + [loss.item()])[-20:]
        dt = time.monotonic() - t0
        if self.slowdown > 1:  # CHAOSLOCO_SLOWDOWN: the harness's slow pass
            contract.sleep(dt * (self.slowdown - 1))
            dt *= self.slowdown
        self.step_ms = dt * 1000.0 if self.step_ms == 0 else 0.9 * self.step_ms + 100.0 * dt

    def stop_asked(self):
        return self.end.is_set() or self.term.is_set() or self.step >= self.args.steps

    def outer_step(self):
        """H inner steps from the global version held, the outer gradient,
        the merged version. False once the worker should stop."""
        base = self.version
        theta = tinylm.flat(self.model)
        s0, k0 = self.step, self.tokens
        for _ in range(self.H):
            if self.stop_asked() or self.rejoin.is_set():
                return not self.stop_asked()
            self.inner_step()
        if self.args.break_rejoin and self.restarted:
            pass  # the broken rejoin of the test option: never contribute
        else:
            delta = (theta - tinylm.flat(self.model)).contiguous()
            h = self.hdrs(X_Base_Version=base, X_Tokens=self.tokens - k0, X_Steps=self.step - s0)
            ans = self.retry("outer-gradient", lambda: self.main.call("POST", "/diloco/outer-gradient", delta.numpy().tobytes(), h))
            if ans is None:
                return False
            st, _, data = ans
            if st in (403,) or (st == 409 and jerr(data).get("reason") == "stale_incarnation"):
                self.rejoin.set()
                return True
            if st not in (202, 409):
                self.log("outer gradient refused: HTTP %d %s" % (st, jerr(data).get("error")))
        # the merged version (or, after a 409 stale_version, the current one)
        while not self.term.is_set() and not self.rejoin.is_set():
            try:
                if self.pull(newer_than=base, wait_ms=2000):
                    break
            except ConnError as x:
                self.log("waiting for the merge: %s" % x)
                contract.sleep(0.2)
            if self.end.is_set():
                return False
        if self.rejoin.is_set():
            return True
        self.save()
        return True

    def run(self):
        threading.Thread(target=self.heartbeats, daemon=True).start()
        while not self.stop_asked():
            if self.incarnation == 0 or self.rejoin.is_set() or self.version < 0:
                if not self.join():
                    break
                if self.retry("pull", lambda: self.pull()) is None:
                    break
                if self.rejoin.is_set():
                    continue
            if not self.outer_step():
                break
        if self.term.is_set():
            self.save()
            self.log("SIGTERM: checkpointed at step %d" % self.step)
            return
        # a last heartbeat with the final step (>= 1 s after the previous one,
        # so that it becomes an event), then leave
        contract.sleep(max(0.0, 1.05 - (time.monotonic() - self.last_hb)))
        try:
            self.heartbeat()
            self.main.call("POST", "/diloco/leave", {"learner": self.id, "incarnation": self.incarnation})
        except ConnError as x:
            self.log("leave: %s" % x)
        self.save()
        self.log("done: %d steps, %d tokens (%s)" % (self.step, self.tokens, "ended" if self.end.is_set() else "steps done"))


def main():
    ap = argparse.ArgumentParser(description="DiLoCo worker (PyTorch example)")
    ap.add_argument("--coordinator", required=True, help="http://HOST:PORT (the agent's proxy under chaosloco)")
    ap.add_argument("--id", type=int, required=True, help="learner id 0..workers-1")
    ap.add_argument("--workers", type=int, required=True, help="M: the data is cut into M shards")
    ap.add_argument("--state-dir", required=True, help="worker.pt, its checkpoint")
    ap.add_argument("--credential-file", help="learner-<id>.cred; none: no Authorization header")
    ap.add_argument("--steps", type=int, default=10**8, help="inner-step budget")
    ap.add_argument("--batch", type=int, default=64, help="sequences per inner step (= tokens: one target each)")
    ap.add_argument("--inner-lr", type=float, default=3e-3, help="AdamW learning rate")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--data", help="a text file instead of Debian's fortunes")
    ap.add_argument("--break-rejoin", action="store_true", help="test option: never contribute after a restart")
    args = ap.parse_args()
    if not 0 <= args.id < args.workers:
        ap.error("--id must be in 0..workers-1")
    torch.set_num_threads(1)
    os.makedirs(args.state_dir, exist_ok=True)
    print("%s worker %d: starting (pid %d)" % (contract.iso_now(), args.id, os.getpid()), flush=True)
    w = Worker(args)
    signal.signal(signal.SIGTERM, lambda s, f: w.term.set())
    w.run()


if __name__ == "__main__":
    main()
