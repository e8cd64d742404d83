#!/usr/bin/env python3
"""The load and the check of `scripts/failover` (Python 3 standard library only).

`run`: approval-gate threads at a steady rate from a few clients, for a bounded time. Each thread
is created (`POST /threads?wait=true`, Idempotency-Key `KEY-create`), read until it is parked if
the create was cut off (`GET /threads/KEY`), and answered (`POST /approvals/ID`,
Idempotency-Key `KEY-answer`), each request retried with the same key while it fails (as a
client that wants its write to land should), a bounded number of times. `/healthz` and `/readyz`
are probed every 100 ms. Every request's outcome goes to a JSON-lines file.

`check`: waits until no thread of the run is running, reads the journal on the new primary with
psql, and prints the summary: recovery times, requests refused by status, acknowledged, lost
(acknowledged and not in the database) and duplicated (applied more than once).
"""

import argparse
import http.client
import json
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

AGENT = "question_gate"


def create_text(key):
    return f"Please approve change {key}."


def answer_text(key):
    return f"Yes, approved ({key})."


class Recorder:
    """Every request's outcome, one JSON object a line."""

    def __init__(self, path):
        self.file = open(path, "w", encoding="utf-8")
        self.lock = threading.Lock()

    def write(self, record):
        with self.lock:
            self.file.write(json.dumps(record) + "\n")
            self.file.flush()

    def close(self):
        self.file.close()


def request(base, token, method, path, body=None, key=None, timeout=20.0):
    """One HTTP request: (status or None, parsed JSON or None, error text, replayed)."""
    headers = {"Authorization": f"Bearer {token}"}
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    if key is not None:
        headers["Idempotency-Key"] = key
    req = urllib.request.Request(base + path, data=data, headers=headers, method=method)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            raw = resp.read()
            replayed = resp.headers.get("idempotent-replayed") == "true"
            return resp.status, json.loads(raw) if raw else None, None, replayed
    except urllib.error.HTTPError as e:
        raw = e.read()
        try:
            parsed = json.loads(raw)
        except ValueError:
            parsed = None
        code = parsed.get("code") if isinstance(parsed, dict) else None
        return e.code, parsed, code, False
    except (OSError, ValueError) as e:  # refused, reset, timed out, a truncated body
        return None, None, type(e).__name__ + ": " + str(e)[:120], False


