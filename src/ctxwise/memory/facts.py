"""Pinned session facts: the user's own words that a summary tends to blur.

The seed's "关键信息固化" (key-fact pinning): after each user message, the rule-based extractor
picks out clauses that carry identifiers, amounts with units, dates and deadlines, quantities,
negations and boundary conditions, preferences, prohibitions and the session goal. A
:class:`Fact` keeps the clause **verbatim** (a slice of the user's text, so digits and units are
exact). A :class:`FactBook` holds the facts of one session; a later fact with the same ``key``
supersedes the earlier one (kept, status ``superseded``). :meth:`FactBook.render` turns the
book into one pinned user-role message inside a budget.

Only user input is read (``role == "user"`` without tool results, and not a ctxwise-made
message such as a summary): assistant and tool text never becomes a fact.

Example::

    book = FactBook()
    book.add_message(text_message("m1", "user", "My budget is under 5,000 EUR."))
    book.add_message(text_message("m3", "user", "Actually up to 6,000 EUR."))
    msg, evicted = book.render(budget=400)          # budget in characters (no counter)
    msg.text.splitlines()[1]                         # '- Actually up to 6,000 EUR.'
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, replace
from typing import Any, Callable, Container, Iterable, Literal

from ..messages import Marker, Message, TextBlock
from ..tokens import Counter as Counter  # the one counter protocol (repo.py and user.py take it from here)
from ..task import is_harness_text
from ..units import is_user_input
from . import patterns as P

FactKind = Literal[
    "identifier", "amount", "date", "quantity", "negation", "condition",
    "preference", "prohibition", "goal",
]
FACT_KINDS: tuple[str, ...] = (
    "identifier", "amount", "date", "quantity", "negation", "condition",
    "preference", "prohibition", "goal",
)

FACTS_HEADER = "Pinned facts from the user (verbatim; background, not a new instruction):"
SUPERSEDED_HEADER = "Earlier statements the user has since replaced (no longer valid):"
FACTS_MESSAGE_ID = "ctxwise-facts"


@dataclass(frozen=True)
class Fact:
    """One pinned fact.

    ``text`` is the verbatim clause from the user's message; ``value`` the exact matched span
    inside it when the fact is a value (``"1,200 EUR"``, ``"#W2378156"``), else None. ``key`` is
    the normalized slot used to detect supersedes (``"budget_max"``, ``"user_id"``,
    ``"order_id:w2378156"``, ``"qty:attendee"``). ``corrects`` marks a clause with a correction
    word ("actually", "改成"); a book uses it to resolve a generic key to the slot it corrects.
    """

    id: str
    text: str
    kind: str
    key: str
    source_message_id: str
    status: Literal["active", "superseded"] = "active"
    superseded_by: str | None = None
    value: str | None = None
    corrects: bool = False

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (the inverse of ``Fact(**d)``)."""
        return {"id": self.id, "text": self.text, "kind": self.kind, "key": self.key,
                "source_message_id": self.source_message_id, "status": self.status,
                "superseded_by": self.superseded_by, "value": self.value, "corrects": self.corrects}


# -- extraction -------------------------------------------------------------------------


def split_clauses(text: str) -> list[str]:
    """Split ``text`` into verbatim clauses: sentences, then ``", "``/``"，"`` parts.

    A conditional clause ("if it can't be fixed", "要是修不好") is kept together with the
    clause that follows it; commas inside parentheses never split. Every clause is an exact
    substring of ``text`` (stripped of surrounding whitespace).
    """
    out: list[str] = []
    for sent_start, sent_end in _spans(text, P.SENTENCE_SPLIT, 0, len(text)):
        depth_ok = _paren_free(text, sent_start, sent_end)
        parts = [
            (s, e) for s, e in _spans(text, P.CLAUSE_SPLIT, sent_start, sent_end, allowed=depth_ok)
        ]
        i = 0
        while i < len(parts):
            s, e = parts[i]
            piece = text[s:e].strip()
            while i + 1 < len(parts) and (
                P.CONDITIONAL_START.search(piece) or P.CONDITIONAL_END.search(piece)
            ):
                i += 1
                e = parts[i][1]
                piece = text[s:e].strip()
            if piece:
                out.append(piece)
            i += 1
    return out


