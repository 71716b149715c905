"""ctxwise as a service under load: 2 server processes on one PostgreSQL, 32 concurrent clients.

    bash scripts/with-postgres.sh .venv/bin/python bench/service.py        # -> bench/results/service.md
    bash scripts/with-postgres.sh .venv/bin/python bench/service.py --sessions 16 --calls 8 --out /tmp/s.md

The workload: ``--sessions`` sessions (200) of ``--calls`` model calls each (30), made of recorded
turns (the OpenAI-shaped tau-bench / tau2-bench recordings in ``../shared/data/trajectories``,
one recording after another, ids prefixed per part, until the session has its calls). For each
model call a client appends what arrived since the last call (canonical messages, with the
recording's ids) and prepares; after the last call it appends the model's output.

1. **In-process**: the same work through the library, in 2 processes x 16 threads (as 2 server
   processes with 32 clients), each session kept open in its thread as a library user would,
   on its own PostgreSQL database. Latency of every ``append()`` and ``prepare()``.
2. **HTTP**, once per ``--routing`` (both by default, each on a fresh database): 2 ``ctxwise
   serve`` processes on one PostgreSQL database, 32 asyncio clients (aiohttp, in 2 processes).
   ``affinity``: a session's requests go to one server (a hash of its id: a load balancer with
   session affinity, so the server's open copy of the session is current); ``round-robin``:
   every request goes to the next live server in turn (no stickiness: consecutive requests of
   one session land on different processes, and a server's copy is often stale). Appends carry
   ``expected_version``; every 8th session sends each append to both servers at once (a hedged
   request: exactly one may win, the other gets 409). A 409 is resolved by reading the
   session's version and resending: 200, or 422 ``duplicate-message-id`` when the first
   attempt was stored, which counts as the acknowledgement. Halfway through, one server is
   killed with SIGKILL; requests that die with it are retried on the other.
3. **Final check**: every session's stored messages (hidden ones included) are read back and
   compared with the recorded ids in order: each acknowledged append stored exactly once,
   nothing lost; every HTTP payload is compared with the in-process payload of the same call.

Latencies are per request (client side, the successful attempt); throughput is model calls per
second of wall time. The machine has 2 cores shared with other work, which the client, both
servers and PostgreSQL share too.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import multiprocessing as mp
import os
import queue
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _machine import REPO, machine, now  # noqa: E402

DATA = REPO.parent / "shared" / "data" / "trajectories"
FILES = ["tau-bench/gpt-4o-airline_subset.json", "tau2-bench/retail_gpt-4.1_1trial.json",
         "tau2-bench/retail_ft-gpt-4.1_1trial.json"]
POLICY_ENV = {"CTXWISE_BUDGET": "4000", "CTXWISE_UNIT": "tokens", "CTXWISE_TOKENIZER": "o200k_base"}
TENANT = "bench"
CLIENTS = 32
HEDGE_EVERY = 8


def policy():  # type: ignore[no-untyped-def]
    from ctxwise import Policy

    return Policy.from_env(POLICY_ENV)


# -- the workload --------------------------------------------------------------------------------


@dataclass
class Work:
    """One session: its id, user, and the batches to append; ``prepare[k]`` says whether a model
    call follows batch k."""

    session_id: str
    user_id: str
    batches: list[list[dict[str, Any]]]
    prepare: list[bool]

    @property
    def ids(self) -> list[str]:
        return [m["id"] for b in self.batches for m in b]


def workload(data: Path, sessions: int, calls: int) -> list[Work]:
    from ctxwise.formats import load

    convs = [c for f in FILES for c in load(data / f)]
    out = []
    for i in range(sessions):
        msgs: list[dict[str, Any]] = []
        k, part = i * 7, 0
        while True:
            conv = convs[k % len(convs)]
            k, part = k + 1, part + 1
            body = conv.messages
            last_final = max(j for j, m in enumerate(body) if m.role == "assistant" and not m.tool_uses)
            for m in body[: last_final + 1]:
                if m.role == "system" and part > 1:
                    continue
                d = m.model_dump(mode="json")
                d["id"] = f"p{part}-{m.id}"
                msgs.append(d)
            batches, prep = split(msgs)
            if sum(prep) >= calls:
                break
        n, cut = 0, len(batches)
        for j, p in enumerate(prep):
            n += p
            if n == calls:
                cut = j + 2  # the batch after the last call: the model's output
                break
        batches, prep = batches[:cut], prep[:cut]
        prep[-1] = False
        # one user per session: a user's long-term memory block is what the user's other sessions stored
        # before this one started, which depends on the order sessions run in; with a user each, every
        # payload can be compared with the in-process one
        out.append(Work(f"bench-{i:04d}", f"user-{i:04d}", batches, prep))
    return out


def split(msgs: list[dict[str, Any]]) -> tuple[list[list[dict[str, Any]]], list[bool]]:
    """Batches ending right before each model call (an assistant message after the first user
    input); a model call follows a batch unless that batch ends with the assistant's own reply."""
    batches: list[list[dict[str, Any]]] = [[]]
    seen_user = False
    for m in msgs:
        seen_user = seen_user or m["role"] == "user"
        if m["role"] == "assistant" and seen_user and batches[-1]:
            batches.append([])
        batches[-1].append(m)
    prep = [b[-1]["role"] != "assistant" for b in batches]
    return batches, prep


