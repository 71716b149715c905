"""The inspector's HTML: plain functions from store rows to escaped HTML strings.

Every value that comes from a session (ids, text, tool inputs, event triggers) goes through
:func:`html.escape`; the pages load only ``/ui/static/*`` (no CDN, no inline script, a
``Content-Security-Policy`` of ``'self'`` set by :mod:`.ui`). The chart is the replay report's
own (:func:`ctxwise.replay.report.chart`), drawn per model call from :mod:`.calls`.
"""

from __future__ import annotations

import json
from datetime import datetime
from html import escape
from typing import Any, Callable
from urllib.parse import urlencode

from .. import ContextRow, ImageBlock, Message, Policy, SessionInfo, SessionState, TextBlock, ThinkingBlock, \
    ToolResultBlock, ToolUseBlock, TranscriptRow, get_counter
from ..replay.report import STAGE_CLASS, chart, legend
from ..replay.runner import SessionResult
from .calls import CallView, chart_records

STATE_NOTE = {
    "verbatim": "sent as appended",
    "cleared": "sent with the result body replaced by a placeholder",
    "pruned": "sent with its thinking removed",
    "summarized": "not sent: folded into a summary",
    "trimmed": "not sent: dropped by the hard limit",
    "popped": "not sent: retracted (pop)",
    "reset": "not sent: the context was cleared",
}
POLICY_KEYS = ("name", "provider", "budget", "unit", "tokenizer", "reserve_output", "clear_at", "clear_target",
               "summarize_at", "hard_limit", "edit_when", "keep_recent_cycles", "clearable_tools", "keep_tools",
               "facts", "user_memory")
"""The policy fields shown first; the rest are in a collapsed table below them."""


def e(value: Any) -> str:
    """``value`` as escaped HTML text (quotes too: safe inside attributes)."""
    return escape(str(value), quote=True)


def q(path: str, **params: Any) -> str:
    """A URL of the inspector with its query string, escaped for an attribute."""
    clean = {k: v for k, v in params.items() if v not in (None, "")}
    return e(path + ("?" + urlencode(clean) if clean else ""))


def _time(t: datetime | str | None) -> str:
    if t is None:
        return "–"
    if isinstance(t, str):
        try:
            t = datetime.fromisoformat(t)
        except ValueError:
            return e(t)
    return e(t.strftime("%Y-%m-%d %H:%M:%S"))


def _n(x: float | None) -> str:
    return "–" if x is None else f"{x:,.0f}"


def layout(title: str, body: str, *, live: dict[str, str] | None = None, who: str = "",
           signout: str | None = None) -> str:
    """A whole page: the stylesheets and the script from ``/ui/static``, a header, ``body``.

    ``live`` (``{"version": url, "fragment": url, "current": value}``) makes the ``#live``
    element poll ``version`` and swap in ``fragment`` when the value changes. ``signout`` (the
    browser's form token) puts a sign-out form in the header."""
    attrs = ""
    if live:
        attrs = "".join(f' data-{k}="{e(v)}"' for k, v in live.items())
    out = "" if signout is None else (
        "<form class='signout' method='post' action='/ui/logout'>"
        f"<input type='hidden' name='csrf' value='{e(signout)}'><button type='submit'>Sign out</button></form>")
    return ("<!doctype html><html lang='en'><head><meta charset='utf-8'>"
            "<meta name='viewport' content='width=device-width, initial-scale=1'>"
            "<link rel='icon' href='data:,'>"
            f"<title>{e(title)} · ctxwise inspector</title>"
            "<link rel='stylesheet' href='/ui/static/report.css'><link rel='stylesheet' href='/ui/static/ui.css'>"
            "<script src='/ui/static/ui.js' defer></script></head><body>"
            f"<header class='top'><a href='/ui' class='home'>ctxwise inspector</a><span class='who'>{e(who)}</span>"
            f"<span id='live-status' class='dim'></span>{out}</header>"
            f"<main id='live'{attrs}>{body}</main></body></html>")


