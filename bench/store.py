"""Benchmark: bytes written and time per appended turn, ctxwise store vs a whole-payload upsert.

    python bench/store.py            # SQLite, and PostgreSQL via scripts/with-postgres.sh
    python bench/store.py --quick    # 10 and 100 turns only

Sessions of 10, 100 and 1,000 turns are built from the real tau2-bench retail conversations
(../shared/data/trajectories/tau2-bench/retail_gpt-4.1_1trial.json; turns are reused with
fresh ids past the 290 recorded ones; read with ``ctxwise.formats.load``, keeping the
metadata an engine would store). Each turn is appended the way an engine writes it: the
user input, then each model call's output (assistant message + its tool results) in its own
transaction. The baseline, in the same run and database, does what Ragent does with
``t_agent_state``: after every turn it upserts the whole context payload as one JSON row per
session (JSONB on PostgreSQL).

Bytes written = the summed size of the bound parameters of every INSERT/UPDATE (an SQLAlchemy
``before_cursor_execute`` listener), plus, on SQLite, the growth of the database file and its
WAL. Writes results to bench/results/store.md.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import JSON, Column, Integer, MetaData, String, Table, create_engine, event
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "bench"), str(REPO / "tests")]

from _machine import machine, now  # noqa: E402
from test_store_support import batches  # noqa: E402  (the write batches of the store tests)

from ctxwise.formats import load  # noqa: E402
from ctxwise.messages import Message  # noqa: E402
from ctxwise.store import Store  # noqa: E402
from ctxwise.units import turns as split_turns  # noqa: E402

SHARED = Path(os.environ.get("CTXWISE_SHARED", REPO.parent / "shared"))
DATA = SHARED / "data" / "trajectories" / "tau2-bench" / "retail_gpt-4.1_1trial.json"
SIZES = (10, 100, 1000)


# -- data --------------------------------------------------------------------------------------

KEPT = ("turn_idx", "timestamp", "cost", "usage")
"""The metadata an engine would store with a message; the recorder's ``raw_data`` dump is left out."""


def recorded_turns() -> list[list[Message]]:
    """Every turn (a user input and what follows up to the next one) of the retail file, read
    by ``ctxwise.formats.load`` (the system prompt and the agent's greeting before the first
    user input are not turns)."""
    out: list[list[Message]] = []
    for conv in load(DATA):
        msgs = conv.messages
        out += [[_kept(m) for m in msgs[t.start:t.end]] for t in split_turns(msgs) if not t.preamble]
    return out


def _kept(m: Message) -> Message:
    return m.model_copy(update={"metadata": {k: m.metadata[k] for k in KEPT if m.metadata.get(k) is not None}})


def make_turns(n: int, pool: list[list[Message]]) -> list[list[list[Message]]]:
    """``n`` turns, each a list of write batches (user input; each model call with its results)."""
    return [batches([m.model_copy(update={"id": f"t{k}m{j}"}) for j, m in enumerate(pool[k % len(pool)])])
            for k in range(n)]


# -- measuring ---------------------------------------------------------------------------------

def _size(v: Any) -> int:
    if v is None:
        return 0
    if isinstance(v, (bytes, bytearray, memoryview)):
        return len(v)
    if isinstance(v, str):
        return len(v.encode("utf-8"))
    if isinstance(v, (bool, int, float)):
        return 8
    if isinstance(v, datetime):
        return 8
    obj = getattr(v, "obj", None)  # psycopg Json / Jsonb wrappers
    if obj is not None:
        return len(json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))
    if isinstance(v, (dict, list, tuple)) and not isinstance(v, tuple):
        return len(json.dumps(v, ensure_ascii=False).encode("utf-8"))
    if isinstance(v, tuple):
        return sum(_size(x) for x in v)
    return len(str(v).encode("utf-8"))


class ByteMeter:
    """Sums the bound-parameter bytes of INSERT/UPDATE statements on an engine."""

    def __init__(self, engine: Any) -> None:
        self.bytes = 0
        event.listen(engine, "before_cursor_execute", self._on)

    def _on(self, conn, cursor, statement, params, context, executemany) -> None:  # noqa: ANN001
        verb = statement.lstrip()[:6].upper()
        if verb not in ("INSERT", "UPDATE"):
            return
        rows = params if executemany else [params]
        for row in rows:
            values = row.values() if isinstance(row, dict) else row
            self.bytes += sum(_size(v) for v in values)


