"""The replay's measures, as pure functions over plain message lists.

Definitions are in ARCHITECTURE.md ("Measures"). Every function takes what any context strategy
produces, one ``list[Message]`` per model call, so the benchmarks can score other libraries'
outputs with the same code:

* :func:`input_tokens`: the sum over calls of the tokens sent;
* :func:`cache_adjusted_cost`: per call, the tokens of the longest run of leading messages
  identical to the previous call's payload count at ``cache_ratio``, the rest at 1;
  :func:`priced_cost` prices the same calls under a provider's own
  :class:`~ctxwise.prices.PriceModel` (cache write, read, miss, minimum prefix);
* :func:`floor_cost`: the reference F(B) at budget B (these four, :func:`call_costs` and
  :func:`common_prefix` are :mod:`ctxwise.prices`' own, the cost model the compaction stages
  decide with, re-exported here);
* :func:`support_recall`: the salient values (identifiers with a digit, e-mails, amounts,
  dates) of each recorded output that the full history held must still be in the prepared
  context; :func:`recall_figures` gives it exact (the old figure), with amounts and dates
  normalized (``$466.75`` = ``466.75``, ``$39`` = ``$39.00``, ``May 5, 2024`` =
  ``2024-05-05``), and the *recoverable* share (missing values whose original a placeholder
  in the context names, so the recall tool can fetch it);
* :func:`task_recall`: the task lines (:func:`ctxwise.task.task_lines`) of the instruction in
  force (the user's latest own instructions, harness notices skipped) present in every call's
  context;
* :func:`edit_anchor_recall`: for every edit call (:func:`edit_anchors`: Claude Code
  ``Edit``/``MultiEdit`` ``old_string``, ``str_replace`` ``old_str``, OpenCode ``oldString``,
  MCP ``edit_file`` ``oldText``, a diff's ``SEARCH`` blocks, a patch's hunks, the pattern of a
  ``sed -i s/…/…/``), whether the text it copies was in the context it was produced from, when
  the full history held it;
* :func:`working_file_freshness`: for every edit of a file viewed before, whether that file's
  latest view was in the context whole (not cleared, not cut); a whole write of the file (its
  text in the call's input) is a view too; views and edits of every tool family are read by the
  resource keys clearing uses (:mod:`ctxwise.resources`, ``Policy.tool_rules`` included);
* :func:`validator_errors`: provider rule violations over all payloads;
* :func:`bound_reasoning_violations`: reasoning sent after a changed prefix, checked from the
  payloads alone (independent of the digests ctxwise stores);
* :func:`events_by_stage`, :func:`percentile`: counts and latency quantiles.

Counters follow :class:`ctxwise.tokens.Counter`.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections import Counter as Tally
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .. import Counter, Message, TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock
from ..prices import (
    CallCost,
    Payloads,
    cache_adjusted_cost,
    call_costs,
    common_prefix,
    floor_cost,
    priced_cost,
)
from ..resources import access_of, accesses_of, is_whole_write, patch_text
from ..salient import salient_values
from ..task import latest_instruction_run, task_lines

__all__ = [
    "Breaks", "CallCost", "call_break", "calls_bought", "CallSupport", "cache_breaks", "Payloads", "Recall", "RecallFigures", "as_sent", "cache_adjusted_cost",
    "call_costs", "call_support", "common_prefix", "context_keys", "context_text", "events_by_stage",
    "floor_cost", "input_tokens", "message_text", "percentile", "placeholder_originals", "priced_cost",
    "recall_figures", "support_recall", "text_keys", "validator_errors", "value_key",
    "edit_anchor_recall", "edit_anchors", "edited_path", "edited_paths", "task_recall", "viewed_path", "working_file_freshness",
    "written_path",
    "bound_reasoning_violations",
]


# --------------------------------------------------------------------------- tokens and cost


def model_calls(messages: Iterable[Message]) -> Iterator[tuple[list[Message], list[Message], Message]]:
    """The recorded model calls of a conversation, in order, as a replay drives them: per call
    ``(new, history, reply)``: ``new`` the messages recorded since the previous call (appended
    before the call is prepared), ``history`` a copy of every message before the reply, ``reply``
    the recorded assistant message (appended after). A call is an assistant message once a user
    message that is not only tool results has been seen; messages after the last call are not
    yielded."""
    history: list[Message] = []
    pending: list[Message] = []
    seen = False
    for m in messages:
        seen = seen or (m.role == "user" and not m.tool_results)
        if m.role == "assistant" and seen:
            yield pending, list(history), m
            pending = []
        else:
            pending.append(m)
        history.append(m)


def as_sent(messages: Sequence[Message], provider: str) -> list[Message]:
    """``messages`` as the provider receives them: without reasoning for providers that take
    none back (OpenAI Chat Completions, Gemini); for the others without the thinking blocks
    the target leaves out (Anthropic: unsigned thinking; Responses: reasoning without its
    ``rs_`` item id) and with an opaque payload counted as the target counts it
    (:func:`ctxwise.compaction.context.opaque_view`, the view ``prepare()`` sizes). Measure
    this, not the canonical list: reasoning that is never sent costs no tokens and breaks no cache."""
    from ..compaction import opaque_view, sent_view
    from ..providers import get_profile

    profile = get_profile(provider)
    if profile.sends_reasoning:
        return [opaque_view(m, profile.reasoning_passback) for m in messages]
    return [sent_view(m) for m in messages]


def input_tokens(payloads: Payloads, counter: Counter) -> int:
    """The sum over calls of ``counter.count(payload)``: what the model was made to read."""
    return sum(counter.count(p) for p in payloads)


# --------------------------------------------------------------------------- support recall


def message_text(m: Message) -> str:
    """Everything a reader of ``m`` can see, as one string: text, thinking, tool names and
    inputs (JSON), tool result text. Used to look salient values up."""
    parts: list[str] = []
    for b in m.blocks:
        if isinstance(b, TextBlock):
            parts.append(b.text)
        elif isinstance(b, ThinkingBlock):
            if not b.redacted:
                parts.append(b.thinking)
        elif isinstance(b, ToolUseBlock):
            parts.append(b.name)
            parts.append(json.dumps(b.input, ensure_ascii=False))
        elif isinstance(b, ToolResultBlock):
            parts.append(b.text)
    return "\n".join(parts)


def context_text(messages: Iterable[Message]) -> str:
    """:func:`message_text` of every message, joined (memoised per message object)."""
    out = []
    for m in messages:
        memo = m.memo()
        t = memo.get("replay/text")
        if t is None:
            t = memo["replay/text"] = message_text(m)
        out.append(t)
    return "\n".join(out)


# -- normalized comparison of amounts and dates (the fair measure) ---------------------------

_MONTHS = {m: i + 1 for i, m in enumerate(("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct",
                                           "nov", "dec"))}
_ISO = re.compile(r"(\d{4})-(\d{2})-(\d{2})")
_CJK_DATE = re.compile(r"(\d{4})年(\d{1,2})月(\d{1,2})日")
_MONTH_DATE = re.compile(r"\b(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]{0,6}\.? (\d{1,2})(?:, (\d{4}))?\b")
_NUMBER = re.compile(r"(?<![A-Za-z0-9_.])\d[\d,]{0,40}(?:\.\d{1,20})?(?![0-9A-Za-z_])")
_CURRENCY = re.compile(r"^[$€£¥]\s?|\s?(?:USD|EUR|GBP|CNY|RMB|dollars|euros|元|块)$")
_PLAIN_AMOUNT = re.compile(r"^\d[\d,]{0,40}(?:\.\d{1,20})?$")


def _number_key(digits: str) -> str | None:
    """``1,200.50`` -> ``1200.5``; ``39.00`` -> ``39``: the value, whatever its spelling."""
    try:
        x = float(digits.replace(",", ""))
    except ValueError:
        return None
    return f"{x:.6f}".rstrip("0").rstrip(".")


def value_key(value: str) -> str:
    """The key a salient value is compared by in the normalized measure: ``amount:<number>``
    for money (currency sign or word dropped, ``$39`` = ``39.00``), ``date:Y-M-D`` or
    ``date:M-D`` (no year given) for dates, the value itself otherwise (identifiers, e-mails)."""
    core = _CURRENCY.sub("", value.strip())
    if core != value.strip() or re.fullmatch(r"\d[\d,]*\.\d{2}", value.strip()):
        if _PLAIN_AMOUNT.match(core):
            k = _number_key(core)
            if k is not None:
                return "amount:" + k
    for m in (_ISO.fullmatch(value[:10]) if len(value) >= 10 else None, _CJK_DATE.fullmatch(value)):
        if m:
            return f"date:{int(m.group(1))}-{int(m.group(2))}-{int(m.group(3))}"
    m = _MONTH_DATE.fullmatch(value)
    if m:
        md = f"{_MONTHS[m.group(1).lower()]}-{int(m.group(2))}"
        return f"date:{int(m.group(3))}-{md}" if m.group(3) else f"date:{md}"
    return value


def text_keys(text: str) -> frozenset[str]:
    """Every amount and date key (see :func:`value_key`) ``text`` holds: each number as
    ``amount:<number>`` (a JSON ``"price": 39`` supports ``$39.00``), each date as
    ``date:Y-M-D`` and ``date:M-D``."""
    keys: set[str] = set()
    for m in _NUMBER.finditer(text):
        k = _number_key(m.group(0))
        if k is not None:
            keys.add("amount:" + k)
    for rx in (_ISO, _CJK_DATE):
        for m in rx.finditer(text):
            y, mo, d = int(m.group(1)), int(m.group(2)), int(m.group(3))
            keys.update((f"date:{y}-{mo}-{d}", f"date:{mo}-{d}"))
    for m in _MONTH_DATE.finditer(text):
        md = f"{_MONTHS[m.group(1).lower()]}-{int(m.group(2))}"
        keys.add(f"date:{md}")
        if m.group(3):
            keys.add(f"date:{int(m.group(3))}-{md}")
    return frozenset(keys)


def _message_keys(m: Message) -> frozenset[str]:
    memo = m.memo()
    k = memo.get("replay/keys")
    if k is None:
        k = memo["replay/keys"] = text_keys(context_text([m]))
    return k


def context_keys(messages: Iterable[Message]) -> set[str]:
    """The union of :func:`text_keys` over ``messages`` (memoised per message object)."""
    out: set[str] = set()
    for m in messages:
        out |= _message_keys(m)
    return out


def _holds(key: str, value: str, text: str, keys: "set[str] | frozenset[str]") -> bool:
    return key in keys if key.startswith(("amount:", "date:")) else value in text


def placeholder_originals(history: Sequence[Message], prepared: Sequence[Message]) -> dict[str, str]:
    """The tool results of ``prepared`` that are placeholders naming their ``tool_use_id`` (the
    id is in the result's text, and the text differs from the original): id -> the original
    body's text, taken from ``history``. What a recall tool could fetch back."""
    named: set[str] = set()
    for m in prepared:
        for b in m.blocks:
            if isinstance(b, ToolResultBlock) and b.tool_use_id and b.tool_use_id in b.text:
                named.add(b.tool_use_id)
    if not named:
        return {}
    out: dict[str, str] = {}
    for m in history:
        for b in m.blocks:
            if isinstance(b, ToolResultBlock) and b.tool_use_id in named:
                out[b.tool_use_id] = b.text
    for m in prepared:  # a body that is still whole is no placeholder
        for b in m.blocks:
            if isinstance(b, ToolResultBlock) and out.get(b.tool_use_id) == b.text:
                out.pop(b.tool_use_id)
    return out


@dataclass
class CallSupport:
    """Support of one call: the salient values it ``needed`` (in its output and in the full
    history before it) and those ``missing`` from its prepared context, compared exactly (the
    old figure); the same with amounts and dates normalized (``needed_norm``, ``missing_norm``),
    and of those missing the ``recoverable`` ones (a placeholder in the context names the
    original that holds them)."""

    needed: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    needed_norm: list[str] = field(default_factory=list)
    missing_norm: list[str] = field(default_factory=list)
    recoverable: list[str] = field(default_factory=list)

    @property
    def supported(self) -> int:
        """How many needed values the prepared context held (exact comparison)."""
        return len(self.needed) - len(self.missing)

    @property
    def supported_norm(self) -> int:
        """How many needed values the prepared context held (amounts and dates normalized)."""
        return len(self.needed_norm) - len(self.missing_norm)


def call_support(history: Sequence[Message], prepared: Sequence[Message], output: Message) -> CallSupport:
    """The support of one call: which salient values of ``output`` were in ``history`` (the
    full, uncompacted record before the call) and which of those ``prepared`` lost, exactly
    and normalized (see :class:`CallSupport`)."""
    full = context_text(history)
    sent = context_text(prepared)
    s = CallSupport()
    values = salient_values(message_text(output))
    for v in values:
        if v in full:
            s.needed.append(v)
            if v not in sent:
                s.missing.append(v)
    full_keys: set[str] = set()
    sent_keys: set[str] = set()
    keyed = False
    originals: list[tuple[str, frozenset[str]]] | None = None
    seen: set[str] = set()
    for v in values:
        key = value_key(v)
        if key in seen:
            continue
        seen.add(key)
        if key.startswith(("amount:", "date:")) and not keyed:
            full_keys, sent_keys, keyed = context_keys(history), context_keys(prepared), True
        if not _holds(key, v, full, full_keys):
            continue
        s.needed_norm.append(v)
        if _holds(key, v, sent, sent_keys):
            continue
        s.missing_norm.append(v)
        if originals is None:
            originals = [(body, text_keys(body)) for body in placeholder_originals(history, prepared).values()]
        if any(_holds(key, v, body, keys) for body, keys in originals):
            s.recoverable.append(v)
    return s


@dataclass(frozen=True)
class Recall:
    """``supported`` of ``needed`` salient values over all calls; ``value`` is 1.0 when
    nothing was needed."""

    supported: int
    needed: int

    @property
    def value(self) -> float:
        """supported / needed (1.0 when nothing was needed)."""
        return self.supported / self.needed if self.needed else 1.0


def support_recall(
    histories: Sequence[Sequence[Message]], payloads: Payloads, outputs: Sequence[Message]
) -> Recall:
    """Recall over calls, exact comparison (the old figure): ``histories[i]`` is the full record
    before call ``i``, ``payloads[i]`` what was sent, ``outputs[i]`` the recorded assistant
    message. Raises ``ValueError`` when the three do not have one entry per call."""
    return recall_figures(histories, payloads, outputs).exact


@dataclass(frozen=True)
class RecallFigures:
    """The three recall figures over the same calls: ``exact`` (values compared as strings, the
    old figure), ``normalized`` (amounts and dates compared by value) and ``recoverable``
    (normalized, counting as supported the missing values a placeholder's original holds)."""

    exact: Recall
    normalized: Recall
    recoverable: Recall


def recall_figures(
    histories: Sequence[Sequence[Message]], payloads: Payloads, outputs: Sequence[Message]
) -> RecallFigures:
    """:class:`RecallFigures` over calls (arguments as :func:`support_recall`)."""
    if not (len(histories) == len(payloads) == len(outputs)):
        raise ValueError(
            f"histories, payloads and outputs must have one entry per call, got "
            f"{len(histories)}, {len(payloads)}, {len(outputs)}"
        )
    sup = need = sup_n = need_n = rec = 0
    for h, p, o in zip(histories, payloads, outputs):
        s = call_support(h, p, o)
        sup += s.supported
        need += len(s.needed)
        sup_n += s.supported_norm
        need_n += len(s.needed_norm)
        rec += len(s.recoverable)
    return RecallFigures(Recall(sup, need), Recall(sup_n, need_n), Recall(sup_n + rec, need_n))


# --------------------------------------------------------------------------- long tool loops


def _check_calls(*lists: Sequence[Any]) -> None:
    if len({len(x) for x in lists}) > 1:
        raise ValueError(f"the lists must have one entry per call, got {', '.join(str(len(x)) for x in lists)}")


def task_recall(histories: Sequence[Sequence[Message]], payloads: Payloads) -> Recall:
    """The task lines of the instruction in force, present at every call: per call ``i``, the
    :func:`~ctxwise.task.task_lines` of the user's latest own instructions in ``histories[i]``
    (the full record before the call; :func:`~ctxwise.task.latest_instruction_run`, harness
    notices skipped), each counted as supported when the text of ``payloads[i]`` holds it
    verbatim. Raises ``ValueError`` when the lists do not have one entry per call."""
    _check_calls(histories, payloads)
    sup = need = 0
    for h, p in zip(histories, payloads):
        lines = [line for i in latest_instruction_run(h) for line in _task_lines(h[i])]
        if not lines:
            continue
        text = context_text(p)
        need += len(lines)
        sup += sum(1 for line in lines if line in text)
    return Recall(sup, need)


def _task_lines(m: Message) -> list[str]:
    memo = m.memo()
    got = memo.get("replay/task_lines")
    if got is None:
        got = memo["replay/task_lines"] = task_lines(m.text)
    return list(got)


_SED_SUBST = re.compile(r"""\bsed\s{1,8}-[a-zA-Z]{0,8}i\S{0,16}\s{1,8}(?:-e\s{1,8})?(['"])[\d,$]{0,32}s(.)(.{1,256}?)(?<!\\)\2""")
_SED_EDIT = re.compile(r"\bsed\s{1,8}-[a-zA-Z]{0,8}i")
_REGEX_META = re.compile(r"(?<!\\)(?:[.][*+?]|[\[\]^$*+?{}|])")
_PATH_KEYS = ("file_path", "path", "filename", "file", "notebook_path")
_VIEW_CMD = re.compile(r"^\s{0,64}(?:cd\s{1,8}\S{1,256}\s{0,8}&&\s{0,8})?(?:cat|nl|head|tail|less|more|bat|sed\s{1,8}-n)\b")
_PATH = re.compile(r"(?:^|(?<=\s))['\"]?((?:[\w.~-]{1,128}/){0,32}[\w.-]{1,128}\.[A-Za-z0-9]{1,8})['\"]?(?=\s|$|\||;|&)")


def _unescape_sed(pattern: str) -> str | None:
    """The literal text a ``sed`` pattern matches, or None when it is a real regular expression
    (a class, a repeat, an anchor: not a copy of any text)."""
    if _REGEX_META.search(pattern):
        return None
    return re.sub(r"\\(.)", r"\1", pattern)


def edit_anchors(use: ToolUseBlock) -> list[str]:
    """The texts an edit call copies from what the agent saw, to say where the edit goes:
    an ``old_string`` / ``old_str`` / ``oldString`` / ``oldText`` argument in any spelling
    (Claude Code ``Edit``, a ``str_replace`` command, OpenCode ``edit``, Gemini CLI
    ``replace``), the same in each item of an ``edits`` list (``MultiEdit``, MCP filesystem
    ``edit_file``), each ``SEARCH`` block of a ``diff`` (Cline ``replace_in_file``, Roo
    ``apply_diff``), the old lines (context and removed) of each hunk of a patch
    (:func:`ctxwise.resources.patch_text`: Codex ``apply_patch``, OpenCode ``patch``), the
    pattern of each ``sed -i 's/PATTERN/…/'`` of a shell command when it is literal text
    (regex escapes undone). ``[]`` for any other call."""
    inp = use.input
    out: list[str] = []
    for k, v in inp.items():
        if _arg_key(k) in _OLD_ARGS and isinstance(v, str) and v.strip():
            out.append(v)
    edits = inp.get("edits")
    if isinstance(edits, list):
        out.extend(v for e in edits if isinstance(e, dict) for k, v in e.items()
                   if _arg_key(k) in _OLD_ARGS and isinstance(v, str) and v.strip())
    patch = patch_text(inp)
    if patch is not None:
        out.extend(_hunk_anchors(patch))
    for v in inp.values():
        if isinstance(v, str):
            out.extend(_text_anchors(v))
    return out


def _text_anchors(v: str) -> list[str]:
    """The anchors one string argument holds: its diff ``SEARCH`` blocks, its literal
    ``sed -i`` patterns."""
    out: list[str] = []
    if "SEARCH" in v:
        out.extend(x for x in (_search_text(b) for b in _search_blocks(v)) if x.strip())
    if "sed" in v:
        for m in _SED_SUBST.finditer(v):
            lit = _unescape_sed(m.group(3))
            if lit and lit.strip():
                out.append(lit)
    return out


_OLD_ARGS = ("oldstring", "oldstr", "oldtext")
"""Argument names of an edit's copied text, compared without ``_`` / ``-`` and case."""


def _search_blocks(text: str) -> list[str]:
    """The texts of the ``SEARCH`` / ``=======`` / ``REPLACE`` blocks in ``text`` (Cline
    ``replace_in_file``'s ``diff``: ``------- SEARCH``, older ``<<<<<<< SEARCH``; Roo
    ``apply_diff``): the lines between a ``SEARCH`` line and the next ``=======`` line, each
    with its line end. Read line by line (linear in the text, no regular expression)."""
    out: list[str] = []
    block: list[str] | None = None
    for line in text.splitlines(keepends=True):
        bare = line.rstrip("\r\n").rstrip(" \t")
        if block is None:
            if bare[:7] in ("<" * 7, "-" * 7) and bare[7:] in ("SEARCH", " SEARCH"):
                block = []
        elif bare == "=" * 7:
            out.append("".join(block))
            block = None
        else:
            block.append(line)
    return out


def _arg_key(name: str) -> str:
    return name.replace("_", "").replace("-", "").lower()


def _search_text(block: str) -> str:
    """A ``SEARCH`` block's text without Roo's leading ``:start_line:N`` / ``-------`` header
    lines (at most two)."""
    lines = block.splitlines(keepends=True)
    drop = 0
    while drop < min(2, len(lines)) and _is_search_meta(lines[drop].rstrip("\r\n").rstrip(" \t")):
        drop += 1
    return "".join(lines[drop:])


def _is_search_meta(line: str) -> bool:
    if line == "-" * 7:
        return True
    rest = line[len(":start_line:"):].strip() if line.startswith(":start_line:") else ""
    return rest.isdigit() and rest.isascii()


def _hunk_anchors(patch: str) -> list[str]:
    """Per hunk of each ``*** Update File:`` section of a patch (hunks start at ``@@``), the
    lines it expects in the file: context (`` ``) and removed (``-``) lines, prefix dropped."""
    out: list[str] = []
    old: list[str] = []
    updating = False
    for line in patch.splitlines() + ["@@"]:
        if line.startswith(("@@", "*** ")):
            if old and any(x.strip() for x in old):
                out.append("\n".join(old))
            old = []
            if line.startswith("*** "):
                updating = line.startswith("*** Update File:")
        elif updating and line[:1] in (" ", "-"):
            old.append(line[1:])
    return out


def _ruled(use: ToolUseBlock, rules: Mapping[str, str] | None) -> bool:
    return bool(rules) and use.name in rules  # type: ignore[operator]


def _shell_call(use: ToolUseBlock) -> bool:
    return any(k in ("command", "cmd", "script") for k in use.input)


def edited_paths(use: ToolUseBlock, rules: Mapping[str, str] | None = None) -> list[str]:
    """The files an edit call changes in place (an edit of what the agent saw; a file written
    whole is no edit of a viewed one): a Claude Code / ``str_replace_editor`` / ``sed -i`` edit
    as :func:`edited_path` reads it; else, for a tool under a ``Policy.tool_rules`` rule or one
    that is no shell command, the files its resource keys
    (:func:`ctxwise.resources.accesses_of`) say it edits (MCP ``edit_file``,
    ``replace_in_file``, OpenCode ``edit``, a rule ``"arg:edit"``); for a patch (Codex
    ``apply_patch``, in a shell too) its ``*** Update File:`` files. Paths as the call gives
    them (a resource key's path for the key machinery). Pure."""
    if not _ruled(use, rules):
        old = edited_path(use)
        if old:
            return [old]
    patch = patch_text(use.input)
    if patch is not None:
        return list(dict.fromkeys(path for line in patch.splitlines() if line.startswith(_UPDATE_FILE)
                                  for path in (line[len(_UPDATE_FILE):].strip(),) if path))
    if is_whole_write(use) or (_shell_call(use) and not _ruled(use, rules)):
        return []
    return list(dict.fromkeys(a.key[5:] for a in accesses_of(use, rules)
                              if a.action == "edit" and a.key.startswith("path:")))


_UPDATE_FILE = "*** Update File: "


def edited_path(use: ToolUseBlock) -> str | None:
    """The file a Claude Code / mini-swe-agent style edit call changes: its path argument when
    it copies an anchor (``Edit``, ``str_replace``) or inserts at a line (``insert``), or the
    last path-like operand of a ``sed -i`` command (by pattern or by line number); None
    otherwise (a new file written whole is no edit of a viewed one). :func:`edited_paths`
    reads every other tool family through the resource keys."""
    inp = use.input
    if not edit_anchors(use) and inp.get("command") != "insert" and not any(
            isinstance(v, str) and _SED_EDIT.search(v) for v in inp.values()):
        return None
    for key in _PATH_KEYS:
        v = inp.get(key)
        if isinstance(v, str) and v:
            return v
    for v in inp.values():
        if isinstance(v, str) and _SED_EDIT.search(v):
            paths = _PATH.findall(v[_SED_EDIT.search(v).start():].split("&&")[0])  # type: ignore[union-attr]
            if paths:
                return str(paths[-1])
    return None


def viewed_path(use: ToolUseBlock, rules: Mapping[str, str] | None = None) -> str | None:
    """The file a call shows the agent: Claude Code ``Read`` (``file_path``), a ``view``
    command (``path``), or a shell ``cat`` / ``nl`` / ``head`` / ``tail`` / ``sed -n`` of one
    path; else the file its resource key (:func:`ctxwise.resources.access_of`, under
    ``Policy.tool_rules``) says it views (OpenCode ``read``, MCP ``read_file``, Gemini CLI
    ``absolute_path``, a Codex ``shell`` argv ``cat``, any ``filePath`` / ``target_file`` / ...
    argument, a rule); None otherwise."""
    inp = use.input
    if not _ruled(use, rules):
        if use.name in ("Read", "read_file", "view_file") or inp.get("command") == "view":
            v = next((inp[k] for k in _PATH_KEYS if isinstance(inp.get(k), str) and inp[k]), None)
            if v is not None:
                return str(v)
        for v in inp.values():
            if isinstance(v, str) and _VIEW_CMD.match(v) and " -i" not in v:
                paths = _PATH.findall(v.split("|")[0])
                if paths:
                    return str(paths[-1])
    acc = access_of(use, rules)
    return acc.key[5:] if acc is not None and acc.action == "view" and acc.key.startswith("path:") else None


def _same_file(a: str, b: str) -> bool:
    """Two spellings of one path: equal, or one ends with ``/`` + the other (relative vs absolute)."""
    return a == b or a.endswith("/" + b.lstrip("./")) or b.endswith("/" + a.lstrip("./"))


def _lines_in(text: str, haystack: str) -> bool:
    """Every non-blank line of ``text``, stripped, is in ``haystack`` (a view prints lines with
    numbers before them, so a copied block is found line by line)."""
    lines = [x.strip() for x in text.splitlines() if x.strip()]
    return bool(lines) and all(x in haystack for x in lines)


def edit_anchor_recall(histories: Sequence[Sequence[Message]], payloads: Payloads,
                       outputs: Sequence[Message]) -> Recall:
    """Over every edit call of ``outputs`` (:func:`edit_anchors`), the anchors whose text the
    full history before the call held (``needed``) and of those the ones the payload the call
    was produced from held (``supported``), line by line (:func:`_lines_in`). Raises
    ``ValueError`` when the lists do not have one entry per call."""
    _check_calls(histories, payloads, outputs)
    sup = need = 0
    for h, p, o in zip(histories, payloads, outputs):
        anchors = [a for u in o.tool_uses for a in edit_anchors(u)]
        if not anchors:
            continue
        full, sent = context_text(h), context_text(p)
        for a in anchors:
            if _lines_in(a, full):
                need += 1
                sup += _lines_in(a, sent)
    return Recall(sup, need)


def working_file_freshness(histories: Sequence[Sequence[Message]], payloads: Payloads,
                           outputs: Sequence[Message], rules: Mapping[str, str] | None = None) -> Recall:
    """Over every edit call of ``outputs`` whose file (:func:`edited_paths`) the history viewed
    before (:func:`viewed_path`) or wrote whole (:func:`written_path`), whether that file's
    latest view was in the payload whole (``supported``: a view's result, or a whole write's
    call input, the same as recorded; cleared, cut or dropped is not): after a whole write the
    file is what that write put there, and an older view shows a file that no longer is.
    ``rules``: ``Policy.tool_rules`` (which argument of a tool names its file, and whether it
    views or edits it). Raises ``ValueError`` when the lists do not have one entry per call."""
    _check_calls(histories, payloads, outputs)
    sup = need = 0
    for h, p, o in zip(histories, payloads, outputs):
        paths = [x for u in o.tool_uses for x in edited_paths(u, rules)]
        if not paths:
            continue
        views = _latest_views(h, rules)
        sent = {b.tool_use_id: b.text for m in p for b in m.blocks if isinstance(b, ToolResultBlock)}
        sent.update({_WRITE + b.id: _input_text(b) for m in p for b in m.blocks if isinstance(b, ToolUseBlock)})
        for path in paths:
            view = next((v for v in reversed(views) if _same_file(v[0], path)), None)
            if view is None:
                continue
            need += 1
            sup += sent.get(view[1]) == view[2]
    return Recall(sup, need)


_WRITE = "write:"
"""Key prefix of a whole write in :func:`_latest_views` (its call's id follows)."""


def _input_text(use: ToolUseBlock) -> str:
    return json.dumps(use.input, ensure_ascii=False, sort_keys=True)


def written_path(use: ToolUseBlock, rules: Mapping[str, str] | None = None) -> str | None:
    """The file a call writes whole, whose input then holds the file's whole text: Claude Code
    ``Write`` (``file_path``), a ``create`` command (``path``), a shell here-document written
    to a file (``cat <<'EOF' > f.py``), or any other whole write by the resource keys
    (:func:`ctxwise.resources.is_whole_write`: MCP ``write_file``, OpenCode ``write``) of the
    file its key names; None otherwise."""
    inp = use.input
    if not _ruled(use, rules) and (use.name == "Write" or inp.get("command") == "create"):
        for key in _PATH_KEYS:
            v = inp.get(key)
            if isinstance(v, str) and v:
                return v
        return None
    if is_whole_write(use):  # a here-document, MCP write_file, OpenCode write, a ruled tool
        acc = access_of(use, rules)
        if acc is not None and acc.action == "edit" and acc.key.startswith("path:"):
            return acc.key[5:]
    return None


def _latest_views(history: Sequence[Message], rules: Mapping[str, str] | None = None) -> list[tuple[str, str, str]]:
    """``(path, key, text)`` of every file view in ``history``, in order: a view's key is its
    ``tool_use_id`` and its text the result's; a whole write of a file (:func:`written_path`)
    shows the agent that file too, in its own call: key ``write:<id>``, text its input as JSON."""
    uses: dict[str, str] = {}
    out: list[tuple[str, str, str]] = []
    for m in history:
        for b in m.blocks:
            if isinstance(b, ToolUseBlock):
                path = viewed_path(b, rules)
                if path:
                    uses[b.id] = path
                written = written_path(b, rules)
                if written:
                    out.append((written, _WRITE + b.id, _input_text(b)))
            elif isinstance(b, ToolResultBlock) and b.tool_use_id in uses and b.state != "error":
                out.append((uses[b.tool_use_id], b.tool_use_id, b.text))
    return out


@dataclass(frozen=True)
class Breaks:
    """Prompt-cache breaks over one conversation's calls (:func:`cache_breaks`): ``calls``
    bought by each break (from it to the next break, the last one to the end of the
    conversation) and the tokens ``rebilled`` in all (sent again uncached although the
    previous call had sent them)."""

    calls: tuple[int, ...]
    rebilled: int

    @property
    def median(self) -> float:
        """The median calls bought per break (0.0 with no break)."""
        return percentile(self.calls, 50) if self.calls else 0.0


def cache_breaks(payloads: Payloads, counter: Counter) -> Breaks:
    """Where a payload is not the previous one plus new messages, the prompt cache serves only
    their :func:`common_prefix`: a *cache-breaking edit*. Per break, the calls until the next
    one (calls bought), and over all breaks the tokens of the messages after that prefix that
    the previous payload had sent already (re-billed; edited copies of them count as sent
    again, messages new at that call do not)."""
    at: list[int] = []
    rebilled = 0
    previous: Sequence[Message] = ()
    for i, p in enumerate(payloads):
        again = call_break(previous, p, counter)
        if again is not None:
            at.append(i)
            rebilled += again
        previous = p
    return Breaks(calls_bought(at, len(payloads)), rebilled)


def call_break(previous: Sequence[Message], payload: Sequence[Message], counter: Counter) -> int | None:
    """One call of :func:`cache_breaks`: None when ``payload`` is ``previous`` plus new
    messages (or there is no previous payload), else the tokens it re-bills (the messages after
    their :func:`common_prefix` that ``previous`` had sent, by id)."""
    k = common_prefix(previous, payload)
    if not previous or k >= len(previous):
        return None
    old = {m.id for m in previous[k:]}
    return sum(counter.count_message(m) for m in payload[k:] if m.id in old)


def calls_bought(breaks: Sequence[int], calls: int) -> tuple[int, ...]:
    """The calls each break buys: from the call index of one break (``breaks``, ascending) to
    the next, the last one to ``calls`` (the conversation's number of calls)."""
    ends = list(breaks[1:]) + [calls]
    return tuple(b - a for a, b in zip(breaks, ends))


# --------------------------------------------------------------------------- validity, events, latency


def validator_errors(payloads: Payloads, provider: str, references: Payloads | None = None) -> list[tuple[int, Any]]:
    """Every provider rule violation over all payloads, as ``(call index, Violation)``.

    ``references[i]`` (optional) is the full record payload ``i`` was built from; with it the
    checker also catches removed or edited reasoning.
    """
    from ..providers import check

    out: list[tuple[int, Any]] = []
    for i, p in enumerate(payloads):
        ref = list(references[i]) if references is not None else None
        out.extend((i, v) for v in check(list(p), provider, reference=ref))
    return out


def _seen(m: Message) -> str:
    """What a provider sees of ``m`` (role, name, blocks), as canonical JSON."""
    return json.dumps([m.role, m.name, [b.model_dump(mode="json") for b in m.blocks]], ensure_ascii=False,
                      sort_keys=True, separators=(",", ":"))


def _own_head(m: Message) -> str:
    """``m``'s blocks before its last reasoning block, as canonical JSON."""
    last = max((k for k, b in enumerate(m.blocks) if isinstance(b, ThinkingBlock)), default=0)
    return json.dumps([b.model_dump(mode="json") for b in m.blocks[:last]], ensure_ascii=False,
                      sort_keys=True, separators=(",", ":"))


def bound_reasoning_violations(payloads: Payloads, outputs: Sequence[Message]) -> list[tuple[int, str]]:
    """Reasoning bound to its prefix, checked from what was sent: ``(call index, message id)``
    for every assistant message with reasoning in payload ``i`` whose prefix (every message
    before it, then its own blocks before its last reasoning block) differs from the payload of
    the call that produced it (``outputs[k]`` is the reply to ``payloads[k]``). A reply not
    produced in this replay is not checked. Rule: Anthropic preserved thinking
    (platform.claude.com/docs/en/build-with-claude/preserved-thinking, prefix checks);
    ``payloads`` must be the canonical lists as sent, pinned blocks included. Raises
    ``ValueError`` when the lists differ in length."""
    _check_calls(payloads, outputs)
    produced: dict[str, str] = {}
    out: list[tuple[int, str]] = []
    for i, payload in enumerate(payloads):
        chain = ""
        for m in payload:
            if m.role == "assistant" and m.thinking and m.id in produced \
                    and hashlib.sha256((chain + _own_head(m)).encode("utf-8")).hexdigest() != produced[m.id]:
                out.append((i, m.id))
            chain = hashlib.sha256((chain + _seen(m)).encode("utf-8")).hexdigest()
        produced[outputs[i].id] = hashlib.sha256((chain + _own_head(outputs[i])).encode("utf-8")).hexdigest()
    return out


def events_by_stage(events: Iterable[Any]) -> dict[str, int]:
    """How many events of each stage (objects or dicts with a ``stage``), in first-seen order."""
    c: Tally[str] = Tally()
    for e in events:
        c[e["stage"] if isinstance(e, dict) else e.stage] += 1
    return dict(c)


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) with linear interpolation; 0.0 for no values."""
    if not values:
        return 0.0
    if not 0 <= q <= 100:
        raise ValueError(f"percentile must be between 0 and 100, got {q}")
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100
    lo, hi = math.floor(pos), math.ceil(pos)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)
