"""The offline, deterministic summarizer: a structured digest, no model involved.

The summary is written in the third person, in sections, with the user's requirements
quoted verbatim so numbers, units, dates, identifiers, negations and conditions survive
(ARCHITECTURE.md, decision 8; case B20). It separates what the user asked from what the assistant
said and what tools returned, and tells proposals ("the assistant said") from completed
actions (a successful call of a tool that changes something). Rolling: the sections of the
previous summary are carried into the new one, so a second pass loses no requirement.

What the agent itself said is kept with its values: each reply's first sentence and every
sentence stating a salient value (a price, a total, an id, a date), after unwrapping replies
sent as JSON (``{"message": "..."}``). Tool findings are the result's key values
(``order_id=#W1, price=321.18, status=pending``; :mod:`ctxwise.compaction.placeholder`), never
call ids, also for a result already cleared to a placeholder. The user's requirements appear
once: the pinned facts are sent in their own block by the engine, not repeated here.

A tool loop's actions are listed by what they did to which resource
(:mod:`ctxwise.resources`), every path complete: the files created or rewritten, the
files edited (with how many edits) and, newest last, the text the latest edits of each file
wrote (what a later edit of that file copies to say where it goes: ``Edit.new_string``, a
``str_replace`` ``new_str``, a ``sed -i`` command), the files read (the lines and the symbols a view showed),
the commands run with their outcome (exit status, test counts, failing tests, the first error:
:func:`ctxwise.compaction.placeholder.log_verdicts`), and each subagent's report as a report
(its opening and its findings lines), not as the key values of a tool result.
"""

from __future__ import annotations

import json
import re
from typing import Callable, Mapping, Sequence

from ..distill import distill
from ..messages import Message, ToolResultBlock, ToolUseBlock
from ..nesting import loads
from ..resources import Access, access_of, accesses_of, is_whole_write, log_verdicts, shell_access, shown_values
from ..salient import salient_values
from ..task import is_harness_text
from .base import SummaryResult

REPLY_CHARS = 400
"""At most this many characters of one assistant reply are kept (whole sentences)."""
FINDING_CHARS = 240
"""At most this many characters of one tool result's key values are kept."""
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])")
"""Where a sentence ends: . ! ? before a space (not inside ``$466.75``), or a CJK stop."""
_WRAPPER_KEYS = ("message", "content", "text", "response", "answer", "reply")


def unwrap(text: str) -> str:
    """A reply sent as a JSON object with its words under one key (``{"message": "..."}``,
    also ``content``, ``text``, ``response``, ``answer``, ``reply``) as those words; any other
    text unchanged."""
    t = text.strip()
    if not (t.startswith("{") and t.endswith("}")):
        return text
    try:
        data = loads(t)
    except ValueError:  # not JSON, or nested too deep (TooDeep): the text as it is
        return text
    if isinstance(data, dict):
        for k in _WRAPPER_KEYS:
            words = data.get(k)
            if isinstance(words, str) and words.strip():
                return words
    return text


def stated(text: str, limit: int = REPLY_CHARS) -> str:
    """What an assistant reply said, for the summary: its first sentence and every later
    sentence stating a salient value, whole sentences only, at most ``limit`` characters."""
    sents = [s.strip() for s in _SENTENCE_END.split(" ".join(unwrap(text).split())) if s.strip()]
    if not sents:
        return ""
    keep = [sents[0][:limit]]
    used = len(keep[0])
    for s in sents[1:]:
        if salient_values(s) and used + 1 + len(s) <= limit:
            keep.append(s)
            used += 1 + len(s)
    return " ".join(keep)


def findings(body: str, call_ids: set[str]) -> str:
    """A tool result's key values (:func:`ctxwise.distill.distill`: ``key=value, value; ...``
    for JSON, salient values otherwise), without any tool call id (a cleared result's
    placeholder names its own), at most :data:`FINDING_CHARS` characters."""
    return distill(body, FINDING_CHARS,
                   exclude=lambda v: "recall_tool_result" in v or any(cid and cid in v for cid in call_ids))