# -- the session list ----------------------------------------------------------------------------


def session_list(infos: list[SessionInfo], *, query: str, offset: int, more: bool, shown_user: Callable[[str], str],
                 scanned_all: bool) -> str:
    """The session list: a search box (matches user and session ids), one row per session with
    its provider, version and times, most recently updated first, and paging links."""
    rows = []
    for s in infos:
        user = shown_user(s.user_id)
        rows.append(f"<tr><td class='l'><a class='sess' href='{q('/ui/session', user=user, id=s.session_id)}'>"
                    f"{e(s.session_id)}</a></td><td class='l'>{e(user)}</td><td class='l'>{e(s.provider)}</td>"
                    f"<td>{s.version}</td><td class='l'>{_time(s.created_at)}</td><td class='l'>{_time(s.updated_at)}</td></tr>")
    table = ("<table class='sessions'><tr><th class='l'>session</th><th class='l'>user</th><th class='l'>provider</th>"
             "<th>version</th><th class='l'>created (UTC)</th><th class='l'>updated (UTC)</th></tr>"
             + "".join(rows) + "</table>") if rows else "<p class='dim' id='no-sessions'>No session matches.</p>"
    nav = []
    if offset > 0:
        nav.append(f"<a href='{q('/ui', q=query, offset=max(offset - 50, 0))}'>← newer</a>")
    if more:
        nav.append(f"<a href='{q('/ui', q=query, offset=offset + 50)}'>older →</a>")
    note = "" if scanned_all else "<p class='dim'>Search looks at the 5,000 most recently updated sessions.</p>"
    return (f"<h1>Sessions</h1><form class='search' method='get' action='/ui'><input type='search' name='q' "
            f"value='{e(query)}' placeholder='user or session id contains…' aria-label='search sessions'>"
            f"<button type='submit'>Search</button></form>{note}{table}<p class='nav'>{' · '.join(nav)}</p>")


# -- one session ---------------------------------------------------------------------------------


def _anchor(ids: dict[str, str], message_id: str) -> str:
    """A stable, attribute-safe anchor for a message id (ids may hold any character)."""
    return ids.setdefault(message_id, f"m{len(ids) + 1}")


def _pre(text: str, cls: str = "tx") -> str:
    return f"<pre class='{cls}'>{e(text)}</pre>"


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=1) if not isinstance(value, str) else value


def _blocks(m: Message) -> str:
    out = []
    for b in m.blocks:
        if isinstance(b, TextBlock):
            out.append(_pre(b.text))
        elif isinstance(b, ThinkingBlock):
            what = "redacted thinking" if b.redacted else f"thinking ({len(b.thinking):,} chars)"
            out.append(f"<details class='think'><summary>{what}</summary>{_pre(b.thinking)}</details>")
        elif isinstance(b, ToolUseBlock):
            out.append(f"<div class='call'>→ <b>{e(b.name)}</b> <span class='dim'>{e(b.id)}</span>"
                       f"{_pre(_json(b.input), 'tx code')}</div>")
        elif isinstance(b, ToolResultBlock):
            body = "".join(_pre(o.text) if isinstance(o, TextBlock) else f"<p class='dim'>[{e(_other(o))}]</p>"
                           for o in b.output)
            out.append(f"<div class='result{' error' if b.state == 'error' else ''}'>← <b>{e(b.name or '')}</b> "
                       f"<span class='dim'>{e(b.tool_use_id)} · {e(b.state)}</span>{body}</div>")
        elif isinstance(b, ImageBlock):
            out.append("<p class='dim'>[image]</p>")
        else:  # documents, search results, audio, refusals, provider blocks
            out.append(f"<p class='dim'>[{e(_other(b))}]</p>")
    return "".join(out)


def _other(b: Any) -> str:
    """A one-line label for a block the pages show without its body."""
    kind = getattr(b, "kind", None)
    return f"{b.type} {getattr(b, 'provider', '')} {kind}".strip() if kind else str(b.type)


