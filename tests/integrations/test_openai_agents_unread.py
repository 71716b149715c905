"""Agents SDK items ctxwise does not read into blocks (issue 29): what is sent is counted, and
an orphan ``function_call_output`` is sent as the user note it is read as (the Responses API
rejects an output that answers no call), while the record keeps it as written."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from ctxwise import ContextManager, Policy

pytest.importorskip("agents")

BIG = "z " * 20_000
"""40,000 characters: 20,000 tokens or so."""


def session(tmp_path: Path, sid: str) -> Any:
    from ctxwise.integrations.openai_agents import CtxwiseSession

    cm = ContextManager(f"sqlite:///{tmp_path}/c.db", Policy(budget=10_000_000, unit="tokens", provider="openai_responses"))
    return CtxwiseSession(cm.session("u", sid))


@pytest.mark.parametrize("item", [
    {"type": "telepathy_call", "id": "t1", "payload": BIG},  # an item type the openai package does not know
    {"role": "user", "content": [{"type": "input_hologram", "data": BIG}]},  # a content part ctxwise does not read
    {"type": "message", "id": "m9", "content": BIG},  # a message without a role
], ids=["unknown type", "unknown part", "message without role"])
def test_an_item_sent_as_written_is_counted(tmp_path: Path, item: dict[str, Any]) -> None:
    s = session(tmp_path, "unread")
    asyncio.run(s.add_items([{"role": "user", "content": "hi"}, item]))
    view = asyncio.run(s.get_items())
    assert item in view  # sent as written
    sent = len(json.dumps(view))
    assert sent > 40_000
    assert s.last_prepared.size > 15_000  # counted: about 20,000 tokens sent (was 47)


def test_an_orphan_output_is_sent_as_a_user_note_and_kept_as_written(tmp_path: Path) -> None:
    s = session(tmp_path, "orphan")
    orphan = {"type": "function_call_output", "call_id": "nope", "output": "x"}
    asyncio.run(s.add_items([{"role": "user", "content": "hi"}, orphan]))
    view = asyncio.run(s.get_items())
    assert all(i.get("type") != "function_call_output" for i in view)
    assert {"type": "message", "role": "user", "content": "[function_call_output nope] x"} in view
    assert orphan in asyncio.run(s.get_items(limit=10))  # the record keeps it


def test_limit_reads_every_item_written_after_a_summary(tmp_path: Path) -> None:
    """Kind (issue 29): ``get_items(limit=N)`` read the compacted view's rows, so after a summary
    the items it took out of the view were gone; limit reads come from the record."""
    from ctxwise.integrations.openai_agents import CtxwiseSession

    cm = ContextManager(f"sqlite:///{tmp_path}/c.db", Policy(budget=2000, unit="tokens", provider="openai_responses"))
    s = CtxwiseSession(cm.session("u", "small"))
    written: list[dict[str, Any]] = []

    async def go() -> None:
        for i in range(12):
            turn = [{"role": "user", "content": f"question {i}: " + "please look at this. " * 20},
                    {"role": "assistant", "content": f"answer {i}: " + "lorem ipsum dolor sit amet. " * 20}]
            await s.add_items(turn)
            written.extend(turn)
            await s.get_items()  # prepared: compaction fires and is persisted
        assert any(m.kind == "summary" for m in s.last_prepared.messages), "the budget made no summary"
        assert await s.get_items(limit=-1) == written
        assert await s.get_items(limit=1000) == written
        assert await s.get_items(limit=3) == written[-3:]
        assert len(await s.get_items()) < len(written)  # the view is compacted

    asyncio.run(go())
