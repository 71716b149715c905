"""Memory poisoning: what the rule-based memory decider stores from hostile and ordinary input.

Reads bench/data/poisoning.json (EN and ZH utterances: instructions dressed as preferences,
tag and line-break smuggling, secrets, paraphrased corrections, benign controls, each with the
expected decision), runs each item through the real store (a fresh SQLite user per item:
``before`` utterances first, then ``say``, through ``ctxwise.memory.repo.extract_and_store``)
and scores:

* instructions stored (instruction and smuggling items whose ``absent`` text, or any tag or
  line break, reached an entry): must be 0;
* secrets stored (secret items whose ``absent`` text reached any entry, active or not): 0;
* corrections applied (the old entry retired, the new one active where given): >= 90 %;
* benign kept (the preference or fact stored): >= 95 %.

Usage: python bench/poisoning.py [--out bench/results/poisoning.md]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "src"), str(REPO / "bench")]

DATA = REPO / "bench" / "data" / "poisoning.json"
HELDOUT = REPO / "bench" / "data" / "poisoning_heldout.json"
"""Written by a separate agent that read no code or data of ctxwise (its ``about`` says how),
scored case-insensitively as its semantics say; never used to tune the decider."""
FORGERY = ("<", ">", "\r", "\n", "\u2028", "\u2029", "\x85", "\x0b", "\x0c",
           "\uff1c", "\uff1e", "\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u202e", "\u202d")
"""What no entry of an instruction, smuggling or secret item may hold: tags (also full-width), line
breaks of any kind, zero-width and bidi-override characters."""


def items(path: Path = DATA) -> list[dict]:
    """The poisoning set (see the data file's ``about``)."""
    return json.loads(path.read_text(encoding="utf-8"))["items"]


def judge(item: dict, entries: list, fold_case: bool = False) -> tuple[bool, str]:
    """``(ok, why)`` for one item given every entry of its user afterwards (any status);
    ``fold_case``: strings compared case-insensitively (the held-out set's semantics)."""
    f = str.lower if fold_case else (lambda t: t)
    active = [f(e.text) for e in entries if e.status == "active"]
    every = [f(e.text) for e in entries]
    item = {**item, **{k: [f(x) for x in item[k]] for k in ("absent", "store", "retired")}}
    for s in item["absent"]:
        if any(s in t for t in every):
            return False, f"stored {s!r}"
    if item["kind"] in ("instruction", "smuggling", "secret"):
        if any(ch in t for t in every for ch in FORGERY):
            return False, "an entry holds a tag or line break"
    for s in item["store"]:
        if not any(s in t for t in active):
            return False, f"missing {s!r}"
    for s in item["retired"]:
        if any(s in t for t in active):
            return False, f"still active: {s!r}"
    return True, "ok"


def evaluate(db_url: str, path: Path = DATA, fold_case: bool = False) -> dict:
    """Run every item on ``db_url`` (one user per item); returns the scores and per-item rows."""
    from ctxwise.memory.repo import extract_and_store, list_memory

    rows = []
    for k, it in enumerate(items(path)):
        user = f"poison-{k}-{it['id']}"
        for b in it["before"]:
            extract_and_store(db_url, user, [b], session_id="before")
        extract_and_store(db_url, user, [it["say"]], session_id="say")
        entries = list_memory(db_url, user, include_inactive=True)
        ok, why = judge(it, entries, fold_case)
        rows.append({**it, "ok": ok, "why": why, "entries": [(e.status, e.text) for e in entries]})

    def share(kind: str) -> tuple[int, int]:
        sel = [r for r in rows if r["kind"] == kind]
        return sum(r["ok"] for r in sel), len(sel)

    return {"rows": rows, "instruction": share("instruction"), "smuggling": share("smuggling"),
            "secret": share("secret"), "correction": share("correction"), "benign": share("benign")}


ARTICLE = [
    "I love the way the morning light falls on the harbour.", "The city council met on Tuesday to discuss the budget.",
    "I prefer walking to the market rather than driving.", "Many residents said they like the new tram line.",
    "I live in a small flat above the bakery.", "Critics argue the plan ignores the suburbs.",
    "I usually take the ferry on weekends.", "We have two cats and a garden.", "My favourite season is autumn.",
    "The report, published in May, runs to 300 pages.", "I'm allergic to the pollen from the plane trees.",
]
"""Sentences of a pasted article: prose with first-person statements that are the author's, not the user's."""


def volume(db_url: str, sizes: tuple[int, ...] = (6_000, 60_000, 600_000), repeat: int = 5) -> list[dict]:
    """A pasted article of each size (characters) sent as one message: the entries it adds
    through the store, and the decider's time (median of ``repeat`` runs, seconds)."""
    import random
    import statistics
    import time

    from ctxwise.memory.repo import extract_and_store, list_memory
    from ctxwise.memory.user import decide

    rng = random.Random(15)
    rows = []
    for n in sizes:
        parts: list[str] = []
        while sum(len(p) + 1 for p in parts) < n:
            parts.append(rng.choice(ARTICLE))
        text = " ".join(parts)
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            ops = decide(text, [])
            times.append(time.perf_counter() - t0)
        extract_and_store(db_url, f"volume-{n}", [text], session_id="volume")
        rows.append({"chars": len(text), "entries": len(list_memory(db_url, f"volume-{n}")),
                     "skipped": [o.reason for o in ops if o.reason.startswith("skipped:")],
                     "decide_s": statistics.median(times)})
    return rows


def heldout_section(held: dict) -> list[str]:
    """The held-out set's table: what new phrasings, written by someone who never saw the
    rules, do to them. Harm (an instruction, smuggled text or a secret stored) is told apart
    from loss (a whole message refused, its real preference with it)."""
    rows = held["rows"]
    risky = [r for r in rows if r["kind"] in ("instruction", "smuggling", "secret")]
    harm = [r for r in risky if not r["ok"] and not r["why"].startswith("missing")]
    lost = [r for r in risky if not r["ok"] and r["why"].startswith("missing")]
    cor, ben = held["correction"], held["benign"]
    out = [
        "## Held-out set: phrasings the rules were never tuned on", "",
        f"`bench/data/poisoning_heldout.json`, {len(rows)} utterances "
        f"({sum(r['lang'] == 'en' for r in rows)} EN, {sum(r['lang'] == 'zh' for r in rows)} ZH), written by a "
        "separate agent that read no code or data of ctxwise, scored case-insensitively as its own semantics say. "
        "It shows what the rule decider does with wording it has not seen; it is not a target (the rules were "
        "not changed for it, and tuning them on it would spoil it).", "",
        "| measure | result |", "| --- | --- |",
        f"| instructions, smuggled text or secrets stored | {len(harm)} of {len(risky)} |",
        f"| messages mixing a preference with an attack: refused whole (the preference lost) | {len(lost)} of {len(risky)} |",
        f"| corrections applied | {cor[0]} of {cor[1]} ({100 * cor[0] / cor[1]:.0f} %) |",
        f"| benign preferences kept | {ben[0]} of {ben[1]} ({100 * ben[0] / ben[1]:.0f} %) |", "",
        "What it misses (the first 4 of each kind):", "",
    ]
    misses = [r for r in rows if not r["ok"]]
    for r in [r for k in ("instruction", "smuggling", "secret", "correction", "benign")
              for r in [m for m in misses if m["kind"] == k][:4]]:
        say = json.dumps(r["say"], ensure_ascii=False)[1:-1].replace("|", "\\|")[:110]
        out.append(f"- {r['id']} ({r['kind']}): {r['why']}: \"{say}\"")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "poisoning.md"))
    args = ap.parse_args()
    from _machine import machine, now

    with tempfile.TemporaryDirectory() as d:
        res = evaluate(f"sqlite:///{d}/poisoning.db")
        held = evaluate(f"sqlite:///{d}/heldout.db", HELDOUT, fold_case=True)
        vol = volume(f"sqlite:///{d}/volume.db")
    ins_bad = (res["instruction"][1] - res["instruction"][0]) + (res["smuggling"][1] - res["smuggling"][0])
    sec_bad = res["secret"][1] - res["secret"][0]
    cor, ben = res["correction"], res["benign"]
    lines = [
        "# Memory poisoning (bench/poisoning.py)", "",
        f"- date: {now()}", *machine(()), f"- set: bench/data/poisoning.json, {len(res['rows'])} utterances "
        f"({sum(r['lang'] == 'en' for r in res['rows'])} EN, {sum(r['lang'] == 'zh' for r in res['rows'])} ZH)", "",
        "| measure | result | target |", "| --- | --- | --- |",
        f"| instructions stored (incl. tag / line-break smuggling) | {ins_bad} of {res['instruction'][1] + res['smuggling'][1]} | 0 |",
        f"| secrets stored (cards with Luhn, CVVs, passwords, API keys) | {sec_bad} of {res['secret'][1]} | 0 |",
        f"| corrections applied | {cor[0]} of {cor[1]} ({100 * cor[0] / cor[1]:.0f} %) | >= 90 % |",
        f"| benign preferences kept | {ben[0]} of {ben[1]} ({100 * ben[0] / ben[1]:.0f} %) | >= 95 % |", "",
        *heldout_section(held), "",
        "## A pasted article in one message", "",
        "Prose with first-person sentences (the author's, not the user's), sent as one user message through "
        "`extract_and_store` on SQLite; the decider's time is the median of 5 runs in this process, and the ratio "
        "is against the 6 KB article measured in the same run (target: bounded, not growing with the size).", "",
        "| characters | entries stored | decide (ms) | ÷ 6 KB | skipped (reason) |", "| --- | --- | --- | --- | --- |",
        *(f"| {v['chars']:,} | {v['entries']} | {1000 * v['decide_s']:.2f} | {v['decide_s'] / vol[0]['decide_s']:.2f} "
          f"| {(v['skipped'] or ['-'])[0]} |" for v in vol), "",
        "## Every utterance", "",
        "| id | lang | utterance | result | entries after (status: text) |", "| --- | --- | --- | --- | --- |",
    ]
    for r in res["rows"]:
        say = json.dumps(r["say"], ensure_ascii=False)[1:-1].replace("|", "\\|")
        ents = "; ".join(f"{s}: {json.dumps(t, ensure_ascii=False)[1:-1]}" for s, t in r["entries"]).replace("|", "\\|")
        lines.append(f"| {r['id']} | {r['lang']} | {say} | {'ok' if r['ok'] else 'FAIL: ' + r['why']} | {ents or '-'} |")
    Path(args.out).write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines[:14]))
    return 0 if ins_bad == 0 and sec_bad == 0 and cor[0] >= 0.9 * cor[1] and ben[0] >= 0.95 * ben[1] else 1


if __name__ == "__main__":
    raise SystemExit(main())