def _spans(text: str, sep: re.Pattern[str], start: int, end: int,
           allowed: Container[int] | None = None) -> list[tuple[int, int]]:
    spans, cur = [], start
    for m in sep.finditer(text, start, end):
        if allowed is not None and m.start() not in allowed:
            continue
        if m.start() > cur:
            spans.append((cur, m.start()))
        cur = max(cur, m.end())
    if cur < end:
        spans.append((cur, end))
    return [(s, e) for s, e in spans if text[s:e].strip()]


_PAREN = re.compile(r"[(（\[)）\]]")


class _ParenFree:
    """Positions of ``text[start:end]`` outside parentheses, as a membership test (``i in it``).
    Stores only where the depth changes (one regex pass), not every position: a 600 KB
    sentence costs a few paren matches instead of a Python loop over every character."""

    def __init__(self, text: str, start: int, end: int) -> None:
        self.starts: list[int] = []  # depth > 0 on [starts[k], ends[k])
        self.ends: list[int] = []
        depth = 0
        for m in _PAREN.finditer(text, start, end):
            if m.group() in "(（[":
                if depth == 0:
                    self.starts.append(m.start())
                depth += 1
            elif depth > 0:
                depth -= 1
                if depth == 0:
                    self.ends.append(m.start())
        if depth > 0:
            self.ends.append(end)

    def __contains__(self, i: object) -> bool:
        if not isinstance(i, int):
            return False
        k = bisect.bisect_right(self.starts, i) - 1
        return k < 0 or i >= self.ends[k]


def _paren_free(text: str, start: int, end: int) -> _ParenFree:
    return _ParenFree(text, start, end)


def _norm(s: str) -> str:
    return re.sub(r"\s+", " ", s.strip().lower().lstrip("#"))


def _norm_amount(span: str) -> str:
    digits = re.sub(r"[^\d.]", "", span)
    cur = ""
    for pat, code in P.CURRENCY_NORM:
        if pat.search(span):
            cur = code
            break
    mult = "万" if "万" in span else ("k" if re.search(r"\d\s?[kK]\b|千", span) else "")
    return f"{digits}{mult} {cur}".strip()


def _bound(clause: str, start: int, end: int) -> str:
    """``"max"``, ``"min"`` or ``""``: the boundary word nearest before (or right after) a value."""
    after = clause[end:end + 6]
    if re.match(r"\s?(?:以内|以下|之内|内|封顶|or less|or fewer|max\b|tops\b)", after, re.I):
        return "max"
    if re.match(r"\s?(?:以上|起|or more|plus|\+)", after, re.I):
        return "min"
    window_start = max(0, start - 28)
    before = clause[window_start:start]
    best_up = max((m.end() for m in P.UPPER_BOUND.finditer(before)), default=-1)
    best_lo = max((m.end() for m in P.LOWER_BOUND.finditer(before)), default=-1)
    if best_up < 0 and best_lo < 0:
        return ""
    if best_up >= best_lo:
        return "max"
    # "超过 8,000 元就不做了" / "over 8,000 is a no": a lower word followed by a refusal
    if re.search(r"就不|就别|就算了|is a no|is too much|no way", clause[end:], re.I):
        return "max"
    return "min"


MAX_VALUES_PER_CLAUSE = 64
"""A clause pins at most this many values (a pasted list of thousands of ids is not a set of
user facts; the cap keeps the work per message linear with a small constant)."""
MAX_CLAUSE_CHARS = 1_000
"""Of a clause longer than this (characters) only its first and last ``MAX_CLAUSE_CHARS // 2``
characters are read, each cut at a space: the words around pasted material (a log, a document,
base64) are the user's, the material itself is not a requirement they stated, and a fact's
verbatim text stays short enough for the facts block. Keeps extraction O(1) in the size of
what was pasted (a 600 KB message took seconds per append; issue 15)."""


