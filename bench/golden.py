"""Byte-for-byte behaviour recorder: every payload and event list ``prepare()`` returns.

    python bench/golden.py --record            # write bench/results/golden.json (the baseline)
    python bench/golden.py --check --quick     # recompute a subset and compare (< 60 s)
    python bench/golden.py --check --jobs 2    # recompute everything and compare
    python bench/golden.py --dump KEY --call 3 # print what call 3 of run KEY returned (JSON)

**Runs.** Every recorded conversation under ``$CTXWISE_SHARED/data`` (default ``../shared``):
the tau-bench and tau2-bench files under ``trajectories/`` at 3,000 / 6,000 / 12,000 tokens, the
coding-agent sessions under ``long/`` at 32,000 / 64,000 / 128,000 tokens, each under
``Policy.preset("default", budget=B, unit="tokens", provider=P)`` in a fresh store of its own
(``memory://`` by default, ``--store sqlite`` for a new SQLite file per run) with the real
tokenizers and the offline digest summarizer. A run key reads
``<path under data>#<index in file>:<provider>:<budget>``.

**Providers a recording allows.** Every profile in :data:`ctxwise.providers.PROFILES` is tried on
every recording. A provider allows a recording when its messages append without error; a
provider that refuses one (e.g. ``deepseek`` on a session whose tool-using turns carry no
reasoning) is still recorded, with the refusal as its outcome: it stops at the first refused
append, so it costs little, and a change in what a provider accepts shows as a mismatch too.
``--check`` recomputes the keys of the digest file (the provider list is the one recorded);
runs the current code would add (a new profile, new data) are listed, never failures.

**Driving.** The rule of ``ctxwise replay`` (:func:`ctxwise.replay.runner.replay_conversation`):
before each recorded assistant message after the first user input, what arrived since the last
call is appended and ``prepare()`` runs; then the recorded assistant message is appended.
Assistant messages before the first user input are appended with the next batch. After the last
call the remaining messages are appended.

**What is hashed**, per call, in three parts:

* ``payload``: ``Prepared.payload`` as JSON with the keys in the order the renderer wrote them
  (the order a JSON encoder sends on the wire), compact separators, UTF-8;
* ``events``: ``Prepared.events`` as ``model_dump(mode="json")`` with keys sorted and the
  wall-clock fields ``at`` and ``duration_ms`` removed (the only nondeterministic fields;
  ``usage`` is None with the digest summarizer);
* ``numbers``: ``size``, ``size_before``, ``chars``, ``unit`` and the ids of ``Prepared.messages``.

A run's ``sha256`` covers every part of every call in order, then its ``outcome``: ``"ok"`` or
``"<ErrorType>: <message>"`` when a call raised (``ContextBudgetExceeded``, ``PayloadInvalid``, or
any other exception, all of which are behaviour). ``steps`` holds 12 hex digits per call (4 per
part, in the order payload, events, numbers): enough to name the first differing call and part.
On a mismatch ``--check`` prints that call's index and, when the baseline's source can be read
from git (``src_commit`` in the digest file, ``--baseline REF`` to override), a unified diff of
the differing part, computed by running this script on the baseline's ``src/`` in a subprocess.

**Quick subset** (``--quick``, the CI check): per source (each file under ``trajectories/``,
each folder under ``long/``) the conversation of median o200k size (the lower median; ties in
file order), on every provider and the three budgets of its set.

The SDK half of the wire check is left as the process has it (this script imports neither SDK).
"""

from __future__ import annotations

import argparse
import difflib
import functools
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("CTXWISE_SHARED", REPO.parent / "shared"))
DATA = SHARED / "data"
DIGEST = REPO / "bench" / "results" / "golden.json"