class Load:
    def __init__(self, args, recorder):
        self.args = args
        self.rec = recorder
        self.stop_probes = threading.Event()
        self.deadline = time.time() + args.duration + args.grace

    def call(self, op, key, attempt, method, path, body=None, idem=None, timeout=20.0):
        t0 = time.time()
        status, parsed, error, replayed = request(
            self.args.base, self.args.token, method, path, body, idem, timeout
        )
        record = {
            "t0": t0,
            "t1": time.time(),
            "op": op,
            "key": key,
            "attempt": attempt,
            "status": status,
            "error": error,
            "replayed": replayed,
        }
        if status == 200 and isinstance(parsed, dict) and parsed.get("approval"):
            record["approval"] = parsed["approval"]  # the park the client was told of
        if status in (200, 202) and isinstance(parsed, dict) and "status" in parsed:
            record["thread_status"] = parsed["status"]
        self.rec.write(record)
        return status, parsed

    def write(self, op, key, path, body, idem):
        """A write retried with its idempotency key until it is acknowledged (200/202) or
        refused for good (another 4xx), at most `--attempts` times and until the deadline."""
        for attempt in range(1, self.args.attempts + 1):
            status, parsed = self.call(op, key, attempt, "POST", path, body, idem)
            if status in (200, 202):
                return status, parsed
            if status is not None and 400 <= status < 500 and status not in (408, 429):
                return status, parsed
            if time.time() > self.deadline:
                break
            time.sleep(0.25)
        return None, None

    def parked(self, key):
        """The thread's approval id once it is parked (a run cut off by the failover is
        continued by recovery once its lease expires)."""
        for attempt in range(1, 2000):
            status, parsed = self.call("get", key, attempt, "GET", f"/threads/{key}", timeout=5.0)
            if status == 200 and parsed.get("approval"):
                return parsed["approval"]
            # A thread whose first message waits for its run reads `idle` with session 0 (the
            # run cut off by the failover is continued once its lease expires).
            started = parsed.get("session", 0) > 0 if status == 200 else True
            if status == 200 and started and parsed.get("status") not in ("running", "awaiting_human"):
                return None  # it settled without asking: reported by the check
            if status == 404:
                return None  # acknowledged, then gone with the failover: reported as lost
            if time.time() > self.deadline:
                return None
            time.sleep(0.25)
        return None

    def thread(self, i):
        key = f"{self.args.prefix}-{i:05d}"
        body = {"agent": AGENT, "key": key, "text": create_text(key)}
        status, parsed = self.write("create", key, "/threads?wait=true", body, f"{key}-create")
        if status not in (200, 202):
            return
        approval = parsed.get("approval") if status == 200 else None
        if not approval:
            approval = self.parked(key)
        if not approval:
            return
        self.write("answer", key, f"/approvals/{approval}", {"text": answer_text(key)}, f"{key}-answer")

    def worker(self, w, counter, lock):
        per_worker = self.args.rate / self.args.workers or float("inf")
        start = time.time()
        n = 0
        while True:
            with lock:
                i = counter[0]
                counter[0] += 1
            if i >= self.args.threads or time.time() - start > self.args.duration:
                return
            self.thread(i)
            n += 1
            # Paced: this worker's n-th thread does not start before n / its rate.
            ahead = start + n / per_worker - time.time()
            if ahead > 0:
                time.sleep(ahead)

    def probe(self, path, op, timeout):
        n = 0
        while not self.stop_probes.is_set() and n < 100_000:
            n += 1
            self.call(op, None, n, "GET", path, timeout=timeout)
            self.stop_probes.wait(0.1)


def run(args):
    rec = Recorder(args.out)
    load = Load(args, rec)
    probes = [
        threading.Thread(target=load.probe, args=("/healthz", "healthz", 3.0), daemon=True),
        threading.Thread(target=load.probe, args=("/readyz", "readyz", 10.0), daemon=True),
    ]
    for p in probes:
        p.start()
    counter, lock = [0], threading.Lock()
    workers = [
        threading.Thread(target=load.worker, args=(w, counter, lock), daemon=True)
        for w in range(args.workers)
    ]
    open(args.started, "w").close()
    for w in workers:
        w.start()
    for w in workers:
        w.join(max(0.0, load.deadline - time.time()) + 30)
    # A little more probing after the last write: /readyz back for good.
    time.sleep(2)
    load.stop_probes.set()
    for p in probes:
        p.join(5)
    rec.close()
    print(f"load: {min(counter[0], args.threads)} threads started")


# --- the check -----------------------------------------------------------------------------


