"""``--report FILE.html``: one static, self-contained HTML page for a replay run.

Per session: a stacked bar chart (inline SVG, no script, no network) of the context sent at
the end of each round by category, the budget and watermark lines (labelled in the right
margin), a marker above each round where compaction fired, and the size the uncompacted record
would have had as a dashed outline, clipped at the top of the chart with its size written
above when it is off the scale (the scale follows the budget and the sizes actually sent). A
round with no model call has no bar ("no call"). Then the round table and the event list. A
summary table with compaction on and off and, for several sessions, a table of contents head
the page. Colours and fonts live in the stylesheet, once, so a page of hundreds of sessions
stays small.
"""

from __future__ import annotations

import math
from html import escape
from typing import Any

from .breakdown import CATEGORIES
from .render import MEASURES, table_cell, excerpt, percent, cache_terms, price_models, total_cells, verdict_sentences
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
    "facts_evicted": ("F", "#475569"),
    "summarizer_failed": ("!", "#7f1d1d"),
}
CAT_CLASS = {cat: f"k{i}" for i, cat in enumerate(COLORS)}
STAGE_CLASS = {st: f"e{i}" for i, st in enumerate(MARKS)}

CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px auto;max-width:1120px;
     color:#0f172a;padding:0 16px;background:#fff}