SETS: dict[str, tuple[int, ...]] = {"trajectories": (3000, 6000, 12000), "long": (32000, 64000, 128000)}
"""Data folder under ``data/`` → the three token budgets its recordings run at."""
VOLATILE_EVENT_FIELDS = ("at", "duration_ms")
"""Event fields that hold wall-clock values, removed before hashing."""
STEP_HEX = 4
"""Hex digits kept per part and call in ``steps``."""
PARTS = ("payload", "events", "numbers")
FORMAT = 1
"""Version of the digest file's layout."""


# -- recordings and run keys ---------------------------------------------------------------


@dataclass(frozen=True)
class RunKey:
    """One run: the recording file (path under ``data/``), the conversation's index in it, the
    provider profile and the token budget."""

    rel: str
    index: int
    provider: str
    budget: int

    def __str__(self) -> str:
        return f"{self.rel}#{self.index:03d}:{self.provider}:{self.budget}"

    @classmethod
    def parse(cls, text: str) -> "RunKey":
        """The key printed by ``str()``. Raises ValueError for another shape."""
        head, provider, budget = text.rsplit(":", 2)
        rel, index = head.rsplit("#", 1)
        return cls(rel, int(index), provider, int(budget))


def recording_files(data: Path) -> list[str]:
    """Every recording file under ``data`` (paths relative to it, sorted), the sets in order."""
    out: list[str] = []
    for folder in SETS:
        root = data / folder
        out.extend(str(p.relative_to(data)) for p in sorted(root.rglob("*.json")) if p.is_file())
    return out


@functools.lru_cache(maxsize=8)
def conversations(data: str, rel: str) -> list[Any]:
    """The conversations of one file (``ctxwise.formats.load``), cached per process."""
    from ctxwise.formats import load

    return list(load(Path(data) / rel))


def budgets_of(rel: str) -> tuple[int, ...]:
    """The three budgets of the set ``rel`` belongs to."""
    return SETS[rel.split("/", 1)[0]]


def source_of(rel: str) -> str:
    """The quick subset's source: the file under ``trajectories/``, the folder under ``long/``."""
    return rel.rsplit("/", 1)[0] if rel.startswith("long/") else rel


def providers() -> tuple[str, ...]:
    """Every provider profile ctxwise knows, in its own order."""
    from ctxwise.providers import PROFILES

    return tuple(PROFILES)


def all_keys(data: Path, provider_names: Sequence[str]) -> list[RunKey]:
    """Every run: each conversation of each file × ``provider_names`` × its set's budgets."""
    keys: list[RunKey] = []
    for rel in recording_files(data):
        for i in range(len(conversations(str(data), rel))):
            keys.extend(RunKey(rel, i, p, b) for p in provider_names for b in budgets_of(rel))
    return keys


def quick_recordings(data: Path) -> set[tuple[str, int]]:
    """``(rel, index)`` of the quick subset: per source the conversation of (lower) median o200k
    size, ties in file order."""
    from ctxwise.tokens import get_counter

    counter = get_counter("o200k_base")
    by_source: dict[str, list[tuple[int, int, str, int]]] = {}
    for order, rel in enumerate(recording_files(data)):
        for i, conv in enumerate(conversations(str(data), rel)):
            by_source.setdefault(source_of(rel), []).append((counter.count(conv.messages), order * 10_000 + i, rel, i))
    picked: set[tuple[str, int]] = set()
    for rows in by_source.values():
        rows.sort()
        _, _, rel, i = rows[(len(rows) - 1) // 2]
        picked.add((rel, i))
    return picked


# -- one run ------------------------------------------------------------------------------


def _json(obj: Any, *, sort: bool) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), sort_keys=sort).encode("utf-8")


def call_parts(prepared: Any) -> dict[str, bytes]:
    """The three hashed parts of one ``Prepared`` (see the module docstring), as bytes."""
    events = []
    for e in prepared.events:
        d = e.model_dump(mode="json")
        for name in VOLATILE_EVENT_FIELDS:
            d.pop(name, None)
        events.append(d)
    numbers = {"size": prepared.size, "size_before": prepared.size_before, "chars": prepared.chars,
               "unit": prepared.unit, "ids": [m.id for m in prepared.messages]}
    return {"payload": _json(prepared.payload, sort=False), "events": _json(events, sort=True),
            "numbers": _json(numbers, sort=True)}


