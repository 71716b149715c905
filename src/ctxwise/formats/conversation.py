"""The :class:`Conversation`: one recorded session as canonical messages plus where it came from."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ..messages import Message


class Conversation(BaseModel):
    """One conversation read from a file.

    ``id`` (tau2: the simulation id; tau-bench: ``task{task_id}-trial{trial}``; otherwise the
    file stem, with ``#k`` for the k-th record of a multi-conversation file), ``messages`` in
    canonical form, ``format`` (a key of :data:`ctxwise.formats.READERS`), ``source`` (the file
    path) and ``metadata``: the record's other fields (tau2 simulation fields, tau-bench
    ``reward``/``info``, AgentScope payload keys) so that writing back loses nothing.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    id: str
    messages: list[Message]
    format: str
    source: str = ""
    metadata: dict[str, Any] = Field(default_factory=dict)