def sqlite_file_bytes(url: str) -> int:
    path = url.split("///", 1)[1]
    return sum(os.path.getsize(p) for p in (path, path + "-wal") if os.path.exists(p))


def bench_ctxwise(url: str, turns: list[list[list[Message]]], session: str) -> dict[str, Any]:
    store = Store(url)
    meter = ByteMeter(store.engine)
    v = store.open_session("bench", session, provider="openai", policy={"budget": 100000}).version
    per_turn_s, per_turn_b = [], []
    for batches in turns:
        b0, t0 = meter.bytes, time.perf_counter()
        for batch in batches:
            v = store.append("bench", session, batch, expected_version=v)
        per_turn_s.append(time.perf_counter() - t0)
        per_turn_b.append(meter.bytes - b0)
    store.close()
    return {"s": per_turn_s, "b": per_turn_b}


def bench_baseline(url: str, turns: list[list[list[Message]]], session: str) -> dict[str, Any]:
    """Ragent's t_agent_state: one row per session, the whole context payload upserted per turn."""
    engine = create_engine(url, json_serializer=lambda o: json.dumps(o, ensure_ascii=False, separators=(",", ":")))
    md = MetaData()
    table = Table("bench_agent_state", md, Column("id", Integer, primary_key=True),
                  Column("session_id", String(255), unique=True),
                  Column("payload", JSON().with_variant(JSONB(), "postgresql")), Column("version", Integer))
    md.create_all(engine)
    meter = ByteMeter(engine)
    ins = pg_insert if engine.dialect.name == "postgresql" else sqlite_insert
    context: list[dict[str, Any]] = []
    per_turn_s, per_turn_b = [], []
    version = 0
    for batches in turns:
        b0, t0 = meter.bytes, time.perf_counter()
        for batch in batches:
            context.extend(m.model_dump(mode="json") for m in batch)
        version += 1
        stmt = ins(table).values(session_id=session, payload={"context": context}, version=version)
        stmt = stmt.on_conflict_do_update(index_elements=["session_id"],
                                          set_={"payload": stmt.excluded.payload, "version": stmt.excluded.version})
        with engine.begin() as conn:
            conn.execute(stmt)
        per_turn_s.append(time.perf_counter() - t0)
        per_turn_b.append(meter.bytes - b0)
    engine.dispose()
    return {"s": per_turn_s, "b": per_turn_b}


# -- report ------------------------------------------------------------------------------------

def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs) if xs else 0.0


