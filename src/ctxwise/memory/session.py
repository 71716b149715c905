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
original messages. Long-term memory is updated from each new user input under the store's
claim (two extractions for one user never run at once), after the append has committed.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Sequence

from ..messages import Message
from .facts import Fact, FactBook
from .user import user_authored


MAX_BOOK_CHARS = 16_384
"""The most fact text a session's fact book keeps, whatever the budget, in characters of its
rendered lines (several facts of one statement share a line; :meth:`FactBook.prune`): at a
2,000,000-character budget four times the block's share was 640,000 characters, and the
stored state (5.6 MB) was serialized and rewritten with each append that added a fact
(issue 15: 0.4 s per append). Facts are short statements of the user's (an id, an amount, a
limit); 16 KiB of them is more than a facts block usefully shows."""


class SessionMemory:
    """Facts and user memory for one ``(user_id, session_id)``.

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
        self.book = FactBook(extractor)
        self.lost = FactBook(extractor)
        """The facts of the user inputs no longer in the context (``when_compacted`` block)."""
        self._memory_block: Message | None = None
        self._evicted: tuple[str, ...] = ()
        self._evicted_version = -1

    def load(self, originals: Sequence[Message] | None, started: datetime | None = None,
             book: dict[str, Any] | None = None, lost: frozenset[str] | set[str] = frozenset()) -> None:
        """Restore the facts from ``book`` (what :meth:`state` returned: every fact, and the
        facts of lost user input), or rebuild them from the session's original messages (in
        order; ``lost``: the ids of those no longer in the context, summarized or trimmed)
        when there is none, and read the user's long-term memory block as it was when the
        session started (``started``, UTC): entries this session wrote itself, or that came
        later, are not shown to it, so a reloaded session sends the same blocks as before."""
        self.book = FactBook(self.extractor)
        self.lost = FactBook(self.extractor)
        if self.policy.facts:
            if book is not None:
                self.restore(book)
            for m in user_authored(originals or []):
                self.book.add_message(m)
                if m.id in lost:
                    self.lost.add_message(m)
            if book is None or "evicted" not in book:
                # no record of what was reported (rebuilt, or stored by an older version): what
                # is left out now was reported before the reload, not again
                budget = int(self.policy.effective_budget * self.policy.facts_share)
                self._evicted = tuple(f.id for f in self._shown().render(budget, self.counter)[1])
                self._evicted_version = self._shown().version
        if self.policy.user_memory:
            from .repo import list_memory
            from .user import render_user_memory

            entries = list_memory(self.store, self.user_id, exclude_session=self.session_id,
                                  created_before=_aware(started) if started is not None else None)
            budget = int(self.policy.effective_budget * self.policy.user_memory_share)
            self._memory_block = render_user_memory(entries, budget, self.counter)

    def state(self) -> dict[str, Any]:
        """The fact books as JSON (for the store): every fact, and the facts of lost user
        input; without the ids of every message seen, which grow with the history (the engine
        never hands a book one message twice)."""
        return {"facts": [_compact(f) for f in self.book.to_dict()["facts"]],
                "lost": [_compact(f) for f in self.lost.to_dict()["facts"]],
                "evicted": list(self._evicted)}

    def observe_facts(self, batch: Sequence[Message]) -> bool:
        """Take the facts of new user input into the book (pure, no I/O; the engine persists
        the book with the append). True when the book changed."""
        before = self.book.version
        if self.policy.facts:
            for m in user_authored(batch):
                self.book.add_message(m)
            self.book.prune(self._keep_chars())
        return self.book.version != before

    def _keep_chars(self) -> int:
        """How much fact text a book keeps (characters): four times the facts block's budget
        (a token taken as 4 characters), at most :data:`MAX_BOOK_CHARS`, so the book and its
        stored state (rewritten with each append that adds a fact) stay bounded however long
        the session runs and however large the budget; what lies beyond could never be shown
        (see FactBook.prune)."""
        budget = int(self.policy.effective_budget * self.policy.facts_share)
        return min(4 * budget * (4 if self.policy.unit == "tokens" else 1), MAX_BOOK_CHARS)

    def restore(self, book: dict[str, Any]) -> None:
        """Put back the books saved with :meth:`state` (on reopen, or after an append that
        failed), and the facts the ``facts_evicted`` events already reported: the next facts
        block reports only what is newly left out, as it would have without the reload, and a
        reopen renders no block (the first ``prepare()`` does)."""
        self.book = FactBook.from_dict({"facts": book.get("facts", [])}, self.extractor)
        self.lost = FactBook.from_dict({"facts": book.get("lost", [])}, self.extractor)
        if "evicted" in book:
            self._evicted, self._evicted_version = tuple(book["evicted"]), -1

    def forget(self, message_id: str) -> None:
        """Drop the facts taken from ``message_id`` (a popped message); a fact it had
        superseded is active again."""
        data = self.book.to_dict()
        dropped = {f["id"] for f in data["facts"] if f.get("source_message_id") == message_id}
        if not dropped and message_id not in data.get("seen_messages", []):
            return
        facts = [dict(f) for f in data["facts"] if f["id"] not in dropped]
        for f in facts:
            if f.get("superseded_by") in dropped:
                f["status"], f["superseded_by"] = "active", None
        seen = [i for i in data.get("seen_messages", []) if i != message_id]
        self.book = FactBook.from_dict({"facts": facts, "seen_messages": seen}, self.extractor)

    def reset(self) -> None:
        """Empty books (the session was cleared)."""
        self.book = FactBook(self.extractor)
        self.lost = FactBook(self.extractor)

    def observe_memory(self, batch: Sequence[Message]) -> Any:
        """Update the user's long-term memory from new user input (after the append committed).
        Returns what :func:`~ctxwise.memory.repo.extract_and_store` did (None when nothing to
        do); raises what it raises (e.g. :class:`~ctxwise.memory.repo.MemoryBusy`)."""
        users = user_authored(batch)
        if not users or not self.policy.user_memory:
            return None
        from .repo import extract_and_store

        return extract_and_store(self.store, self.user_id, users, session_id=self.session_id, decider=self.decider)

    def observe(self, batch: Sequence[Message]) -> None:
        """Take the facts of new user input and update the user's long-term memory."""
        self.observe_facts(batch)
        self.observe_memory(batch)

    def lose(self, messages: Sequence[Message]) -> bool:
        """Note messages that left the context (summarized or trimmed): their user inputs'
        facts go into the ``when_compacted`` block. Returns whether that block gained a fact."""
        if not self.policy.facts:
            return False
        before = self.lost.version
        for m in user_authored(messages):
            self.lost.add_message(m)
        self.lost.prune(self._keep_chars())
        return self.lost.version != before

    def _shown(self) -> FactBook:
        """The book the facts block is rendered from: every fact (``always``) or the lost ones."""
        return self.book if self.policy.facts_mode == "always" else self.lost

    def head_blocks(self) -> list[Message]:
        """Blocks sent right after the system prompt (the user-memory block)."""
        return [self._memory_block] if self._memory_block is not None else []

    def facts_block(self, lossy: bool = True) -> tuple[Message | None, list[Fact], bool]:
        """The facts block to send (or None; where it goes: see the module doc), the facts
        *newly* left out to fit its budget since the last call (for the ``facts_evicted``
        event; the event never re-lists earlier evictions, so its size does not grow with the
        session), and whether there are any. The ``when_compacted`` block holds the facts of
        lost user input only (see :meth:`lose`), so it is None until something is lost;
        ``lossy=False`` forces None there too."""
        if not self.policy.facts or (self.policy.facts_mode == "when_compacted" and not lossy):
            return None, [], False
        book = self._shown()
        budget = int(self.policy.effective_budget * self.policy.facts_share)
        version = book.version
        block, evicted = book.render(budget, self.counter)
        if version == self._evicted_version:
            return block, [], False
        self._evicted_version = version
        known = set(self._evicted)
        fresh = [f for f in evicted if f.id not in known]
        self._evicted = tuple(f.id for f in evicted)
        return block, fresh, bool(fresh)

    def pinned_texts(self) -> list[str]:
        """The active facts' clauses, verbatim, for summarizers to quote."""
        return self.book.pinned_texts() if self.policy.facts else []


_FACT_DEFAULTS = {"status": "active", "superseded_by": None, "value": None, "corrects": False}


def _compact(fact: dict[str, Any]) -> dict[str, Any]:
    """A fact's stored dict without the fields at their defaults (``Fact(**d)`` fills them
    in again): a third less state to write on every append and to read on every reopen."""
    return {k: v for k, v in fact.items() if k not in _FACT_DEFAULTS or _FACT_DEFAULTS[k] != v}


def _aware(t: datetime) -> datetime:
    return t if t.tzinfo is not None else t.replace(tzinfo=timezone.utc)