def _readable(clause: str) -> list[str]:
    """``[clause]``, or for a clause over :data:`MAX_CLAUSE_CHARS` its head and tail pieces
    (verbatim substrings ending / starting at whitespace; a piece with no whitespace to cut at
    is one unbroken run and is dropped)."""
    if len(clause) <= MAX_CLAUSE_CHARS:
        return [clause]
    half = MAX_CLAUSE_CHARS // 2
    head, tail = clause[:half], clause[-half:]
    cut = max(head.rfind(" "), head.rfind("\n"), head.rfind("\t"))
    head = head[:cut].strip() if cut > 0 else ""
    starts = [i for i in (tail.find(" "), tail.find("\n"), tail.find("\t")) if i >= 0]
    tail = tail[min(starts):].strip() if starts else ""
    return [p for p in (head, tail) if p]


def _overlaps(spans: list[tuple[int, int]], s: int, e: int) -> bool:
    """Whether ``[s, e)`` overlaps a span of ``spans`` (sorted, pairwise disjoint): two
    neighbours checked by bisection, so a clause with thousands of values stays linear-ish."""
    i = bisect.bisect_left(spans, (s, s))
    return (i > 0 and spans[i - 1][1] > s) or (i < len(spans) and spans[i][0] < e)


def _id_slot(clause: str, start: int, value: str) -> tuple[str, bool]:
    if P.EMAIL.fullmatch(value):
        return "email", True
    if P.USER_HANDLE.fullmatch(value):
        return "user_id", True
    if value.startswith("#W") or value.startswith("#w"):
        return "order_id", False
    before = clause[max(0, start - 32):start]
    after = clause[start + len(value):start + len(value) + 8]
    best: tuple[int, str, bool] | None = None
    for slot, pat, single in P.ID_SLOTS:
        for m in pat.finditer(before):
            if best is None or m.end() > best[0]:
                best = (m.end(), slot, single)
    if best is not None:
        return best[1], best[2]
    if re.match(r"\s*(?:card|卡)", after, re.I):
        return "card", False
    return "id", False


_Value = tuple[str, str, str, bool, int, int]
"""A value found in a clause: ``(kind, key, span_text, generic, start, end)``, offsets in characters."""


class _Taken:
    """The spans of a clause already read as values (sorted, pairwise disjoint): a span is
    read once, by the first pattern that takes it."""

    def __init__(self) -> None:
        self.spans: list[tuple[int, int]] = []

    def overlaps(self, s: int, e: int) -> bool:
        """Whether ``[s, e)`` overlaps a span already taken."""
        return _overlaps(self.spans, s, e)

    def add(self, s: int, e: int) -> None:
        """Mark ``[s, e)`` as taken."""
        bisect.insort(self.spans, (s, e))

    def take(self, s: int, e: int) -> bool:
        """Take ``[s, e)`` unless it overlaps a taken span or the clause holds
        :data:`MAX_VALUES_PER_CLAUSE` values already; whether it was taken."""
        if len(self.spans) >= MAX_VALUES_PER_CLAUSE or self.overlaps(s, e):
            return False
        self.add(s, e)
        return True


def _emails(clause: str, taken: _Taken, budget_ctx: bool) -> list[_Value]:
    return [("identifier", "email", m.group(), False, m.start(), m.end())
            for m in P.EMAIL.finditer(clause) if taken.take(m.start(), m.end())]


def _budget_key(b: str, budget_ctx: bool) -> tuple[str, bool]:
    """The key of an amount under bound ``b`` (``"min"`` / ``"max"``) in a budget clause, or
    the generic bound key; and whether it is generic."""
    if budget_ctx:
        return ("budget_min" if b == "min" else "budget_max"), False
    return b, True


