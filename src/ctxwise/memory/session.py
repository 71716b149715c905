"""A session's memory: its pinned facts and its user's long-term memory, as the engine uses them.

Placement is chosen for prompt caches: neither block moves or changes while only new
messages are appended, so neither breaks the cache on its own.

* the **user-memory block** is read once when the session opens and sent right after the
  system prompt, unchanged for the whole session;
* the **facts block** (``facts_mode="when_compacted"``, the default) holds the facts of the
  user inputs the context has lost (summarized or trimmed away): before a loss every fact is
  still in the context verbatim. It changes only when a summary or trim hides more user
  input, and it stands right after the last summary (or right after the head when there is
  none), the position where that summary or trim already broke the cached prefix; so a new
  user turn moves nothing. With ``facts_mode="always"`` every fact is sent on every call,
  right before the current user input (the third seed's layout; a new fact then re-bills only
  the last turn).

Facts come from user input only. The fact book is persisted with the session (the engine
hands :meth:`SessionMemory.state` to the store with each write that changed it) and restored
on reopen without reading the history; a session stored before that is rebuilt once from its
original messages. Long-term memory is updated from each new user input after the append has
committed: decided first on one read of the user's entries; an input that changes an entry is
written under the store's claim (two extractions for one user never write at once), one that
changes none (most turns) takes no claim and writes nothing.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import Any, Sequence

from ..messages import Message
from .facts import Fact, FactBook
from .user import decide_unread, user_authored

log = logging.getLogger("ctxwise")


MAX_BOOK_CHARS = 16_384
"""The most fact text a session's fact book keeps, whatever the budget, in characters of its
rendered lines (several facts of one statement share a line; :meth:`FactBook.prune`): at a
2,000,000-character budget four times the block's share was 640,000 characters, and the
stored state (5.6 MB) was serialized and rewritten with each append that added a fact
(issue 15: 0.4 s per append). Facts are short statements of the user's (an id, an amount, a
limit); 16 KiB of them is more than a facts block usefully shows."""


@dataclass(frozen=True)
class Facts:
    """A session's fact books as one immutable value: ``book`` (every fact of its user
    input), ``lost`` (the facts of user input no longer in the context, the
    ``when_compacted`` block), ``evicted`` (the fact ids the ``facts_evicted`` events already
    reported) and ``evicted_version`` (the version of the shown book they were computed at;
    -1: recompute). The books are never changed in place: every operation returns a new value
    (``self`` when nothing changed), so a value held by a session view never moves."""

    book: FactBook
    lost: FactBook
    evicted: tuple[str, ...] = ()
    evicted_version: int = -1

    @classmethod
    def empty(cls, extractor: Any = None) -> "Facts":
        """No facts."""
        return cls(FactBook(extractor), FactBook(extractor))

    @classmethod
    def from_state(cls, book: dict[str, Any], extractor: Any = None) -> "Facts":
        """The books saved with :meth:`state`, and the facts the ``facts_evicted`` events already
        reported (the next block reports only what is newly left out, as it would have without
        the reload)."""
        facts = cls(FactBook.from_dict({"facts": book.get("facts", [])}, extractor),
                    FactBook.from_dict({"facts": book.get("lost", [])}, extractor))
        return replace(facts, evicted=tuple(book["evicted"])) if "evicted" in book else facts

    def state(self) -> dict[str, Any]:
        """The fact books as JSON (for the store): every fact, and the facts of lost user
        input; without the ids of every message seen, which grow with the history."""
        return {"facts": [_compact(f) for f in self.book.to_dict()["facts"]],
                "lost": [_compact(f) for f in self.lost.to_dict()["facts"]],
                "evicted": list(self.evicted)}

    def observe(self, batch: Sequence[Message], policy: Any) -> "Facts":
        """With the facts of new user input in ``batch`` (pure, no I/O)."""
        users = user_authored(batch)
        if not policy.facts or not users:
            return self
        book = self.book.copy()
        for m in users:
            book.add_message(m)
        book.prune(_keep_chars(policy))
        return replace(self, book=book)

    def forget(self, message_id: str) -> "Facts":
        """Without the facts taken from ``message_id`` (a popped message); a fact it had
        superseded is active again."""
        data = self.book.to_dict()
        dropped = {f["id"] for f in data["facts"] if f.get("source_message_id") == message_id}
        if not dropped and message_id not in data.get("seen_messages", []):
            return self
        facts = [dict(f) for f in data["facts"] if f["id"] not in dropped]
        for f in facts:
            if f.get("superseded_by") in dropped:
                f["status"], f["superseded_by"] = "active", None
        seen = [i for i in data.get("seen_messages", []) if i != message_id]
        return replace(self, book=FactBook.from_dict({"facts": facts, "seen_messages": seen}, self.book._extractor))

    def reset(self) -> "Facts":
        """Empty books (the session was cleared); what was reported evicted stays known."""
        return replace(self, book=FactBook(self.book._extractor), lost=FactBook(self.lost._extractor))

    def lose(self, messages: Sequence[Message], policy: Any) -> tuple["Facts", bool]:
        """Note messages that left the context (summarized or trimmed): their user inputs'
        facts go into the ``when_compacted`` block. Returns the new value and whether that
        block gained a fact."""
        users = user_authored(messages)
        if not policy.facts or not users:
            return self, False
        lost = self.lost.copy()
        for m in users:
            lost.add_message(m)
        lost.prune(_keep_chars(policy))
        return replace(self, lost=lost), lost.version != self.lost.version

    def shown(self, policy: Any) -> FactBook:
        """The book the facts block is rendered from: every fact (``always``) or the lost ones."""
        return self.book if policy.facts_mode == "always" else self.lost

    def block(self, policy: Any, counter: Any, lossy: bool = True) -> tuple["Facts", Message | None, list[Fact], bool]:
        """``(new value, the facts block to send or None, the facts newly left out to fit its
        budget since the last call, whether there are any)``. The ``when_compacted`` block
        holds the facts of lost user input only, so it is None until something is lost;
        ``lossy=False`` forces None there too."""
        if not policy.facts or (policy.facts_mode == "when_compacted" and not lossy):
            return self, None, [], False
        book = self.shown(policy)
        budget = int(policy.effective_budget * policy.facts_share)
        block, evicted = book.render(budget, counter)
        if book.version == self.evicted_version:
            return self, block, [], False
        known = set(self.evicted)
        fresh = [f for f in evicted if f.id not in known]
        new = replace(self, evicted=tuple(f.id for f in evicted), evicted_version=book.version)
        return new, block, fresh, bool(fresh)

    def pinned_texts(self, policy: Any) -> list[str]:
        """The active facts' clauses, verbatim, for summarizers to quote."""
        return self.book.pinned_texts() if policy.facts else []