def _is_user_input(m: Any) -> bool:
    """``ctxwise.units.is_user_input``, written out so this script runs on any version's
    ``src/`` (the baseline's included): a user message that carries no tool result."""
    return bool(m.role == "user" and not m.tool_results)


def drive(conv: Any, key: RunKey, store: str, on_call: Callable[[int, Any], bool]) -> str:
    """Replay ``conv`` under ``key``'s provider and budget, calling ``on_call(i, prepared)``
    after each ``prepare()``; it returns False to stop early. Returns the outcome: ``"ok"`` or
    ``"<ErrorType>: <message>"`` for the exception a call raised."""
    from ctxwise import ContextManager, Policy

    policy = Policy.preset("default", budget=key.budget, unit="tokens", provider=key.provider)
    with tempfile.TemporaryDirectory(prefix="golden-") as tmp:
        url = f"sqlite:///{tmp}/golden.db" if store == "sqlite" else "memory://"
        with ContextManager(url, policy) as cm:
            try:
                session = cm.session("golden", "run")
                pending: list[Any] = []
                seen_user = False
                calls = 0
                for m in conv.messages:
                    seen_user = seen_user or _is_user_input(m)
                    if m.role == "assistant" and seen_user:
                        if pending:
                            session.append(pending)
                            pending = []
                        if not on_call(calls, session.prepare()):
                            return "stopped"
                        calls += 1
                        session.append([m])
                    else:
                        pending.append(m)
                if pending:
                    session.append(pending)
            except Exception as e:  # every outcome is behaviour, a crash included
                return f"{type(e).__name__}: {e}"
    return "ok"


@dataclass
class RunDigest:
    """What one run recorded: the call count, the sha256 over every call's parts and the
    outcome, the per-call ``steps`` and the outcome itself."""

    calls: int = 0
    sha256: str = ""
    steps: str = ""
    outcome: str = ""

    def as_dict(self) -> dict[str, Any]:
        """The digest file's entry for the run."""
        return {"calls": self.calls, "sha256": self.sha256, "outcome": self.outcome, "steps": self.steps}