def _amounts(clause: str, taken: _Taken, budget_ctx: bool) -> list[_Value]:
    out: list[_Value] = []
    for m in P.AMOUNT.finditer(clause):
        if taken.take(m.start(), m.end()):
            b = _bound(clause, m.start(), m.end())
            if budget_ctx or b:
                key, generic = _budget_key(b, budget_ctx)
            else:
                key, generic = "amount:" + _norm_amount(m.group()), False
            out.append(("amount", key, m.group(), generic, m.start(), m.end()))
    return out


def _dates(clause: str, taken: _Taken, budget_ctx: bool) -> list[_Value]:
    out: list[_Value] = []
    for m in P.DATE.finditer(clause):
        if taken.take(m.start(), m.end()):
            if P.DEADLINE_WORDS.search(clause[max(0, m.start() - 16):m.start()]) or re.match(
                r"\s?(?:之前|以前|前|为止)", clause[m.end():m.end() + 3]
            ):
                key = "deadline"
            elif P.DATE_WORDS.search(clause[max(0, m.start() - 16):m.start()]):
                key = "date"
            else:
                key = "date:" + _norm(m.group())
            out.append(("date", key, m.group(), False, m.start(), m.end()))
    return out


def _addresses(clause: str, taken: _Taken, budget_ctx: bool) -> list[_Value]:
    return [("identifier", "address:" + _norm(m.group()), m.group(), False, m.start(), m.end())
            for m in P.ADDRESS_NUM.finditer(clause) if taken.take(m.start(), m.end())]


def _identifiers(clause: str, taken: _Taken, budget_ctx: bool) -> list[_Value]:
    """User handles, phone numbers and tokens with a digit (a bare year is not one)."""
    out: list[_Value] = []
    for pat in (P.USER_HANDLE, P.PHONE, P.TOKEN_WITH_DIGIT):
        for m in pat.finditer(clause):
            v = m.group()
            if pat is P.TOKEN_WITH_DIGIT and v.isdigit() and len(v) == 4 and 1900 <= int(v) <= 2100:
                if not re.search(r"card|ending|尾号|#|id\b", clause[max(0, m.start() - 20):m.start()], re.I):
                    continue  # a bare year
            if not taken.take(m.start(), m.end()):
                continue
            slot, single = _id_slot(clause, m.start(), v)
            key = slot if single else f"{slot}:{_norm(v)}"
            out.append(("identifier", key, v, False, m.start(), m.end()))
    return out


def _names(clause: str, taken: _Taken, budget_ctx: bool) -> list[_Value]:
    out: list[_Value] = []
    for m in P.NAME.finditer(clause):
        g = 1 if m.group(1) else 2
        if taken.take(m.start(g), m.end(g)):
            out.append(("identifier", "name", m.group(g), False, m.start(g), m.end(g)))
    return out


def _quantities_en(clause: str, taken: _Taken, budget_ctx: bool) -> list[_Value]:
    """English quantities (``14 attendees``, ``30 km``), a stop word ending the unit."""
    out: list[_Value] = []
    for m in P.QTY_EN.finditer(clause):
        words = m.group(2).lower().split()
        if words[0] in P.QTY_STOP:
            continue
        if words[-1] in P.QTY_STOP:
            words = words[:1]
            if words[0] in P.QTY_STOP:
                continue
        unit = words[-1]
        end = m.start(2) + len(" ".join(m.group(2).split()[: len(words)]))
        if not taken.take(m.start(), end):
            continue
        b = _bound(clause, m.start(), end)
        if unit in P.DISTANCE_UNITS:
            key = "distance" + (f"_{b}" if b else "")
        else:
            key = "qty:" + re.sub(r"(?<=[a-z]{3})s$", "", unit) + (f"_{b}" if b else "")
        out.append(("quantity", key, clause[m.start():end], False, m.start(), end))
    return out


