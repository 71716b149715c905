"""Rich tables for the terminal: the per-session round table, the measures side by side with
compaction off, and ``inspect``'s size breakdown."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from ..prices import PRICE_MODELS, PriceModel
from .run import RunResult
from .runner import Measures, RoundRecord, SessionResult, describe

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


def excerpt(text: str, width: int = 33) -> str:
    one = " ".join(text.split())
    return one if len(one) <= width else one[: width - 1] + "…"


def session_table(r: SessionResult, unit: str) -> Table:
    """The seeds' round table with compaction on top: one row per user turn, then totals."""
    t = Table(title=f"{r.name}  (format {r.format}, provider {r.provider}, {r.messages} messages)",
              title_justify="left",
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
        what = Text(excerpt(row.user_text), style="dim")
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
    ("reference_fb", "reference F(B) (full to budget), cost ÷ F(B)"),
    ("priced", "cost, provider prices"),
    ("task_recall", "task recall"),
    ("anchor_recall", "edit-anchor recall"),
    ("freshness", "working-file freshness"),
    ("breaks", "cache breaks, calls per break (median)"),
    ("rebilled", "re-billed tokens (o200k)"),
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


RATIOS = {"task_recall": "task", "anchor_recall": "anchors", "freshness": "fresh"}
"""The long-loop recalls of :data:`MEASURES`: the :class:`Measures` property and the prefix of
its ``_supported`` / ``_needed`` counts."""


def table_cell(key: str, m: Measures, sessions: int) -> str:
    """The text of measure ``key``'s cell for ``m`` (``sessions`` for the sessions row)."""
    if key == "sessions":
        return str(sessions)
    if key == "recall":
        return f"{m.recall:.1%}  ({m.supported_norm}/{m.needed_norm})"
    if key == "recall_exact":
        return f"{m.recall_exact:.1%}  ({m.supported}/{m.needed})"
    if key in RATIOS:
        part = RATIOS[key]
        need = getattr(m, part + "_needed")
        return f"{getattr(m, key):.1%}  ({getattr(m, part + '_supported')}/{need})" if need else "– (none)"
    if key == "breaks":
        return f"{len(m.bought)}, {m.calls_per_break:.1f}" if m.bought else "0"
    if key == "recall_recoverable":
        return f"{m.recall_recoverable:.1%}  (+{m.recoverable})"
    if key == "reference_fb":
        return f"{n(m.reference_fb)}  ×{m.cost_ratio:.3f}" if m.reference_fb else "–"
    if key == "priced":
        return f"{n(m.priced)} ({m.prices})  ×{m.priced_ratio:.3f}" if m.reference_fb_priced else n(m.priced)
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
    if key in RATIOS and not (getattr(on, RATIOS[key] + "_needed") or getattr(off, RATIOS[key] + "_needed")):
        return ""  # nothing to count on either side (no edit): no change to show
    if key in ("recall", "recall_exact", "recall_recoverable", *RATIOS):
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
    if key in ("recall", "recall_exact", "recall_recoverable", *RATIOS):
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
        row: list[Any] = [label, table_cell(key, on, sessions)]
        if off is not None:
            row += [table_cell(key, off, sessions), _change(key, on, off)]
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


# -- what fired and why; what it cost under each price model; the verdict ---------------------


def events_table(r: SessionResult, unit: str) -> Table | None:
    """What fired in one session and why: one row per compaction event with its round, model
    call, action, trigger (the rule that fired it, e.g. ``size 4059 > clear_at 2000 (0.5 x 4000
    tokens); the hard limit is crossed``) and the size before and after. None when nothing
    fired."""
    rows = [(c.round, i, e) for i, c in enumerate(r.calls, 1) for e in c.events]
    if not rows:
        return None
    t = Table(title=f"{r.name}: what fired and why", title_justify="left", header_style="bold")
    for col, right in (("round", True), ("call", True), ("action", False), ("why (the rule that fired)", False),
                       (f"size ({unit})", True)):
        t.add_column(col, justify="right" if right else "left")
    for rnd, call, e in rows:
        t.add_row(str(rnd), str(call), "; ".join(describe([e])) or str(e["stage"]), str(e.get("trigger") or ""),
                  f"{n(e['size_before'])} → {n(e['size_after'])}")
    return t


def price_models() -> list[PriceModel]:
    """The distinct published price models (:data:`ctxwise.prices.PRICE_MODELS`), in order."""
    return list({m.name: m for m in PRICE_MODELS.values()}.values())


def percent(a: float, b: float) -> str:
    """``a`` against ``b`` as a change: ``-29%``, ``+9%``, ``0%``."""
    d = round((a / b - 1) * 100) if b else 0
    return f"{d:+d}%" if d else "0%"


def cache_terms(model: PriceModel) -> str:
    """A price model's cache terms in a few words: ``hits ×0.1, writes ×1.25, none under
    1,024 tokens, kept 5 min`` (multiples of a fresh input token; the write, the minimum and
    the lifetime only when they apply)."""
    terms = [f"hits ×{model.read:g}"]
    if model.write != 1:
        terms.append(f"writes ×{model.write:g}")
    if model.min_prefix >= 1024:
        terms.append(f"none under {model.min_prefix:,} tokens")
    if model.lifetime:
        life = model.lifetime
        terms.append(f"kept {life / 3600:g} h" if life >= 3600 else f"kept {life / 60:g} min")
    return ", ".join(terms)


def price_table(on: Measures, off: Measures) -> Table:
    """What the calls cost with ctxwise and sending everything (compaction off), priced under
    each published price model, in uncached-token units (a cached token at the model's read
    price, the rest at its write or miss price; :meth:`Measures.cost_under`). The model of the
    provider the sessions were replayed as is marked ``*``."""
    mine = [m.name for m in price_models() if m.name == on.prices]
    caption = "the same calls priced under each provider's cache terms" + ("; * the provider replayed" if mine else "")
    t = Table(title="cost under each price model (uncached-token units)", title_justify="left", header_style="bold",
              caption=caption, caption_justify="left")
    for col in ("price model", "cache terms", "ctxwise", "send everything", "change"):
        t.add_column(col, justify="right" if col in ("ctxwise", "send everything", "change") else "left")
    for model in price_models():
        a, b = on.cost_under(model), off.cost_under(model)
        change = percent(a, b)
        style = "green" if change.startswith("-") else "red" if change.startswith("+") else ""
        t.add_row(model.name + (" *" if model.name in mine else ""), cache_terms(model), n(a), n(b),
                  Text(change, style=style))
    return t


def _names(names: Sequence[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _money(on: Measures, off: Measures) -> str:
    """The sentence on cost: under which price models ctxwise costs less than sending
    everything, and under which it costs more, with their cache terms."""
    models = price_models()
    cheaper = [m.name for m in models if on.cost_under(m) < off.cost_under(m)]
    dearer = [m for m in models if on.cost_under(m) >= off.cost_under(m)]
    fewer = 1 - on.input_tokens / off.input_tokens if off.input_tokens else 0.0
    why = (f"it sends {fewer:.0%} fewer input tokens, and that outweighs the cached prefix its edits make "
           "the provider bill again")
    if not dearer:
        return f"Money: ctxwise costs less than sending everything under every price model here: {why}."
    terms = _names([f"{m.name} ({cache_terms(m)})" for m in dearer])
    cheap = ("whose cache terms make re-sending the whole cached history cost less than the edits that keep "
             "it short")
    if not cheaper:
        return f"Money: sending everything costs less under every price model here ({terms}), {cheap}."
    return (f"Money: ctxwise costs less than sending everything under {_names(cheaper)} prices: {why}. "
            f"It costs more under {terms} prices, {cheap}.")


def _validity(on: Measures, off: Measures, budget: int, unit: str) -> str:
    """The sentence on validity: how many calls sent whole would break the budget."""
    if not off.over_budget:
        return (f"Validity: sent whole, every call fits the budget of {budget:,} {unit}, so here ctxwise's only "
                "value is what it saves.")
    kept = "keeps every call inside it" if not on.over_budget else f"keeps all but {on.over_budget} inside it"
    return (f"Validity: sent whole, {off.over_budget:,} of {off.calls:,} calls would exceed the budget of {budget:,} "
            f"{unit}; ctxwise {kept}, with support recall {on.recall:.1%}. Where it costs more, that is its value: "
            "an over-long session stays valid.")


def verdict_sentences(on: Measures, off: Measures, *, budget: int, unit: str) -> list[str]:
    """Two plain sentences from the figures: when ctxwise saves money (under which price models,
    and the cache terms of those under which it does not) and when its value is keeping an
    over-long session valid (how many calls sent whole would break the budget)."""
    return [_money(on, off), _validity(on, off, budget, unit)]


def verdict(on: Measures, off: Measures, *, budget: int, unit: str) -> Text:
    """:func:`verdict_sentences` as one rich text, a sentence per line."""
    return Text("\n".join(verdict_sentences(on, off, budget=budget, unit=unit)))


def summary_title(run: RunResult, failed: int) -> str:
    """``summary: 3 session(s) replayed, 1 failed, policy default, budget 4,000 tokens
    (o200k_base), provider deepseek``; several providers are listed with their counts."""
    p = run.policy
    providers = run.providers() or {p.provider: 0}
    which = (f"provider {next(iter(providers))}" if len(providers) == 1 else
             "providers per recording (" + ", ".join(f"{k} {v}" for k, v in providers.items()) + ")")
    return (f"summary: {len(run.sessions)} session(s) replayed{f', {failed} failed' if failed else ''}, "
            f"policy {p.name}, budget {p.budget:,} {p.unit}" + (f" ({p.tokenizer})" if p.unit == "tokens" else "")
            + f", {which}")


def run_text(run: RunResult) -> list[RenderableType]:
    """Everything ``ctxwise replay`` prints for a run: per session (up to :data:`TABLES_UP_TO`)
    its round table and what fired and why; the measures with compaction on and off; with a
    baseline, the cost under each price model and the verdict."""
    unit = run.policy.unit
    parts: list[RenderableType] = []
    if len(run.sessions) <= TABLES_UP_TO:
        for s in run.sessions:
            parts.append(session_table(s, unit))
            fired = events_table(s, unit)
            if fired is not None:
                parts.append(fired)
    on, off = run.totals()
    parts.append(measures_table(on, off, sessions=len(run.sessions), unit=unit,
                                title=summary_title(run, len(run.errors))))
    if off is not None and run.sessions:
        parts += [price_table(on, off), verdict(on, off, budget=run.policy.effective_budget, unit=unit)]
    return parts