SECTIONS = (
    "User requirements (verbatim)",
    "Completed actions",
    "Files created or rewritten",
    "Files edited",
    "Edits made",
    "Files read",
    "Commands run and outcomes",
    "Subagent reports",
    "Tools called and findings",
    "Dead ends",
    "Progress",
    "Open tasks and next step",
    "Values stated in dropped items",
)
VALUE_SEP = "; "
"""Between the values on that line: not ", ", which values hold themselves (``May 1, 2024``,
``$1,254.50`` is safe, a date is not)."""
REQUIREMENTS = SECTIONS[0]
"""The section quoting the user's requirements verbatim."""
VALUES = SECTIONS[-1]
"""The section that keeps, as one line (values separated by :data:`VALUE_SEP`), the salient values (ids, amounts,
dates, statuses) of the items dropped to fit the target: a value a later answer quotes is
still there when the sentence around it is gone."""
_SENT = re.compile(r"(?:[^.!?。！？\n]|[.!?](?=[^\s.!?]))+[.!?。！？]?")
"""One sentence: a . ! ? followed by another character (``$154.17``, ``v1.2``, ``e.g.``) does not end it."""
_KEEP = re.compile(
    r"\d|@|\b(?:not|no|never|don't|dont|doesn't|won't|without|only|must|unless|if|at least|at most|"
    r"under|over|below|above|within|before|after|by|prefer|want|would like|need|please|instead|"
    r"cancel|return|exchange|refund|keep|change|book|budget|deadline)\b"
    r"|[不别没无只必须如果要是以内以上以下超过之前之后希望喜欢想要退换]",
    re.IGNORECASE,
)
_WRITE_TOOL = re.compile(
    r"cancel|modify|update|exchange|return|book|create|send|transfer|refund|submit|delete|place|pay|write|set_",
    re.IGNORECASE,
)


def _requirements(text: str) -> list[str]:
    """The user's sentences that carry a constraint, preference or goal, verbatim (a bare list
    marker is no sentence)."""
    out = []
    for s in _SENT.findall(text):
        s = s.strip()
        if len(s) > 1 and _KEEP.search(s) and not _LIST_MARKER.match(s):
            out.append(s)
    return out


_LIST_MARKER = re.compile(r"^(?:\(?\d{1,3}[.)]|\(?[A-Za-z][.)]|[-*•+#]{1,16})$")
"""A bare list marker ("1.", "a)", "-"), which the sentence split leaves on its own: no requirement."""


def _call_text(use: ToolUseBlock, limit: int = 160) -> str:
    args = ", ".join(
        f"{k}={v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)}" for k, v in use.input.items()
    )
    s = f"{use.name}({args})"
    return s if len(s) <= limit else s[: limit - 1] + "…"


def _first_sentence(text: str, limit: int = 220) -> str:
    t = " ".join(text.split())
    m = _SENT.match(t)
    s = (m.group(0) if m else t).strip()
    return s if len(s) <= limit else s[: limit - 1] + "…"


def _parse_previous(previous: str | None) -> dict[str, list[str]]:
    sections: dict[str, list[str]] = {name: [] for name in SECTIONS}
    if not previous:
        return sections
    current: str | None = None
    for line in previous.splitlines():
        head = line.rstrip(":").strip()
        if not line.startswith("- ") and line.rstrip().endswith(":"):
            current = head if head in sections else None  # a section no longer written (Pinned facts)
        elif current and line.startswith("- "):
            sections[current].append(line[2:])
    return sections