def _quantities_zh(clause: str, taken: _Taken, budget_ctx: bool) -> list[_Value]:
    out: list[_Value] = []
    for m in P.QTY_ZH.finditer(clause):
        if taken.take(m.start(), m.end()):
            b = _bound(clause, m.start(), m.end())
            unit = m.group(2)
            key = ("distance" if unit in P.DISTANCE_UNITS else "qty:" + unit) + (f"_{b}" if b else "")
            out.append(("quantity", key, m.group(), False, m.start(), m.end()))
    return out


def _bare_numbers(clause: str, taken: _Taken, budget_ctx: bool) -> list[_Value]:
    """Bare numbers under a bound or in a budget clause: "up to 6,000", "5,000 以内" (not
    counted against :data:`MAX_VALUES_PER_CLAUSE`)."""
    out: list[_Value] = []
    for m in re.finditer(rf"(?<![\w.,#/-])(?:{P.NUM})(?![\w%/-]|[.,]\d)", clause):
        if taken.overlaps(m.start(), m.end()):
            continue
        b = _bound(clause, m.start(), m.end())
        if not b and not budget_ctx:
            continue
        taken.add(m.start(), m.end())
        key, generic = _budget_key(b, budget_ctx)
        out.append(("amount", key, m.group(), generic, m.start(), m.end()))
    return out


_FINDERS: tuple[Callable[[str, _Taken, bool], list[_Value]], ...] = (
    _emails, _amounts, _dates, _addresses, _identifiers, _names, _quantities_en, _quantities_zh, _bare_numbers,
)
"""The value patterns in the order they take spans (an earlier one wins an overlap)."""


def _values(clause: str) -> list[_Value]:
    """Every value in ``clause``, in order of position: ``(kind, key, span_text, generic, start, end)``."""
    taken = _Taken()
    budget_ctx = bool(P.BUDGET_WORDS.search(clause))
    out = [v for find in _FINDERS for v in find(clause, taken, budget_ctx)]
    out.sort(key=lambda t: t[4])
    return out


def _clause_kind(clause: str, has_values: bool) -> tuple[str, str] | None:
    """The clause-level kind and key (goal, preference, prohibition, negation, condition)."""
    norm = _norm(re.sub(r"[^\w\s]", "", clause))[:80]
    if len(norm.split()) < 2 and len(norm) < 3:
        return None  # "No", "好的": too short to be a fact
    if P.PREFERENCE.search(clause):
        return "preference", "pref:" + norm
    if P.PROHIBITION.search(clause) and not P.NEGATION_NOISE.search(clause):
        return "prohibition", "prohibit:" + norm
    if P.GOAL.search(clause):
        return "goal", "goal"
    if has_values:
        return None
    if P.NEGATION.search(clause) and not P.NEGATION_NOISE.search(clause):
        return "negation", "neg:" + norm
    if P.CONDITION.search(clause):
        return "condition", "cond:" + norm
    return None


def extract_facts(message: Message) -> list[Fact]:
    """The candidate facts of one user message, in text order (rule-based, English and Chinese).

    Returns ``[]`` for anything that is not user input (assistant, tool and system messages, a
    user message carrying tool results, ctxwise's own summary/facts/memory messages, an agent
    harness's notice: :func:`ctxwise.task.is_harness_text`). Fact ids are
    ``"<message id>:f<n>"``; the same message always yields the same facts (deterministic).
    A clause yields one fact per value in it (kind identifier/amount/date/quantity, each with the
    whole clause as ``text``) plus at most one clause-level fact (goal, preference, prohibition;
    negation or condition only when the clause holds no value). Of a clause over
    :data:`MAX_CLAUSE_CHARS` characters only its head and tail are read (see :func:`_readable`).
    """
    if not is_user_input(message) or message.kind is not None or is_harness_text(message.text):
        return []
    facts: list[Fact] = []
    for clause in (piece for whole in split_clauses(message.text) for piece in _readable(whole)):
        values = _values(clause)
        corrects = bool(P.CORRECTION.search(clause))
        seen_keys: set[str] = set()
        for kind, key, span, generic, _s, _e in values:
            if key in seen_keys:
                continue
            seen_keys.add(key)
            facts.append(Fact(
                id=f"{message.id}:f{len(facts) + 1}", text=clause, kind=kind,
                key=key + ("?" if generic else ""), source_message_id=message.id,
                value=span, corrects=corrects,
            ))
        ck = _clause_kind(clause, bool(values))
        if ck is not None:
            kind, key = ck
            facts.append(Fact(
                id=f"{message.id}:f{len(facts) + 1}", text=clause, kind=kind,
                key=key + ("?" if key == "goal" else ""), source_message_id=message.id,
                corrects=corrects,
            ))
    return facts