def _context_row(r: ContextRow, ids: dict[str, str], user: str, session: str, size: int,
                 folded_into: dict[str, str], replaced: dict[str, list[str]]) -> str:
    """One context message: its id, role, state and size, what is sent, and for an edited or
    hidden message a button that loads the original (``/ui/api/original``)."""
    m = r.current
    anchor = _anchor(ids, m.id)
    kind = m.kind
    badges = [f"<span class='st {e(r.state)}' title='{e(STATE_NOTE.get(r.state, r.state))}'>{e(r.state)}</span>"]
    if kind:
        badges.append(f"<span class='st kind'>{e(kind)}</span>")
    extra = ""
    if r.message_id in folded_into:
        s_id = folded_into[r.message_id]
        extra += f"<div class='link'>folded into <a href='#{_anchor(ids, s_id)}'>{e(s_id)}</a></div>"
    if r.message_id in replaced:
        got = replaced[r.message_id]
        first, last = got[0], got[-1]
        tail = f" … <a href='#{_anchor(ids, last)}'>{e(last)}</a>" if last != first else ""
        extra += (f"<div class='link'>replaces {len(got)} messages: "
                  f"<a href='#{_anchor(ids, first)}'>{e(first)}</a>{tail}</div>")
    original = ""
    if r.state != "verbatim" and kind is None:
        label = {"cleared": "show the original result", "pruned": "show the original with its thinking"}.get(
            r.state, "show the original")
        original = (f"<details class='orig' data-key='orig-{anchor}' data-src="
                    f"'{q('/ui/api/original', user=user, id=session, message_id=m.id)}'>"
                    f"<summary>{label}</summary><pre class='tx'></pre></details>")
    shown = _blocks(m) if r.visible else ""  # a hidden message: its header, where it went, its original
    return (f"<div class='msg {e(m.role)}{'' if r.visible else ' hidden'}' id='{anchor}' data-id='{e(m.id)}'>"
            f"<div class='mh'><a href='#{anchor}' class='mid'>{e(m.id)}</a> <span class='role'>{e(m.role)}</span> "
            f"{''.join(badges)} <span class='sz'>{_n(size)}</span></div>{extra}{shown}{original}</div>")


def _transcript_row(t: TranscriptRow) -> str:
    parts = []
    for b in t.blocks:
        k = b.get("kind")
        if k == "reasoning":
            parts.append(f"<details class='think'><summary>reasoning</summary>{_pre(str(b.get('text', '')))}</details>")
        elif k == "tool":
            parts.append(f"<details class='tool'><summary>tool <b>{e(b.get('name', ''))}</b> "
                         f"<span class='dim'>{e(b.get('status', ''))}</span></summary>"
                         f"{_pre(_json(b.get('input')), 'tx code')}{_pre(str(b.get('result') or ''))}</details>")
    answer = _pre(t.text) if t.text else ""
    status = f" <span class='st interrupted'>{e(t.status)}</span>" if t.status != "normal" else ""
    return (f"<div class='trow {e(t.role)}' id='t{t.seq}'><div class='mh'><span class='role'>{e(t.role)}</span>{status} "
            f"<span class='dim'>{_time(t.created_at)}</span></div>{''.join(parts)}{answer}</div>")