class DigestSummarizer:
    """Offline structured summary (see module doc). ``target_chars`` (characters) is honoured
    by dropping the oldest items first: tool findings, then the assistant's replies, dead ends
    and completed actions, their salient values kept on one line; the user's requirements
    go last (the clauses a pinned fact in ``facts`` holds are elided from their quotes: the
    engine sends that block beside the summary), so a summary may exceed the target when they
    alone do."""

    name = "digest"
    reads_tool_rules = True
    """It takes ``tool_rules=`` (:class:`~ctxwise.summarizers.base.ToolRulesSummarizer`)."""

    def __init__(self, max_findings: int = 8) -> None:
        self.max_findings = max_findings

    def summarize(
        self,
        material: Sequence[Message],
        previous: str | None,
        target_chars: int,
        *,
        facts: Sequence[str] = (),
        tool_rules: Mapping[str, str] | None = None,
    ) -> SummaryResult:
        """Summarize ``material`` (rolling ``previous`` in); see :class:`Summarizer`.
        ``tool_rules``: ``Policy.tool_rules`` (tool name to the argument naming its resource,
        :mod:`ctxwise.resources`): which calls are file reads, edits and commands in the
        tool-loop sections ("Files read", "Files edited", ...); None: the default keys."""
        sec = _parse_previous(previous)
        pinned = list(facts)
        req = sec[REQUIREMENTS]
        req[:] = [e for e in (_elide(q, pinned) for q in req) if e]  # an earlier pass's, pinned since
        speaker, last_answer = _read_material(material, sec, pinned, tool_rules or {})
        if last_answer:
            sec["Open tasks and next step"] = [
                f'Where the conversation stood: {speaker} last said "{_first_sentence(last_answer, 300)}"'
            ]
        values = [v for line in sec[VALUES] for v in line.split(VALUE_SEP) if v]
        sec[VALUES] = []
        text = _fit_sections(sec, values, target_chars)
        cap = max(target_chars, MIN_REQUIREMENTS_CAP)
        text = _fit_requirements(sec, facts, cap) if len(text) > cap else text
        return SummaryResult(text=text, usage=None, detail={"sections": {k: len(v) for k, v in sec.items()}})


def _named(m: Message) -> str | None:
    """The message's author when it names one other than its role (``name``: a multi-agent
    conversation's other agent, a named participant), else None."""
    name = (m.name or "").strip()
    return name if name and name.lower() != m.role else None


def _read_material(material: Sequence[Message], sec: dict[str, list[str]], pinned: Sequence[str],
                   rules: Mapping[str, str]) -> tuple[str, str]:
    """Add what ``material`` holds to the sections ``sec``: the user's requirements (less what
    the pinned facts quote), what the assistant told the user, tool findings, dead ends and
    completed actions. Words are credited to the message's author when it names one
    (:func:`_named`: ``The user (host) said: "..."``, ``Bob said: "..."``), else to "the user" /
    "the assistant". ``rules``: ``Policy.tool_rules``. Returns ``(who said it, what was said last by an assistant)`` (``""``
    when no assistant said anything)."""
    req = sec[REQUIREMENTS]
    uses: dict[str, ToolUseBlock] = {}
    said_by_user: list[str] = []
    last_answer, speaker = "", "the assistant"
    for m in material:
        if m.kind == "summary":
            continue
        if m.role == "user" and not m.tool_results:
            harness = is_harness_text(m.text, said_by_user)
            said_by_user.append(m.text)
            if harness:  # a format error or interruption the agent's harness wrote: not the user's
                continue
            for r in _requirements(m.text):
                # what the pinned facts block quotes already (engine) is elided: once, not twice
                who = f"The user ({_named(m)})" if _named(m) else "The user"
                q = _elide(f'{who} said: "{r}"', pinned)
                if q and q not in req:
                    req.append(q)
        elif m.role == "assistant":
            for u in m.tool_uses:
                uses[u.id] = u
            said = stated(m.text) if m.text.strip() else ""
            if said:
                name = _named(m)
                last_answer, speaker = said, name or "the assistant"
                sec["Progress"].append(f'{name} said: "{said}"' if name else f'The assistant told the user: "{said}"')
        for b in m.blocks:
            if isinstance(b, ToolResultBlock):
                _read_result(b, uses, sec, rules)
    return speaker, last_answer