def _keep_chars(policy: Any) -> int:
    """How much fact text a book keeps (characters): four times the facts block's budget
    (a token taken as 4 characters), at most :data:`MAX_BOOK_CHARS`, so the book and its
    stored state stay bounded however long the session runs; what lies beyond could never be
    shown (see FactBook.prune)."""
    budget = int(policy.effective_budget * policy.facts_share)
    return int(min(4 * budget * (4 if policy.unit == "tokens" else 1), MAX_BOOK_CHARS))


class SessionMemory:
    """Facts and user memory for one ``(user_id, session_id)``: the session's current
    :class:`Facts` (``facts``, set by the engine after each commit) and the user's long-term
    memory (read and written through ``store``).

    ``store`` is a :class:`~ctxwise.store.MemoryStore`; ``counter`` measures the policy unit;
    block budgets are ``facts_share`` / ``user_memory_share`` of the effective budget;
    ``extractor`` is the fact extractor (default: the rules of :func:`extract_facts`);
    ``decider`` the long-term memory decider (default: the rules of
    :func:`ctxwise.memory.user.decide`).
    """

    def __init__(self, store: Any, user_id: str, session_id: str, policy: Any, counter: Any,
                 extractor: Any = None, decider: Any = None) -> None:
        self.store = store
        self.user_id = user_id
        self.session_id = session_id
        self.policy = policy
        self.counter = counter
        self.extractor = extractor
        self.decider = decider
        self.facts = Facts.empty(extractor)
        self._memory_block: Message | None = None

    @property
    def book(self) -> FactBook:
        """Every fact of the session's user input."""
        return self.facts.book

    @property
    def lost(self) -> FactBook:
        """The facts of the user inputs no longer in the context (``when_compacted`` block)."""
        return self.facts.lost

    def load(self, originals: Sequence[Message] | None, started: datetime | None = None,
             book: dict[str, Any] | None = None, lost: frozenset[str] | set[str] = frozenset()) -> None:
        """Restore the facts from ``book`` (what :meth:`state` returned: every fact, and the
        facts of lost user input), or rebuild them from the session's original messages (in
        order; ``lost``: the ids of those no longer in the context, summarized or trimmed)
        when there is none, and read the user's long-term memory block as it was when the
        session started (``started``, UTC): entries this session wrote itself, or that came
        later, are not shown to it, so a reloaded session sends the same blocks as before."""
        self.facts = Facts.empty(self.extractor)
        if self.policy.facts:
            self.facts = _loaded_facts(book, originals or [], lost, self.policy, self.counter, self.extractor)
        self._memory_block = None
        if self.policy.user_memory:
            from .repo import list_memory
            from .user import render_user_memory

            entries = list_memory(self.store, self.user_id, exclude_session=self.session_id,
                                  created_before=_aware(started) if started is not None else None)
            budget = int(self.policy.effective_budget * self.policy.user_memory_share)
            self._memory_block = render_user_memory(entries, budget, self.counter)

    def state(self) -> dict[str, Any]:
        """The fact books as JSON (for the store), see :meth:`Facts.state`."""
        return self.facts.state()

    def observe_memory(self, batch: Sequence[Message]) -> Any:
        """Update the user's long-term memory from new user input (after the append committed).
        Returns what :func:`~ctxwise.memory.repo.extract_and_store` did (None when nothing to
        do); raises what it raises (e.g. :class:`~ctxwise.memory.repo.MemoryBusy`). Optimistic: a
        batch whose user input changes no entry takes no claim and writes nothing (one read).
        With the default decider, a batch whose every user message the rules decide without
        looking at any entry, to NOOPs only (:func:`~ctxwise.memory.user.decide_unread`: the
        same ops whatever the entries), reads nothing either: its ops are returned, with no
        ``entries`` (not read)."""
        users = user_authored(batch)
        if not users or not self.policy.user_memory:
            return None
        from .repo import StoredExtraction, extract_and_store

        if self.decider is None:
            alone = [decide_unread(m.text) for m in users]
            if all(ops is not None for ops in alone):
                return StoredExtraction(ops=[op for ops in alone if ops is not None for op in ops])

        return extract_and_store(self.store, self.user_id, users, session_id=self.session_id, decider=self.decider,
                                optimistic=True)

    def remember(self, batch: Sequence[Message]) -> dict[str, Any] | None:
        """Update the user's long-term memory from a committed batch (:meth:`observe_memory`);
        never raises. Returns the event to record: ``memory_failed`` when the update raised,
        ``memory_skipped`` with the reasons when the memory decider left text unread or
        unstored because of its bounds, else None. Logs it."""
        from .user import SKIPPED

        ids = [m.id for m in batch]
        try:
            done = self.observe_memory(batch)
        except Exception as exc:  # noqa: BLE001 - reported, not raised: the append is committed
            log.warning(json.dumps({"event": "ctxwise.memory_failed", "session": self.session_id,
                                    "user": self.user_id, "error": type(exc).__name__,
                                    "message": f"<{len(str(exc))} chars>"}))  # its text may quote the user
            return {"stage": "memory_failed", "trigger": type(exc).__name__, "at": _now(),
                    "affected_ids": ids, "detail": {"error": str(exc)[:500]}}
        skipped = [op.reason for op in (getattr(done, "ops", None) or []) if op.reason.startswith(SKIPPED)]
        if not skipped:
            return None
        reasons = list(dict.fromkeys(skipped))[:5]
        log.info(json.dumps({"event": "ctxwise.memory_skipped", "session": self.session_id, "user": self.user_id,
                             "reasons": reasons}))
        return {"stage": "memory_skipped", "trigger": "bounds of the memory decider", "at": _now(),
                "affected_ids": ids, "detail": {"skipped": len(skipped), "reasons": reasons}}

    def head_blocks(self) -> list[Message]:
        """Blocks sent right after the system prompt (the user-memory block)."""
        return [self._memory_block] if self._memory_block is not None else []

    def pinned_texts(self) -> list[str]:
        """The active facts' clauses, verbatim, for summarizers to quote."""
        return self.facts.pinned_texts(self.policy)