# -- the book -----------------------------------------------------------------------------


Extractor = Callable[[Message], list[Fact]]


class FactBook:
    """The facts of one session, in the order they were stated, with their supersede history.

    ``extractor`` maps a message to candidate facts (default :func:`extract_facts`; an
    :class:`ctxwise.memory.llm.LLMFactExtractor` fits too). Generic keys ending in ``?`` (a
    goal, a bare bound such as "up to 6,000") are resolved on :meth:`add`: a correction
    ("actually …", "改成 …") takes over the most recent active slot of the same sort; otherwise
    the fact gets its own key. Not thread-safe; one book per session.
    """

    def __init__(self, extractor: Extractor | None = None) -> None:
        self._extractor = extractor or extract_facts
        self._facts: list[Fact] = []
        self._index: dict[str, int] = {}
        self._active_by_key: dict[str, int] = {}
        self._active_by_text: dict[str, int] = {}
        self._seen_messages: set[str] = set()
        self._version = 0
        self._pinned_cache: tuple[int, list[str]] = (-1, [])
        self._render_cache: tuple[tuple[Any, ...], tuple[Message | None, list[Fact]]] | None = None

    # -- adding -------------------------------------------------------------------------

    def add_message(self, message: Message) -> list[Fact]:
        """Extract and add the facts of ``message``; returns the added facts (keys resolved).

        A message id seen before is ignored (appending the same message twice adds nothing);
        non-user messages yield nothing.
        """
        if message.id in self._seen_messages:
            return []
        self._seen_messages.add(message.id)
        return self.add(self._extractor(message))

    def add(self, facts: Iterable[Fact]) -> list[Fact]:
        """Add ``facts`` (in order); each supersedes the active fact with the same key. A fact
        repeating the active one of its key word for word adds nothing (a user who says the
        same thing twice does not grow the book). O(1) per fact."""
        added: list[Fact] = []
        for f in facts:
            if f.id in self._index:
                continue
            j = self._active_by_text.get(f.text)
            if j is not None and self._facts[j].status == "active" and self._facts[j].value == f.value:
                continue  # the same words stated again: nothing new to pin
            f = replace(f, key=self._resolve(f), status="active", superseded_by=None)
            i = self._active_by_key.get(f.key)
            if i is not None:
                old = self._facts[i]
                if old.text == f.text:
                    continue
                self._facts[i] = replace(old, status="superseded", superseded_by=f.id)
            self._index[f.id] = len(self._facts)
            self._active_by_key[f.key] = len(self._facts)
            self._active_by_text[f.text] = len(self._facts)
            self._facts.append(f)
            added.append(f)
        if added:
            self._version += 1
        return added

    def _resolve(self, f: Fact) -> str:
        if not f.key.endswith("?"):
            return f.key
        base = f.key[:-1]
        if base == "goal":
            goals = [x for x in self._facts if x.kind == "goal" and x.status == "active"]
            if f.corrects and goals:
                return goals[-1].key
            if not goals:
                return "goal"
            return f"goal#{sum(1 for x in self._facts if x.kind == 'goal') + 1}"
        # a bare bound: "max" / "min"
        if f.corrects:
            for x in reversed(self._facts):
                if x.status == "active" and x.kind in ("amount", "quantity") and x.key.endswith("_" + base):
                    return x.key
        return f"{f.kind}_{base}:{_norm(f.value or f.text)}"

    # -- views --------------------------------------------------------------------------

    @property
    def facts(self) -> list[Fact]:
        """Every fact ever added (active and superseded), in the order added. A copy."""
        return list(self._facts)

    def active(self) -> list[Fact]:
        """The facts still in force, in the order stated."""
        return [f for f in self._facts if f.status == "active"]

    def superseded(self) -> list[Fact]:
        """The facts replaced by a later statement, in the order stated."""
        return [f for f in self._facts if f.status == "superseded"]

    def pinned_texts(self) -> list[str]:
        """The distinct clauses of the active facts, in the order stated (for summarizers that
        must quote them verbatim)."""
        if self._pinned_cache[0] != self._version:
            self._pinned_cache = (self._version, list(dict.fromkeys(f.text for f in self._facts if f.status == "active")))
        return list(self._pinned_cache[1])

    @property
    def version(self) -> int:
        """Increases with every :meth:`add` that added a fact (cheap change detection)."""
        return self._version

    def get(self, fact_id: str) -> Fact | None:
        i = self._index.get(fact_id)
        return None if i is None else self._facts[i]

    def __len__(self) -> int:
        return len(self._facts)

    # -- rendering ----------------------------------------------------------------------

    def render(self, budget: int, counter: Counter | None = None) -> tuple[Message | None, list[Fact]]:
        """One pinned user-role message holding the facts, and the facts left out to fit.

        ``budget`` is in the counter's unit (tokens or characters); with ``counter=None`` it is
        the character length of the message text. Facts are grouped into one line per distinct
        clause, in the order stated; superseded clauses are listed last under their own header.
        When the whole block does not fit, lines are dropped in this order: superseded lines,
        oldest first; then active lines, least recently stated first. Returns ``(None, evicted)``
        when the book is empty or not even one line fits. Deterministic: the same facts give a
        byte-identical message (id ``"ctxwise-facts"``, metadata
        ``{"ctxwise": {"kind": "facts", "fact_ids": [...]}}``). A repeated call on an unchanged
        book with the same budget and counter returns the cached message (no recount).
        """
        ck = (self._version, budget, id(counter), str(getattr(counter, "memo_key", "")))
        if self._render_cache is not None and self._render_cache[0] == ck:
            msg, ev = self._render_cache[1]
            return msg, list(ev)  # unchanged book: the same message object, no recount
        result = self._render(budget, counter)
        self._render_cache = (ck, result)
        return result[0], list(result[1])

    def _render(self, budget: int, counter: Counter | None) -> tuple[Message | None, list[Fact]]:
        lines = self._lines()
        if not lines:
            return None, []
        order = sorted(
            range(len(lines)),
            key=lambda i: (lines[i]["active"], lines[i]["recency"]),
        )  # eviction order: superseded before active, older before newer

        def build(drop: int) -> Message | None:
            gone = set(order[:drop])
            kept = [ln for i, ln in enumerate(lines) if i not in gone]
            if not kept:
                return None
            return _facts_message(kept)

        def size(m: Message) -> int:
            if counter is None:
                return len(m.text)
            return counter.count_message(m)

        # dropping more lines never grows the block: binary search the fewest drops that fit
        lo, hi = 0, len(lines)
        while lo < hi:
            mid = (lo + hi) // 2
            m = build(mid)
            if m is None or size(m) <= budget:
                hi = mid
            else:
                lo = mid + 1
        msg = build(lo)
        evicted_ids = {fid for i in order[:lo] for fid in lines[i]["ids"]}
        evicted = [f for f in self._facts if f.id in evicted_ids]
        return msg, evicted

    def _lines(self) -> list[dict[str, Any]]:
        groups: dict[str, dict[str, Any]] = {}
        for seq, f in enumerate(self._facts):
            g = groups.setdefault(f.text, {"text": f.text, "ids": [], "active": False, "recency": seq})
            g["ids"].append(f.id)
            g["active"] = g["active"] or f.status == "active"
            g["recency"] = seq
        return list(groups.values())

    def prune(self, max_chars: int) -> bool:
        """Forget the facts the block could not show anyway, so the book (and the state the
        store keeps for it) stays bounded by the block's budget, not by the session's length.

        Lines go in :meth:`render`'s eviction order (superseded lines oldest first, then active
        lines least recently stated first) until the remaining lines' text, with their bullets,
        is at most ``max_chars`` characters. Callers pass several times the block budget, so a
        pruned line is one no render would show unless that many newer lines were superseded.
        Returns whether anything was forgotten (the book's version then changes)."""
        lines = self._lines()
        total = sum(len(ln["text"]) + 3 for ln in lines)
        if total <= max_chars:
            return False
        order = sorted(range(len(lines)), key=lambda i: (lines[i]["active"], lines[i]["recency"]))
        drop: set[str] = set()
        for i in order:
            if total <= max_chars:
                break
            total -= len(lines[i]["text"]) + 3
            drop.update(lines[i]["ids"])
        data = self.to_dict()
        kept = self.from_dict({"facts": [f for f in data["facts"] if f["id"] not in drop],
                               "seen_messages": data["seen_messages"]}, self._extractor)
        self._facts, self._index = kept._facts, kept._index
        self._active_by_key, self._active_by_text = kept._active_by_key, kept._active_by_text
        self._version += 1
        return True

    def copy(self) -> "FactBook":
        """An independent book with the same facts, seen ids and version (the caches are
        shared: they are keyed by the version)."""
        book = FactBook(self._extractor)
        book._facts, book._index = list(self._facts), dict(self._index)
        book._active_by_key, book._active_by_text = dict(self._active_by_key), dict(self._active_by_text)
        book._seen_messages, book._version = set(self._seen_messages), self._version
        book._pinned_cache, book._render_cache = self._pinned_cache, self._render_cache
        return book

    # -- persistence --------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """``{"facts": [...], "seen_messages": [...]}``: JSON-ready state for the store."""
        return {"facts": [f.to_dict() for f in self._facts], "seen_messages": sorted(self._seen_messages)}

    @classmethod
    def from_dict(cls, data: dict[str, Any], extractor: Extractor | None = None) -> "FactBook":
        """Rebuild a book saved with :meth:`to_dict` (facts keep their keys and statuses)."""
        book = cls(extractor)
        for d in data.get("facts", []):
            f = Fact(**d)
            book._index[f.id] = len(book._facts)
            if f.status == "active":
                book._active_by_key[f.key] = len(book._facts)
                book._active_by_text[f.text] = len(book._facts)
            book._facts.append(f)
        book._seen_messages = set(data.get("seen_messages", []))
        return book


def _facts_message(lines: list[dict[str, Any]]) -> Message:
    active = [ln for ln in lines if ln["active"]]
    old = [ln for ln in lines if not ln["active"]]
    parts = [FACTS_HEADER, *(f"- {ln['text']}" for ln in active)]
    if old:
        parts += [SUPERSEDED_HEADER, *(f"- {ln['text']}" for ln in old)]
    ids = [fid for ln in lines for fid in ln["ids"]]
    return Message(
        id=FACTS_MESSAGE_ID, role="user", blocks=[TextBlock(text="\n".join(parts))],
        metadata=Marker.with_({}, kind="facts", fact_ids=ids),
    )


def quote_facts(facts: Iterable[Fact]) -> str:
    """The facts' clauses as verbatim bullet lines (``"- <text>"``), each distinct clause once,
    in the given order. For summarizers that must quote the user's constraints exactly.
    Returns ``""`` for no facts."""
    seen: dict[str, None] = {}
    for f in facts:
        seen.setdefault(f.text, None)
    return "\n".join(f"- {t}" for t in seen)
