"""``--report FILE.html``: one static, self-contained HTML page for a replay run.

Per session: a stacked bar chart (inline SVG, no script, no network) of the context sent at
the end of each round by category, the size the uncompacted record would have had as a dashed
outline, the budget and watermark lines, and a marker above each round where compaction fired;
then the round table and the event list. A summary table with compaction on and off heads the
page.
"""

from __future__ import annotations

from html import escape
from typing import Any

from .breakdown import CATEGORIES
from .render import MEASURES, _cell
from .run import RunResult
from .runner import RoundRecord, SessionResult, describe

COLORS = {
    "system": "#94a3b8",
    "dialogue": "#3b82f6",
    "tool calls": "#a855f7",
    "tool results": "#f59e0b",
    "thinking": "#10b981",
    "summary": "#ec4899",
}
MARKS = {  # stage -> (letter, colour)
    "thinking": ("P", "#059669"),
    "clearing": ("C", "#d97706"),
    "summarizing": ("S", "#db2777"),
    "trimming": ("T", "#dc2626"),
    "summarizer_failed": ("!", "#7f1d1d"),
}

CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px auto;max-width:1120px;
     color:#0f172a;padding:0 16px;background:#fff}
h1{font-size:22px;margin:0 0 4px} h2{font-size:18px;margin:36px 0 4px;border-top:1px solid #e2e8f0;padding-top:20px}
.sub{color:#475569;margin:0 0 12px}
table{border-collapse:collapse;margin:8px 0 16px;font-size:13px}
th,td{padding:4px 10px;border-bottom:1px solid #e2e8f0;text-align:right;vertical-align:top}
th{background:#f8fafc;font-weight:600} td.l,th.l{text-align:left}
.legend span{display:inline-block;margin-right:14px;font-size:12px;color:#334155}
.legend i{display:inline-block;width:11px;height:11px;border-radius:2px;margin-right:5px;vertical-align:-1px}
.err{color:#b91c1c} .dim{color:#64748b} .act{color:#b45309;font-weight:600}
svg.chart{display:block;margin:6px 0 4px;background:#fff}
details{margin:4px 0 10px} summary{cursor:pointer;color:#334155}
"""


def _n(x: float) -> str:
    return f"{x:,.0f}"


def nice_step(span: float, ticks: int = 5) -> float:
    """A round tick step (1, 2 or 5 times a power of ten) giving about ``ticks`` ticks."""
    import math

    raw = max(span, 1) / ticks
    mag = 10 ** math.floor(math.log10(raw))
    return next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)


def chart(s: SessionResult, policy: Any, index: int, width: int = 1060, height: int = 330) -> str:
    """The stacked bar chart of one session as an ``<svg class="chart">`` element."""
    rounds = s.rounds
    left, right, top, bottom = 64, 16, 26, 44
    pw, ph = width - left - right, height - top - bottom
    budget = policy.effective_budget
    top_value = max([budget] + [r.full for r in rounds] + [r.size_before for r in rounds]) * 1.08 or 1
    step = nice_step(top_value)
    ymax = step * -(-top_value // step)
    y = lambda v: top + ph - ph * v / ymax  # noqa: E731
    k = max(len(rounds), 1)
    slot = pw / k
    bw = max(min(slot * 0.62, 56), 3)
    out = [f'<svg class="chart" id="chart-{index}" xmlns="http://www.w3.org/2000/svg" width="{width}" '
           f'height="{height}" viewBox="0 0 {width} {height}" role="img" '
           f'aria-label="context size per round for {escape(s.name)}">']
    # grid and y labels
    for i in range(int(round(ymax / step)) + 1):
        v = step * i
        out.append(f'<line x1="{left}" x2="{width - right}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#f1f5f9"/>')
        out.append(f'<text x="{left - 6}" y="{y(v) + 4:.1f}" font-size="11" text-anchor="end" fill="#64748b">{_n(v)}</text>')
    out.append(f'<text x="14" y="{top + ph / 2:.0f}" font-size="11" fill="#475569" '
               f'transform="rotate(-90 14 {top + ph / 2:.0f})" text-anchor="middle">{escape(policy.unit)}</text>')
    for r_i, r in enumerate(rounds):
        x = left + slot * r_i + (slot - bw) / 2
        # what the uncompacted record would be
        out.append(f'<rect x="{x - 2:.1f}" y="{y(r.full):.1f}" width="{bw + 4:.1f}" height="{y(0) - y(r.full):.1f}" '
                   f'fill="none" stroke="#94a3b8" stroke-dasharray="4 3"><title>round {r.round}: uncompacted '
                   f'record {_n(r.full)} {policy.unit}</title></rect>')
        base = 0.0
        total = sum(r.categories.values()) or 1
        scale = r.size / total if r.size else 1  # categories exclude fixed overhead; scale to the sent size
        for cat in CATEGORIES:
            v = r.categories.get(cat, 0) * scale
            if v <= 0:
                continue
            out.append(f'<rect class="seg" x="{x:.1f}" y="{y(base + v):.1f}" width="{bw:.1f}" '
                       f'height="{y(base) - y(base + v):.1f}" fill="{COLORS[cat]}"><title>round {r.round} · {cat}: '
                       f'{_n(r.categories.get(cat, 0))} {policy.unit}</title></rect>')
            base += v
        out.append(f'<text x="{x + bw / 2:.1f}" y="{y(0) + 15:.1f}" font-size="11" text-anchor="middle" '
                   f'fill="#334155">{r.round}</text>')
        stages = list(dict.fromkeys(e["stage"] for e in r.events))
        for j, st in enumerate(stages):
            letter, colour = MARKS.get(st, ("•", "#334155"))
            cy = y(max(base, r.full)) - 10 - 17 * j
            tip = escape("; ".join(describe([e for e in r.events if e["stage"] == st])) or st)
            out.append(f'<g class="marker"><circle cx="{x + bw / 2:.1f}" cy="{cy:.1f}" r="7.5" fill="{colour}"/>'
                       f'<text x="{x + bw / 2:.1f}" y="{cy + 3.8:.1f}" font-size="10" font-weight="700" fill="#fff" '
                       f'text-anchor="middle">{letter}</text><title>round {r.round}: {tip}</title></g>')
    for frac, label, colour in ((policy.clear_at, "clear", "#d97706"), (policy.summarize_at, "summarize", "#db2777"),
                                (policy.hard_limit, "budget", "#dc2626")):
        v = budget * frac
        out.append(f'<line x1="{left}" x2="{width - right}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="{colour}" '
                   f'stroke-width="1.2" stroke-dasharray="{"" if label == "budget" else "6 4"}"/>')
        out.append(f'<text x="{width - right - 4}" y="{y(v) - 4:.1f}" font-size="11" text-anchor="end" '
                   f'fill="{colour}">{label} {_n(v)}</text>')
    out.append(f'<line x1="{left}" x2="{width - right}" y1="{y(0):.1f}" y2="{y(0):.1f}" stroke="#334155"/>')
    out.append(f'<text x="{left + pw / 2:.0f}" y="{height - 8}" font-size="11" text-anchor="middle" '
               f'fill="#475569">round (user turn)</text>')
    out.append("</svg>")
    return "".join(out)


def _legend() -> str:
    items = [f'<span><i style="background:{c}"></i>{escape(k)}</span>' for k, c in COLORS.items()]
    items.append('<span><i style="border:1px dashed #94a3b8;background:#fff"></i>uncompacted record</span>')
    items += [f'<span><i style="background:{c};border-radius:50%"></i>{escape(letter)} = {escape(st)}</span>'
              for st, (letter, c) in MARKS.items() if st != "summarizer_failed"]
    return f'<div class="legend">{"".join(items)}</div>'


def _round_rows(rounds: list[RoundRecord], unit: str) -> str:
    rows = []
    for r in rounds:
        tools = ", ".join(escape(t[:-1]) + ' <span class="err">✗</span>' if t.endswith("!") else escape(t)
                          for t in r.tools) or '<span class="dim">no tools</span>'
        act = "<br>".join(escape(a) for a in r.actions)
        rows.append(f"<tr><td>{r.round}</td><td class='l'>{tools}</td><td>{r.calls}</td><td>{_n(r.size_before)}</td>"
                    f"<td>{_n(r.size)}</td><td>{_n(r.chars)}</td><td>+{_n(r.growth)}</td>"
                    f"<td class='l {'act' if act else 'dim'}'>{act or 'none'}</td></tr>")
    return (f"<table><tr><th>round</th><th class='l'>tools called</th><th>calls</th><th>before ({unit})</th>"
            f"<th>after ({unit})</th><th>after (chars)</th><th>growth</th><th class='l'>action</th></tr>"
            + "".join(rows) + "</table>")


def _event_rows(s: SessionResult) -> str:
    rows = []
    for ci, c in enumerate(s.calls):
        for e in c.events:
            letter, colour = MARKS.get(e["stage"], ("•", "#334155"))
            rows.append(
                f"<tr><td>{c.round}</td><td>{ci + 1}</td><td class='l'><b style='color:{colour}'>{escape(e['stage'])}</b></td>"
                f"<td class='l'>{escape(e.get('trigger', ''))}</td><td>{_n(e['size_before'])} → {_n(e['size_after'])}</td>"
                f"<td>{len(e.get('affected_ids') or [])}</td><td class='l'>{escape(e.get('summary_id') or '')}</td>"
                f"<td>{e.get('duration_ms', 0):.1f}</td></tr>")
    if not rows:
        return '<p class="dim">No compaction event: the context stayed under the clearing watermark.</p>'
    return ("<table class='events'><tr><th>round</th><th>call</th><th class='l'>stage</th><th class='l'>trigger</th>"
            "<th>size</th><th>messages</th><th class='l'>summary id</th><th>ms</th></tr>" + "".join(rows) + "</table>")


def _measures(run: RunResult, s: SessionResult | None = None) -> str:
    if s is None:
        on, off = run.totals()
        sessions = len(run.sessions)
    else:
        on, off, sessions = s.measures, s.baseline, 1
    head = "<tr><th class='l'>measure</th><th>ctxwise</th>" + ("<th>compaction off</th>" if off else "") + "</tr>"
    rows = []
    for key, label in MEASURES:
        if s is not None and key == "sessions":
            continue
        cells = f"<td class='l'>{escape(label)}</td><td>{escape(_cell(key, on, sessions))}</td>"
        if off:
            cells += f"<td>{escape(_cell(key, off, sessions))}</td>"
        rows.append(f"<tr>{cells}</tr>")
    return f"<table>{head}{''.join(rows)}</table>"


def render_html(run: RunResult) -> str:
    """The report page for ``run`` as one HTML string."""
    p = run.policy
    parts = [
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>",
        "<meta name='viewport' content='width=device-width, initial-scale=1'>",
        f"<title>ctxwise replay · {len(run.sessions)} session(s)</title><style>{CSS}</style></head><body>",
        "<h1>ctxwise replay</h1>",
        f"<p class='sub'>Policy <b>{escape(p.name)}</b>: budget {_n(p.budget)} {escape(p.unit)}"
        f"{' (' + escape(p.tokenizer) + ')' if p.unit == 'tokens' else ''}, clear at {p.clear_at:.0%}, "
        f"summarize at {p.summarize_at:.0%}, provider {escape(p.provider)}, summarizer {escape(p.summarizer)}. "
        f"Cache-adjusted cost at a cached-price ratio of {run.cache_ratio}. Run {escape(run.run_id)}.</p>",
        _measures(run),
    ]
    if run.errors:
        parts.append("<h3 class='err'>Failed</h3><ul>" + "".join(f"<li class='err'>{escape(str(e))}</li>" for e in run.errors) + "</ul>")
    for i, s in enumerate(run.sessions):
        parts.append(f"<section class='session'><h2>{escape(s.name)}</h2>")
        parts.append(f"<p class='sub'>{escape(s.format)} · {s.messages} messages · {len(s.rounds)} rounds · "
                     f"{s.measures.calls} model calls</p>")
        parts.append(_legend())
        parts.append(chart(s, p, i))
        parts.append("<details open><summary>Rounds</summary>" + _round_rows(s.rounds, escape(p.unit)) + "</details>")
        parts.append("<details open><summary>Compaction events</summary>" + _event_rows(s) + "</details>")
        parts.append("<details><summary>Measures</summary>" + _measures(run, s) + "</details></section>")
    parts.append("</body></html>")
    return "".join(parts)