def _read_result(b: ToolResultBlock, uses: dict[str, ToolUseBlock], sec: dict[str, list[str]],
                 rules: Mapping[str, str]) -> None:
    """Add one tool result to ``sec``: a tool loop's action on a file, a command or a
    subagent (:func:`_read_loop_action`), else a dead end when it failed, else its findings
    (and a completed action when the tool changes something)."""
    use = uses.get(b.tool_use_id)
    if use is not None and _read_loop_action(b, use, sec, rules):
        return
    call = _call_text(use) if use else (b.name or "tool")
    if b.state == "error":
        sec["Dead ends"].append(f'{call} failed: "{_first_sentence(b.text, 160)}"')
        return
    found = findings(b.text, set(uses) | {b.tool_use_id}) or _first_sentence(b.text, 120)
    sec["Tools called and findings"].append(f"{call} returned {found}")
    name = (use.name if use else b.name) or ""
    if _WRITE_TOOL.search(name):
        sec["Completed actions"].append(f"{call} succeeded")


REPORT_CHARS = 700
"""At most this many characters of one subagent report are kept (its opening and findings lines)."""
VIEW_CHARS = 300
"""At most this many characters about one file read (its path, lines and symbols)."""
COMMAND_CHARS = 200
"""A command is quoted up to this many characters (its first line)."""
_RANGE = re.compile(r"\d{1,7}-\d{1,7}")
_REPORT_LINE = re.compile(r"^\s{0,8}(?:[-*•]|\d{1,3}[.)]|#{1,6})\s+\S")


def _read_loop_action(b: ToolResultBlock, use: ToolUseBlock, sec: dict[str, list[str]],
                      rules: Mapping[str, str]) -> bool:
    """Record ``b`` as a tool loop's action in ``sec`` when its call (keyed under ``rules``,
    ``Policy.tool_rules``) reads, writes or edits a file, runs a command or hands work to a
    subagent; False for any other call."""
    if use.name == "Task" or "subagent_type" in use.input:
        what = str(use.input.get("description") or use.input.get("subagent_type") or "subagent")
        _put(sec["Subagent reports"], f"{what}: ", f"{what}: {_report(b.text)}")
        return True
    acc = access_of(use, rules)
    if acc is None or acc.key.startswith(("query:", "url:", "arg:", "task:")):
        return False
    failed = " (failed)" if b.state == "error" else ""
    if acc.key.startswith("path:"):
        _file_action(b, use, acc, sec, failed, rules)
        return True
    for other in shell_edits(use):  # a command run that also edits files (`cd r && make && sed -i ...`)
        _edited(sec, other, failed, "")
    cmd = acc.key[len("command:"):]
    cmd = cmd if len(cmd) <= COMMAND_CHARS else cmd[:COMMAND_CHARS - 1] + "…"
    found = findings(b.text, {b.tool_use_id})
    outcome = "; ".join(log_verdicts(b.text) + ([found] if found else [])) or _first_sentence(b.text, 120) or "no output"
    sec["Commands run and outcomes"].append(f"`{cmd}` -> {'failed: ' if failed else ''}{outcome}")
    return True


def _file_action(b: ToolResultBlock, use: ToolUseBlock, acc: Access, sec: dict[str, list[str]], failed: str,
                 rules: Mapping[str, str]) -> None:
    """Record a call on a file (``acc`` keyed ``path:``) in ``sec``: a view under "Files read",
    a whole write under "Files created or rewritten", else an edit of that file and of every
    other file a chained shell command edits."""
    path = acc.key[5:]
    for more in accesses_of(use, rules)[1:]:  # a patch of several files: each is edited
        if more.key.startswith("path:") and more.action == "edit":
            _put(sec["Files edited"], more.key[5:], more.key[5:] + failed)
    if acc.action == "view":
        shown = shown_values(b.text, acc, VIEW_CHARS) or path
        _put(sec["Files read"], path, shown + failed)
    elif is_whole_write(use):
        _put(sec["Files created or rewritten"], path, path + failed)
    else:
        _edited(sec, path, failed, edit_text(use))
        for other in shell_edits(use):  # `sed -i ... a.py && sed -i ... b.py`: b.py is edited too
            if other != path:
                _edited(sec, other, failed, "")