def records(state: SessionState, transcript: list[TranscriptRow], events: list[dict[str, Any]], user: str,
            ids: dict[str, str]) -> str:
    """The two records side by side: each transcript row beside the context messages it was
    derived from (aligned by message id), in context order; context messages no transcript
    row holds (the system prompt, summaries) stand alone where they sit in the context."""
    policy = Policy.from_stored(state.policy, state.provider)
    counter = get_counter(policy.tokenizer if policy.unit == "tokens" else "chars")
    folded_into: dict[str, str] = {}
    replaced: dict[str, list[str]] = {}
    for ev in events:
        sid = ev.get("summary_id")
        if ev.get("stage") == "summarizing" and sid:
            got = [i for i in (ev.get("affected_ids") or []) if i != sid]
            replaced[sid] = got
            for i in got:
                folded_into[i] = sid
    owner = {mid: t for t in transcript for mid in t.message_ids}
    by_id = {r.message_id: r for r in state.rows}
    done: set[int] = set()
    out = []
    for r in state.rows:
        t = owner.get(r.message_id)
        if t is not None and t.seq in done:
            continue
        group = [by_id[i] for i in t.message_ids if i in by_id] if t is not None else [r]
        right = "".join(_context_row(g, ids, user, state.session_id,
                                     g.size if g.size is not None else counter.count_message(g.current),
                                     folded_into, replaced) for g in group)
        left = _transcript_row(t) if t is not None else "<div class='trow none dim'>not in the transcript</div>"
        if t is not None:
            done.add(t.seq)
        out.append(f"<div class='pair'><div class='tcell'>{left}</div><div class='ccell'>{right}</div></div>")
    for t in transcript:  # rows whose messages the context no longer holds (e.g. after a clear)
        if t.seq not in done:
            out.append(f"<div class='pair'><div class='tcell'>{_transcript_row(t)}</div><div class='ccell dim'>"
                       "not in the context</div></div>")
    return ("<div class='records'><div class='pair head'><div class='tcell'><h3>Transcript</h3><p class='dim'>what a "
            "person sees; never edited</p></div><div class='ccell'><h3>Context</h3><p class='dim'>what the model reads, "
            "in order; <label><input type='checkbox' id='sent-only'> only what is sent</label></p></div></div>"
            + "".join(out) + "</div>")


def timeline(events: list[dict[str, Any]], calls: list[CallView], ids: dict[str, str]) -> str:
    """The event timeline: time, model call, stage, trigger, sizes, the messages it touched.
    A ``cache_usage`` event (reported cache tokens beside the predicted ones) is put on the
    call whose output it names."""
    call_of = {id(ev): c.number for c in calls for ev in c.events}
    by_output = {c.message_id: c.number for c in calls if c.message_id}
    for ev in events:
        if ev.get("stage") == "cache_usage" and ev.get("affected_ids"):
            found = by_output.get(ev["affected_ids"][0])
            if found is not None:
                call_of[id(ev)] = found
    rows = []
    for ev in events:
        affected = ev.get("affected_ids") or []
        links = ", ".join(f"<a href='#{_anchor(ids, a)}'>{e(a)}</a>" for a in affected[:6])
        if len(affected) > 6:
            links += f" <span class='dim'>+{len(affected) - 6} more</span>"
        sid = ev.get("summary_id")
        summary = f"<a href='#{_anchor(ids, sid)}'>{e(sid)}</a>" if sid else ""
        stage = str(ev.get("stage", ""))
        rows.append(f"<tr class='ev'><td class='l'>{_time(ev.get('at'))}</td><td>{call_of.get(id(ev), '–')}</td>"
                    f"<td class='l'><b class='{STAGE_CLASS.get(stage, '')}'>{e(stage)}</b></td>"
                    f"<td class='l trig'>{e(ev.get('trigger', ''))}</td>"
                    f"<td>{_n(ev.get('size_before'))} → {_n(ev.get('size_after'))}</td>"
                    f"<td class='l'>{links}</td><td class='l'>{summary}</td></tr>")
    if not rows:
        return "<p class='dim' id='no-events'>No event yet: nothing was edited.</p>"
    return ("<table class='events'><tr><th class='l'>at (UTC)</th><th>call</th><th class='l'>stage</th>"
            "<th class='l'>trigger</th><th>size</th><th class='l'>messages</th><th class='l'>summary</th></tr>"
            + "".join(rows) + "</table>")


