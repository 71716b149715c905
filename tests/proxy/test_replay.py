"""Recorded conversations from ../shared/data replayed through the proxy by the SDKs: every
request the upstream receives is byte-equal to the library's ``prepare()`` for the same session
(a library session fed the same messages beside it, in the same writes: a reply with the
next call's new messages), compaction included."""
from __future__ import annotations

import json
from pathlib import Path
from collections.abc import Iterator
from typing import Any

import pytest

from ctxwise import ContextManager, Message, Policy, ThinkingBlock
from ctxwise.formats import load, to_anthropic, to_openai, to_responses
from ctxwise.proxy.conversation import append_items
from ctxwise.proxy.wire import ROUTES, managed_body, reply_items

from .conftest import POLICY, Live, running
from .stub import Reply
from .test_routes import anthropic_client, openai_client

DATA = Path(__file__).resolve().parents[2] / ".." / "shared" / "data"
TAU = DATA / "trajectories" / "tau-bench" / "gpt-4o-airline_subset.json"
LONG = DATA / "long" / "claude-code_spotter"
PATHS = {"chat": "/v1/chat/completions", "responses": "/v1/responses", "messages": "/v1/messages"}


def conversation(path: Path, index: int = 0, limit: int | None = None) -> list[Message]:
    """Conversation ``index`` of ``path``, reasoning left out (a recorded reasoning text carries
    no provider signature to send back), cut after ``limit`` messages at an assistant turn."""
    msgs = load(path)[index].messages
    out = [m.model_copy(update={"blocks": [b for b in m.blocks if not isinstance(b, ThinkingBlock)]}) for m in msgs]
    out = [m for m in out if m.blocks]
    if limit is not None:
        out = out[:limit]
    return out


def write(kind: str, msgs: list[Message]) -> tuple[Any, list[dict[str, Any]]]:
    """(system, history) in ``kind``'s wire shape."""
    if kind == "chat":
        return None, to_openai(msgs, extras=False)
    if kind == "responses":
        return None, to_responses(msgs, extras=False)
    a = to_anthropic(msgs, extras=False)
    return a.get("system"), a["messages"]


def replay(live: Live, kind: str, canon: list[Message], sid: str, policy: Policy = POLICY) -> int:
    """Drive ``canon`` through the proxy with the ``kind`` SDK (each assistant message is a model
    call the stub answers with it) and check every upstream body; returns the compaction events
    the reference prepares fired."""
    route = ROUTES[PATHS[kind]]
    ref = ContextManager("memory://", policy.model_copy(update={"provider": route.provider}))
    s = ref.session("acme:proxy", sid)
    oc = openai_client(live, **{"X-Ctxwise-Session": sid})
    ac = anthropic_client(live, **{"X-Ctxwise-Session": sid})
    sent = 0  # wire items the reference holds or holds back
    held: list[dict[str, Any]] = []  # the last reply: the proxy stores it with the next call's messages
    events = 0
    for i, m in enumerate(canon):
        if m.role != "assistant" or i == 0:
            continue
        system, hist = write(kind, canon[:i])
        _, full = write(kind, canon[:i + 1])
        assert full[:len(hist)] == hist
        content = full[-1].get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        live.stub.queue(kind, Reply(raw=full[len(hist):] if kind == "responses" else
                                    (full[-1] if kind == "chat" else blocks)))
        n = len(live.stub.requests)
        if kind == "chat":
            raw = oc.chat.completions.with_raw_response.create(model="gpt-4o", messages=hist)
        elif kind == "responses":
            raw = oc.responses.with_raw_response.create(model="gpt-5", input=hist)
        else:
            raw = ac.messages.with_raw_response.create(model="claude-sonnet-4-5", max_tokens=1024, messages=hist,
                                                       **({"system": system} if system else {}))
        assert raw.status_code == 200 and raw.headers["x-ctxwise-session"] == sid, raw.headers
        seen = live.stub.requests[n]
        items = ([{"role": "system", "content": system}] if system else []) + hist
        append_items(s, route, held, items[sent:])
        p = s.prepare()
        events += len(p.events)
        expected = json.dumps(managed_body(route.kind, seen.json, p.payload), ensure_ascii=False,
                              separators=(",", ":")).encode("utf-8")
        if seen.body != expected:
            k = next(j for j in range(min(len(seen.body), len(expected))) if seen.body[j] != expected[j])
            print("DIFF", seen.body[k-300:k+80], "\nREF ", expected[k-300:k+80])
        assert seen.body == expected, f"call at message {i}: the upstream body differs from prepare()"
        held = reply_items(route.kind, live.stub.replies[-1])
        sent = len(items) + 1
    ref.close()
    assert live.stub.invalid == []
    return events


@pytest.mark.parametrize("kind", ["chat", "responses", "messages"])
def test_tau_bench_conversation_replayed_byte_equal(live: Live, kind: str) -> None:
    canon = conversation(TAU, 0)
    replay(live, kind, canon, f"tau-{kind}")
    assert len(live.stub.requests) == sum(1 for m in canon[1:] if m.role == "assistant")


BIG = Policy.preset("default", budget=40000, unit="tokens", tokenizer="o200k_base")
"""Room for the largest tool result of the long session; the session outgrows it."""


@pytest.fixture
def live_big(tmp_path: Path) -> Iterator[Live]:
    with running(tmp_path, BIG) as lv:
        yield lv


@pytest.mark.parametrize("kind", ["chat", "messages"])
def test_long_claude_code_session_replayed_byte_equal_through_compaction(live_big: Live, kind: str) -> None:
    path = sorted(LONG.glob("cc_*.json"))[0]
    canon = conversation(path, 0, limit=160)
    events = replay(live_big, kind, canon, f"long-{kind}", BIG)
    assert events > 0  # compaction fired on the way, and the proxy still sent what prepare() made