def _edited(sec: dict[str, list[str]], path: str, failed: str, written: str) -> None:
    """Count one edit of ``path`` in "Files edited" (``path (3 edits)``) and keep the text it
    ``written`` in "Edits made" (the latest :data:`EDITS_PER_FILE` per file)."""
    old = next((x for x in sec["Files edited"] if x == path or x.startswith(path + " (")), None)
    n = 1 + (int(re.search(r"\((\d+) edits", old).group(1)) if old and "edits" in old else 1 if old else 0)  # type: ignore[union-attr]
    _put(sec["Files edited"], path, f"{path} ({n} edits)" if n > 1 else path + failed)
    if written and not failed:
        mine = [x for x in sec["Edits made"] if x.startswith(path + ": ")]
        for x in mine[: max(0, len(mine) + 1 - EDITS_PER_FILE)]:
            sec["Edits made"].remove(x)
        sec["Edits made"].append(f"{path}: {written}")


def shell_steps(command: str) -> list[str]:
    """The steps of a shell command's first line (with the lines a trailing ``\\`` continues it
    on), split at ``&&``, ``||`` and ``;`` outside quotes (a ``sed`` script's own ``;`` stays in
    its step); blank steps left out."""
    line = re.sub(r"\\\r?\n", " ", command.strip()).split("\n", 1)[0]  # `a && \⏎ b` is one line
    steps, cur, quote, i = [], "", "", 0
    while i < len(line):
        ch = line[i]
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == ";" or line.startswith(("&&", "||"), i):
            steps.append(cur)
            cur, i = "", i + (1 if ch == ";" else 2)
            continue
        cur += ch
        i += 1
    return [x.strip() for x in [*steps, cur] if x.strip()]


_CD_STEP = re.compile(r"^cd\s{1,8}\S{1,512}$")
_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")
_SEPARATORS = re.compile(r"[;&|<>]")
"""Inside a quoted word (a ``sed`` script) these separate nothing: blanked before the step's file is read."""


def shell_edits(use: ToolUseBlock) -> list[str]:
    """The files each step of a shell call (``command`` / ``cmd``) edits, in order, each once:
    a ``sed -i``, ``cat > FILE``, ``tee FILE`` step (:func:`ctxwise.resources.shell_access`),
    relative to the directory an earlier ``cd`` step entered. ``[]`` for any other call."""
    cmd = next((use.input[k] for k in ("command", "cmd") if isinstance(use.input.get(k), str)), "")
    out: list[str] = []
    cd = ""
    for step in shell_steps(cmd):
        if _CD_STEP.match(step):
            cd = step + " && "
            continue
        acc = shell_access(cd + _QUOTED.sub(lambda q: _SEPARATORS.sub(" ", q.group(0)), step))
        if acc.action == "edit" and acc.key.startswith("path:") and acc.key[5:] not in out:
            out.append(acc.key[5:])
    return out


EDIT_CHARS = 400
"""At most this many characters of the text one edit wrote are kept (its head)."""
EDITS_PER_FILE = 3
"""The latest this many edits of one file keep the text they wrote."""


def edit_text(use: ToolUseBlock, limit: int = EDIT_CHARS) -> str:
    """What an edit call wrote, on one line, at most ``limit`` characters: ``wrote "NEW"`` for
    an ``Edit`` / ``str_replace`` / ``insert`` (each ``MultiEdit`` edit's ``new_string`` in
    turn), the command itself for a shell edit (``sed -i 's/a/b/' f.py``: the pattern it
    replaced and the text it put there); line breaks shown as `` ⏎ ``. ``""`` when the call
    carries neither."""
    inp = use.input
    news = [v for v in (inp.get("new_string"), inp.get("new_str")) if isinstance(v, str)]
    edits = inp.get("edits")
    if isinstance(edits, list):
        news += [e["new_string"] for e in edits if isinstance(e, dict) and isinstance(e.get("new_string"), str)]
    if news:
        text = " / ".join(f'wrote "{n}"' for n in news)
    else:
        cmd = next((inp[k] for k in ("command", "cmd", "script") if isinstance(inp.get(k), str)), "")
        text = f"`{cmd.strip()}`" if cmd.strip() else ""
    text = " ⏎ ".join(x.rstrip() for x in text.splitlines())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _put(items: list[str], key: str, item: str) -> None:
    """Replace the item of ``items`` about ``key`` (a path, or a prefix) with ``item``, at the end."""
    items[:] = [x for x in items if not (x == key or x.startswith(key + " (") or x.startswith(key + ", ")
                                         or (key.endswith(": ") and x.startswith(key)))]
    items.append(item)