def run_one(key: RunKey, data: str, store: str = "memory") -> RunDigest:
    """Run ``key`` and digest every call (see the module docstring)."""
    conv = conversations(data, key.rel)[key.index]
    whole = hashlib.sha256()
    steps: list[str] = []

    def on_call(i: int, prepared: Any) -> bool:
        for name, blob in call_parts(prepared).items():
            whole.update(f"{i}:{name}:{len(blob)}:".encode())
            whole.update(blob)
            steps.append(hashlib.sha256(blob).hexdigest()[:STEP_HEX])
        return True

    outcome = drive(conv, key, store, on_call)
    whole.update(b"outcome:" + outcome.encode("utf-8"))
    return RunDigest(calls=len(steps) // len(PARTS), sha256=whole.hexdigest(), steps="".join(steps), outcome=outcome)


def dump_call(key: RunKey, data: str, call: int, store: str = "memory") -> dict[str, Any]:
    """The three parts of call ``call`` of ``key`` as JSON values, plus the run's outcome when
    the run ended before that call (``{"outcome": ...}`` alone)."""
    conv = conversations(data, key.rel)[key.index]
    found: dict[str, Any] = {}

    def on_call(i: int, prepared: Any) -> bool:
        if i == call:
            found.update({name: json.loads(blob) for name, blob in call_parts(prepared).items()})
            return False
        return True

    outcome = drive(conv, key, store, on_call)
    return found or {"outcome": outcome}


def _work(args: tuple[str, str, str]) -> tuple[str, dict[str, Any], float]:
    key, data, store = args
    t0 = time.perf_counter()
    d = run_one(RunKey.parse(key), data, store)
    return key, d.as_dict(), time.perf_counter() - t0


def run_many(keys: Sequence[RunKey], data: Path, *, jobs: int = 1, store: str = "memory",
             progress: bool = False) -> dict[str, dict[str, Any]]:
    """Every key's digest (``RunDigest.as_dict``), by key string, in ``jobs`` processes."""
    todo = [(str(k), str(data), store) for k in keys]
    out: dict[str, dict[str, Any]] = {}
    results: Iterable[tuple[str, dict[str, Any], float]]
    pool = ProcessPoolExecutor(max_workers=jobs) if jobs > 1 else None
    try:
        results = pool.map(_work, todo, chunksize=4) if pool else map(_work, todo)
        t0 = time.perf_counter()
        for n, (key, d, _) in enumerate(results, 1):
            out[key] = d
            if progress and (n % 50 == 0 or n == len(todo)):
                print(f"  {n}/{len(todo)} runs, {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
    finally:
        if pool:
            pool.shutdown()
    return out


# -- the digest file and the comparison ----------------------------------------------------


def _git(*args: str) -> str:
    try:
        r = subprocess.run(["git", *args], capture_output=True, text=True, check=False, cwd=REPO)
    except OSError:
        return ""
    return r.stdout.strip() if r.returncode == 0 else ""


def data_fingerprint(data: Path) -> dict[str, str]:
    """sha256 (first 16 hex digits) of every recording file, by path under ``data``."""
    return {rel: hashlib.sha256((data / rel).read_bytes()).hexdigest()[:16] for rel in recording_files(data)}


def write_digest(path: Path, runs: dict[str, dict[str, Any]], meta: dict[str, Any]) -> None:
    """Write the digest file: ``meta`` then one run per line (sorted by key), for readable diffs."""
    lines = [f"  {json.dumps(k)}: {json.dumps(runs[k], sort_keys=True)}" for k in sorted(runs)]
    text = ('{\n "meta": ' + json.dumps(meta, sort_keys=True, indent=1).replace("\n", "\n ")
            + ',\n "runs": {\n' + ",\n".join(lines) + "\n }\n}\n")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)  # a reader never sees half a file


def read_digest(path: Path) -> dict[str, Any]:
    """The digest file as written by :func:`write_digest`. Raises SystemExit when missing."""
    if not path.is_file():
        raise SystemExit(f"{path}: no digest file (hint: run `python bench/golden.py --record` on the baseline)")
    doc: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    if doc.get("meta", {}).get("format") != FORMAT:
        raise SystemExit(f"{path}: digest format {doc.get('meta', {}).get('format')!r}, this script reads {FORMAT}")
    return doc


@dataclass
class Mismatch:
    """A run whose digest differs: the first differing call (None when only the outcome or the
    call count differs), which parts differ there, and both sides' outcome and call count."""

    key: str
    call: int | None
    parts: list[str]
    want: dict[str, Any]
    got: dict[str, Any]
    diff: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        """The mismatch as printed: a head line, both outcomes when they differ, the diff."""
        head = f"MISMATCH {self.key}: "
        if self.call is not None:
            head += f"first differing call {self.call} ({', '.join(self.parts) or 'beyond the step digests'})"
        elif self.want["outcome"] != self.got["outcome"]:
            head += "every call's step digests identical, the outcome differs"
        else:
            head += "a call differs where the step digests collide (dump the calls to find it)"
        head += f"; calls {self.want['calls']} -> {self.got['calls']}"
        out = [head]
        if self.want["outcome"] != self.got["outcome"]:
            out += [f"  outcome was: {self.want['outcome'][:300]}", f"  outcome now: {self.got['outcome'][:300]}"]
        return out + [f"  {line}" for line in self.diff]


def compare(key: str, want: dict[str, Any], got: dict[str, Any]) -> Mismatch | None:
    """None when ``got`` equals ``want``; else where they first differ."""
    if want["sha256"] == got["sha256"]:
        return None
    width = STEP_HEX * len(PARTS)
    a, b = want["steps"], got["steps"]
    for i in range(0, max(len(a), len(b)), width):
        if a[i:i + width] != b[i:i + width]:
            parts = [p for j, p in enumerate(PARTS)
                     if a[i + j * STEP_HEX:i + (j + 1) * STEP_HEX] != b[i + j * STEP_HEX:i + (j + 1) * STEP_HEX]]
            return Mismatch(key, i // width, parts if len(a) > i and len(b) > i else [], want, got)
    return Mismatch(key, None, [], want, got)


# -- the diff of a mismatch, against the baseline's source -----------------------------------


def _clip(line: str, at: int, width: int = 160) -> str:
    """``line`` cut to ``width`` characters around position ``at``."""
    if len(line) <= width:
        return line
    start = max(0, min(at - width // 2, len(line) - width))
    return ("…" if start else "") + line[start:start + width] + ("…" if start + width < len(line) else "")


def _pretty(value: Any) -> list[str]:
    return json.dumps(value, ensure_ascii=False, indent=1).splitlines()


def part_diff(old: Any, new: Any, *, limit: int = 30) -> list[str]:
    """A short unified diff of two JSON values (lines clipped around their first difference)."""
    a, b = _pretty(old), _pretty(new)
    raw = list(difflib.unified_diff(a, b, "baseline", "now", n=1, lineterm=""))
    minus = [x for x in raw if x.startswith("-") and not x.startswith("---")]
    plus = [x for x in raw if x.startswith("+") and not x.startswith("+++")]
    at = 0
    if minus and plus:
        at = next((i for i, (x, y) in enumerate(zip(minus[0], plus[0])) if x != y), min(len(minus[0]), len(plus[0])))
    out = [_clip(x, at) for x in raw[2:]]
    return out[:limit] + ([f"... {len(out) - limit} more diff lines"] if len(out) > limit else [])


def baseline_dump(ref: str, key: str, call: int, data: Path, store: str) -> dict[str, Any] | str:
    """Call ``call`` of ``key`` as the baseline's ``src/`` (git ``ref``) returns it, from this
    script run in a subprocess on that source; a one-line reason when that is not possible."""
    with tempfile.TemporaryDirectory(prefix="golden-base-") as tmp:
        archive = subprocess.run(["git", "archive", "--format=tar", ref, "src"], capture_output=True, cwd=REPO,
                                 check=False)
        if archive.returncode != 0:
            return f"cannot read src/ at {ref!r} from git: {archive.stderr.decode(errors='replace').strip()[:200]}"
        subprocess.run(["tar", "-x", "-C", tmp], input=archive.stdout, check=True)
        env = {**os.environ, "PYTHONPATH": str(Path(tmp) / "src"), "CTXWISE_SHARED": str(SHARED)}
        r = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--dump", key, "--call", str(call),
                            "--data", str(data), "--store", store], capture_output=True, text=True, env=env,
                           check=False)
        if r.returncode != 0:
            return f"the baseline run failed: {r.stderr.strip()[-300:]}"
        found: dict[str, Any] = json.loads(r.stdout)
        return found


def explain(m: Mismatch, ref: str, data: Path, store: str) -> None:
    """Fill ``m.diff`` with the differing parts of its first differing call, baseline vs now."""
    if m.call is None or not ref:
        return
    old = baseline_dump(ref, m.key, m.call, data, store)
    if isinstance(old, str):
        m.diff = [f"(no diff: {old})"]
        return
    new = dump_call(RunKey.parse(m.key), str(data), m.call, store)
    for name in [*PARTS, "outcome"]:
        if name in old or name in new:
            if old.get(name) != new.get(name):
                m.diff += [f"{name} of call {m.call}:", *part_diff(old.get(name), new.get(name))]


# -- the command line ----------------------------------------------------------------------


def select(keys: Iterable[RunKey], data: Path, *, quick: bool, only: str | None) -> list[RunKey]:
    """``keys`` restricted to the quick subset and to keys containing ``only``."""
    picked = quick_recordings(data) if quick else None
    return [k for k in keys if (picked is None or (k.rel, k.index) in picked) and (not only or only in str(k))]


def record(a: argparse.Namespace) -> int:
    """``--record``: digest the selected runs and merge them into the digest file."""
    keys = select(all_keys(a.data, providers()), a.data, quick=a.quick, only=a.only)
    src_commit = _git("log", "-1", "--format=%H", "--", "src")
    dirty = bool(_git("status", "--porcelain", "--", "src"))
    if dirty:
        raise SystemExit("src/ has uncommitted changes: the baseline must be a commit (hint: commit or stash them)")
    old = json.loads(a.digest.read_text(encoding="utf-8")) if a.digest.is_file() else {"runs": {}, "meta": {}}
    if old["runs"] and old["meta"].get("src_commit") != src_commit:
        raise SystemExit(f"{a.digest} holds a baseline of src/ at {old['meta'].get('src_commit')}, src/ is now at "
                         f"{src_commit} (hint: delete the file to record a new baseline)")
    t0 = time.perf_counter()
    runs = {**old["runs"], **run_many(keys, a.data, jobs=a.jobs, store=a.store, progress=True)}
    meta = {"format": FORMAT, "src_commit": src_commit, "providers": list(providers()),
            "budgets": {k: list(v) for k, v in SETS.items()}, "data": data_fingerprint(a.data),
            "quick": sorted(f"{r}#{i:03d}" for r, i in quick_recordings(a.data)),
            "runs": len(runs), "calls": sum(r["calls"] for r in runs.values())}
    write_digest(a.digest, runs, meta)
    print(f"recorded {len(keys)} runs ({sum(runs[str(k)]['calls'] for k in keys)} calls) in "
          f"{time.perf_counter() - t0:.0f} s; {a.digest} holds {meta['runs']} runs, {meta['calls']} calls")
    return 0


def check(data: Path, digest: dict[str, Any], *, quick: bool = False, only: str | None = None, jobs: int = 1,
          store: str = "memory", progress: bool = False) -> tuple[list[Mismatch], dict[str, Any]]:
    """Recompute the digest file's runs (restricted by ``quick`` / ``only``) and compare them.
    Returns the mismatches and a summary: ``runs``, ``calls``, ``seconds``, ``unrecorded`` (keys
    the current code and data would add), ``data_changed`` (files whose bytes differ)."""
    recorded = [RunKey.parse(k) for k in digest["runs"]]
    keys = select(recorded, data, quick=quick, only=only)
    t0 = time.perf_counter()
    got = run_many(keys, data, jobs=jobs, store=store, progress=progress)
    mismatches = [m for k in keys if (m := compare(str(k), digest["runs"][str(k)], got[str(k)])) is not None]
    now = {str(k) for k in select(all_keys(data, providers()), data, quick=quick, only=only)}
    fingerprint = data_fingerprint(data)
    summary = {"runs": len(keys), "calls": sum(g["calls"] for g in got.values()),
               "seconds": time.perf_counter() - t0, "unrecorded": sorted(now - set(digest["runs"])),
               "data_changed": sorted(r for r, h in digest["meta"]["data"].items() if fingerprint.get(r) != h)}
    return mismatches, summary


def check_command(a: argparse.Namespace) -> int:
    """``--check``: compare, print every mismatch with its first differing call, exit 1 on any."""
    digest = read_digest(a.digest)
    mismatches, s = check(a.data, digest, quick=a.quick, only=a.only, jobs=a.jobs, store=a.store,
                          progress=not a.quick)
    ref = a.baseline if a.baseline is not None else digest["meta"].get("src_commit", "")
    lines: list[str] = []
    for m in mismatches[:a.diffs]:
        explain(m, ref, a.data, a.store)
    for m in mismatches:
        lines += m.lines()
    for rel in s["data_changed"]:
        lines.append(f"WARNING data file changed since the recording: {rel} (its mismatches are not the code's)")
    if s["unrecorded"]:
        lines.append(f"note: {len(s['unrecorded'])} runs the current code would add are not in the digest "
                     f"(e.g. {s['unrecorded'][0]}); they are not compared")
    verdict = "FAIL" if mismatches else "OK"
    lines.append(f"{verdict}: {s['runs']} runs, {s['calls']} "
                 f"calls, {len(mismatches)} mismatches, {s['seconds']:.0f} s "
                 f"({'quick' if a.quick else 'full'}{', only ' + repr(a.only) if a.only else ''}, store {a.store}, "
                 f"jobs {a.jobs}; baseline src {str(digest['meta'].get('src_commit', '?'))[:12]})")
    print("\n".join(lines))
    if a.report:
        write_report(a, lines)
    if s["runs"] == 0:
        print("no run selected (hint: check --only)", file=sys.stderr)
        return 2
    return 1 if mismatches else 0


def write_report(a: argparse.Namespace, lines: list[str]) -> None:
    """``bench/results/golden.md``: the command, date, machine and the check's full output."""
    sys.path.insert(0, str(REPO / "bench"))
    from _machine import machine, now

    digest = read_digest(a.digest)
    meta = digest["meta"]
    text = "\n".join([
        "# Behaviour digest check (`bench/golden.py`)", "",
        "Every payload and event list `prepare()` returns on the recorded sessions, hashed and compared",
        "with the baseline recorded in `bench/results/golden.json` (issue 24, acceptance line 1).",
        "What runs and what is hashed: the docstring of `bench/golden.py`.", "",
        f"- command: `{' '.join(['python', 'bench/golden.py', *sys.argv[1:]])}`",
        f"- date: {now()}",
        *machine(("tiktoken", "tokenizers")),
        f"- baseline: src/ at {meta['src_commit']}, {meta['runs']} runs, {meta['calls']} calls, "
        f"providers {', '.join(meta['providers'])}",
        "", "```", *lines, "```", "",
    ])
    a.report.write_text(text, encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    """The command line (``--help``); returns the exit status."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--record", action="store_true", help="digest the runs and write them into --digest")
    mode.add_argument("--check", action="store_true", help="recompute the recorded runs and compare (exit 1 on a mismatch)")
    mode.add_argument("--dump", metavar="KEY", help="print call --call of run KEY as JSON (used for the diffs)")
    mode.add_argument("--list", action="store_true", help="print the selected run keys")
    ap.add_argument("--quick", action="store_true", help="only the quick subset (one conversation per source)")
    ap.add_argument("--only", metavar="SUBSTR", help="only run keys containing SUBSTR")
    ap.add_argument("--jobs", type=int, default=1, help="processes (default 1)")
    ap.add_argument("--store", choices=("memory", "sqlite"), default="memory", help="a fresh store per run")
    ap.add_argument("--call", type=int, default=0, help="with --dump: the call index")
    ap.add_argument("--data", type=Path, default=DATA, help=f"recordings (default {DATA})")
    ap.add_argument("--digest", type=Path, default=DIGEST, help=f"digest file (default {DIGEST})")
    ap.add_argument("--baseline", metavar="REF", help="git ref of the baseline's src/ for the diffs "
                    "(default: the digest's src_commit; '' for no diff)")
    ap.add_argument("--diffs", type=int, default=5, help="mismatches to diff against the baseline (default 5)")
    ap.add_argument("--report", type=Path, help="with --check: also write this Markdown report")
    a = ap.parse_args(argv)
    if a.dump:
        print(json.dumps(dump_call(RunKey.parse(a.dump), str(a.data), a.call, a.store), ensure_ascii=False))
        return 0
    if a.list:
        for k in select(all_keys(a.data, providers()), a.data, quick=a.quick, only=a.only):
            print(k)
        return 0
    return record(a) if a.record else check_command(a)


if __name__ == "__main__":
    raise SystemExit(main())
