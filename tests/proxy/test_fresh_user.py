"""What a fresh user of the drop-in endpoint meets (issue 27's review): a system prompt that
changes between calls, the default budget, paths the proxy does not manage, the header values
it reads. Real uvicorn, the official SDKs, the stub upstream."""
from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest

from ctxwise import ContextManager, Policy

from .conftest import PROVIDER_KEY, Live, running
from .stub import Reply
from .test_routes import anthropic_client, openai_client, session_messages


def _events(live: Live, tenant: str, user: str, sid: str) -> list[dict[str, Any]]:
    live.settle()
    cm = ContextManager(live.store_url)
    try:
        return cm.session(f"{tenant}:{user}", sid, create=False).events()
    finally:
        cm.close()


def test_chat_system_prompt_that_changes_keeps_the_session(live: Live) -> None:
    live.stub.queue("chat", Reply(text="a"), Reply(text="b"), Reply(text="c"))
    client = openai_client(live)
    hist: list[Any] = [{"role": "user", "content": "plan the trip"}]
    sids = []
    for t in range(3):
        msgs = [{"role": "system", "content": f"You are helpful. Current time: 12:0{t}:00"}, *hist]
        raw = client.chat.completions.with_raw_response.create(model="gpt-4o", messages=msgs)
        assert raw.headers.get("x-ctxwise-branched-from") is None
        sids.append(raw.headers["x-ctxwise-session"])
        hist += [{"role": "assistant", "content": raw.parse().choices[0].message.content},
                 {"role": "user", "content": f"step {t}"}]
    assert len(set(sids)) == 1
    seen = live.stub.of("chat")
    assert [s.json["messages"][0]["content"] for s in seen] == [f"You are helpful. Current time: 12:0{t}:00"
                                                                for t in range(3)]
    assert [m["role"] for m in seen[2].json["messages"]] == ["system", "user", "assistant", "user", "assistant", "user"]
    stored = session_messages(live, "acme", "proxy", sids[0])
    assert stored[0].blocks[0].text == "You are helpful. Current time: 12:02:00"
    assert sum(1 for m in stored if m.role == "system") == 1
    replaced = [e for e in _events(live, "acme", "proxy", sids[0]) if e["stage"] == "system_replaced"]
    assert len(replaced) == 2 and replaced[0]["affected_ids"] == [stored[0].id]


def test_named_session_with_changing_system_does_not_branch(live: Live) -> None:
    live.stub.queue("chat", Reply(text="a"), Reply(text="b"))
    client = openai_client(live, **{"X-Ctxwise-Session": "drift"})
    hist: list[Any] = [{"role": "user", "content": "go"}]
    sids = []
    for t in range(2):
        raw = client.chat.completions.with_raw_response.create(
            model="gpt-4o", messages=[{"role": "system", "content": f"cwd #{t}"}, *hist])
        sids.append(raw.headers["x-ctxwise-session"])
        hist += [{"role": "assistant", "content": raw.parse().choices[0].message.content},
                 {"role": "user", "content": "next"}]
    assert sids == ["drift", "drift"]


def test_anthropic_system_param_that_changes_keeps_the_session(live: Live) -> None:
    live.stub.queue("messages", Reply(text="a"), Reply(text="b"), Reply(text="c"))
    client = anthropic_client(live)
    hist: list[Any] = [{"role": "user", "content": "status?"}]
    sids = []
    for t in range(3):
        raw = client.messages.with_raw_response.create(model="claude-sonnet-4-5", max_tokens=50,
                                                       system=f"system, cwd status #{t}", messages=hist)
        assert raw.headers.get("x-ctxwise-branched-from") is None
        sids.append(raw.headers["x-ctxwise-session"])
        hist += [{"role": "assistant", "content": raw.parse().content[0].text}, {"role": "user", "content": f"step {t}"}]
    assert len(set(sids)) == 1
    seen = live.stub.of("messages")
    systems = [s.json["system"] if isinstance(s.json["system"], str) else s.json["system"][0]["text"] for s in seen]
    assert systems == [f"system, cwd status #{t}" for t in range(3)]
    stored = session_messages(live, "acme", "proxy", sids[0])
    assert stored[0].role == "system" and stored[0].blocks[0].text == "system, cwd status #2"