def _report(text: str) -> str:
    """A subagent's report as a report: its first sentence and its list and heading lines (its
    findings), at most :data:`REPORT_CHARS` characters, whole lines."""
    lines = [x.strip() for x in text.splitlines() if x.strip()]
    out = [_first_sentence(text, 240)] if lines else []
    used = len(out[0]) if out else 0
    for x in lines:
        if _REPORT_LINE.match(x) and used + len(x) + 3 <= REPORT_CHARS:
            out.append(x)
            used += len(x) + 3
    return " / ".join(out)


def _fit_sections(sec: dict[str, list[str]], values: list[str], target_chars: int) -> str:
    """The summary of ``sec`` fitted to ``target_chars`` by dropping the oldest items of the
    least important sections first, their salient values kept in ``values`` (the
    :data:`VALUES` line), then the oldest values. The user's requirements are not touched
    here (:func:`_fit_requirements`)."""

    def render() -> str:
        sec[VALUES] = [VALUE_SEP.join(values)] if values else []
        return _render(sec)

    def drop(name: str, k: int) -> None:
        item = sec[name].pop(k)
        if name in CODE_SECTIONS:
            return  # paths, line ranges, symbols and code: no value a later answer quotes
        if name == "Commands run and outcomes":
            item = item.partition("` -> ")[2]  # the outcome's values, not the command's paths and flags
        said = set(values)
        for v in salient_values(item):
            if _RANGE.fullmatch(v):
                continue  # a view's line range is no value a later answer quotes
            if v not in said:
                values.append(v)
                said.add(v)

    text = render()
    # A tool finding goes before what the agent told the user about it: the reply is the
    # shorter, and what the user was told is what the next turn builds on.
    for name in ("Tools called and findings", "Progress", "Commands run and outcomes", "Files read", "Dead ends",
                 "Subagent reports", "Completed actions", "Edits made"):
        while len(text) > target_chars and len(sec[name]) > 1:
            if name == "Files read":  # shortened, never dropped: every file read stays named
                if not _shorten_reads(sec[name]):
                    break
            else:
                drop(name, 0)
            text = render()
    for name in ("Tools called and findings", "Progress", "Commands run and outcomes", "Dead ends"):
        while len(text) > target_chars and sec[name]:
            drop(name, 0)
            text = render()
    while len(text) > target_chars and values:  # then the oldest values
        values.pop(0)
        text = render()
    return text


CODE_SECTIONS = frozenset({"Files created or rewritten", "Files edited", "Edits made", "Files read"})
"""Sections whose dropped items give no values to the :data:`VALUES` line: what they hold are
paths, line ranges, the symbols a view defines and code (``total_43_7`` is no value the user gave)."""
ALSO_READ = "also read: "
"""The "Files read" item that names, paths only, the older files read (:func:`_shorten_reads`)."""
ALSO_READ_PATHS = 30
"""At most this many paths on that item; the older ones are counted (``(and 12 more)``)."""
_MORE = re.compile(r" \(and (\d+) more\)$")


