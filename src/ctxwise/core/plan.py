"""What a plan is: the new view, the one store write that commits it, and what follows."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, Mapping, TypeVar, Union

from ..changes import Change
from ..compaction import CompactionEvent
from ..messages import Message
from .view import SessionView

R = TypeVar("R")


@dataclass(frozen=True)
class AppendWrite:
    """``SessionStore.append(messages, sizes=, state=)``."""

    messages: tuple[Message, ...]
    sizes: tuple[int, ...]
    state: dict[str, Any] | None


@dataclass(frozen=True)
class ApplyWrite:
    """``SessionStore.apply(changes, events, sizes=, state=)``."""

    changes: tuple[Change, ...]
    events: tuple[dict[str, Any], ...]
    sizes: Mapping[str, int]
    state: dict[str, Any] | None


@dataclass(frozen=True)
class PopWrite:
    """``SessionStore.pop(events=, state=, message_id=, then_append=, sizes=)``; ``message_id``
    None pops the newest stored message (a reply left out of the context)."""

    events: tuple[dict[str, Any], ...]
    state: dict[str, Any]
    message_id: str | None
    then_append: tuple[Message, ...] = ()
    sizes: tuple[int, ...] = ()


@dataclass(frozen=True)
class AmendWrite:
    """``SessionStore.amend(metadata=, beside=, message_id=, size=, events=, state=)``."""

    metadata: dict[str, Any]
    beside: list[Any] | None
    message_id: str
    size: int | None
    events: tuple[dict[str, Any], ...]
    state: dict[str, Any]


@dataclass(frozen=True)
class ClearWrite:
    """``SessionStore.clear(events=, state=)``."""

    events: tuple[dict[str, Any], ...]
    state: dict[str, Any]


@dataclass(frozen=True)
class PolicyWrite:
    """``SessionStore.set_policy(provider=, policy=, events=, sizes=, state=)``."""

    provider: str
    policy: dict[str, Any]
    events: tuple[dict[str, Any], ...]
    sizes: Mapping[str, int]
    state: dict[str, Any]


Write = Union[AppendWrite, ApplyWrite, PopWrite, AmendWrite, ClearWrite, PolicyWrite]


@dataclass(frozen=True)
class Plan(Generic[R]):
    """One operation, computed and not yet committed.

    ``view``: the session after the write (its ``version`` is set from the write's result);
    ``write``: the one store call that commits it (None: nothing to store, the view is taken
    as is); ``result``: what the operation returns; ``emit``: events handed to ``on_event``
    after the commit; ``records``: events written after the commit, each in its own small
    write, then emitted (a failure there leaves the committed view in place); ``logs``: JSON
    log lines; ``error``: raised after the commit (``prepare()``'s final check);
    ``index_base``: where the write's first new message stands in the context (for
    :class:`~ctxwise.errors.MessageNotStorable`); ``remember``: messages whose user input
    feeds the user's long-term memory after the commit."""

    view: SessionView
    write: Write | None
    result: R
    emit: tuple[CompactionEvent, ...] = ()
    records: tuple[CompactionEvent, ...] = ()
    logs: tuple[str, ...] = ()
    error: Exception | None = None
    index_base: int = 0
    remember: tuple[Message, ...] = ()
