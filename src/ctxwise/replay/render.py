"""Rich tables for the terminal: the per-session round table, the measures side by side with
compaction off, and ``inspect``'s size breakdown."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from .runner import Measures, RoundRecord, SessionResult

TABLES_UP_TO = 3
"""The CLI prints per-session tables for up to this many sessions; with more, one line says so."""

NO_CALL = "–"
"""What a size cell shows for a round with no model call (nothing was sent)."""


def n(x: float | int) -> str:
    """A number with thousands separators (no decimals)."""
    return f"{x:,.0f}"


def size(x: float | int | None) -> str:
    """A size cell: ``n(x)``, or ``–`` when nothing was sent (a round with no model call)."""
    return NO_CALL if x is None else n(x)


def total_cells(r: SessionResult) -> dict[str, Any]:
    """The numbers of a session's total row: rounds, calls, the largest size before
    compaction, the size sent at the session's last model call (policy unit and chars; None
    when it made none), the record at the start (system prompt, opening), the rounds' growth,
    and the full uncompacted record (= start + growth)."""
    last = r.last_call
    befores = [x.size_before for x in r.rounds if x.size_before is not None]
    growth = sum(x.growth for x in r.rounds)
    return {
        "rounds": len(r.rounds), "calls": sum(x.calls for x in r.rounds),
        "before": max(befores) if befores else None,
        "after": last.size if last else None, "chars": last.chars if last else None,
        "start": r.start, "growth": growth, "full": r.start + growth,
    }


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
        t.add_row(str(row.round), what, str(row.calls), size(row.size_before), size(row.size), size(row.chars),
                  f"+{n(row.growth)}", _action(row))
    if r.rounds:
        tot = total_cells(r)
        ev = r.measures.events
        fired = ", ".join(f"{k} {v}" for k, v in ev.items()) or "none"
        what = Text(f"{tot['rounds']} rounds, full record {n(tot['full'])} {unit}", style="bold")
        if tot["start"]:
            what.append(f"\n= start {n(tot['start'])} + growth {n(tot['growth'])}", style="dim")
        t.add_section()
        t.add_row("total", what, str(tot["calls"]), size(tot["before"]), size(tot["after"]), size(tot["chars"]),
                  f"+{n(tot['growth'])}", fired)
    return t


def _action(row: RoundRecord) -> Text:
    if row.actions:
        return Text("\n".join(row.actions), style="bold yellow")
    return Text("no model call" if not row.calls else "none", style="dim")


MEASURES: list[tuple[str, str]] = [
    ("sessions", "sessions"),
    ("calls", "model calls"),
    ("input_tokens", "input tokens (o200k)"),
    ("cost", "cache-adjusted cost (tokens)"),
    ("floor", "reference F(B), cost ÷ F(B)"),
    ("priced", "cost, provider prices"),
    ("recall", "support recall"),
    ("recall_exact", "support recall (exact, old)"),
    ("recall_recoverable", "recoverable recall"),
    ("validator_errors", "validator errors"),
    ("wire_errors", "wire errors (rendered payload)"),
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
        return f"{m.recall:.1%}  ({m.supported_norm}/{m.needed_norm})"
    if key == "recall_exact":
        return f"{m.recall_exact:.1%}  ({m.supported}/{m.needed})"
    if key == "recall_recoverable":
        return f"{m.recall_recoverable:.1%}  (+{m.recoverable})"
    if key == "floor":
        return f"{n(m.floor)}  ×{m.cost_ratio:.3f}" if m.floor else "–"
    if key == "priced":
        return f"{n(m.priced)} ({m.prices})  ×{m.priced_ratio:.3f}" if m.floor_priced else n(m.priced)
    if key == "events":
        return ", ".join(f"{k} {v}" for k, v in m.events.items()) or "none"
    if key == "p50":
        return f"{m.p50_ms:.2f}"
    if key == "p95":
        return f"{m.p95_ms:.2f}"
    return n(getattr(m, key))


def change_text(key: str, on: Measures, off: Measures) -> str:
    """The change column's text: ``-67%``, ``+9%``, ``-10.4 pt``; a change that rounds to
    nothing is ``0%`` / ``0 pt`` (never ``−0%`` or ``+0.0 pt``); ``""`` for measures without one."""
    if key in ("input_tokens", "cost", "priced") and getattr(off, key):
        d = round((getattr(on, key) / getattr(off, key) - 1) * 100)
        return f"{d:+d}%" if d else "0%"
    if key in ("recall", "recall_exact", "recall_recoverable"):
        d = round((getattr(on, key) - getattr(off, key)) * 100, 1)
        return f"{d:+.1f} pt" if d else "0 pt"
    if key in ("validator_errors", "wire_errors", "over_budget"):
        d = getattr(on, key) - getattr(off, key)
        return f"{d:+d}" if d else "0"
    return ""


def _change(key: str, on: Measures, off: Measures) -> Text:
    text = change_text(key, on, off)
    if text in ("", "0", "0%", "0 pt"):
        return Text(text, style="dim" if text else "")
    if key in ("input_tokens", "cost", "priced"):
        return Text(text, style="green" if text.startswith("-") else "red")
    if key in ("recall", "recall_exact", "recall_recoverable"):
        return Text(text, style="red" if text.startswith("-") else "green")
    if key in ("validator_errors", "wire_errors", "over_budget"):
        d = getattr(on, key) - getattr(off, key)
        return Text(f"{d:+d}" if d else "0", style="green" if d <= 0 else "red")
    return Text("")


def title_lines(title: str, width: int = 64) -> str:
    """``title`` broken into lines of about ``width`` characters, only after a comma, so that
    no ``key value`` group (``provider anthropic``) is split across lines."""
    lines: list[str] = []
    for group in title.split(", "):
        if lines and len(lines[-1]) + 2 + len(group) <= width:
            lines[-1] += ", " + group
        else:
            if lines:
                lines[-1] += ","
            lines.append(group)
    return "\n".join(lines)


def measures_table(on: Measures, off: Measures | None, *, sessions: int, unit: str, title: str) -> RenderableType:
    """The measures with compaction on, and with it off (``enabled=false``) side by side, under
    ``title`` (broken after commas only). With more than :data:`TABLES_UP_TO` sessions, a line
    first says the per-session tables were left out."""
    t = Table(header_style="bold")
    t.add_column("measure")
    t.add_column("ctxwise", justify="right")
    if off is not None:
        t.add_column("compaction off", justify="right")
        t.add_column("change", justify="right")
    for key, label in MEASURES:
        if key == "peak_size":
            label = f"{label} ({unit})"
        row: list[Any] = [label, _cell(key, on, sessions)]
        if off is not None:
            row += [_cell(key, off, sessions), _change(key, on, off)]
        t.add_row(*row)
    parts: list[RenderableType] = []
    if sessions > TABLES_UP_TO:
        parts.append(Text(f"{sessions} sessions: per-session tables omitted; use --json or --report"))
    parts += [Text(title_lines(title), style="table.title"), t]
    return Group(*parts)


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