def policy_table(state: SessionState) -> str:
    """The policy in force (the session's stored policy), the main fields first."""
    p = state.policy
    policy = Policy.from_stored(p, state.provider)

    def row(k: str) -> str:
        v = p.get(k)
        shown = json.dumps(v, ensure_ascii=False) if isinstance(v, (list, dict)) else v
        return f"<div class='kv'><span>{e(k)}</span> <b>{e(shown)}</b></div>"

    main = "".join(row(k) for k in POLICY_KEYS if k in p)
    rest = "".join(row(k) for k in p if k not in POLICY_KEYS)
    marks = (f"clearing above {_n(policy.effective_budget * policy.clear_at)}, summarizing above "
             f"{_n(policy.effective_budget * policy.summarize_at)}, hard limit {_n(policy.effective_budget * policy.hard_limit)} "
             f"{e(policy.unit)}")
    return (f"<p class='sub'>Provider <b>{e(state.provider)}</b>, policy <b>{e(p.get('name', ''))}</b>: budget "
            f"{_n(policy.effective_budget)} {e(policy.unit)} after the reserve; {marks}.</p>"
            f"<div class='policy'>{main}</div><details><summary>every other setting</summary>"
            f"<div class='policy'>{rest}</div></details>")


def session_live(state: SessionState, transcript: list[TranscriptRow], events: list[dict[str, Any]],
                 calls: list[CallView], user: str, tenant_note: str = "") -> str:
    """What the live part of the session page holds: the header, the chart, the policy, the
    event timeline and the two records (swapped in whole when the session's version moves)."""
    policy = Policy.from_stored(state.policy, state.provider)
    ids: dict[str, str] = {}
    visible = sum(1 for r in state.rows if r.visible)
    pending = " (the last bar: what the next call reads before compaction)" if calls and calls[-1].message_id is None else ""
    result = SessionResult(name=f"{user} / {state.session_id}", source="store", format="stored",
                           messages=len(state.rows), rounds=chart_records(calls))
    graph = (chart(result, policy, 0, width=1360, height=340, axis="model call") if calls else
             "<p class='dim'>No model call yet.</p>")
    rebuilt = sum(1 for c in calls if not c.exact)
    return (f"<h1 class='sname'>{e(state.session_id)}</h1>"
            f"<p class='sub'>user <b>{e(user)}</b>{e(tenant_note)} · version <b class='version'>{state.version}</b> · "
            f"{len(state.rows)} context messages ({visible} sent) · {len(transcript)} transcript rows · "
            f"{len([c for c in calls if c.message_id])} model calls · {len(events)} events</p>"
            f"<section><h2>Context size per model call</h2><p class='dim'>Sizes in {e(policy.unit)}; a call that fired "
            f"compaction shows the sizes its events measured, the {rebuilt} others are rebuilt from the stored "
            f"messages{e(pending)}.</p>{legend()}{graph}</section>"
            f"<section><h2>Policy in force</h2>{policy_table(state)}</section>"
            f"<section><h2>Events</h2>{timeline(events, calls, ids)}</section>"
            f"<section><h2>Transcript and context</h2>{records(state, transcript, events, user, ids)}</section>")


def message_text(m: Message) -> str:
    """A message as plain text for the "show the original" panel: text, thinking, tool calls
    with their input, tool results with their output, in order."""
    out = []
    for b in m.blocks:
        if isinstance(b, TextBlock):
            out.append(b.text)
        elif isinstance(b, ThinkingBlock):
            out.append("[thinking]\n" + (b.thinking if not b.redacted else "(redacted)"))
        elif isinstance(b, ToolUseBlock):
            out.append(f"[tool call {b.name} {b.id}]\n{_json(b.input)}")
        elif isinstance(b, ToolResultBlock):
            body = "".join(o.text if isinstance(o, TextBlock) else f"[{_other(o)}]" for o in b.output)
            out.append(f"[result of {b.name or ''} {b.tool_use_id}, {b.state}]\n{body}")
        elif isinstance(b, ImageBlock):
            out.append("[image]")
        else:
            out.append(f"[{_other(b)}]")
    return "\n\n".join(out)


def message_page(status: int, title: str, text: str) -> str:
    """A small page for 401 / 404: one line, nothing about other tenants."""
    return layout(title, f"<h1>{e(title)}</h1><p class='msgline'>{e(text)}</p><p><a href='/ui'>sessions</a></p>")
