"""What the drop-in endpoint adds to a model call, on loopback: one run.

    .venv/bin/python bench/proxy.py                          # -> bench/results/proxy.md
    .venv/bin/python bench/proxy.py --limit 3 --out /tmp/p.md

The workload: the first ``--limit`` tau-bench conversations (``../shared/data/trajectories``,
OpenAI chat); every assistant message is one model call, its history sent the way a client
sends it (the whole conversation so far, ``to_openai``) and answered by the stub upstream of
tests/proxy/stub.py (127.0.0.1, validates each request with the openai SDK's request types)
with that recorded message. Each call is made twice, back to back, from one httpx client:

* **direct**: to the stub itself;
* **proxy**: to ``ctxwise serve``'s app (uvicorn, one process, a SQLite file) at
  ``/v1/chat/completions``, whose upstream is the stub: the call is mapped to its session, the
  new messages appended (with the previous reply, held until then), ``prepare()`` run, the
  managed payload sent. Every call must continue its session (a branch fails the run).

Measured per call: client latency of each; the **added** latency (proxy minus direct, paired
per call); the proxy's own ``Server-Timing`` (``prepare``: the library's prepare; ``ctxwise``:
key check, mapping, append, prepare and heads together, before the upstream is called); the
CPU time of the whole process per call, paired the same way (the proxy's own work, whatever
else runs on the machine). Then the same
calls streamed (``stream: true``, a new session): time to the first byte at the client,
direct and through the proxy. The target (issue 27): the proxy adds no more than the prepare
time plus 5 ms at p50.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "src"))

from proxy.stub import Reply, Stub, serve  # noqa: E402  (tests/proxy/stub.py)

from ctxwise import Policy  # noqa: E402
from ctxwise.formats import load, to_openai  # noqa: E402
from ctxwise.proxy.routes import Upstreams  # noqa: E402
from ctxwise.server import create_app  # noqa: E402
from ctxwise.server.keys import KeyStore  # noqa: E402

TAU = REPO.parent / "shared" / "data" / "trajectories" / "tau-bench" / "gpt-4o-airline_subset.json"
POLICY = Policy.preset("default", budget=8000, unit="tokens", tokenizer="o200k_base")


class _Holder:
    url = ""


def pct(xs: list[float], q: float) -> float:
    if not xs:
        return float("nan")
    s = sorted(xs)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))]


def timing(header: str, name: str) -> float:
    for part in header.split(","):
        bits = part.strip().split(";")
        if bits[0] == name:
            for b in bits[1:]:
                if b.startswith("dur="):
                    return float(b[4:])
    return float("nan")


def calls(limit: int) -> list[tuple[str, list[dict[str, Any]], dict[str, Any]]]:
    """(conversation id, history, recorded reply) per model call."""
    out = []
    for k, conv in enumerate(load(TAU)[:limit]):
        msgs = conv.messages
        for i, m in enumerate(msgs):
            if m.role == "assistant" and i > 0:
                hist = to_openai(msgs[:i], extras=False)
                full = to_openai(msgs[:i + 1], extras=False)
                out.append((f"c{k}", hist, full[-1]))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--limit", type=int, default=30, help="tau-bench conversations (default 30)")
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "proxy.md")
    args = ap.parse_args()

    stub = Stub()
    current: list[Reply] = [Reply(text="")]
    stub.responder = lambda kind, body: current[0]
    servers = [stub.start()]
    tmp = Path(tempfile.mkdtemp())
    store = f"sqlite:///{tmp / 'proxy.db'}"
    app = create_app(store, POLICY)
    app.proxy.upstreams = Upstreams(openai=stub.url + "/v1", anthropic=stub.url)  # type: ignore[attr-defined]
    holder = _Holder()
    servers.append(serve(app, holder))
    ks = KeyStore(store)
    key = ks.create("bench", "proxy")[0]
    ks.close()

    work = calls(args.limit)
    direct: list[float] = []
    proxied: list[float] = []
    added: list[float] = []
    prepare: list[float] = []
    own: list[float] = []
    ttfb_direct: list[float] = []
    ttfb_proxy: list[float] = []
    cpu_added: list[float] = []
    with httpx.Client(timeout=60) as client:
        for _ in range(3):  # warm both paths (connections, tokenizer)
            current[0] = Reply(text="warm")
            client.post(stub.url + "/v1/chat/completions", json={"model": "m", "messages": [
                {"role": "user", "content": "warm"}]})
            client.post(holder.url + "/v1/chat/completions", json={"model": "m", "messages": [
                {"role": "user", "content": "warm"}]}, headers={"X-Ctxwise-Key": key, "X-Ctxwise-Session": "warm"})
        for conv, hist, reply in work:
            current[0] = Reply(raw=reply)
            body = {"model": "gpt-4o", "messages": hist}
            c0, t0 = time.process_time(), time.perf_counter()
            r = client.post(stub.url + "/v1/chat/completions", json=body)
            d, dc = (time.perf_counter() - t0) * 1000, (time.process_time() - c0) * 1000
            assert r.status_code == 200, r.text
            c0, t0 = time.process_time(), time.perf_counter()
            r = client.post(holder.url + "/v1/chat/completions", json=body,
                            headers={"X-Ctxwise-Key": key, "X-Ctxwise-Session": conv, "Authorization": "Bearer sk-x"})
            p, pc = (time.perf_counter() - t0) * 1000, (time.process_time() - c0) * 1000
            assert r.status_code == 200, r.text
            assert r.headers["x-ctxwise-session"] == conv, "a call did not continue its session"
            cpu_added.append(pc - dc)
            direct.append(d)
            proxied.append(p)
            added.append(p - d)
            prepare.append(timing(r.headers.get("server-timing", ""), "prepare"))
            own.append(timing(r.headers.get("server-timing", ""), "ctxwise"))
        for conv, hist, reply in work:
            current[0] = Reply(raw=reply)
            body = {"model": "gpt-4o", "messages": hist, "stream": True}
            for url, into, headers in ((stub.url, ttfb_direct, {}),
                                       (holder.url, ttfb_proxy, {"X-Ctxwise-Key": key,
                                                                 "X-Ctxwise-Session": conv + "-stream"})):
                t0 = time.perf_counter()
                with client.stream("POST", url + "/v1/chat/completions", json=body, headers=headers) as s:
                    chunks = s.iter_raw()
                    first = next(chunks)
                    into.append((time.perf_counter() - t0) * 1000)
                    assert first and s.status_code == 200
                    assert url == stub.url or s.headers["x-ctxwise-session"] == conv + "-stream", \
                        "a streamed call did not continue its session"
                    for _chunk in chunks:
                        pass
    assert stub.invalid == [], stub.invalid[:1]
    for server, thread in servers:
        server.should_exit = True
        thread.join(timeout=30)

    rows = [("direct to the stub", direct), ("through the proxy", proxied), ("added by the proxy (paired)", added),
            ("  of which prepare() (Server-Timing)", prepare),
            ("  of which key check + map + append + prepare + heads (Server-Timing)", own),
            ("added CPU time (paired, the whole process)", cpu_added),
            ("streamed: first byte, direct", ttfb_direct), ("streamed: first byte, through the proxy", ttfb_proxy)]
    target = pct(prepare, 0.5) + 5
    met = pct(added, 0.5) <= target
    lines = [
        "# The drop-in endpoint's added latency (loopback, one run)",
        "",
        f"`.venv/bin/python bench/proxy.py --limit {args.limit}`: {len(work)} model calls of {args.limit} tau-bench "
        "conversations (OpenAI chat), each made directly to the stub upstream and through `ctxwise serve`'s "
        "`/v1/chat/completions` (uvicorn, one process, SQLite; budget 8000 o200k tokens), back to back from one "
        "httpx client; then the same calls streamed. See the script's docstring.",
        "",
        f"Machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the end of the run (shared with "
        "other work); one run, so the tails are noisy. The stub, the proxy and the client share one process, so "
        "the CPU time the process spent per call, paired like the latency (proxy call minus direct call), is the "
        "proxy's own work however loaded the machine is: on an idle machine the added latency comes close to it.",
        "",
        "| ms per call | p50 | p99 | mean |",
        "| --- | ---: | ---: | ---: |",
        *(f"| {name} | {pct(xs, 0.5):.2f} | {pct(xs, 0.99):.2f} | {statistics.fmean(xs):.2f} |" for name, xs in rows),
        "",
        f"Target (issue 27): added p50 <= prepare p50 + 5 ms = {target:.2f} ms: "
        f"**{'met' if met else 'not met'}** (added p50 {pct(added, 0.5):.2f} ms).",
        "",
        "The added time is the key check and the mapping (one indexed read each: of the keys table, of the heads "
        "table; on SQLite straight on a pooled connection, src/ctxwise/store/sql.py QuickRead), one append (the "
        "client's new messages, with the previous reply when it was still held, and the call's heads rows, in "
        "one transaction), prepare() (the session kept open in the server's session cache from the call that "
        "created it; no version read: the append just committed it), and one more HTTP hop on loopback. The reply "
        "is stored after the client has it (src/ctxwise/proxy/replies.py): in the same write as its session's "
        "next call, or by a writer thread half a second later when no call comes; it is stored before the "
        "session's next call is served. The library's append is one transaction (the session row locked, "
        "the ids read under the lock, and the open turn unless this process's own last append left it at that "
        "version; the rows and the header written; SQLite, WAL, "
        "synchronous=NORMAL, as the store sets it) and, for a user message the memory rules must check "
        "against the user's memory entries, one read of them (the claim is taken only when the input "
        "changes an entry; a request or a question reads none).",
        "",
    ]
    args.out.write_text("\n".join(lines), encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