def psql(command, sql):
    out = subprocess.run(
        command.split() + ["-AtF", "\t", "-c", sql],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout
    return [line.split("\t") for line in out.splitlines() if line]


def follow_after_failover(args):
    """The change feed after the failover: a thread created and parked, followed over SSE
    (`/threads/KEY/events`, woken only by the feed's LISTEN), then answered; the follower must
    see it settle."""
    key = f"{args.prefix}-feed"
    status, parsed, error, _ = request(
        args.base, args.token, "POST", "/threads?wait=true",
        {"agent": AGENT, "key": key, "text": create_text(key)}, f"{key}-create",
    )
    if status != 200 or not parsed.get("approval"):
        return f"change feed after failover: could not park a thread ({status} {error})"
    url = urllib.parse.urlsplit(args.base)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=15)
    conn.request("GET", f"/threads/{key}/events", headers={"Authorization": f"Bearer {args.token}"})
    resp = conn.getresponse()
    if resp.status != 200:
        return f"change feed after failover: events answered {resp.status}"
    seen = threading.Event()
    opened = threading.Event()

    def read():
        try:
            event = None
            for raw in resp:
                line = raw.decode().rstrip("\n")
                if line.startswith("event: "):
                    event = line[7:]
                elif line.startswith("data: ") and event == "status":
                    if '"awaiting_human"' in line:
                        opened.set()
                    if '"idle"' in line:
                        seen.set()
                        return
        except OSError:
            pass

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    if not opened.wait(10):
        conn.close()
        return "change feed after failover: the follower saw no parked status"
    t0 = time.time()
    request(args.base, args.token, "POST", f"/approvals/{parsed['approval']}",
            {"text": answer_text(key)}, f"{key}-answer")
    ok = seen.wait(10)
    conn.close()
    if not ok:
        return "change feed after failover: a follower did NOT see the answered thread settle within 10 s"
    return f"change feed after failover: a follower saw the answered thread settle {(time.time() - t0) * 1000:.0f} ms after the answer"


def outcome(r):
    if r["status"] in (200, 202):
        return str(r["status"])
    if r["status"] is not None:
        return str(r["status"])
    e = r["error"] or ""
    if "timed out" in e or "Timeout" in e:
        return "timeout"
    if "Refused" in e or "refused" in e:
        return "connection refused"
    return "connection error"


