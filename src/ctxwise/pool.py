"""Open sessions kept between calls: one bounded, locked, least-recently-used pool.

    pool = SessionPool(max_entries=1024, max_bytes=128 * 2**20)
    pool.put(key, session)        # True when kept
    pool.get(key)                 # shared use: the value stays in the pool
    pool.take(key)                # exclusive use: the value leaves the pool until put back

Opening a session reads it from the store, so a process that serves the same sessions again
and again (the service, the LangChain and AgentScope middlewares) keeps the ones it opened.
The pool bounds what they hold in two ways: at most ``max_entries`` values, and at most
``max_bytes`` held by their messages (:func:`held_bytes`, an estimate: the characters of
every string a message holds, plus :data:`MESSAGE_OVERHEAD` per message). A value is weighed
each time it is put; the least recently used values leave first until both bounds hold. A
value heavier than ``max_entry_bytes`` (a quarter of ``max_bytes`` by default: a session whose
context still holds an uncompacted multi-megabyte tool result) is not kept at all: the next
call opens it from the store again, so no session holds the pool's room for content it only
needs until its next ``prepare()``.

Every method takes the pool's lock (one :class:`threading.Lock`); weighing happens outside
it. Sizes of messages already weighed are remembered by object identity, weakly (a message
is frozen, and a message no session holds any more is forgotten), so putting back a session
whose context did not change costs one lookup per message.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from typing import Any, Callable, Generic, TypeVar

from .messages import Message

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

DEFAULT_ENTRIES = 1024
"""Values one pool keeps at most."""

DEFAULT_BYTES = 128 * 2**20
"""Bytes (by :func:`held_bytes`) the values of one pool hold at most: 128 MiB."""

MESSAGE_OVERHEAD = 512
"""Bytes counted per message besides its strings (the objects that hold them)."""


def held_bytes(message: Message) -> int:
    """The bytes ``message`` holds, estimated: the length of every string in it (ids, text,
    thinking, tool inputs, image data, metadata, block extras; keys included) plus
    :data:`MESSAGE_OVERHEAD`. The walk is iterative, so a deeply nested tool input costs no
    recursion. Never raises."""
    total = MESSAGE_OVERHEAD + len(message.id) + len(message.name or "")
    stack: list[Any] = [message.metadata, *(b.__dict__ for b in message.blocks)]
    while stack:
        value = stack.pop()
        if isinstance(value, str):
            total += len(value)
        elif isinstance(value, dict):
            stack.extend(value.keys())
            stack.extend(value.values())
        elif isinstance(value, (list, tuple)):
            stack.extend(value)
        elif hasattr(value, "__dict__") and not isinstance(value, type):
            stack.append(vars(value))  # a nested block (a tool result's output)
        else:
            total += 8  # a number, a bool, None
    return total


def _messages_of(value: Any) -> Iterable[Message]:
    messages: Iterable[Message] = value.messages
    return messages


@dataclass
class _Slot(Generic[V]):
    value: V
    bytes: int


class SessionPool(Generic[K, V]):
    """A bounded, thread-safe, least-recently-used map of open sessions (see the module
    docstring).

    ``max_entries``: values kept at most (0 keeps none: every ``put`` returns False).
    ``max_bytes``: bytes their messages hold at most. ``max_entry_bytes``: the heaviest value
    kept (default ``max_bytes // 4``). ``messages(value)``: the messages a value holds
    (default: ``value.messages``, a :class:`~ctxwise.Session`'s context).

    Raises :class:`~ctxwise.PolicyError` for a negative bound, or an entry bound above
    ``max_bytes``."""

    def __init__(self, max_entries: int = DEFAULT_ENTRIES, max_bytes: int = DEFAULT_BYTES, *,
                 max_entry_bytes: int | None = None,
                 messages: Callable[[V], Iterable[Message]] = _messages_of) -> None:
        from .errors import PolicyError

        entry = max_bytes // 4 if max_entry_bytes is None else max_entry_bytes
        for name, bound in (("max_entries", max_entries), ("max_bytes", max_bytes), ("max_entry_bytes", entry)):
            if not isinstance(bound, int) or isinstance(bound, bool) or bound < 0:
                raise PolicyError(f"SessionPool({name}={bound!r}): must be an integer >= 0",
                                  hint="0 turns the pool off")
        if entry > max_bytes:
            raise PolicyError(f"SessionPool(max_entry_bytes={entry}): must be at most max_bytes={max_bytes}",
                              hint="leave max_entry_bytes out: a quarter of max_bytes")
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.max_entry_bytes = entry
        self._messages = messages
        self._slots: OrderedDict[K, _Slot[V]] = OrderedDict()
        self._held = 0
        self._lock = threading.Lock()
        self._sizes: dict[int, tuple[weakref.ref[Message], int]] = {}
        self.evicted = 0
        """Values that left to keep the bounds, or were too heavy to keep (a count since start)."""

    # -- weighing ----------------------------------------------------------------------------

    def weigh(self, value: V) -> int:
        """The bytes ``value``'s messages hold (:func:`held_bytes` of each, remembered)."""
        total = 0
        sizes = self._sizes
        for m in self._messages(value):
            known = sizes.get(id(m))
            if known is not None and known[0]() is m:
                total += known[1]
                continue
            n = held_bytes(m)
            sizes[id(m)] = (weakref.ref(m, _forget(sizes, id(m))), n)
            total += n
        return total

    # -- use -----------------------------------------------------------------------------------

    def get(self, key: K) -> V | None:
        """The value under ``key`` (it stays, now the most recently used), or None."""
        with self._lock:
            slot = self._slots.get(key)
            if slot is None:
                return None
            self._slots.move_to_end(key)
            return slot.value

    def take(self, key: K) -> V | None:
        """The value under ``key``, out of the pool until it is put back (one user at a time),
        or None."""
        with self._lock:
            slot = self._slots.pop(key, None)
            if slot is None:
                return None
            self._held -= slot.bytes
            return slot.value

    def put(self, key: K, value: V, *, keep: Callable[[V], bool] | None = None) -> bool:
        """Keep ``value`` under ``key`` as the most recently used, weighed now; the least
        recently used values leave until the bounds hold. ``keep(held)``: True leaves a value
        already held under ``key`` in place (a newer one another caller put back). Returns
        whether ``value`` is in the pool now."""
        if not self.max_entries:
            return False
        weight = self.weigh(value)
        with self._lock:
            held = self._slots.get(key)
            if held is not None and held.value is not value and keep is not None and keep(held.value):
                return False
            if held is not None:
                self._held -= held.bytes
                del self._slots[key]
            if weight > self.max_entry_bytes:
                self.evicted += 1
                return False
            self._slots[key] = _Slot(value, weight)
            self._held += weight
            while len(self._slots) > self.max_entries or self._held > self.max_bytes:
                _, out = self._slots.popitem(last=False)
                self._held -= out.bytes
                self.evicted += 1
            return True

    def discard(self, key: K) -> None:
        """Drop the value under ``key``, if any."""
        with self._lock:
            slot = self._slots.pop(key, None)
            if slot is not None:
                self._held -= slot.bytes

    def clear(self) -> None:
        """Drop every value."""
        with self._lock:
            self._slots.clear()
            self._held = 0

    @property
    def held_bytes(self) -> int:
        """Bytes the values in the pool hold, as weighed when each was put (at most
        :attr:`max_bytes`)."""
        return self._held

    def __len__(self) -> int:
        return len(self._slots)

    def __contains__(self, key: object) -> bool:
        return key in self._slots


def _forget(sizes: dict[int, tuple[weakref.ref[Message], int]], key: int) -> Callable[[Any], None]:
    """The callback that forgets a weighed message once it is gone."""

    def forget(ref: Any) -> None:
        known = sizes.get(key)
        if known is not None and known[0] is ref:
            sizes.pop(key, None)

    return forget