def test_default_budget_is_in_tokens_and_the_error_names_the_setting(tmp_path: Path) -> None:
    from ctxwise.proxy.conversation import DEFAULT_BUDGET_TOKENS

    with running(tmp_path, Policy.from_env({})) as lv:  # no budget configured
        lv.stub.queue("chat", Reply(text="read it"))
        client = openai_client(lv)
        big = "word " * 24_000  # 120,000 characters, about 24,000 tokens
        raw = client.chat.completions.with_raw_response.create(model="gpt-4o", messages=[{"role": "user", "content": big}])
        assert raw.status_code == 200 and lv.stub.of("chat")[0].json["messages"][0]["content"] == big
        sid = raw.headers["x-ctxwise-session"]
        lv.settle()
        cm = ContextManager(lv.store_url)
        try:
            s = cm.session("acme:proxy", sid, create=False)
            assert (s.policy.budget, s.policy.unit) == (DEFAULT_BUDGET_TOKENS, "tokens")
        finally:
            cm.close()
        with pytest.raises(openai.BadRequestError) as e:
            client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "word " * 120_000}])
        assert "CTXWISE_BUDGET" in str(e.value) and "--config" in str(e.value)
        assert len(lv.stub.of("chat")) == 1


def test_unmanaged_paths_pass_through_under_the_key_segment(live: Live) -> None:
    key = live.keys["a"]
    oc = openai.OpenAI(base_url=f"{live.url}/k/{key}/v1", api_key=PROVIDER_KEY, max_retries=0)
    assert [m.id for m in oc.models.list()] == ["stub-model"]
    assert oc.embeddings.create(model="e", input="hi").data[0].embedding == [0.25, 0.5]
    ac = anthropic.Anthropic(base_url=f"{live.url}/k/{key}", api_key=PROVIDER_KEY, max_retries=0)
    assert ac.messages.batches.list(limit=5).data == []
    # a trailing slash on a managed route is that route
    r = httpx.post(f"{live.url}/k/{key}/v1/chat/completions/", json={"model": "m", "messages": [
        {"role": "user", "content": "hi"}]}, headers={"authorization": f"Bearer {PROVIDER_KEY}"})
    assert r.status_code == 200 and r.headers["x-ctxwise-session"]
    paths = [(m, p, q) for m, p, q, _ in live.stub.other]
    assert paths == [("GET", "/v1/models", ""), ("POST", "/v1/embeddings", ""), ("GET", "/v1/messages/batches", "limit=5")]
    for _, _, _, h in live.stub.other:
        assert not any(k.startswith("x-ctxwise") for k in h) and key not in str(h)
    assert live.stub.other[0][3]["authorization"] == f"Bearer {PROVIDER_KEY}"
    assert PROVIDER_KEY in (live.stub.other[2][3].get("x-api-key") or live.stub.other[2][3]["authorization"])
    assert live.stub.other[2][3]["anthropic-version"]