def check(args):
    records = [json.loads(line) for line in open(args.out, encoding="utf-8")]
    api = [r for r in records if r["op"] in ("create", "answer", "get")]
    writes = [r for r in api if r["op"] != "get"]
    kill = args.kill_at

    # Wait (bounded) until no thread of the run is running or has a queued message.
    like = f"%{args.prefix}-%"
    settled_after = None
    start = time.time()
    while time.time() - start < args.settle:
        [[running, queued]] = psql(
            args.psql,
            "SELECT (SELECT count(*) FROM threads WHERE key LIKE '"
            + like
            + "' AND status = 'running'), (SELECT count(*) FROM queue q JOIN threads t ON t.num = q.thread WHERE t.key LIKE '"
            + like
            + "')",
        )
        if running == "0" and queued == "0":
            settled_after = time.time() - start
            break
        time.sleep(1)

    threads = {}
    for key, status, stop, result in psql(
        args.psql,
        f"SELECT key, status, coalesce(stop_reason, ''), coalesce(result, '') FROM threads WHERE key LIKE '{like}'",
    ):
        threads[key.split("/")[-1]] = (status, stop, result)
    messages = {}
    for key, content, n in psql(
        args.psql,
        "SELECT t.key, j.content, count(*) FROM journal j JOIN threads t ON t.num = j.thread "
        f"WHERE t.key LIKE '{like}' AND j.kind = 'message' "
        "AND (j.content LIKE 'Please approve change %' OR j.content LIKE 'Yes, approved (%') GROUP BY 1, 2",
    ):
        messages[(key.split("/")[-1], content)] = int(n)

    acked = {"create": set(), "answer": set()}
    for r in writes:
        if r["status"] in (200, 202):
            acked[r["op"]].add(r["key"])
    keys = {r["key"] for r in writes if r["op"] == "create"}
    lost_threads = sorted(
        k for k in acked["create"] if k not in threads or messages.get((k, create_text(k)), 0) == 0
    )
    lost_answers = sorted(k for k in acked["answer"] if messages.get((k, answer_text(k)), 0) == 0)
    duplicated = sorted(f"{k}: {c!r} x{n}" for (k, c), n in messages.items() if n > 1)
    unfinished = sorted(
        k
        for k in acked["answer"]
        if threads.get(k, ("", "", ""))[0] != "idle" or threads[k][2] != "approved"
    )
    never_acked = sorted(keys - acked["create"])
    # A park the client was told of (a 200 naming the approval) that the new primary never had:
    # the answer to it got 404 (recovery then asks the same question again).
    told = {r["key"] for r in records if r.get("approval")}
    lost_parks = sorted(
        {r["key"] for r in writes if r["op"] == "answer" and r["status"] == 404 and r["key"] in told}
    )
    unanswered = sorted(k for k in acked["create"] if k not in acked["answer"])
    unanswered_states = {}
    for k in unanswered:
        state = "/".join(x for x in threads.get(k, ("missing",)) if x)
        unanswered_states[state] = unanswered_states.get(state, 0) + 1
    # Writes whose first acknowledgement was a replay: an earlier attempt, refused or cut off,
    # had been stored, and the retry with the same Idempotency-Key wrote nothing.
    first_ack = {}
    for r in sorted(writes, key=lambda r: r["t0"]):
        if r["status"] in (200, 202):
            first_ack.setdefault((r["op"], r["key"]), r)
    replayed = sum(1 for r in first_ack.values() if r["replayed"])

    # Threads whose create was acknowledged without the park (the run was cut off), read until
    # they parked: when the client first saw them parked.
    polled = {}
    for r in records:
        if r["op"] == "get" and r.get("approval"):
            polled[r["key"]] = min(polled.get(r["key"], r["t1"]), r["t1"])
    polled_line = (
        f"creates acknowledged with their run cut off: {len(polled)}, parked by "
        + ", ".join(f"{t - kill:+.1f} s" for t in sorted(polled.values()))
        if polled
        else "creates acknowledged with their run cut off: 0"
    )

    refused = {}
    for r in api:
        if r["status"] not in (200, 202):
            o = outcome(r)
            refused[o] = refused.get(o, 0) + 1
    failures = sorted((r for r in api if r["status"] not in (200, 202) and not (r["op"] == "get" and r["status"] == 200)), key=lambda r: r["t0"])
    first_fail = failures[0] if failures else None
    last_fail = failures[-1] if failures else None
    first_ok_after = None
    if first_fail:
        oks = [r for r in api if r["status"] in (200, 202) and r["t0"] >= first_fail["t1"]]
        first_ok_after = min(oks, key=lambda r: r["t1"]) if oks else None

    def probe(op):
        ps = sorted((r for r in records if r["op"] == op), key=lambda r: r["t0"])
        bad = [r for r in ps if r["status"] != 200]
        first_bad = bad[0] if bad else None
        back = None
        if first_bad:
            later = [r for r in ps if r["status"] == 200 and r["t0"] > first_bad["t0"]]
            back = later[0] if later else None
        slowest = max((r["t1"] - r["t0"] for r in ps), default=0.0)
        outcomes = {}
        for r in bad:
            o = outcome(r)
            outcomes[o] = outcomes.get(o, 0) + 1
        return ps, bad, first_bad, back, slowest, outcomes

    hz, hz_bad, _, _, hz_slowest, _ = probe("healthz")
    rz, rz_bad, rz_first_bad, rz_back, rz_slowest, rz_outcomes = probe("readyz")

    feed_line = follow_after_failover(args)

    def rel(t):
        return f"{t - kill:+.2f} s" if t is not None else "never"

    lines = [
        f"mode: {args.mode} ({'synchronous_mode: true, synchronous_commit: on' if args.mode == 'sync' else 'synchronous_mode: false (asynchronous replication), synchronous_commit: on'})",
        f"new primary promoted {args.promoted_at - kill:.2f} s after the kill",
        f"threads: {len(keys)} started, {len(acked['create'])} creates acknowledged, {len(acked['answer'])} answers acknowledged"
        + (f" ({len(never_acked)} never acknowledged, {len(unanswered)} not answered: never parked, now {unanswered_states} {unanswered[:5]})" if never_acked or unanswered else ""),
        f"requests: {len(api)} API requests ({len(writes)} writes), {len(api) - sum(refused.values())} succeeded; refused/failed: "
        + (", ".join(f"{n} {o}" for o, n in sorted(refused.items())) or "none"),
        f"API outage: first failed request {rel(first_fail['t0']) if first_fail else 'none'}, first success after it {rel(first_ok_after['t1']) if first_ok_after else 'none'}"
        + (f" ({first_ok_after['t1'] - first_fail['t0']:.2f} s); last failed request {rel(last_fail['t1'])}" if first_fail and first_ok_after else ""),
        f"/readyz: {len(rz_bad)} of {len(rz)} not 200 ("
        + (", ".join(f"{n} {o}" for o, n in sorted(rz_outcomes.items())) or "none")
        + f"); first not ready {rel(rz_first_bad['t0']) if rz_first_bad else 'never'}, ready again {rel(rz_back['t1']) if rz_back else 'never'}"
        + (f" ({rz_back['t1'] - rz_first_bad['t0']:.2f} s)" if rz_first_bad and rz_back else "")
        + f"; slowest probe {rz_slowest:.2f} s",
        f"/healthz: {len(hz) - len(hz_bad)} of {len(hz)} answered 200; slowest {hz_slowest * 1000:.0f} ms",
        polled_line,
        f"settled: every thread of the run idle {settled_after:.1f} s after the load ended" if settled_after is not None else f"settled: NOT within {args.settle} s",
        f"lost: {len(lost_threads)} acknowledged threads, {len(lost_answers)} acknowledged answers, {len(lost_parks)} acknowledged parks"
        + (f" {(lost_threads + lost_answers + lost_parks)[:10]}" if lost_threads or lost_answers or lost_parks else ""),
        f"duplicated: {len(duplicated)}" + (f" {duplicated[:10]}" if duplicated else ""),
        f"answered but not finished (status idle, result approved): {len(unfinished)}" + (f" {unfinished[:10]}" if unfinished else ""),
        f"writes stored although their request failed (the retry was a replay): {replayed}",
        feed_line,
    ]
    text = "\n".join(lines) + "\n"
    print(text, end="")
    with open(args.summary, "w", encoding="utf-8") as f:
        f.write(text)
    bad = duplicated or unfinished or hz_bad or not rz_back and rz_first_bad or settled_after is None
    bad = bad or "follower saw the answered" not in feed_line
    if args.mode == "sync" and (lost_threads or lost_answers or lost_parks):
        bad = True
    return 1 if bad else 0


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--base", required=True)
    r.add_argument("--token", required=True)
    r.add_argument("--prefix", required=True)
    r.add_argument("--out", required=True)
    r.add_argument("--started", required=True)
    r.add_argument("--threads", type=int, default=2000, help="at most this many threads")
    r.add_argument("--workers", type=int, default=4)
    r.add_argument("--rate", type=float, default=0.0, help="threads started per second, in all (0: as fast as the clients go)")
    r.add_argument("--duration", type=float, default=30.0, help="seconds during which threads start")
    r.add_argument("--grace", type=float, default=120.0, help="seconds after that for the last ones to finish")
    r.add_argument("--attempts", type=int, default=200, help="tries per write")
    c = sub.add_parser("check")
    c.add_argument("--base", required=True)
    c.add_argument("--token", required=True)
    c.add_argument("--out", required=True)
    c.add_argument("--prefix", required=True)
    c.add_argument("--mode", required=True)
    c.add_argument("--psql", required=True)
    c.add_argument("--kill-at", type=float, required=True)
    c.add_argument("--promoted-at", type=float, required=True)
    c.add_argument("--summary", required=True)
    c.add_argument("--settle", type=float, default=120.0)
    args = p.parse_args()
    if args.cmd == "run":
        run(args)
        return 0
    return check(args)


if __name__ == "__main__":
    sys.exit(main())
