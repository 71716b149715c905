"""Replies the client already has, stored off the request's critical path.

A proxied call's reply is handed to the client first and stored after: it waits here as a
:class:`Pending` (the reply's wire items, their heads, the session version its call left). It
is stored by whichever comes first:

* the **next call of the same session** in this process (:func:`ctxwise.proxy.conversation.begin`
  takes it with :meth:`Replies.take`): a client re-sends the reply in its history, so the reply
  and that call's new messages are appended together, one store write for the two, before the
  call is prepared;
* the writer thread, ``delay`` seconds after the reply was handed over (default
  :data:`DEFAULT_DELAY`), for a session whose client stops or pauses;
* :meth:`Replies.flush` (the server shutting down; a test reading the store).

So a reply is stored before the next call of its session is served, and a reader of the store
(the inspector, ``GET .../context``) may see a session without its latest reply for up to
``delay`` seconds. The write is made only on the version the call left: if another process
served the session's next call meanwhile (that call carried the reply in its history and
stored it), the late write is refused by the store's version check and dropped, never stored
twice (so is it when anything else wrote the session in that window, e.g. an append through
the REST API: the client's next call, which carries the reply, stores it then). A process
killed in that window loses the reply from the transcript until the client's next call,
which carries it, is served.
"""
from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

log = logging.getLogger("ctxwise.proxy")

DEFAULT_DELAY = 0.5
"""Seconds a reply waits for its session's next call before the writer thread stores it."""

Key = tuple[str, str, str]
"""``(tenant, user_id, session_id)``."""


@dataclass
class Pending:
    """A reply handed to the client and not yet stored: its wire ``items`` (route kind of
    ``call``), their ``chain`` of heads, and ``version``, the session version its call left
    (the write is refused on any other). ``due``: the monotonic time the writer stores it."""

    call: Any
    items: list[dict[str, Any]]
    chain: list[str]
    version: int
    extra: list[tuple[str, int]] = field(default_factory=list)
    """More heads to store with the reply, ``(head, count)``: a Responses reply's id
    (:func:`ctxwise.proxy.wire.response_head`)."""
    due: float = 0.0
    done: threading.Event = field(default_factory=threading.Event)

    @property
    def key(self) -> Key:
        return (self.call.tenant, self.call.user_id, self.call.session_id)