def digest(payload: Any) -> str:
    return hashlib.sha1(json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode()).hexdigest()


# -- 1. in-process --------------------------------------------------------------------------------


def inproc_worker(url: str, works: list[Work], threads: int, results: Any) -> None:
    from ctxwise import ContextManager

    cm = ContextManager(url, policy())
    todo: queue.Queue[Work] = queue.Queue()
    for w in works:
        todo.put(w)
    lat: dict[str, list[float]] = {"append": [], "prepare": []}
    hashes: dict[str, str] = {}
    errors: list[str] = []
    lock = threading.Lock()

    def run() -> None:
        while True:
            try:
                w = todo.get_nowait()
            except queue.Empty:
                return
            try:
                s = cm.session(w.user_id, w.session_id)
                for k, batch in enumerate(w.batches):
                    t0 = time.perf_counter()
                    s.append(batch)
                    t1 = time.perf_counter()
                    with lock:
                        lat["append"].append(t1 - t0)
                    if w.prepare[k]:
                        t0 = time.perf_counter()
                        p = s.prepare()
                        t1 = time.perf_counter()
                        with lock:
                            lat["prepare"].append(t1 - t0)
                            hashes[f"{w.session_id}/{k}"] = digest(p.payload)
            except Exception as e:  # reported, never hidden
                with lock:
                    errors.append(f"{w.session_id}: {type(e).__name__}: {e}")

    ts = [threading.Thread(target=run) for _ in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    cm.close()
    results.put({"lat": lat, "hashes": hashes, "errors": errors})


def run_inproc(url: str, works: list[Work]) -> dict[str, Any]:
    ctx = mp.get_context("fork")
    results = ctx.Queue()
    procs = [ctx.Process(target=inproc_worker, args=(url, works[p::2], CLIENTS // 2, results)) for p in range(2)]
    c0, pg0 = children_cpu(), postgres_cpu(url)
    t0 = time.perf_counter()
    for p in procs:
        p.start()
    parts = [results.get() for _ in procs]
    wall = time.perf_counter() - t0
    for p in procs:
        p.join()
    cpu = {"workers": children_cpu() - c0, "postgres": postgres_cpu(url) - pg0}
    lat = {k: [x for part in parts for x in part["lat"][k]] for k in ("append", "prepare")}
    hashes = {k: v for part in parts for k, v in part["hashes"].items()}
    return {"wall": wall, "lat": lat, "hashes": hashes, "errors": [e for part in parts for e in part["errors"]],
            "cpu": cpu}


# -- 2. HTTP ---------------------------------------------------------------------------------------


@dataclass
class Stats:
    requests: int = 0
    s5xx: int = 0
    c409: int = 0
    resolved_409: int = 0
    found_stored: int = 0
    transport_errors: int = 0
    other_errors: list[str] = field(default_factory=list)
    lat: dict[str, list[tuple[float, float]]] = field(default_factory=lambda: {"append": [], "prepare": []})
    hashes: dict[str, str] = field(default_factory=dict)
    acked: set[str] = field(default_factory=set)
    calls_done: int = 0
    after_kill_ok: int = 0
    killed_at: float | None = None
    server_timing: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    cache: dict[str, dict[str, int]] = field(default_factory=dict)
    cpu: float = 0.0
    hedge_winner_killed: int = 0


class Reply:
    """An answered request, read whole: ``status_code``, ``headers``, ``text``, ``json()``."""

    __slots__ = ("status_code", "headers", "body")

    def __init__(self, status_code: int, headers: Any, body: bytes) -> None:
        self.status_code, self.headers, self.body = status_code, headers, body

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", "replace")

    def json(self) -> Any:
        return json.loads(self.body)


class Servers:
    """The two server processes as a client sees them: with ``routing="affinity"`` each session
    goes to one server (a hash of its id, as a load balancer with session affinity does; the
    other live server when that one is down), with ``"round-robin"`` each request to the next
    live server (no stickiness).

    The client is aiohttp (C HTTP parser): the clients share the machine's 2 cores with the
    servers, and httpx cost about 5 ms of client CPU per model call."""

    def __init__(self, urls: list[str], key: str, stats: Stats, routing: str = "affinity") -> None:
        import aiohttp

        self.urls = urls
        self.headers = {"Authorization": f"Bearer {key}"}
        self.clients = [aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=CLIENTS * 2, limit_per_host=CLIENTS * 2),
            timeout=aiohttp.ClientTimeout(total=120)) for _u in urls]
        self.alive = [True] * len(urls)
        self.turn = 0
        self.stats = stats
        self.routing = routing

    def pick(self, session_id: str) -> int:
        live = [i for i, a in enumerate(self.alive) if a]
        if self.routing == "affinity":
            home = zlib.crc32(session_id.encode()) % len(self.alive)
            return home if self.alive[home] else live[home % len(live)]
        self.turn += 1
        return live[self.turn % len(live)]

    async def request(self, i: int, method: str, path: str, params: dict[str, Any], body: Any) -> Reply:
        headers = self.headers
        data = None
        if body is not None:  # compact UTF-8 JSON, as httpx sends it
            data = json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()
            headers = {**headers, "Content-Type": "application/json"}
        async with self.clients[i].request(method, self.urls[i] + path, params=params, data=data,
                                           headers=headers) as r:
            return Reply(r.status, r.headers, await r.read())

    async def send(self, method: str, path: str, *, params: dict[str, Any], body: Any = None,
                   server: int | None = None) -> tuple[Any, float]:
        import aiohttp

        session_id = path.split("/")[3]
        for _attempt in range(100):
            i = server if server is not None and self.alive[server] else self.pick(session_id)
            server = None
            t0 = time.perf_counter()
            try:
                r = await self.request(i, method, path, params, body)
            except (aiohttp.ClientError, asyncio.TimeoutError) as e:  # the server died under the request, or is gone
                self.stats.transport_errors += 1
                if isinstance(e, aiohttp.ClientConnectorError):
                    self.alive[i] = False
                await asyncio.sleep(0.05)
                continue
            dt = time.perf_counter() - t0
            self.stats.requests += 1
            op = "append" if path.endswith("/messages") else "prepare" if path.endswith("/prepare") else None
            if op and r.status_code == 200:
                for part in r.headers.get("server-timing", "").split(", "):
                    if ";dur=" in part:
                        name, ms = part.split(";dur=")
                        self.stats.server_timing.setdefault(op, {}).setdefault(name, []).append(float(ms))
                    elif part.startswith("cache;desc="):
                        state = part.split("=", 1)[1].strip('"')
                        self.stats.cache.setdefault(op, {}).setdefault(state, 0)
                        self.stats.cache[op][state] += 1
                self.stats.server_timing.setdefault(op, {}).setdefault("client", []).append(dt * 1000)
            if KILLED is not None and KILLED.value >= 0 and r.status_code < 500:
                self.stats.after_kill_ok += 1
            if r.status_code >= 500:
                self.stats.s5xx += 1
                self.stats.other_errors.append(f"{r.status_code} {path}: {r.text[:200]}")
                await asyncio.sleep(0.1)
                continue
            return r, dt
        raise RuntimeError(f"{method} {path}: no server answered")

    async def close(self) -> None:
        for c in self.clients:
            await c.close()


async def http_session(w: Work, srv: Servers, stats: Stats, hedge: bool, t_start: float) -> None:
    q = {"user_id": w.user_id}
    base = f"/v1/sessions/{w.session_id}"
    version = 0
    for k, batch in enumerate(w.batches):
        body = {"format": "canonical", "messages": batch, "expected_version": version}
        if hedge and all(srv.alive):
            (r1, d1), (r2, d2) = await asyncio.gather(srv.send("POST", base + "/messages", params=q, body=body, server=0),
                                                      srv.send("POST", base + "/messages", params=q, body=body, server=1))
            wins = [(r, d) for r, d in ((r1, d1), (r2, d2)) if r.status_code == 200]
            losers = [r for r in (r1, r2) if r.status_code != 200]
            # no winner is right only when the killed server stored the append and died before answering
            # (the retry of its request then lost too); resolve() below must find the append stored
            died = not wins and KILLED is not None and KILLED.value >= 0
            if died and all(r.status_code == 409 for r in losers):
                stats.hedge_winner_killed += 1
            elif len(wins) != 1 or any(r.status_code != 409 for r in losers):
                stats.other_errors.append(f"hedged append {w.session_id}/{k}: {r1.status_code} {r2.status_code} "
                                          + " ".join(r.text[:300] for r in losers))
            if wins:
                version = wins[0][0].json()["version"]
                stats.lat["append"].append((time.monotonic() - t_start, wins[0][1]))
                stats.acked.add(f"{w.session_id}/{k}")
            for _ in losers:
                stats.c409 += 1
                stored_before = stats.found_stored
                version = await resolve(w, k, batch, srv, stats)
                if died and stats.found_stored == stored_before:
                    stats.other_errors.append(f"hedged append {w.session_id}/{k}: no winner, and not stored")
        else:
            r, d = await srv.send("POST", base + "/messages", params=q, body=body)
            if r.status_code == 200:
                version = r.json()["version"]
                stats.lat["append"].append((time.monotonic() - t_start, d))
                stats.acked.add(f"{w.session_id}/{k}")
            elif r.status_code == 409:
                stats.c409 += 1
                version = await resolve(w, k, batch, srv, stats)
            else:
                stats.other_errors.append(f"append {w.session_id}/{k}: {r.status_code} {r.text[:300]}")
                return
        if w.prepare[k]:
            for _ in range(50):
                r, d = await srv.send("POST", base + "/prepare", params=q, body={})
                if r.status_code == 409:
                    stats.c409 += 1
                    stats.resolved_409 += 1
                    continue
                break
            if r.status_code != 200:
                stats.other_errors.append(f"prepare {w.session_id}/{k}: {r.status_code} {r.text[:300]}")
                return
            body_json = r.json()
            version = body_json["version"]
            stats.lat["prepare"].append((time.monotonic() - t_start, d))
            stats.hashes[f"{w.session_id}/{k}"] = digest(body_json["payload"])
            stats.calls_done += 1
            if CALLS is not None:
                with CALLS.get_lock():
                    CALLS.value += 1


async def resolve(w: Work, k: int, batch: list[dict[str, Any]], srv: Servers, stats: Stats) -> int:
    """After a 409 on an append: read the version, resend; 422 duplicate-message-id means the
    first attempt was stored (its acknowledgement was lost or went to the other request)."""
    q = {"user_id": w.user_id}
    base = f"/v1/sessions/{w.session_id}"
    for _ in range(50):
        ctx, _d = await srv.send("GET", base + "/context", params=q)
        if ctx.status_code == 404:  # the first append of the session never went through
            version = 0
        else:
            version = ctx.json()["version"]
        r, _d = await srv.send("POST", base + "/messages", params=q,
                               body={"format": "canonical", "messages": batch, "expected_version": version})
        if r.status_code == 200:
            stats.resolved_409 += 1
            stats.acked.add(f"{w.session_id}/{k}")
            return int(r.json()["version"])
        if r.status_code == 422 and any(v.get("rule") == "duplicate-message-id"
                                        for v in r.json()["error"].get("violations", [])):
            stats.resolved_409 += 1
            stats.found_stored += 1
            stats.acked.add(f"{w.session_id}/{k}")
            return version
        if r.status_code != 409:
            stats.other_errors.append(f"resolve {w.session_id}/{k}: {r.status_code} {r.text[:300]}")
            return version
        stats.c409 += 1
    raise RuntimeError(f"{w.session_id}/{k}: 409 fifty times")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_servers(url: str, n: int) -> tuple[list[subprocess.Popen], list[str]]:
    env = {**os.environ, **POLICY_ENV, "CTXWISE_DB": url}
    procs, urls = [], []
    for _ in range(n):
        port = free_port()
        procs.append(subprocess.Popen([sys.executable, "-m", "ctxwise", "serve", "--db", url, "--port", str(port),
                                       "--log-level", "warning"], env=env, stdout=subprocess.DEVNULL,
                                      stderr=open(f"/tmp/ctxwise-bench-server-{port}.log", "w")))
        urls.append(f"http://127.0.0.1:{port}")
    import urllib.error
    import urllib.request

    deadline = time.monotonic() + 120
    for u, p in zip(urls, procs):
        while True:
            assert p.poll() is None, f"server {u} exited ({p.returncode})"
            try:
                with urllib.request.urlopen(u + "/readyz", timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:  # not listening yet (URLError), or not ready (HTTPError 503)
                pass
            assert time.monotonic() < deadline, f"server {u} did not become ready"
            time.sleep(0.2)
    return procs, urls


CALLS: Any = None
"""Model calls done, shared by the client processes (the parent kills a server at half)."""
KILLED: Any = None
"""When the server was killed (seconds after the start), -1 before."""


def client_proc(part: list[tuple[int, Work]], urls: list[str], key: str, t0: float, calls: Any, killed: Any,
                results: Any, routing: str) -> None:
    """One client process: ``CLIENTS // 2`` asyncio clients over its share of the sessions."""
    global CALLS, KILLED
    CALLS, KILLED = calls, killed
    stats = Stats()

    async def run() -> None:
        srv = Servers(urls, key, stats, routing)
        todo: asyncio.Queue[tuple[int, Work]] = asyncio.Queue()
        for item in part:
            todo.put_nowait(item)

        async def client() -> None:
            while True:
                try:
                    i, w = todo.get_nowait()
                except asyncio.QueueEmpty:
                    return
                await http_session(w, srv, stats, hedge=i % HEDGE_EVERY == 0, t_start=t0)

        await asyncio.gather(*(client() for _ in range(CLIENTS // 2)))
        await srv.close()

    asyncio.run(run())
    stats.cpu = time.process_time()
    results.put(stats)


def run_http_clients(works: list[Work], urls: list[str], key: str, procs: list[subprocess.Popen],
                     kill_after_calls: int, routing: str) -> tuple[Stats, float]:
    """32 clients in 2 processes (one process could not keep 32 clients busy on a shared machine);
    the parent kills server 0 with SIGKILL once ``kill_after_calls`` model calls are done."""
    ctx = mp.get_context("fork")
    calls, killed, results = ctx.Value("i", 0), ctx.Value("d", -1.0), ctx.Queue()
    t0 = time.monotonic()
    items = list(enumerate(works))
    children = [ctx.Process(target=client_proc, args=(items[c::2], urls, key, t0, calls, killed, results, routing))
                for c in range(2)]
    for c in children:
        c.start()
    while calls.value < kill_after_calls and any(c.is_alive() for c in children):
        time.sleep(0.02)
    if calls.value >= kill_after_calls:
        procs[0].send_signal(signal.SIGKILL)
        killed.value = time.monotonic() - t0
    parts = [results.get() for _ in children]
    wall = time.monotonic() - t0
    for c in children:
        c.join()
    stats = Stats()
    for st in parts:
        for name in ("requests", "s5xx", "c409", "resolved_409", "found_stored", "transport_errors", "calls_done",
                     "after_kill_ok", "cpu", "hedge_winner_killed"):
            setattr(stats, name, getattr(stats, name) + getattr(st, name))
        stats.other_errors += st.other_errors
        for op in ("append", "prepare"):
            stats.lat[op] += st.lat[op]
        stats.hashes.update(st.hashes)
        stats.acked |= st.acked
        for op, steps in st.server_timing.items():
            for name, values in steps.items():
                stats.server_timing.setdefault(op, {}).setdefault(name, []).extend(values)
        for op, states in st.cache.items():
            for name, n in states.items():
                stats.cache.setdefault(op, {}).setdefault(name, 0)
                stats.cache[op][name] += n
    stats.killed_at = killed.value if killed.value >= 0 else None
    return stats, wall


# -- 3. the final check ------------------------------------------------------------------------------


def final_check(url: str, works: list[Work]) -> dict[str, int]:
    from ctxwise import SqlStore

    store = SqlStore(url)
    out = {"sessions": 0, "expected": 0, "stored": 0, "lost": 0, "duplicated": 0, "out_of_order": 0}
    try:
        for w in works:
            state = store.load(f"{TENANT}:{w.user_id}", w.session_id, include_hidden=True)
            stored = [r.message_id for r in sorted(state.rows, key=lambda r: r.seq)
                      if not (r.original or r.current).kind]  # ctxwise's own rows (summaries) are not appends
            expected = w.ids
            out["sessions"] += 1
            out["expected"] += len(expected)
            out["stored"] += len(stored)
            out["lost"] += len(set(expected) - set(stored))
            out["duplicated"] += len(stored) - len(set(stored)) + len(set(stored) - set(expected))
            out["out_of_order"] += int(stored != expected and set(stored) == set(expected))
    finally:
        store.close()
    return out


# -- CPU accounting ------------------------------------------------------------------------------------


def children_cpu() -> float:
    """CPU seconds of this process's waited-for children (the workers, servers and clients)."""
    import resource

    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def postgres_cpu(url: str) -> float:
    """CPU seconds used so far by the PostgreSQL cluster at ``url``: the postmaster (with its
    exited backends) and its live children, from /proc; nan when it cannot be read."""
    from sqlalchemy import create_engine, text

    try:
        eng = create_engine(url)
        with eng.connect() as conn:
            data = conn.execute(text("SHOW data_directory")).scalar()
        eng.dispose()
        pm = int(Path(str(data), "postmaster.pid").read_text().split()[0])
        tck = os.sysconf("SC_CLK_TCK")

        def stat(pid: int) -> list[str]:
            return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()

        st = stat(pm)
        total = sum(int(x) for x in st[11:15])
        for d in Path("/proc").iterdir():
            if d.name.isdigit():
                try:
                    st = stat(int(d.name))
                except (OSError, IndexError):
                    continue
                if int(st[1]) == pm:
                    total += int(st[11]) + int(st[12])
        return total / tck
    except Exception:  # noqa: BLE001 - a report column, not a check
        return float("nan")


# -- the report ----------------------------------------------------------------------------------------


def pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    xs = sorted(values)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))] * 1000


def new_database(base: str, name: str) -> str:
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    admin = create_engine(base, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}"'))
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    return make_url(base).set(database=name).render_as_string(hide_password=False)


ROUTINGS = ("affinity", "round-robin")


def http_phase(pg: str, works: list[Work], inproc: dict[str, Any], routing: str) -> dict[str, Any]:
    """One HTTP run on a fresh database: 2 servers, 32 clients routed by ``routing``, one server
    killed at half the model calls, then the final check. Returns the report's rows and verdicts."""
    n_calls = sum(sum(w.prepare) for w in works)
    n_appends = sum(len(w.batches) for w in works)
    http_url = new_database(pg, f"bench_service_http_{routing.replace('-', '_')}")
    from ctxwise import SqlStore
    from ctxwise.server.keys import KeyStore

    SqlStore(http_url).close()
    ks = KeyStore(http_url)
    key, _rec = ks.create(TENANT, "bench")
    ks.close()
    procs, urls = start_servers(http_url, 2)
    c0, pg0 = children_cpu(), postgres_cpu(http_url)
    try:
        stats, wall = run_http_clients(works, urls, key, procs, kill_after_calls=n_calls // 2, routing=routing)
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
    killed = procs[0].returncode
    pg_cpu = postgres_cpu(http_url) - pg0
    server_cpu = children_cpu() - c0 - stats.cpu
    print(f"http ({routing}): {wall:.1f} s, killed server exit {killed}, 5xx {stats.s5xx}, 409 {stats.c409}, "
          f"cache {stats.cache}", flush=True)
    for op_, steps_ in stats.server_timing.items():
        print(f"timing {op_}: " + ", ".join(f"{n}={statistics.median(v):.1f}(n={len(v)})" for n, v in steps_.items()), flush=True)
    check = final_check(http_url, works)
    mismatched_keys = sorted(k for k, h in stats.hashes.items() if inproc["hashes"].get(k) != h)
    mismatched = len(mismatched_keys)
    if mismatched_keys:
        print("payloads differing:", mismatched_keys[:40], flush=True)
    missing_calls = len(set(inproc["hashes"]) ^ set(stats.hashes))
    acked_never = n_appends - len(stats.acked)

    kill_t = stats.killed_at if stats.killed_at is not None else float("inf")
    before = {k: [d for t, d in v if t <= kill_t] for k, v in stats.lat.items()}
    whole = {k: [d for _t, d in v] for k, v in stats.lat.items()}
    calls_before = sum(1 for t, _d in stats.lat["prepare"] if t <= kill_t)
    rows = []
    for name in ("append", "prepare"):
        ip50 = pct(inproc["lat"][name], 50)
        b50, b99 = pct(before[name], 50), pct(before[name], 99)
        w50, w99 = pct(whole[name], 50), pct(whole[name], 99)
        rows.append(f"| {name} | {routing} | {len(before[name]):,} | {b50:.1f} | {b99:.1f} | **{b50 / ip50:.2f}x** | "
                    f"{w50:.1f} | {w99:.1f} | {w50 / ip50:.2f}x |")
    tp_in = n_calls / inproc["wall"]
    tp_before = calls_before / kill_t if stats.killed_at else float("nan")
    tp_whole = n_calls / wall
    p50_ok = all(pct(before[n], 50) <= 2 * pct(inproc["lat"][n], 50) for n in ("append", "prepare"))
    ok = (stats.s5xx == 0 and check["lost"] == 0 and check["duplicated"] == 0 and check["out_of_order"] == 0
          and acked_never == 0 and mismatched == 0 and missing_calls == 0 and not stats.other_errors
          and killed == -signal.SIGKILL and stats.after_kill_ok > 0)
    breakdown = []
    for op in ("append", "prepare"):
        steps = stats.server_timing.get(op, {})
        if steps:
            lib = [x * 1000 for x in inproc["lat"][op]]
            cells = " | ".join(f"{statistics.median(steps[n]):.1f}" if n in steps else ""
                               for n in ("auth", "open", op, "total"))
            states = stats.cache.get(op, {})
            total = sum(states.values()) or 1
            cache = ", ".join(f"{k} {100 * states.get(k, 0) / total:.0f}%" for k in ("hit", "miss", "stale"))
            breakdown.append(f"| {op} | {routing} | {cache} | {cells} | {statistics.median(steps['client']):.1f} | "
                             f"{statistics.median(lib):.1f} |")
    correctness = [
        ("HTTP requests answered", f"{stats.requests:,}"),
        ("5xx responses", f"{stats.s5xx}"),
        ("409 responses (hedged losers, retries after the kill)", f"{stats.c409}"),
        ("409s retried to success (of which the append was found already stored)",
         f"{stats.resolved_409} ({stats.found_stored})"),
        ("requests that died with the killed server or hit it afterwards (retried on the other)",
         f"{stats.transport_errors}"),
        ("server killed at", f"{kill_t:.1f} s of {wall:.1f} s (exit {killed})"),
        ("hedged appends whose winner was the killed server (stored, never answered; both answers 409, found stored)",
         f"{stats.hedge_winner_killed}"),
        ("requests the other server answered after the kill", f"{stats.after_kill_ok:,}"),
        ("appends acknowledged (200, or 422 duplicate-message-id after a 409)", f"{len(stats.acked):,} of {n_appends:,}"),
        ("messages expected / stored", f"{check['expected']:,} / {check['stored']:,}"),
        ("lost / duplicated / out of order (sessions)", f"{check['lost']} / {check['duplicated']} / {check['out_of_order']}"),
        ("HTTP payloads differing from the in-process payload of the same call, byte for byte (calls missing on one side)",
         f"{mismatched} ({missing_calls})"),
        ("other errors", f"{len(stats.other_errors)}"),
    ]
    cpu = (f"| HTTP, {routing} | {1000 * server_cpu / n_calls:.1f} (2 servers) | {1000 * stats.cpu / n_calls:.1f} | "
           f"{1000 * pg_cpu / n_calls:.1f} | {1000 * (server_cpu + stats.cpu + pg_cpu) / n_calls:.1f} |")
    return {"routing": routing, "rows": rows, "cpu": cpu, "breakdown": breakdown, "correctness": correctness, "ok": ok,
            "p50_ok": p50_ok, "errors": stats.other_errors,
            "throughput": f"{routing}: {tp_before:.1f} with both servers ({tp_before / tp_in:.2f}x), "
                          f"{tp_whole:.1f} over the whole run (one server after the kill)"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sessions", type=int, default=200)
    ap.add_argument("--calls", type=int, default=30)
    ap.add_argument("--routing", choices=[*ROUTINGS, "both"], default="both",
                    help="how the clients pick a server: by session (affinity), every request to the next one "
                         "(round-robin), or one run of each (both, the default)")
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--pg", default=os.environ.get("CTXWISE_TEST_PG_URL"),
                    help="PostgreSQL server URL (default $CTXWISE_TEST_PG_URL, set by scripts/with-postgres.sh)")
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "service.md")
    args = ap.parse_args()
    if not args.pg:
        sys.exit("error: no PostgreSQL (run through `bash scripts/with-postgres.sh .venv/bin/python bench/service.py`)")
    started = time.perf_counter()
    loads: list[float] = []
    works = workload(args.data, args.sessions, args.calls)
    n_calls = sum(sum(w.prepare) for w in works)
    n_appends = sum(len(w.batches) for w in works)
    n_msgs = sum(len(w.ids) for w in works)
    print(f"workload: {len(works)} sessions, {n_calls} model calls, {n_appends} appends, {n_msgs} messages", flush=True)

    inproc_url = new_database(args.pg, "bench_service_inproc")
    from ctxwise import SqlStore

    SqlStore(inproc_url).close()  # create the tables before the workers race to
    inproc = run_inproc(inproc_url, works)
    loads.append(os.getloadavg()[0])
    print(f"in-process: {inproc['wall']:.1f} s, errors {len(inproc['errors'])}", flush=True)
    phases = []
    for routing in (ROUTINGS if args.routing == "both" else (args.routing,)):
        phases.append(http_phase(args.pg, works, inproc, routing))
        loads.append(os.getloadavg()[0])

    ok = all(p["ok"] for p in phases) and not inproc["errors"]
    tp_in = n_calls / inproc["wall"]
    in_rows = [f"| {name} | {len(inproc['lat'][name]):,} | {pct(inproc['lat'][name], 50):.1f} | "
               f"{pct(inproc['lat'][name], 99):.1f} |" for name in ("append", "prepare")]
    opts = "".join([f" --sessions {args.sessions}" if args.sessions != 200 else "",
                    f" --calls {args.calls}" if args.calls != 30 else "",
                    f" --routing {args.routing}" if args.routing != "both" else ""])
    lines = [
        "# ctxwise as a service: 2 server processes on one PostgreSQL, 32 concurrent clients",
        "",
        f"- command: `bash scripts/with-postgres.sh .venv/bin/python bench/service.py{opts}`",
        f"- date: {now()}; wall time {(time.perf_counter() - started) / 60:.1f} min",
        *machine(("fastapi", "uvicorn", "aiohttp", "psycopg", "sqlalchemy")),
        "- load average (1 min) after the in-process run and after each HTTP run: "
        + ", ".join(f"{x:.1f}" for x in loads),
        f"- workload: {len(works)} sessions x {args.calls} model calls of recorded turns ({', '.join(FILES)}), "
        f"{n_calls:,} model calls, {n_appends:,} appends, {n_msgs:,} messages; policy default preset, "
        "4,000 o200k tokens, provider openai (compaction fires along the way)",
        "- in-process: the library in 2 processes x 16 threads on its own PostgreSQL database, one open Session per "
        "session; HTTP: 2 `ctxwise serve` processes (one uvicorn worker each) on one PostgreSQL database, 32 asyncio "
        "aiohttp clients in 2 processes. Routing `affinity`: each session's requests go to one server (a hash of the "
        "session id, as a load balancer with session affinity); `round-robin`: each request to the next live server "
        f"(no stickiness). Every {HEDGE_EVERY}th session sends each append to both servers at once (hedged: one "
        "wins, the other is 409); server 1 killed with SIGKILL when half the model calls were done (its sessions "
        "move to the other server). Each routing runs on a fresh database after the in-process run.",
        "",
        "## Latency (ms per request, client side) and throughput",
        "",
        "In-process:",
        "",
        "| op | n | p50 | p99 |",
        "| --- | ---: | ---: | ---: |",
        *in_rows,
        "",
        "HTTP, against the in-process p50 of the same run:",
        "",
        "| op | routing | n (both up) | p50 | p99 | HTTP p50 / in-process p50 | whole run p50 | p99 | ratio |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        *[r for p in phases for r in p["rows"]],
        "",
        f"- throughput (model calls / s, each an append and a prepare): in-process {tp_in:.1f}; HTTP "
        + "; ".join(p["throughput"] for p in phases),
        *[f"- target HTTP p50 <= 2x in-process p50 (both servers up), {p['routing']}: "
          f"**{'met' if p['p50_ok'] else 'not met'}**" for p in phases],
        "",
        "Where an HTTP request's time goes (medians over the whole HTTP run, ms; server side from each response's "
        "`Server-Timing` header): whether the server had the session open and current (hit), had to read it (miss: "
        "not open in this process; stale: another process wrote it since), the key check (for a prepare: the key "
        "check and the session's freshness read, made in one statement), getting the session (reading "
        "it from the store on a miss or stale), the library call itself, the whole request in the "
        "server (from the app's first middleware to its response: waiting for a worker thread included), and the "
        "whole request as the client saw it, beside the same library call in-process.",
        "",
        "| op | routing | session cache | auth | open | library call | server total | client total | in-process call |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
        *[r for p in phases for r in p["breakdown"]],
        "",
        "CPU per model call (ms of CPU time, all processes of the side; the servers' figure is what the 2 server "
        "processes used, the killed one until its death):",
        "",
        "| run | library / servers | clients | PostgreSQL | total |",
        "| --- | ---: | ---: | ---: | ---: |",
        f"| in-process | {1000 * inproc['cpu']['workers'] / n_calls:.1f} (2 worker processes) | | "
        f"{1000 * inproc['cpu']['postgres'] / n_calls:.1f} | "
        f"{1000 * (inproc['cpu']['workers'] + inproc['cpu']['postgres']) / n_calls:.1f} |",
        *[p["cpu"] for p in phases],
        "",
        "## Correctness",
        "",
        "| measure | " + " | ".join(p["routing"] for p in phases) + " |",
        "| --- | " + " | ".join("---:" for _ in phases) + " |",
        *[f"| {label} | " + " | ".join(p["correctness"][i][1] for p in phases) + " |"
          for i, (label, _v) in enumerate(phases[0]["correctness"])],
        f"| in-process errors | {len(inproc['errors'])} |" + " |" * (len(phases) - 1),
        "",
        f"**Verdict: {'all correctness checks pass' if ok else 'FAILED: see the table'}.**",
    ]
    errs = [e for p in phases for e in p["errors"]] + inproc["errors"]
    if errs:
        lines += ["", "Errors (first 10):", "", *[f"- `{e[:300]}`" for e in errs[:10]]]
    args.out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))
    print(f"written to {args.out}")


if __name__ == "__main__":
    main()
