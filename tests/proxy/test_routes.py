"""The proxied routes through a real uvicorn server, driven by the official SDKs with only the
base URL (and the ctxwise key header) changed, against the stub upstream that validates every
request with the SDK request types."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest

from ctxwise import ContextManager

from .conftest import PROVIDER_KEY, Live
from .stub import Reply

CHAT_TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather of a city.",
                                                  "parameters": {"type": "object",
                                                                 "properties": {"city": {"type": "string"}},
                                                                 "required": ["city"]}}}]
RESP_TOOLS = [{"type": "function", "name": "get_weather", "description": "Weather of a city.",
               "parameters": CHAT_TOOLS[0]["function"]["parameters"], "strict": False}]
ANTH_TOOLS = [{"name": "get_weather", "description": "Weather of a city.",
               "input_schema": CHAT_TOOLS[0]["function"]["parameters"]}]


def openai_client(live: Live, key: str = "a", **headers: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=live.openai_base, api_key=PROVIDER_KEY, max_retries=0,
                         default_headers={"X-Ctxwise-Key": live.keys.get(key, key), **headers})


def anthropic_client(live: Live, key: str = "a", **headers: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=live.url, api_key=PROVIDER_KEY, max_retries=0,
                               default_headers={"X-Ctxwise-Key": live.keys.get(key, key), **headers})


def session_messages(live: Live, tenant: str, user: str, sid: str) -> list[Any]:
    live.settle()
    cm = ContextManager(live.store_url)
    try:
        return cm.session(f"{tenant}:{user}", sid, create=False).messages
    finally:
        cm.close()


def test_openai_chat_tool_loop_is_one_session(live: Live) -> None:
    live.stub.queue("chat", Reply(calls=[("call_1", "get_weather", {"city": "Paris"})]), Reply(text="Sunny, 21C."))
    client = openai_client(live)
    msgs: list[Any] = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Paris weather?"}]
    raw1 = client.chat.completions.with_raw_response.create(model="gpt-4o", messages=msgs, tools=CHAT_TOOLS,
                                                            temperature=0.2)
    r1 = raw1.parse()
    assert r1.choices[0].message.tool_calls and r1.choices[0].message.tool_calls[0].id == "call_1"
    msgs.append(r1.choices[0].message.model_dump(exclude_none=True))
    msgs.append({"role": "tool", "tool_call_id": "call_1", "content": "sunny, 21C"})
    raw2 = client.chat.completions.with_raw_response.create(model="gpt-4o", messages=msgs, tools=CHAT_TOOLS,
                                                            temperature=0.2)
    assert raw2.parse().choices[0].message.content == "Sunny, 21C."

    assert live.stub.invalid == []
    seen = live.stub.of("chat")
    assert len(seen) == 2
    sid = raw1.headers["x-ctxwise-session"]
    assert raw2.headers["x-ctxwise-session"] == sid
    for s in seen:
        assert s.headers["authorization"] == f"Bearer {PROVIDER_KEY}"
        assert not any(k.startswith("x-ctxwise") for k in s.headers)
        assert s.json["tools"] == CHAT_TOOLS and s.json["temperature"] == 0.2  # unmanaged params pass through
    assert [m["role"] for m in seen[1].json["messages"]] == ["system", "user", "assistant", "tool"]
    stored = session_messages(live, "acme", "proxy", sid)
    assert [m.role for m in stored] == ["system", "user", "assistant", "tool", "assistant"]
    assert stored[-1].blocks[0].text == "Sunny, 21C."


def test_openai_responses_tool_loop(live: Live) -> None:
    live.stub.queue("responses", Reply(calls=[("call_9", "get_weather", {"city": "Oslo"})]), Reply(text="Cold."))
    client = openai_client(live, **{"X-Ctxwise-Session": "trip-1", "X-Ctxwise-User": "alice"})
    items: list[Any] = [{"role": "user", "content": "Oslo weather?"}]
    r1 = client.responses.create(model="gpt-5", input=items, tools=RESP_TOOLS, instructions="Be brief.")
    call = next(o for o in r1.output if o.type == "function_call")
    items += [o.model_dump(exclude_none=True) for o in r1.output]
    items.append({"type": "function_call_output", "call_id": call.call_id, "output": "-3C"})
    r2 = client.responses.create(model="gpt-5", input=items, tools=RESP_TOOLS, instructions="Be brief.")
    assert r2.output_text == "Cold."
    assert live.stub.invalid == []
    seen = live.stub.of("responses")
    assert len(seen) == 2 and seen[1].json["instructions"] == "Be brief."
    assert [i.get("type", "message") for i in seen[1].json["input"]] == ["message", "function_call",
                                                                        "function_call_output"]
    stored = session_messages(live, "acme", "alice", "trip-1")
    assert [m.role for m in stored] == ["user", "assistant", "tool", "assistant"]


def test_anthropic_messages_tool_use_and_thinking(live: Live) -> None:
    live.stub.queue("messages", Reply(thinking="Need the tool.", calls=[("toolu_1", "get_weather", {"city": "Rome"})]),
                    Reply(text="Warm."))
    client = anthropic_client(live)
    msgs: list[Any] = [{"role": "user", "content": "Rome weather?"}]
    raw1 = client.messages.with_raw_response.create(model="claude-sonnet-4-5", max_tokens=1024, system="Be brief.",
                                                    messages=msgs, tools=ANTH_TOOLS,
                                                    thinking={"type": "enabled", "budget_tokens": 1024})
    r1 = raw1.parse()
    assert [b.type for b in r1.content] == ["thinking", "tool_use"]
    msgs.append({"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in r1.content]})
    msgs.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "28C",
                                              "cache_control": {"type": "ephemeral"}}]})
    r2 = client.messages.create(model="claude-sonnet-4-5", max_tokens=1024, system="Be brief.", messages=msgs,
                                tools=ANTH_TOOLS, thinking={"type": "enabled", "budget_tokens": 1024})
    assert r2.content[0].type == "text" and r2.content[0].text == "Warm."
    assert live.stub.invalid == []
    seen = live.stub.of("messages")
    assert len(seen) == 2
    # anthropic 2.17 sends the key as a bearer token; x-api-key when set so: either passes through
    assert PROVIDER_KEY in (seen[1].headers.get("x-api-key"), seen[1].headers.get("authorization", "")[7:])
    assert "anthropic-version" in seen[1].headers
    assert seen[1].json["system"] == "Be brief." and seen[1].json["thinking"]["type"] == "enabled"
    sent = seen[1].json["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user"]
    assert sent[1]["content"][0]["type"] == "thinking" and sent[1]["content"][0]["signature"].startswith("sig-")
    stored = session_messages(live, "acme", "proxy", raw1.headers["x-ctxwise-session"])
    assert [m.role for m in stored] == ["system", "user", "assistant", "tool", "assistant"]


@pytest.mark.parametrize("key", [None, "ctxw_000000000000_" + "x" * 43])
def test_missing_or_wrong_key_is_a_401_in_each_providers_shape(live: Live, key: str | None) -> None:
    headers = {} if key is None else {"X-Ctxwise-Key": key}
    oc = openai.OpenAI(base_url=live.openai_base, api_key=PROVIDER_KEY, max_retries=0, default_headers=headers)
    with pytest.raises(openai.AuthenticationError) as oe:
        oc.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    assert oe.value.status_code == 401 and oe.value.code == "invalid_api_key"
    ac = anthropic.Anthropic(base_url=live.url, api_key=PROVIDER_KEY, max_retries=0, default_headers=headers)
    with pytest.raises(anthropic.AuthenticationError) as ae:
        ac.messages.create(model="m", max_tokens=5, messages=[{"role": "user", "content": "hi"}])
    assert ae.value.status_code == 401
    assert ae.value.body["error"]["type"] == "authentication_error"  # type: ignore[index]
    assert live.stub.requests == []


def test_key_in_the_path_segment(live: Live) -> None:
    client = anthropic.Anthropic(base_url=f"{live.url}/k/{live.keys['a']}", api_key=PROVIDER_KEY, max_retries=0)
    r = client.messages.create(model="m", max_tokens=5, messages=[{"role": "user", "content": "hi"}])
    assert r.content[0].text == "done."  # type: ignore[union-attr]
    assert len(live.stub.of("messages")) == 1


def test_upstream_error_comes_back_unchanged(live: Live) -> None:
    live.stub.status = 529
    client = anthropic_client(live)
    with pytest.raises(anthropic.APIStatusError) as e:
        client.messages.create(model="m", max_tokens=5, messages=[{"role": "user", "content": "hi"}])
    assert e.value.status_code == 529
    assert e.value.body == {"type": "error", "error": {"type": "overloaded_error", "message": "stub busy"}}
    live.stub.status = None
    r = client.messages.create(model="m", max_tokens=5, messages=[{"role": "user", "content": "hi"}])
    assert r.content[0].text == "done."  # type: ignore[union-attr]  # the retry continues the same session


def test_tenants_are_isolated_and_provider_keys_never_stored_or_logged(live: Live, tmp_path: Path,
                                                                        caplog: pytest.LogCaptureFixture) -> None:
    msgs = [{"role": "user", "content": "a secret plan"}]
    ra = openai_client(live, "a").chat.completions.with_raw_response.create(model="m", messages=msgs)
    msgs2 = [*msgs, {"role": "assistant", "content": "done."}, {"role": "user", "content": "go on"}]
    rb = openai_client(live, "b").chat.completions.with_raw_response.create(model="m", messages=msgs2)
    # globex sent acme's history: it is not mapped to acme's session, it gets its own
    assert rb.headers["x-ctxwise-session"] != ra.headers["x-ctxwise-session"]
    b_sent = live.stub.of("chat")[1].json["messages"]
    assert [m["content"] for m in b_sent] == ["a secret plan", "done.", "go on"]  # only what globex sent
    assert [m.role for m in session_messages(live, "globex", "proxy", rb.headers["x-ctxwise-session"])] == \
        ["user", "assistant", "user", "assistant"]
    with pytest.raises(Exception):
        session_messages(live, "globex", "proxy", ra.headers["x-ctxwise-session"])
    # the provider key: nowhere in the database file, nowhere in the logs
    db = Path(live.store_url.removeprefix("sqlite:///"))
    blobs = b"".join(p.read_bytes() for p in db.parent.iterdir() if p.name.startswith(db.name))
    assert b"a secret plan" in blobs  # the check can fail: what is stored is found
    assert PROVIDER_KEY.encode() not in blobs and b"SECRET-d41d8" not in blobs
    assert "SECRET-d41d8" not in caplog.text
    assert live.keys["a"].encode() not in blobs


def test_a_cookie_the_upstream_sets_for_one_tenant_is_not_sent_for_another(live: Live) -> None:
    # a provider's edge sets cookies on its answers (Cloudflare's __cf_bm on api.openai.com); the
    # proxy's one upstream client must not keep them and send them with other tenants' calls
    live.stub.set_cookie = "__cf_bm=tenant-a-visit; Path=/"
    openai_client(live, "a").chat.completions.create(model="m", messages=[{"role": "user", "content": "one"}])
    live.stub.set_cookie = None
    openai_client(live, "b").chat.completions.create(model="m", messages=[{"role": "user", "content": "two"}])
    first, second = live.stub.of("chat")
    assert first.headers.get("cookie") is None and second.headers.get("cookie") is None
    # the client's own Cookie header still passes through as sent
    openai_client(live, "b", Cookie="mine=1").chat.completions.create(
        model="m", messages=[{"role": "user", "content": "three"}])
    assert live.stub.of("chat")[2].headers.get("cookie") == "mine=1"


@pytest.mark.parametrize("bypass", [False, True])
def test_the_upstream_is_reached_through_the_environments_proxy(live: Live, monkeypatch: pytest.MonkeyPatch,
                                                                  bypass: bool) -> None:
    # the upstream host does not resolve: only a forward proxy (the stub, which reads the
    # absolute-form request target as its path) can reach it; NO_PROXY listing it goes direct
    from ctxwise.proxy.routes import Upstreams

    for var in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HTTP_PROXY", live.stub.url)
    if bypass:
        monkeypatch.setenv("NO_PROXY", "upstream.invalid")
    live.app.proxy.upstreams = Upstreams(openai="http://upstream.invalid:9/v1", anthropic="http://upstream.invalid:9")
    r = httpx.post(live.openai_base + "/chat/completions", json={"model": "m", "messages": [
        {"role": "user", "content": "via the proxy"}]}, headers={"X-Ctxwise-Key": live.keys["a"]}, timeout=30, trust_env=False)
    if bypass:
        assert r.status_code == 502 and live.stub.of("chat") == []
    else:
        assert r.status_code == 200, r.text
        assert json.loads(live.stub.of("chat")[0].body)["messages"][-1]["content"] == "via the proxy"


def test_count_tokens_passes_through(live: Live) -> None:
    client = anthropic_client(live)
    n = client.messages.count_tokens(model="m", messages=[{"role": "user", "content": "hello there"}])
    assert n.input_tokens > 0
    assert len(live.stub.count_tokens) == 1 and live.stub.requests == []


def test_bad_body_is_a_400_in_the_provider_shape(live: Live) -> None:
    r = httpx.post(live.url + "/v1/messages", content=b"{not json", headers={"X-Ctxwise-Key": live.keys["a"],
                                                                           "content-type": "application/json"})
    assert r.status_code == 400 and r.json()["type"] == "error"
    r = httpx.post(live.openai_base + "/chat/completions", json={"model": "m", "messages": "hi"},
                   headers={"X-Ctxwise-Key": live.keys["a"]})
    assert r.status_code == 400 and json.loads(r.content)["error"]["type"] == "invalid_request_error"


def test_the_inspector_lists_and_shows_a_proxied_session(live: Live) -> None:
    live.stub.queue("chat", Reply(text="A visible reply."))
    client = openai_client(live, **{"X-Ctxwise-Session": "seen-in-ui", "X-Ctxwise-User": "bob"})
    client.chat.completions.create(model="m", messages=[{"role": "user", "content": "show me in the inspector"}])
    live.settle()  # the reply is stored after the client has it (ctxwise.proxy.replies)
    acme = {"Authorization": f"Bearer {live.keys['a']}"}
    listing = httpx.get(live.url + "/ui/fragment/sessions", headers=acme)
    assert listing.status_code == 200 and "seen-in-ui" in listing.text
    page = httpx.get(live.url + "/ui/fragment/session", params={"user": "bob", "id": "seen-in-ui"}, headers=acme)
    assert page.status_code == 200
    assert "show me in the inspector" in page.text and "A visible reply." in page.text
    other = httpx.get(live.url + "/ui/fragment/sessions", headers={"Authorization": f"Bearer {live.keys['b']}"})
    assert other.status_code == 200 and "seen-in-ui" not in other.text


def test_the_access_log_never_shows_the_key_in_the_path(live: Live, caplog: pytest.LogCaptureFixture) -> None:
    import socket
    import threading
    import time

    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    import logging

    seen: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = seen.append  # type: ignore[method-assign]
    access_logger = logging.getLogger("uvicorn.access")
    access_logger.addHandler(handler)
    access_logger.setLevel(logging.INFO)
    error_logger = logging.getLogger("uvicorn.error")  # where uvicorn logs a refused WebSocket
    level = error_logger.level
    error_logger.setLevel(logging.INFO)
    error_logger.addHandler(handler)
    server = uvicorn.Server(uvicorn.Config(live.app, log_config=None, access_log=True, lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.02)
    try:
        r = httpx.post(f"http://127.0.0.1:{port}/k/{live.keys['a']}/v1/messages", headers={"x-api-key": PROVIDER_KEY},
                       json={"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]})
        assert r.status_code == 200
        # Codex tries a WebSocket at the same URL first (then falls back to HTTPS): refused, key kept out
        from websockets.exceptions import InvalidStatus
        from websockets.sync.client import connect

        with pytest.raises(InvalidStatus) as refused:
            connect(f"ws://127.0.0.1:{port}/k/{live.keys['a']}/v1/responses", open_timeout=30)
        assert refused.value.response.status_code == 403
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        access_logger.removeHandler(handler)
        error_logger.setLevel(level)
        error_logger.removeHandler(handler)
    access = [rec.getMessage() for rec in seen]
    assert any("/v1/messages" in line for line in access)  # the line is there, without the key
    assert any('"WebSocket /k/%2A%2A%2A/v1/responses" 403' in line for line in access), access
    assert not any(live.keys["a"] in line or PROVIDER_KEY in line for line in access)
    server_side = [r.getMessage() for r in caplog.records if r.name.startswith(("ctxwise", "uvicorn"))]
    assert not any(live.keys["a"] in line or PROVIDER_KEY in line for line in server_side)


def test_responses_previous_response_id_continues_the_session(live: Live) -> None:
    live.stub.queue("responses", Reply(calls=[("call_p", "get_weather", {"city": "Oslo"})]), Reply(text="Cold."),
                    Reply(text="You're welcome."), Reply(text="unmanaged"), Reply(text="forked"),
                    Reply(text="other tenant"))
    client = openai_client(live)
    r1 = client.responses.with_raw_response.create(model="gpt-5", input=[{"role": "user", "content": "Oslo?"}],
                                                   tools=RESP_TOOLS)
    sid = r1.headers["x-ctxwise-session"]
    first = r1.parse()
    # only the new input after previous_response_id: the upstream gets the whole managed context
    r2 = client.responses.with_raw_response.create(model="gpt-5", previous_response_id=first.id, tools=RESP_TOOLS,
                                                   input=[{"type": "function_call_output", "call_id": "call_p",
                                                           "output": "-3C"}])
    assert r2.headers["x-ctxwise-session"] == sid and r2.parse().output_text == "Cold."
    sent = live.stub.of("responses")[1].json
    assert "previous_response_id" not in sent
    assert [i.get("role") or i["type"] for i in sent["input"]] == ["user", "function_call", "function_call_output"]
    r3 = client.responses.with_raw_response.create(model="gpt-5", previous_response_id=r2.parse().id,
                                                   input="Thanks!")
    assert r3.headers["x-ctxwise-session"] == sid
    assert [i.get("role") or i["type"] for i in live.stub.of("responses")[2].json["input"]] == \
        ["user", "function_call", "function_call_output", "assistant", "user"]
    assert [m.role for m in session_messages(live, "acme", "proxy", sid)] == \
        ["user", "assistant", "tool", "assistant", "user", "assistant"]
    # passed on unmanaged, as sent: a response made elsewhere, an earlier one (a fork), another tenant's
    for k, (tenant, prev) in enumerate((("a", "resp_made_elsewhere"), ("a", first.id), ("b", first.id))):
        raw = openai_client(live, tenant).responses.with_raw_response.create(
            model="gpt-5", previous_response_id=prev, input="again")
        assert raw.status_code == 200 and "x-ctxwise-session" not in raw.headers
        assert live.stub.of("responses")[3 + k].json == {"model": "gpt-5", "previous_response_id": prev,
                                                          "input": "again"}
    assert [m.role for m in session_messages(live, "acme", "proxy", sid)][-1] == "assistant"  # unchanged
    assert live.stub.invalid == []


def test_a_continuing_call_is_one_write_from_the_held_session(live: Live) -> None:
    """The first call's new session stays open in the server's session cache, and the next
    call writes its messages, the held reply and its heads in one transaction, reading no
    session from the store first (the proxy's per-call overhead, issue 27)."""
    from sqlalchemy import event

    live.stub.queue("chat", Reply(text="Hello."), Reply(text="Bye."))
    client = openai_client(live, **{"X-Ctxwise-Session": "held"})
    msgs: list[Any] = [{"role": "user", "content": "Hi"}]
    r1 = client.chat.completions.create(model="gpt-4o", messages=msgs)
    cache = live.app.proxy.server.sessions
    assert len(cache) == 1  # the session the first call created
    msgs += [r1.choices[0].message.model_dump(exclude_none=True), {"role": "user", "content": "Bye"}]
    spans: list[list[str]] = [[]]

    def on_begin(conn) -> None:  # noqa: ANN001
        spans.append([])

    def on_execute(conn, cursor, statement, params, context, executemany) -> None:  # noqa: ANN001
        words = " ".join(statement.split()).replace('"', "")
        if words.startswith("INSERT INTO"):
            spans[-1].append(words.split()[2])
        elif words.startswith("SELECT") and " FROM context_messages" in words:
            spans[-1].append("read rows")

    engine = live.app.proxy.heads.engine
    event.listen(engine, "begin", on_begin)
    event.listen(engine, "before_cursor_execute", on_execute)
    try:
        r2 = client.chat.completions.with_raw_response.create(model="gpt-4o", messages=msgs)
    finally:
        event.remove(engine, "begin", on_begin)
        event.remove(engine, "before_cursor_execute", on_execute)
    assert r2.headers["x-ctxwise-session"] == "held"
    writes = [s for s in spans if set(s) - {"read rows"}]
    assert len(writes) == 1, spans  # messages, originals, transcript and heads together
    assert {"context_messages", "ctxwise_proxy_heads"} <= set(writes[0])
    assert [s for s in spans if s == ["read rows"]] == []  # no session loaded from the store
    assert [m.blocks[0].text for m in session_messages(live, "acme", "proxy", "held")] == ["Hi", "Hello.", "Bye",
                                                                                             "Bye."]