h1{font-size:22px;margin:0 0 4px} h2{font-size:18px;margin:36px 0 4px;border-top:1px solid #e2e8f0;padding-top:20px}
h2 a{color:inherit;text-decoration:none} a{color:#1d4ed8}
.sub{color:#475569;margin:0 0 12px}
table{border-collapse:collapse;margin:8px 0 16px;font-size:13px}
th,td{padding:4px 10px;border-bottom:1px solid #e2e8f0;text-align:right;vertical-align:top}
th{background:#f8fafc;font-weight:600} td.l,th.l{text-align:left}
tr.tot td{border-top:2px solid #cbd5e1;font-weight:600} tr.tot .t{font-weight:400}
td.w{min-width:300px;max-width:560px} td.w .u{color:#334155} td.w .t{color:#64748b;font-size:12px}
td.a{white-space:nowrap}
.legend{position:sticky;top:0;z-index:1;background:#fffe;padding:6px 0;border-bottom:1px solid #f1f5f9}
.legend span{display:inline-block;margin-right:14px;font-size:12px;color:#334155}
.legend i{display:inline-block;width:11px;height:11px;border-radius:2px;margin-right:5px;vertical-align:-1px}
.legend i.o{border:1px dashed #94a3b8;background:#fff;box-sizing:border-box}
.legend i.m{border-radius:50%}
.err{color:#b91c1c} .dim{color:#64748b} .act{color:#b45309;font-weight:600}
details{margin:4px 0 10px} summary{cursor:pointer;color:#334155}
.toc td:first-child{text-align:left} .toc b{margin-left:6px}
svg.chart{display:block;margin:6px 0 4px;background:#fff;font-family:inherit}
svg.chart text{font-size:11px;fill:#64748b}
svg.chart .ax{stroke:#334155} svg.chart .gr{stroke:#f1f5f9}
svg.chart .rn{fill:#334155;text-anchor:middle} svg.chart .yl{text-anchor:end}
svg.chart .full{fill:none;stroke:#94a3b8;stroke-dasharray:4 3}
svg.chart .clip{fill:#64748b;text-anchor:middle;font-size:10px}
svg.chart .nc{fill:#64748b;text-anchor:middle;font-style:italic} svg.chart .nc.v{text-anchor:start}
svg.chart .wm{stroke-width:1.2;stroke-dasharray:6 4} svg.chart .wm.b{stroke-dasharray:none}
svg.chart .marker text{fill:#fff;font-size:10px;font-weight:700;text-anchor:middle}
"""
CSS += "".join(f".{c}{{fill:{COLORS[cat]};background:{COLORS[cat]}}}" for cat, c in CAT_CLASS.items())
CSS += "".join(f".{c},svg.chart text.{c}{{fill:{colour};color:{colour}}}i.{c}{{background:{colour}}}"
               f"line.{c}{{stroke:{colour}}}" for st, c in STAGE_CLASS.items() for colour in [MARKS[st][1]])
WATERMARK_CLASS = {"clear": STAGE_CLASS["clearing"], "summarize": STAGE_CLASS["summarizing"],
                   "budget": STAGE_CLASS["trimming"]}


def _n(x: float) -> str:
    return f"{x:,.0f}"


def _size(x: float | None) -> str:
    return "–" if x is None else _n(x)


def _k(x: float) -> str:
    """``812``, ``15.2k``, ``1.3M``: a short size for labels on the chart."""
    if x < 1000:
        return f"{x:.0f}"
    return f"{x / 1000:.1f}k" if x < 1_000_000 else f"{x / 1_000_000:.1f}M"


def _f(x: float) -> str:
    """An SVG coordinate: one decimal at most, no trailing ``.0``."""
    return f"{x:.1f}".rstrip("0").rstrip(".")


def nice_step(span: float, ticks: int = 5) -> float:
    """A round tick step (1, 2 or 5 times a power of ten) giving about ``ticks`` ticks."""
    raw = max(span, 1) / ticks
    mag = 10.0 ** math.floor(math.log10(raw))
    return next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)


def scale_top(rounds: list[RoundRecord], policy: Any) -> float:
    """The value at the top of the y axis: the larger of the hard limit (the budget) and the
    largest size sent, with room for the markers, rounded up to a tick. The uncompacted record
    does not count: it would squash the bars that were actually sent."""
    sent = [r.size for r in rounds if r.size is not None]
    top_value = max([policy.effective_budget * max(policy.hard_limit, 1.0)] + sent) * 1.1 or 1
    step = nice_step(top_value)
    return step * math.ceil(top_value / step)


class _Frame:
    """The chart's geometry: margins, the plot's size, the y scale (``ymax``, tick ``step``)
    and the slot and bar width per round. :meth:`y` maps a size to a y coordinate."""

    left, right, top, bottom = 56, 112, 30, 40

    def __init__(self, rounds: list[RoundRecord], policy: Any, width: int, height: int) -> None:
        self.width, self.height = width, height
        self.pw, self.ph = width - self.left - self.right, height - self.top - self.bottom
        self.ymax = scale_top(rounds, policy)
        self.step = nice_step(self.ymax)
        self.slot = self.pw / max(len(rounds), 1)
        self.bw = max(min(self.slot * 0.62, 56), 3)
        self.label_every = max(1, math.ceil(40 / self.slot))  # a "↑14.8k" label is about 40 px wide

    def y(self, v: float) -> float:
        """The y coordinate of size ``v`` (clipped at the top of the plot)."""
        return self.top + self.ph - self.ph * min(v, self.ymax) / self.ymax


def _grid(f: _Frame, unit: str) -> list[str]:
    """Grid lines with their y labels, and the unit along the y axis."""
    out = []
    for i in range(int(round(f.ymax / f.step)) + 1):
        v = f.step * i
        out.append(f'<line class="gr" x1="{f.left}" x2="{f.width - f.right}" y1="{_f(f.y(v))}" y2="{_f(f.y(v))}"/>'
                   f'<text class="yl" x="{f.left - 6}" y="{_f(f.y(v) + 4)}">{_n(v)}</text>')
    mid = f.top + f.ph / 2
    out.append(f'<text x="14" y="{mid:.0f}" transform="rotate(-90 14 {mid:.0f})" text-anchor="middle">{unit}</text>')
    return out


def _outline(f: _Frame, r: RoundRecord, x: float, last: bool, label: bool) -> list[str]:
    """The uncompacted record of a round: an outline, open at the top and labelled with its
    size when off the scale (``label``: this slot's turn to carry one; always the last)."""
    if r.full > f.ymax:
        x0, x1 = _f(x - 2), _f(x + f.bw + 2)
        out = [f'<path class="full" d="M{x0} {_f(f.y(0))}V{f.top}M{x1} {_f(f.y(0))}V{f.top}"/>']
        if label or last:  # narrow slots: labels never overlap
            out.append(f'<text class="clip" x="{_f(x + f.bw / 2)}" y="{f.top - 5}">↑{_k(r.full)}</text>')
        return out
    if r.full > 0:
        return [f'<rect class="full" x="{_f(x - 2)}" y="{_f(f.y(r.full))}" width="{_f(f.bw + 4)}" '
                f'height="{_f(f.y(0) - f.y(r.full))}"/>']
    return []


def _no_call(f: _Frame, cx: str) -> str:
    """What a round with no model call shows instead of a bar: "no call", upright in a
    narrow slot."""
    if f.slot >= 48:
        return f'<text class="nc" x="{cx}" y="{_f(f.y(0) - 6)}">no call</text></g>'
    ny = _f(f.y(0) - 4)
    return f'<text class="nc v" x="{cx}" y="{ny}" dy="4" transform="rotate(-90 {cx} {ny})">no call</text></g>'


def _segments(f: _Frame, r: RoundRecord, size: int, x: float) -> tuple[list[str], float]:
    """The stacked segments of a round's bar by category (scaled to ``size``, the size sent),
    and the size at its top."""
    out = []
    base = 0.0
    scale = size / (sum(r.categories.values()) or 1)  # categories exclude fixed overhead; scale to the sent size
    for cat in CATEGORIES:
        v = r.categories.get(cat, 0) * scale
        if v <= 0:
            continue
        w, h = _f(f.bw), _f(f.y(base) - f.y(base + v))
        out.append(f'<path class="seg {CAT_CLASS[cat]}" d="M{_f(x)} {_f(f.y(base + v))}h{w}v{h}h-{w}z"/>')
        base += v
    return out, base


def _markers(f: _Frame, r: RoundRecord, cx: str, top: float, what: str) -> list[str]:
    """One lettered marker per stage that fired in the round, stacked above its bar."""
    out = []
    for j, st in enumerate(dict.fromkeys(e["stage"] for e in r.events)):
        letter = MARKS.get(st, ("•", ""))[0]
        cy = f.y(top) - 10 - 17 * j
        tip = escape("; ".join(describe([e for e in r.events if e["stage"] == st])) or st)
        out.append(f'<g class="marker"><circle class="{STAGE_CLASS.get(st, "")}" cx="{cx}" cy="{_f(cy)}" '
                   f'r="7.5"/><text x="{cx}" y="{_f(cy + 3.8)}">{letter}</text>'
                   f'<title>{what} {r.round}: {tip}</title></g>')
    return out


def _bar(f: _Frame, r: RoundRecord, r_i: int, last: bool, unit: str, what: str) -> list[str]:
    """One round: its number, a tooltip, the uncompacted outline, the bar (or "no call") and
    the markers of what fired."""
    x = f.left + f.slot * r_i + (f.slot - f.bw) / 2
    cx = _f(x + f.bw / 2)
    out = [f'<text class="rn" x="{cx}" y="{_f(f.y(0) + 15)}">{r.round}</text>']
    if r.size is None:
        tip = f"{what} {r.round}: no model call (no recorded answer)"
    else:
        parts = " · ".join(f"{cat} {_n(r.categories[cat])}" for cat in CATEGORIES if r.categories.get(cat))
        tip = f"{what} {r.round}: sent {_n(r.size)} {unit} ({parts})"
    out.append(f"<g><title>{tip}; uncompacted record {_n(r.full)} {unit}</title>")
    out += _outline(f, r, x, last, r_i % f.label_every == 0)
    if r.size is None:  # no model call in this round: nothing was sent, no bar
        out.append(_no_call(f, cx))
        return out
    segments, top = _segments(f, r, r.size, x)
    out += segments
    out.append("</g>")
    return out + _markers(f, r, cx, top, what)


def _watermarks(f: _Frame, policy: Any) -> list[str]:
    """The clear, summarize and budget lines across the plot, labelled in the right margin
    (never behind a bar; close labels kept apart)."""
    out = []
    label_y: list[float] = []
    for frac, label in [(policy.clear_at, "clear"), (policy.summarize_at, "summarize"), (policy.hard_limit, "budget")]:
        v = policy.effective_budget * frac
        cls = WATERMARK_CLASS[label]
        ly = f.y(v) + 4
        if label_y and label_y[-1] - ly < 12:
            ly = label_y[-1] - 12
        label_y.append(ly)
        out.append(f'<line class="wm {cls}{" b" if label == "budget" else ""}" x1="{f.left}" x2="{f.width - f.right}" '
                   f'y1="{_f(f.y(v))}" y2="{_f(f.y(v))}"/>'
                   f'<text class="{cls}" x="{f.width - f.right + 6}" y="{_f(ly)}">{label} {_n(v)}</text>')
    return out


def chart(s: SessionResult, policy: Any, index: int, width: int = 1060, height: int = 320, *,
          axis: str = "round (user turn)") -> str:
    """The stacked bar chart of one session as an ``<svg class="chart">`` element: one bar per
    record of ``s.rounds`` (a user turn here; the web inspector passes one per model call and
    ``axis="model call"``). ``width`` and ``height`` in pixels."""
    f = _Frame(s.rounds, policy, width, height)
    unit = escape(policy.unit)
    what = escape(axis.split(" (")[0])  # "round", "model call": the word the tooltips use
    out = [f'<svg class="chart" id="chart-{index}" xmlns="http://www.w3.org/2000/svg" width="{width}" '
           f'height="{height}" viewBox="0 0 {width} {height}" role="img" '
           f'aria-label="context size per {escape(axis)} for {escape(s.name)}">']
    out += _grid(f, unit)
    for r_i, r in enumerate(s.rounds):
        out += _bar(f, r, r_i, r_i == len(s.rounds) - 1, unit, what)
    out += _watermarks(f, policy)
    out.append(f'<line class="ax" x1="{f.left}" x2="{width - f.right}" y1="{_f(f.y(0))}" y2="{_f(f.y(0))}"/>'
               f'<text x="{f.left + f.pw / 2:.0f}" y="{height - 6}" text-anchor="middle">{escape(axis)}</text>')
    out.append("</svg>")
    return "".join(out)


def legend() -> str:
    """The chart's legend: categories, the uncompacted outline, the markers."""
    items = [f'<span><i class="{CAT_CLASS[k]}"></i>{escape(k)}</span>' for k in COLORS]
    items.append('<span><i class="o"></i>uncompacted record (↑ size when off the scale)</span>')
    items += [f'<span><i class="m {STAGE_CLASS[st]}"></i>{escape(letter)} = {escape(st.replace("_", " "))}</span>'
              for st, (letter, _) in MARKS.items() if st != "summarizer_failed"]
    return f'<div class="legend">{"".join(items)}</div>'


def _tools(tools: list[str]) -> str:
    counts: dict[str, int] = {}
    for t in tools:
        counts[t] = counts.get(t, 0) + 1
    parts = []
    for t, c in counts.items():
        name = escape(t[:-1]) + ' <span class="err">✗</span>' if t.endswith("!") else escape(t)
        parts.append(name + (f" ×{c}" if c > 1 else ""))
    return ", ".join(parts) or "no tools"


def _round_rows(s: SessionResult, unit: str) -> str:
    rows = []
    for r in s.rounds:
        act = "<br>".join(escape(a) for a in r.actions)
        quiet = "no model call" if not r.calls else "none"
        rows.append(f"<tr><td>{r.round}</td><td class='l w'><div class='u'>{escape(excerpt(r.user_text, 72))}</div>"
                    f"<div class='t'>{_tools(r.tools)}</div></td><td>{r.calls}</td><td>{_size(r.size_before)}</td>"
                    f"<td>{_size(r.size)}</td><td>{_size(r.chars)}</td><td>+{_n(r.growth)}</td>"
                    f"<td class='l a {'act' if act else 'dim'}'>{act or quiet}</td></tr>")
    if s.rounds:
        t = total_cells(s)
        start = f"<div class='t'>= start {_n(t['start'])} + growth {_n(t['growth'])}</div>" if t["start"] else ""
        rows.append(f"<tr class='tot'><td>total</td><td class='l w'>{t['rounds']} rounds, full record {_n(t['full'])} "
                    f"{unit}{start}</td><td>{t['calls']}</td><td>{_size(t['before'])}</td>"
                    f"<td>{_size(t['after'])}</td><td>{_size(t['chars'])}</td><td>+{_n(t['growth'])}</td><td></td></tr>")
    return (f"<table><tr><th>round</th><th class='l'>what happened (user said / tools called)</th><th>calls</th>"
            f"<th>before ({unit})</th><th>after ({unit})</th><th>after (chars)</th><th>growth</th>"
            f"<th class='l'>action</th></tr>" + "".join(rows) + "</table>")


def _event_rows(s: SessionResult) -> str:
    rows = []
    for ci, c in enumerate(s.calls):
        for e in c.events:
            rows.append(
                f"<tr><td>{c.round}</td><td>{ci + 1}</td><td class='l'><b class='{STAGE_CLASS.get(e['stage'], '')}'>"
                f"{escape(e['stage'])}</b></td><td class='l'>{escape(e.get('trigger', ''))}</td>"
                f"<td>{_n(e['size_before'])} → {_n(e['size_after'])}</td><td>{len(e.get('affected_ids') or [])}</td>"
                f"<td class='l'>{escape(e.get('summary_id') or '')}</td><td>{e.get('duration_ms', 0):.1f}</td></tr>")
    if not rows:
        return '<p class="dim">No compaction event: the context stayed under the clearing watermark.</p>'
    return ("<table class='events'><tr><th>round</th><th>call</th><th class='l'>stage</th><th class='l'>trigger</th>"
            "<th>size</th><th>messages</th><th class='l'>summary id</th><th>ms</th></tr>" + "".join(rows) + "</table>")


def _cache_rows(s: SessionResult) -> str:
    """Per call, the cache tokens the price model predicts for the replayed payload beside what
    the provider reported for the recorded call (where the recording kept its usage); empty
    when no call has a report."""
    rows = []
    for ci, c in enumerate(s.calls):
        r = c.reported
        if r is None:
            continue
        idle = "" if c.idle is None else f"{c.idle:,.0f}"
        miss = escape(str(r.get("miss_reason") or ""))
        write = "" if r.get("cache_write_tokens") is None else _n(r["cache_write_tokens"])
        rows.append(f"<tr><td>{c.round}</td><td>{ci + 1}</td><td>{_n(c.tokens)}</td><td>{_n(c.predicted_cached)}</td>"
                    f"<td>{_n(r['input_tokens'])}</td><td>{'' if r.get('cached_tokens') is None else _n(r['cached_tokens'])}</td>"
                    f"<td>{write}</td>"
                    f"<td>{idle}</td><td class='l'>{miss}</td></tr>")
    if not rows:
        return ""
    return ("<details><summary>Cache tokens per call: predicted (replayed payload, o200k) and reported "
            "(recorded call, provider tokens)</summary><table><tr><th>round</th><th>call</th><th>sent</th>"
            "<th>predicted cached</th><th>reported input</th><th>reported cached</th><th>reported written</th>"
            "<th>idle (s)</th><th class='l'>miss reason</th></tr>" + "".join(rows) + "</table></details>")


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
        cells = f"<td class='l'>{escape(label)}</td><td>{escape(table_cell(key, on, sessions))}</td>"
        if off:
            cells += f"<td>{escape(table_cell(key, off, sessions))}</td>"
        rows.append(f"<tr>{cells}</tr>")
    return f"<table>{head}{''.join(rows)}</table>"


def _toc(run: RunResult) -> str:
    """The table of contents: per session a link to its section, its rounds, calls, events
    by stage and support recall."""
    rows = []
    for i, s in enumerate(run.sessions):
        m = s.measures
        ev = "".join(f"<b class='{STAGE_CLASS.get(k, '')}' title='{escape(k)}'>{MARKS.get(k, (k,))[0]}</b> {v}"
                     for k, v in m.events.items()) or "<span class='dim'>none</span>"
        rows.append(f"<tr><td><a href='#s{i}'>{escape(s.name)}</a></td><td>{len(s.rounds)}</td><td>{m.calls}</td>"
                    f"<td class='l'>{ev}</td><td>{m.recall:.1%}</td><td>{_n(m.peak_size)}</td></tr>")
    return (f"<details open><summary>Sessions ({len(run.sessions)})</summary><table class='toc'><tr>"
            f"<th class='l'>session</th><th>rounds</th><th>calls</th><th class='l'>events</th><th>support recall</th>"
            f"<th>peak ({escape(run.policy.unit)})</th></tr>" + "".join(rows) + "</table></details>")


def _prices(run: RunResult) -> str:
    """With a baseline: the cost under each price model against sending everything, and the
    verdict sentences (:func:`~ctxwise.replay.render.verdict_sentences`); else nothing."""
    on, off = run.totals()
    if off is None or not run.sessions:
        return ""
    rows = "".join(f"<tr><td class='l'>{escape(m.name)}</td><td class='l'>{escape(cache_terms(m))}</td>"
                   f"<td>{_n(on.cost_under(m))}</td><td>{_n(off.cost_under(m))}</td>"
                   f"<td>{percent(on.cost_under(m), off.cost_under(m))}</td></tr>" for m in price_models())
    said = "".join(f"<p>{escape(s)}</p>" for s in verdict_sentences(on, off, budget=run.policy.effective_budget,
                                                                      unit=run.policy.unit))
    return ("<table><tr><th class='l'>price model</th><th class='l'>cache terms</th><th>ctxwise</th>"
            "<th>send everything</th><th>change</th></tr>" + rows + "</table>" + said)


def render_html(run: RunResult) -> str:
    """The report page for ``run`` as one HTML string."""
    p = run.policy
    many = len(run.sessions) > 3
    parts = [
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>",
        "<meta name='viewport' content='width=device-width, initial-scale=1'>",
        f"<title>ctxwise replay · {len(run.sessions)} session(s)</title><style>{CSS}</style></head><body>",
        "<h1>ctxwise replay</h1>",
        f"<p class='sub'>Policy <b>{escape(p.name)}</b>: budget {_n(p.budget)} {escape(p.unit)}"
        f"{' (' + escape(p.tokenizer) + ')' if p.unit == 'tokens' else ''}, clear at {p.clear_at:.0%}, "
        f"summarize at {p.summarize_at:.0%}, provider {escape(p.provider)}, summarizer {escape(run.runtime.summarizer)}. "
        f"Cache-adjusted cost at a cached-price ratio of {run.cache_ratio}. Run {escape(run.run_id)}.</p>",
        _measures(run),
        _prices(run),
    ]
    if len(run.sessions) > 1:
        parts.append(_toc(run))
    if run.errors:
        parts.append("<h3 class='err'>Failed</h3><ul>" + "".join(f"<li class='err'>{escape(str(e))}</li>" for e in run.errors) + "</ul>")
    unit = escape(p.unit)
    if run.sessions:
        parts.append(legend())  # once, and it stays in view (sticky) over every session's chart
    for i, s in enumerate(run.sessions):
        parts.append(f"<section class='session' id='s{i}'><h2><a href='#s{i}'>{escape(s.name)}</a></h2>")
        parts.append(f"<p class='sub'>{escape(s.format)} · {s.messages} messages · {len(s.rounds)} rounds · "
                     f"{s.measures.calls} model calls</p>")
        parts.append(chart(s, p, i))
        parts.append("<details open><summary>Rounds</summary>" + _round_rows(s, unit) + "</details>")
        parts.append(f"<details{'' if many else ' open'}><summary>Compaction events ({sum(len(c.events) for c in s.calls)})"
                     "</summary>" + _event_rows(s) + "</details>")
        parts.append(_cache_rows(s))
        parts.append("<details><summary>Measures</summary>" + _measures(run, s) + "</details></section>")
    parts.append("</body></html>")
    return "".join(parts)