def run_backend(name: str, make_url, sizes: tuple[int, ...], pool) -> list[str]:  # noqa: ANN001
    lines = [f"### {name}", "",
             "| turns | ctxwise B/turn | baseline B/turn | bytes ratio | ctxwise ms/turn | baseline ms/turn "
             "| time ratio | written / new bytes, ctxwise vs baseline | ctxwise ms/turn, first 10 → last 10 "
             "| baseline ms/turn, first 10 → last 10 |",
             "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    file_lines = []
    warm = make_turns(3, pool)
    bench_ctxwise(make_url("warm"), warm, "warm")
    bench_baseline(make_url("warmb"), warm, "warm")
    for n in sizes:
        turns = make_turns(n, pool)
        new = sum(len(m.model_dump_json().encode("utf-8")) for t in turns for b in t for m in b)
        url_c, url_b = make_url(f"c{n}"), make_url(f"b{n}")
        f0c = sqlite_file_bytes(url_c) if name == "SQLite" else 0
        c = bench_ctxwise(url_c, turns, f"s{n}")
        b = bench_baseline(url_b, turns, f"s{n}")
        cb, bb = _mean(c["b"]), _mean(b["b"])
        cs, bs = _mean(c["s"]) * 1000, _mean(b["s"]) * 1000
        lines.append(
            f"| {n} | {cb:,.0f} | {bb:,.0f} | {bb / cb:,.1f}x | {cs:.2f} | {bs:.2f} | {bs / cs:,.1f}x "
            f"| {sum(c['b']) / new:.2f} vs {sum(b['b']) / new:.1f} "
            f"| {_mean(c['s'][:10]) * 1000:.2f} → {_mean(c['s'][-10:]) * 1000:.2f} "
            f"| {_mean(b['s'][:10]) * 1000:.2f} → {_mean(b['s'][-10:]) * 1000:.2f} |")
        if name == "SQLite":
            fc, fb = sqlite_file_bytes(url_c) - f0c, sqlite_file_bytes(url_b)
            file_lines.append(f"| {n} | {fc / n:,.0f} | {fb / n:,.0f} |")
        print(lines[-1], flush=True)
    if file_lines:
        lines += ["", "SQLite database file + WAL size after the run, per turn (the ctxwise file also holds the "
                  "schema, indexes, transcript and tool-result index; WAL reuse makes the baseline's grow less "
                  "than its writes):", "", "| turns | ctxwise bytes/turn | baseline bytes/turn |",
                  "| ---: | ---: | ---: |"] + file_lines
    return lines + [""]


def main(argv: list[str]) -> int:
    quick = "--quick" in argv
    pg = os.environ.get("CTXWISE_BENCH_PG_URL") or os.environ.get("CTXWISE_TEST_PG_URL")
    if not pg and "--no-postgres" not in argv and not os.environ.get("CTXWISE_BENCH_REEXEC"):
        script = REPO / "scripts" / "with-postgres.sh"
        env = dict(os.environ, CTXWISE_BENCH_REEXEC="1")
        return subprocess.call(["bash", str(script), sys.executable, __file__, *argv], env=env)
    sizes = SIZES[:2] if quick else SIZES
    pool = recorded_turns()
    started = time.time()
    out = ["# Store benchmark: bytes written and time per appended turn", "",
           f"Command: `python bench/store.py {' '.join(argv)}`".rstrip() + " (PostgreSQL from scripts/with-postgres.sh: "
           "a throwaway local cluster, fsync off)",
           f"Date: {now()}", "", "Machine:", "MACHINE", "",
           f"Turns from {DATA.name}: {len(pool)} recorded turns "
           f"(a turn averages {_mean([len(t) for t in pool]):.1f} messages), reused with fresh ids past that.", "",
           "ctxwise = `Store.append` per model call (k messages → k context rows + transcript rows + one version "
           "update). Baseline = Ragent's `t_agent_state`: the whole context upserted as one JSON row per turn. "
           "B = bound-parameter bytes of INSERT/UPDATE statements; ms = wall time of the turn's writes. "
           "written / new bytes = bytes written over the JSON size of the messages the turns added (write "
           "amplification: flat for ctxwise, growing with the session for the baseline). first 10 → last 10 = "
           "mean time of a turn's writes at the start and at the end of the session. ctxwise commits once per "
           "model call (≈2.5 transactions per turn here), the baseline once per turn.", ""]
    tmp = Path(tempfile.mkdtemp(prefix="ctxwise-bench-"))
    try:
        out += run_backend("SQLite", lambda tag: f"sqlite:///{tmp / tag}.db", sizes, pool)
        if pg:
            from sqlalchemy.engine import make_url
            from sqlalchemy.schema import CreateSchema

            admin = create_engine(pg)

            def pg_url(tag: str) -> str:
                schema = f"bench_{tag}_{os.getpid()}"
                with admin.begin() as conn:
                    conn.execute(CreateSchema(schema, if_not_exists=True))
                return make_url(pg).update_query_dict({"options": f"-csearch_path={schema}"}).render_as_string(
                    hide_password=False)

            out += run_backend("PostgreSQL", pg_url, sizes, pool)
        else:
            out += ["PostgreSQL: not run (no server).", ""]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    out += [f"Total run time: {time.time() - started:.0f} s.", ""]
    at = out.index("MACHINE")  # described at the end, for the load average during the run
    out[at:at + 1] = machine(("sqlalchemy", "psycopg", "pydantic"))
    text = "\n".join(out)
    print(text)
    if not quick:
        (REPO / "bench" / "results").mkdir(parents=True, exist_ok=True)
        (REPO / "bench" / "results" / "store.md").write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