class Replies:
    """The pending replies of one process, stored by ``write`` (called with one
    :class:`Pending`; its errors are logged, never raised) on a daemon thread started with the
    first reply. ``delay``: seconds before the thread stores a reply (>= 0; ValueError otherwise)."""

    def __init__(self, write: Callable[[Pending], None], delay: float = DEFAULT_DELAY) -> None:
        if delay < 0:
            raise ValueError(f"reply delay {delay!r}: expected seconds >= 0")
        self.write = write
        self.delay = delay
        self._waiting: dict[Key, Pending] = {}
        self._writing: dict[Key, Pending] = {}
        self._urgent: list[Pending] = []
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closed = False
        self._flying: dict[Key, int] = {}

    def flying(self, key: Key, delta: int) -> int:
        """Count calls of session ``key`` in flight in this process (``delta`` +1 when one is
        sent upstream, -1 when its answer is over; 0 to read); returns the count."""
        with self._cond:
            n = self._flying.get(key, 0) + delta
            if n > 0:
                self._flying[key] = n
            else:
                self._flying.pop(key, None)
        return max(n, 0)

    def add(self, pending: Pending) -> None:
        """Hold ``pending`` until its session's next call or its due time (never blocks, unless
        closed: then it is stored now). A reply still waiting for the same session (two calls of
        one session at once) goes to the writer thread at once."""
        pending.due = time.monotonic() + self.delay
        with self._cond:
            if not self._closed:
                older = self._waiting.pop(pending.key, None)
                if older is not None:
                    older.due = 0.0
                    self._urgent.append(older)
                self._waiting[pending.key] = pending
                self._start()
                if older is not None or not self.delay:
                    # else the writer needs no wake-up: it looks again within ``delay`` seconds
                    # (its idle wait), or at an earlier reply's due time, by this one's due time
                    self._cond.notify_all()
                return
        self._store(pending)

    def take(self, key: Key) -> Pending | None:
        """The reply waiting for session ``key``, now the caller's to store (the writer will not);
        None when there is none. A reply the writer is storing right now is waited for (then
        None: it is stored)."""
        with self._cond:
            pending = self._waiting.pop(key, None)
            busy = self._writing.get(key)
        if busy is not None:
            busy.done.wait()
        return pending

    def carried(self, tenant: str, name: str | None, chain: list[str]) -> Pending | None:
        """The waiting reply of ``tenant`` (and of client name ``name`` when given) that the
        history ``chain`` carries whole, its call's history before it (the longest such);
        None when none. Left waiting: :meth:`take` it by its key."""
        best: Pending | None = None
        with self._cond:
            for p in self._waiting.values():
                start, n = len(p.call.chain), len(p.call.chain) + len(p.chain)
                if p.call.tenant != tenant or not p.chain or len(chain) < n or chain[n - 1] != p.chain[-1]:
                    continue
                if name is not None and (p.call.name or "") != name:
                    continue
                if start and chain[start - 1] != p.call.chain[-1]:
                    continue
                if best is None or n > len(best.call.chain) + len(best.chain):
                    best = p
        return best

    def take_head(self, tenant: str, head: str) -> Pending | None:
        """The reply waiting with the extra head ``head`` of ``tenant`` (:attr:`Pending.extra`),
        as :meth:`take` gives it."""
        def match(p: Pending) -> bool:
            return p.call.tenant == tenant and any(h == head for h, _ in p.extra)

        with self._cond:
            pending = next((p for p in self._waiting.values() if match(p)), None)
            busy = next((p for p in self._writing.values() if match(p)), None)
            if pending is not None:
                del self._waiting[pending.key]
        if busy is not None:
            busy.done.wait()
        return pending

    def put_back(self, pending: Pending) -> None:
        """Store a reply :meth:`take` returned that the caller did not store, now."""
        self._store(pending)

    def flush(self) -> None:
        """Store every waiting reply now, and wait for those being stored."""
        with self._cond:
            todo = [*self._urgent, *self._waiting.values()]
            self._urgent.clear()
            self._waiting.clear()
            busy = list(self._writing.values())
        for pending in todo:
            self._store(pending)
        for pending in busy:
            pending.done.wait()

    def close(self) -> None:
        """Store every waiting reply and stop the writer thread (later replies are stored at once)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self.flush()
        if self._thread is not None:
            self._thread.join(timeout=30)

    def __len__(self) -> int:
        with self._cond:
            return len(self._waiting) + len(self._urgent)

    # -- the writer ------------------------------------------------------------------------

    def _start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="ctxwise-proxy-replies", daemon=True)
            self._thread.start()

    def _store(self, pending: Pending) -> None:
        with self._cond:
            self._writing[pending.key] = pending
        try:
            self.write(pending)
        except Exception:  # noqa: BLE001 - the client has its reply; its next call carries it again
            log.exception("proxy: the reply of session %s could not be stored", pending.call.session_id)
        finally:
            with self._cond:
                if self._writing.get(pending.key) is pending:
                    del self._writing[pending.key]
            pending.done.set()

    def _due(self) -> Pending | None:
        """The next reply due, marked as being stored; None once closed. Waits under the lock:
        until the soonest reply is due, or ``delay`` seconds when none waits (so :meth:`add`
        need not wake the thread for each reply: a reply added during that wait is due no
        sooner than it ends)."""
        with self._cond:
            while not self._closed:
                if self._urgent:
                    first = self._urgent.pop(0)
                    self._writing[first.key] = first
                    return first
                now = time.monotonic()
                soonest = min(self._waiting.values(), key=lambda p: p.due, default=None)
                if soonest is not None and soonest.due <= now:
                    del self._waiting[soonest.key]
                    self._writing[soonest.key] = soonest
                    return soonest
                self._cond.wait((self.delay or None) if soonest is None else soonest.due - now)
        return None

    def _run(self) -> None:
        while (pending := self._due()) is not None:
            self._store(pending)
