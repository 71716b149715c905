"""The LLM fact extractor against fake OpenAI-compatible endpoints (httpx.MockTransport and a
local socket server): verbatim-checked JSON, and the rule-based fallback on every failure,
within a bounded time."""

from __future__ import annotations

import json
import socket
import threading
import time

import httpx
import pytest

from ctxwise.memory import FactBook, LLMFactExtractor, extract_facts
from ctxwise.messages import text_message

USER = text_message("m1", "user", "My user ID is mia_li_3668. Total budget 1,200 EUR, no more than 2 steps.")


def completion(content: str) -> dict:
    return {
        "id": "c1", "object": "chat.completion", "created": 0, "model": "fake",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 50, "completion_tokens": 20, "total_tokens": 70},
    }


def extractor(handler, **kw) -> tuple[LLMFactExtractor, list[httpx.Request]]:
    seen: list[httpx.Request] = []

    def record(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return handler(request)

    client = httpx.Client(transport=httpx.MockTransport(record))
    kw.setdefault("timeout_s", 2.0)
    return LLMFactExtractor(model="fake", base_url="http://llm.test/v1", api_key="k", http_client=client, **kw), seen


def test_valid_answer_gives_verbatim_facts_and_drops_paraphrases() -> None:
    answer = {"facts": [
        {"text": "My user ID is mia_li_3668.", "kind": "identifier", "key": "user_id"},
        {"text": "Total budget 1,200 EUR", "kind": "amount", "key": "Budget Max"},
        {"text": "budget about 1200 euros", "kind": "amount", "key": "budget_max"},  # not verbatim
        {"text": "no more than 2 steps", "kind": "mystery", "key": "x"},  # unknown kind
    ]}
    ex, seen = extractor(lambda r: httpx.Response(200, json=completion(json.dumps(answer))))
    result = ex.extract(USER)
    assert not result.failed and result.usage["total_tokens"] == 70
    assert [(f.text, f.key) for f in result.facts] == [
        ("My user ID is mia_li_3668.", "user_id"), ("Total budget 1,200 EUR", "budget_max")]
    body = json.loads(seen[0].content)
    assert body["model"] == "fake" and body["response_format"] == {"type": "json_object"}
    assert body["messages"][-1]["content"] == USER.text


def test_fenced_json_and_empty_list_are_fine() -> None:
    ex, _ = extractor(lambda r: httpx.Response(200, json=completion('```json\n{"facts": []}\n```')))
    result = ex.extract(USER)
    assert result.facts == [] and not result.failed


@pytest.mark.parametrize(
    "content, why",
    [
        ("Sure! Here are the facts: budget 1,200 EUR", "not JSON"),
        ('{"items": []}', "no \"facts\" list"),
        ('{"facts": [{"text": "budget is twelve hundred", "kind": "amount"}]}', "verbatim"),
    ],
)
def test_bad_answers_fall_back_to_rules(content: str, why: str) -> None:
    ex, _ = extractor(lambda r: httpx.Response(200, json=completion(content)))
    result = ex.extract(USER)
    assert result.failed and why in result.error
    assert result.facts == extract_facts(USER)


def test_server_errors_are_retried_at_most_twice_then_fall_back() -> None:
    ex, seen = extractor(lambda r: httpx.Response(500, json={"error": {"message": "boom"}}), max_retries=2)
    start = time.monotonic()
    result = ex.extract(USER)
    assert result.failed and result.facts == extract_facts(USER)
    assert len(seen) == 3  # one call + two retries
    assert time.monotonic() - start < ex.deadline_s


def test_transport_timeout_falls_back() -> None:
    def slow(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("timed out", request=request)

    ex, seen = extractor(slow, max_retries=0)
    result = ex.extract(USER)
    assert result.failed and "Timeout" in result.error and len(seen) == 1


def test_non_user_messages_send_no_request() -> None:
    ex, seen = extractor(lambda r: httpx.Response(500))
    assert ex.extract(text_message("a1", "assistant", "Your order #W1 costs 5 EUR")).facts == []
    assert seen == []


def test_rejects_unbounded_settings() -> None:
    with pytest.raises(ValueError):
        LLMFactExtractor(model="m", base_url="http://x/v1", api_key="k", max_retries=3)
    with pytest.raises(ValueError):
        LLMFactExtractor(model="m", base_url="http://x/v1", api_key="k", timeout_s=0)


def _trickle_server() -> tuple[int, threading.Event]:
    """A local HTTP server that sends headers, then one byte every 0.2 s forever: each read
    succeeds, so only a whole-call deadline can stop a client."""
    stop = threading.Event()
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)
    srv.settimeout(0.2)

    def serve() -> None:
        conns = []
        while not stop.is_set():
            try:
                c, _ = srv.accept()
                c.recv(65536)
                c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n")
                conns.append(c)
            except OSError:
                pass
            for c in conns:
                try:
                    c.sendall(b" ")
                except OSError:
                    pass
        for c in conns:
            c.close()
        srv.close()

    threading.Thread(target=serve, daemon=True).start()
    return srv.getsockname()[1], stop


def test_a_trickling_server_cannot_hold_the_call() -> None:
    port, stop = _trickle_server()
    try:
        ex = LLMFactExtractor(model="m", base_url=f"http://127.0.0.1:{port}/v1", api_key="k",
                              timeout_s=0.5, max_retries=0)
        start = time.monotonic()
        result = ex.extract(USER)
        took = time.monotonic() - start
        assert result.failed and result.facts == extract_facts(USER)
        assert took <= ex.deadline_s + 1.0, took
    finally:
        stop.set()


def test_plugs_into_a_fact_book() -> None:
    answer = {"facts": [{"text": "Total budget 1,200 EUR", "kind": "amount", "key": "budget_max"}]}
    ex, _ = extractor(lambda r: httpx.Response(200, json=completion(json.dumps(answer))))
    book = FactBook(extractor=ex)
    book.add_message(USER)
    assert [f.text for f in book.active()] == ["Total budget 1,200 EUR"] and ex.last is not None
    assert not ex.last.failed
