"""tau-bench historical trajectories (sierra-research/tau-bench) ↔ canonical.

Shape: a JSON list of ``{"task_id", "reward", "info", "traj": [OpenAI chat messages], "trial"}``.
``traj`` is plain OpenAI Chat Completions (system prompt first, ``tool_calls`` with string
arguments, ``tool`` messages with ``tool_call_id`` and ``name``), read by
:func:`ctxwise.formats.openai_chat.from_openai`. Call ids are reused within a conversation, so
pairing is positional; a conversation may end on a ``tool`` message. One :class:`Conversation`
per record, id ``task{task_id}-trial{trial}``; the record's other keys are kept in
``Conversation.metadata["record"]`` (with ``traj_at``, the position of ``traj``).
"""

from __future__ import annotations

from typing import Any

from ..errors import FormatError
from ..messages import Message
from ._common import need_dict
from .conversation import Conversation
from .openai_chat import from_openai, to_openai


def from_taubench(records: list[dict[str, Any]], source: str = "") -> list[Conversation]:
    """Read a tau-bench trajectory list into conversations.

    Raises :class:`~ctxwise.errors.FormatError` naming the record and message (see
    :func:`~ctxwise.formats.openai_chat.from_openai` for the message rules).
    """
    if not isinstance(records, list):
        raise FormatError("document", "expected a list of tau-bench records")
    convs = []
    for k, rec in enumerate(records):
        rec = need_dict(rec, f"record {k}", "a tau-bench record object")
        cid = f"task{rec.get('task_id')}-trial{rec.get('trial')}"
        try:
            msgs = from_openai(rec.get("traj"))  # type: ignore[arg-type]  # checked inside: FormatError
        except FormatError as e:
            raise FormatError(f"conversation {k} ({cid}), {e.place}", e.rule) from None
        meta = {"record": {a: b for a, b in rec.items() if a != "traj"},
                "traj_at": list(rec).index("traj") if "traj" in rec else None}
        convs.append(Conversation(id=cid, messages=msgs, format="taubench", source=source, metadata=meta))
    return convs


def to_taubench_traj(messages: list[Message]) -> list[dict[str, Any]]:
    """One ``traj`` list (OpenAI chat; no reasoning field, as tau-bench has none)."""
    return to_openai(messages, reasoning_field=None)


def to_taubench(conversations: list[Conversation]) -> list[dict[str, Any]]:
    """The tau-bench record list for conversations read by :func:`from_taubench`."""
    out = []
    for c in conversations:
        items = list((c.metadata.get("record") or {}).items())
        at = c.metadata.get("traj_at")
        items.insert(len(items) if at is None else at, ("traj", to_taubench_traj(c.messages)))
        out.append(dict(items))
    return out
