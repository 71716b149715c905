"""Rich tables for the terminal: the per-session round table, the measures side by side with
compaction off, and ``inspect``'s size breakdown."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

from .runner import Measures, SessionResult


def n(x: float | int) -> str:
    """A number with thousands separators (no decimals)."""
    return f"{x:,.0f}"


def _tools(names: list[str]) -> Text:
    """``load_skill, query_order ×2`` with failed calls (``name!``) in red and marked ✗."""
    if not names:
        return Text("no tools", style="dim")
    counts: dict[str, int] = {}
    for name in names:
        counts[name] = counts.get(name, 0) + 1
    t = Text()
    for i, (name, c) in enumerate(counts.items()):
        if i:
            t.append(", ")
        failed = name.endswith("!")
        label = (name[:-1] + " ✗") if failed else name
        t.append(label + (f" ×{c}" if c > 1 else ""), style="red" if failed else "")
    return t


def k(x: float) -> str:
    """A compact number: ``812``, ``26.6k``, ``1.2M``."""
    if abs(x) < 1000:
        return f"{x:.0f}"
    if abs(x) < 1_000_000:
        return f"{x / 1000:.1f}k"
    return f"{x / 1_000_000:.1f}M"


def _excerpt(text: str, width: int = 33) -> str:
    one = " ".join(text.split())
    return one if len(one) <= width else one[: width - 1] + "…"


def session_table(r: SessionResult, unit: str) -> Table:
    """The seeds' round table with compaction on top: one row per user turn, then totals."""
    t = Table(title=f"{r.name}  ({r.format}, {r.messages} messages)", title_justify="left",
              header_style="bold", show_lines=False, expand=False)
    t.add_column("round", justify="right")
    t.add_column("what happened\n(user said / tools called)", width=34)
    t.add_column("calls", justify="right")
    t.add_column(f"before\n({unit})", justify="right")
    t.add_column(f"after\n({unit})", justify="right")
    t.add_column("after\n(chars)", justify="right")
    t.add_column(f"growth\n({unit})", justify="right")
    t.add_column("action", min_width=18)
    for row in r.rounds:
        what = Text(_excerpt(row.user_text), style="dim")
        what.append("\n")
        what.append_text(_tools(row.tools))
        action = Text("\n".join(row.actions), style="bold yellow") if row.actions else Text("none", style="dim")
        t.add_row(str(row.round), what, str(row.calls), n(row.size_before), n(row.size), n(row.chars),
                  f"+{n(row.growth)}", action)
    if r.rounds:
        last = r.rounds[-1]
        ev = r.measures.events
        fired = ", ".join(f"{k} {v}" for k, v in ev.items()) or "none"
        t.add_section()
        t.add_row("total", Text(f"{len(r.rounds)} rounds, full record {n(last.full)} {unit}", style="bold"),
                  str(sum(x.calls for x in r.rounds)), n(max(x.size_before for x in r.rounds)),
                  n(last.size), n(last.chars), f"+{n(sum(x.growth for x in r.rounds))}", fired)
    return t


MEASURES: list[tuple[str, str]] = [
    ("sessions", "sessions"),
    ("calls", "model calls"),
    ("input_tokens", "input tokens (o200k)"),
    ("cost", "cache-adjusted cost (tokens)"),
    ("recall", "support recall"),
    ("validator_errors", "validator errors"),
    ("over_budget", "calls over budget"),
    ("peak_size", "peak context size"),
    ("events", "compaction events"),
    ("p50", "prepare p50 (ms)"),
    ("p95", "prepare p95 (ms)"),
]


def _cell(key: str, m: Measures, sessions: int) -> str:
    if key == "sessions":
        return str(sessions)
    if key == "recall":
        return f"{m.recall:.1%}  ({m.supported}/{m.needed})"
    if key == "events":
        return ", ".join(f"{k} {v}" for k, v in m.events.items()) or "none"
    if key == "p50":
        return f"{m.p50_ms:.2f}"
    if key == "p95":
        return f"{m.p95_ms:.2f}"
    return n(getattr(m, key))


def _change(key: str, on: Measures, off: Measures) -> Text:
    if key in ("input_tokens", "cost") and getattr(off, key):
        d = getattr(on, key) / getattr(off, key) - 1
        return Text(f"{d:+.0%}", style="green" if d < 0 else "red")
    if key == "recall":
        d = on.recall - off.recall
        return Text(f"{d * 100:+.1f} pt", style="red" if d < 0 else "green")
    if key in ("validator_errors", "over_budget"):
        d = getattr(on, key) - getattr(off, key)
        return Text(f"{d:+d}" if d else "0", style="green" if d <= 0 else "red")
    return Text("")


def measures_table(on: Measures, off: Measures | None, *, sessions: int, unit: str, title: str) -> Table:
    """The measures with compaction on, and with it off (``enabled=false``) side by side."""
    t = Table(title=title, title_justify="left", header_style="bold")
    t.add_column("measure")
    t.add_column("ctxwise", justify="right")
    if off is not None:
        t.add_column("compaction off", justify="right")
        t.add_column("change", justify="right")
    for key, label in MEASURES:
        if key == "peak_size":
            label = f"{label} ({unit})"
        row = [label, _cell(key, on, sessions)]
        if off is not None:
            row += [_cell(key, off, sessions), _change(key, on, off)]
        t.add_row(*row)
    return t


def errors_block(errors: Sequence[Any]) -> Group:
    """The one-line errors, in red."""
    return Group(*(Text(f"error: {e}", style="red") for e in errors))


def inspect_table(rows: list[dict[str, Any]]) -> Table:
    """``inspect``: per conversation, messages and size by category in chars and o200k tokens.

    One conversation: a row per category with its share (the seeds' breakdown). Several: a row
    per conversation with ``chars / tokens`` cells, then the total.
    """
    from .inspect import SHOWN

    t = Table(header_style="bold")
    if len(rows) == 1:
        row = rows[0]
        tc, tt = row["total"]
        for col in ("category", "chars", "share", "tokens (o200k)", "share"):
            t.add_column(col, justify="left" if col == "category" else "right")
        for cat in SHOWN:
            c, tk = row["categories"][cat]
            t.add_row(cat, n(c), f"{c / tc:.0%}" if tc else "-", n(tk), f"{tk / tt:.0%}" if tt else "-")
        t.add_section()
        t.add_row("total", n(tc), "100%", n(tt), "100%", style="bold")
        return t
    t.add_column("conversation")
    t.add_column("messages", justify="right")
    for cat in SHOWN:
        t.add_column(f"{cat}\nchars / tokens", justify="right")
    t.add_column("total\nchars / tokens", justify="right")
    for i, row in enumerate(rows):
        if row["name"] == "total" and i == len(rows) - 1:
            t.add_section()
        cells = [row["name"], n(row["messages"])]
        for cat in SHOWN:
            c, tk = row["categories"][cat]
            cells.append(f"{k(c)} / {k(tk)}")
        tc, tt = row["total"]
        cells.append(f"{k(tc)} / {k(tt)}")
        t.add_row(*cells, style="bold" if row["name"] == "total" and i == len(rows) - 1 else None)
    return t