def _loaded_facts(book: dict[str, Any] | None, originals: Sequence[Message], lost: frozenset[str] | set[str],
                  policy: Any, counter: Any, extractor: Any) -> Facts:
    """The facts restored from a stored ``book`` and/or rebuilt from ``originals``."""
    facts = Facts.from_state(book, extractor) if book is not None else Facts.empty(extractor)
    users = user_authored(originals)
    if users:
        whole, gone = facts.book.copy(), facts.lost.copy()
        for m in users:
            whole.add_message(m)
            if m.id in lost:
                gone.add_message(m)
        facts = replace(facts, book=whole, lost=gone)
    if book is None or "evicted" not in book:
        # no record of what was reported (rebuilt, or stored by an older version): what is
        # left out now was reported before the reload, not again
        budget = int(policy.effective_budget * policy.facts_share)
        shown = facts.shown(policy)
        facts = replace(facts, evicted=tuple(f.id for f in shown.render(budget, counter)[1]),
                        evicted_version=shown.version)
    return facts


_FACT_DEFAULTS = {"status": "active", "superseded_by": None, "value": None, "corrects": False}


def _compact(fact: dict[str, Any]) -> dict[str, Any]:
    """A fact's stored dict without the fields at their defaults (``Fact(**d)`` fills them
    in again): a third less state to write on every append and to read on every reopen."""
    return {k: v for k, v in fact.items() if k not in _FACT_DEFAULTS or _FACT_DEFAULTS[k] != v}


def _now() -> str:
    return datetime.now(timezone.utc).isoformat()


def _aware(t: datetime) -> datetime:
    return t if t.tzinfo is not None else t.replace(tzinfo=timezone.utc)