def _shorten_reads(items: list[str]) -> bool:
    """One step of fitting "Files read" (``items``, oldest first; the newest is kept as it is):
    the oldest item with details (lines, symbols) loses them; else the oldest path moves onto
    the :data:`ALSO_READ` item (first in the section); else that item's oldest path is counted
    in its ``(and N more)``, over :data:`ALSO_READ_PATHS` paths or when nothing else is left.
    False when nothing can be shortened."""
    folded = items[0] if items and items[0].startswith(ALSO_READ) else None
    body = folded[len(ALSO_READ):] if folded else ""
    m = _MORE.search(body)
    more = int(m.group(1)) if m else 0
    paths = [x for x in (body[:m.start()] if m else body).split(VALUE_SEP) if x]
    rest = items[1:] if folded else items[:]
    older = rest[:-1]
    for k, item in enumerate(older):
        path = _read_path(item)
        if item != path:
            older[k] = path
            items[:] = ([folded] if folded else []) + older + rest[-1:]
            return True
    if older:
        paths.append(older.pop(0))
    elif paths and (len(paths) > 1 or more == 0):
        paths.pop(0)
        more += 1
    else:
        return False
    while len(paths) > ALSO_READ_PATHS:
        paths.pop(0)
        more += 1
    line = ALSO_READ + VALUE_SEP.join(paths) + (f" (and {more} more)" if more else "")
    items[:] = [line] + older + rest[-1:]
    return True


def _read_path(item: str) -> str:
    """The path a "Files read" item names (before its lines, symbols or ``(failed)``)."""
    return item.split(", ", 1)[0].split(" (failed)", 1)[0]


MIN_REQUIREMENTS_CAP = 2000
"""Characters the user's verbatim requirements may always use, however small the target
(a target from a tiny or message-counted budget would otherwise drop every constraint)."""


def _fit_requirements(sec: dict[str, list[str]], facts: Sequence[str], target_chars: int) -> str:
    """Last step of fitting: the summary must stay bounded however long the session.

    The user's quotes go oldest first: quotes whose words are all in a pinned fact (the engine
    sends those in their own pinned block), then quotes without a number, then any; the newest
    quote always stays.
    """
    text = _render(sec)
    req = sec[REQUIREMENTS]
    pinned = list(facts)
    ranks: tuple[Callable[[str], bool], ...] = (
        lambda q: _covered(q, pinned), lambda q: not any(ch.isdigit() for ch in q), lambda q: True)
    for rank in ranks:
        i = 0
        while len(text) > target_chars and len(req) > 1 and i < len(req) - 1:
            if rank(req[i]):
                req.pop(i)
                text = _render(sec)
            else:
                i += 1
    return text


_FILLER = re.compile(r"[\W_]+|\b(?:and|or|but|also|then|so|please|the|a|an|to|it|is)\b", re.IGNORECASE)
"""What is left of a request once its pinned clauses are elided that says nothing on its own."""


def _elide(quote: str, pinned: Sequence[str]) -> str:
    """A requirement quote (``The user said: "..."``) with each pinned fact it holds (at least 6
    characters) replaced by "…", the engine sending the pinned facts verbatim in their own block
    beside the summary: ``The user said: "Book me a flight to Lisbon, …, …, and no red-eye."``.
    The words no fact holds stay verbatim. "" when nothing of substance is left."""
    head, _, rest = quote.partition(': "')
    body = rest.removesuffix('"')
    out = body
    for f in sorted({f.strip() for f in pinned}, key=len, reverse=True):
        if len(f) >= 6 and f in out:
            out = out.replace(f, "…")
    if out == body:
        return quote
    return f'{head}: "{out}"' if _FILLER.sub("", out.replace("…", "")) else ""


def _covered(quote: str, pinned: Sequence[str]) -> bool:
    """Whether a requirement quote (``The user said: "..."``) and a pinned fact share text, one
    inside the other: the order in which quotes go when the requirements alone are over the cap
    (the pinned facts block beside the summary still quotes that text)."""
    body = quote.partition(': "')[2].removesuffix('"')
    return any(body in f or f in body for f in pinned)


def _render(sec: dict[str, list[str]]) -> str:
    parts = []
    for name in SECTIONS:
        if sec[name]:
            parts.append(name + ":\n" + "\n".join(f"- {x}" for x in sec[name]))
    return "\n".join(parts) if parts else "Nothing of note happened in the summarized turns."