def test_unmanaged_paths_with_the_header_and_without_a_key(live: Live) -> None:
    oc = openai_client(live)
    assert [m.id for m in oc.models.list()] == ["stub-model"]
    bad = openai.OpenAI(base_url=f"{live.url}/k/wrong-key/v1", api_key=PROVIDER_KEY, max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        bad.models.list()
    r = httpx.get(f"{live.url}/k/{live.keys['a']}")
    assert r.status_code == 404 and "/k/<key>/v1" in r.json()["error"]["message"]
    assert len(live.stub.other) == 1  # neither reached the upstream


def test_key_segment_masked_in_every_uvicorn_log_line(caplog: pytest.LogCaptureFixture) -> None:
    import logging.config

    from ctxwise.proxy.auth import uvicorn_log_config

    config = uvicorn_log_config()
    logging.config.dictConfig(config)
    stream = io.StringIO()
    for name in ("default", "access"):
        handler = logging.getLogger("uvicorn" if name == "default" else "uvicorn.access").handlers[0]
        handler.setStream(stream)  # type: ignore[attr-defined]
    secret = "ctxw_SECRETKEY123"
    logging.getLogger("uvicorn.access").info('%s - "%s %s HTTP/%s" %d', "127.0.0.1:1", "GET",
                                             f"/k/{secret}/v1/models?x=1", "1.1", 200)
    logging.getLogger("uvicorn.asgi").log(5, "%s ASGI [%d] Started scope=%s", "127.0.0.1:1", 1,
                                          {"path": f"/k/{secret}/nope", "raw_path": f"/k/{secret}/nope".encode()})
    logging.getLogger("uvicorn.error").warning(f"Invalid HTTP request at /k/{secret}/")
    logging.getLogger("uvicorn.asgi").setLevel(1)
    logging.getLogger("uvicorn.asgi").log(5, "%s ASGI [%d] Started scope=%s", "127.0.0.1:1", 2,
                                          {"path": f"/k/{secret}/nope", "raw_path": f"/k/{secret}/nope".encode()})
    out = stream.getvalue()
    assert secret not in out and out.count("/k/***") >= 3


def _marks(body: dict[str, Any]) -> list[tuple[str, Any]]:
    """(where, cache_control) of every mark in a Messages request, in request order."""
    out: list[tuple[str, Any]] = []
    system = body.get("system")
    for b in system if isinstance(system, list) else []:
        if "cache_control" in b:
            out.append(("system:" + b["text"], b["cache_control"]))
    for m in body["messages"]:
        for b in m["content"] if isinstance(m["content"], list) else []:
            if "cache_control" in b:
                out.append((f"{m['role']}:{b.get('text')}", b["cache_control"]))
    return out


def test_anthropic_marks_are_the_clients_marks_of_this_request(live: Live) -> None:
    live.stub.queue("messages", *[Reply(text=f"ok {t}") for t in range(5)])
    client = anthropic_client(live)
    system = [{"type": "text", "text": "You are a coding agent.", "cache_control": {"type": "ephemeral", "ttl": "1h"}}]
    hist: list[Any] = []
    for turn in range(5):
        hist.append({"role": "user", "content": [{"type": "text", "text": f"turn {turn}"}]})
        sent = [{**m, "content": [dict(b) for b in m["content"]]} for m in hist]
        sent[-1]["content"][-1]["cache_control"] = {"type": "ephemeral"}  # the moving breakpoint
        # the system mark is dropped by the client on its last call
        sys_now = system if turn < 4 else [{"type": "text", "text": "You are a coding agent."}]
        r = client.messages.create(model="claude-sonnet-4-5", max_tokens=20, system=sys_now,  # type: ignore[arg-type]
                                   messages=sent)
        hist.append({"role": "assistant", "content": [{"type": "text", "text": r.content[0].text}]})  # type: ignore[union-attr]
    seen = [s.json for s in live.stub.of("messages")]
    assert live.stub.invalid == []
    for turn in range(4):
        assert _marks(seen[turn]) == [("system:You are a coding agent.", {"type": "ephemeral", "ttl": "1h"}),
                                      (f"user:turn {turn}", {"type": "ephemeral"})]
    assert _marks(seen[4]) == [("user:turn 4", {"type": "ephemeral"})]


def test_header_values_are_checked_and_read_as_utf8(live: Live) -> None:
    url = live.openai_base + "/chat/completions"
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
    base = {"x-ctxwise-key": live.keys["a"], "authorization": f"Bearer {PROVIDER_KEY}"}
    for header, value, rule in (("X-Ctxwise-Session", b"a/b", "X-Ctxwise-Session 'a/b'"),
                                ("X-Ctxwise-User", b"x" * 191, "1-190 characters"),
                                ("X-Ctxwise-Session", b"\xff\xfe", "not UTF-8"),
                                ("X-Ctxwise-Recall", b"garbage", "X-Ctxwise-Recall 'garbage'")):
        r = httpx.post(url, json=body, headers={**base, header: value})  # type: ignore[dict-item]
        assert r.status_code == 400 and rule in r.json()["error"]["message"], (header, r.text)
    assert live.stub.of("chat") == []
    live.stub.queue("chat", Reply(text="ok"))
    r = httpx.post(url, json=body, headers={**base, "X-Ctxwise-Session": "café-1".encode(),  # type: ignore[dict-item]
                                            "X-Ctxwise-Recall": "TRUE"})
    assert r.status_code == 200
    assert r.headers.raw[[k.lower() for k, _ in r.headers.raw].index(b"x-ctxwise-session")][1] == "café-1".encode()
    tools = live.stub.of("chat")[0].json.get("tools") or []
    assert any(t["function"]["name"] == "recall_tool_result" for t in tools)  # TRUE means on
    assert [m.role for m in session_messages(live, "acme", "proxy", "café-1")] == ["user", "assistant"]


def test_empty_messages_get_an_http_shaped_message(live: Live) -> None:
    with pytest.raises(openai.BadRequestError) as e:
        openai_client(live).chat.completions.create(model="gpt-4o", messages=[])
    assert "messages: no message to answer" in str(e.value) and "append()" not in str(e.value)
    with pytest.raises(anthropic.BadRequestError) as e2:
        anthropic_client(live).messages.create(model="claude-sonnet-4-5", max_tokens=5, system="s", messages=[])
    assert "messages: no message to answer" in str(e2.value)
    assert live.stub.requests == []


def test_an_exact_retry_reuses_the_session_and_a_continued_reply_branches(live: Live) -> None:
    live.stub.queue("chat", Reply(text="first try"), Reply(text="second try"), Reply(text="third"),
                    Reply(text="fork"))
    client = openai_client(live, **{"X-Ctxwise-Session": "haiku"})
    msgs: list[Any] = [{"role": "user", "content": "write a haiku"}]
    r1 = client.chat.completions.with_raw_response.create(model="gpt-4o", messages=msgs)
    r2 = client.chat.completions.with_raw_response.create(model="gpt-4o", messages=msgs)  # regenerate
    sid = r1.headers["x-ctxwise-session"]
    assert sid == "haiku"
    assert r2.headers["x-ctxwise-session"] == sid and r2.headers.get("x-ctxwise-branched-from") is None
    stored = session_messages(live, "acme", "proxy", sid)
    assert [(m.role, m.blocks[0].text) for m in stored] == [("user", "write a haiku"), ("assistant", "second try")]
    assert [e["stage"] for e in _events(live, "acme", "proxy", sid)].count("popped") == 1
    # the client goes on from the second reply: same session
    msgs2 = [*msgs, {"role": "assistant", "content": "second try"}, {"role": "user", "content": "another"}]
    r3 = client.chat.completions.with_raw_response.create(model="gpt-4o", messages=msgs2)
    assert r3.headers["x-ctxwise-session"] == sid
    # the first reply, continued now, is no longer that session's: a branch
    msgs3 = [*msgs, {"role": "assistant", "content": "first try"}, {"role": "user", "content": "another"}]
    r4 = client.chat.completions.with_raw_response.create(model="gpt-4o", messages=msgs3)
    assert r4.headers["x-ctxwise-session"] != sid and r4.headers["x-ctxwise-branched-from"] == sid


def test_an_unnamed_exact_repeat_is_another_conversation(live: Live) -> None:
    live.stub.queue("chat", Reply(text="one"), Reply(text="two"))
    client = openai_client(live)
    msgs: list[Any] = [{"role": "user", "content": "hello"}]
    r1 = client.chat.completions.with_raw_response.create(model="gpt-4o", messages=msgs)
    r2 = client.chat.completions.with_raw_response.create(model="gpt-4o", messages=msgs)
    assert r1.headers["x-ctxwise-session"] != r2.headers["x-ctxwise-session"]
    assert r2.headers.get("x-ctxwise-branched-from") is None
    for r, text in ((r1, "one"), (r2, "two")):
        stored = session_messages(live, "acme", "proxy", r.headers["x-ctxwise-session"])
        assert [(m.role, m.blocks[0].text) for m in stored] == [("user", "hello"), ("assistant", text)]


def test_parallel_conversations_that_start_the_same_way_keep_their_own_sessions(live: Live) -> None:
    import itertools
    import threading

    from threadrun import run_threads

    counter = itertools.count()
    live.stub.responder = lambda kind, body: Reply(text=f"reply {next(counter)}")
    start = threading.Barrier(4)
    results: dict[int, list[tuple[str, str | None]]] = {}

    def worker(k: int) -> None:
        client = openai_client(live)
        msgs: list[Any] = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "same start"}]
        got = []
        start.wait()
        for step in range(3):
            raw = client.chat.completions.with_raw_response.create(model="gpt-4o", messages=msgs)
            got.append((raw.headers["x-ctxwise-session"], raw.headers.get("x-ctxwise-branched-from")))
            msgs += [{"role": "assistant", "content": raw.parse().choices[0].message.content},
                     {"role": "user", "content": f"worker {k} step {step}"}]
        results[k] = got

    assert run_threads(worker, 4) == []
    assert all(len({sid for sid, _ in results[k]}) == 1 for k in range(4)), results
    assert len({results[k][0][0] for k in range(4)}) == 4
    assert all(branched is None for k in range(4) for _, branched in results[k])
    for k in range(4):
        stored = session_messages(live, "acme", "proxy", results[k][0][0])
        users = [m.blocks[0].text for m in stored if m.role == "user"]
        assert users == ["same start", f"worker {k} step 0", f"worker {k} step 1"]
        assert [m.role for m in stored] == ["system", "user", "assistant", "user", "assistant", "user", "assistant"]
