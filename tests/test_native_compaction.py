"""Native provider compaction as a summarizer, driven through the real SDK clients against a
local stub server on 127.0.0.1 that speaks the documented wire shapes.

Sources: Anthropic ``POST /v1/messages`` with ``compaction: {"type": "summarize"}`` and beta
``compact-2026-09-04`` (anthropic 2.17 ``types/beta/beta_compaction_config_param.py``,
``beta_compaction_block.py``; platform.claude.com/docs/en/build-with-claude/compaction): the
response holds only a signed ``compaction`` block (stop_reason ``compaction``), sent back
verbatim in place of what it summarizes. OpenAI ``POST /responses/compact`` (openai 3.63
``types/responses/response_compact_params.py``, ``compacted_response.py``): ``output`` is the
user messages followed by one encrypted ``compaction`` item, sent back as input items. The stub
validates every request with the SDK's own request types, closed (unknown keys refused).
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterator

import pytest

from builders import assistant, results, system, user
from ctxwise import ContextManager, Policy
from ctxwise.errors import SummarizerError
from ctxwise.providers import check, check_wire
from ctxwise.providers.wire import strict_validator
from ctxwise.summarizers.anthropic_native import BETA, AnthropicNativeSummarizer
from ctxwise.summarizers.openai_native import OpenAINativeSummarizer

BLOCK = {"type": "compaction", "content": "The user asked for order A1; the tool said it shipped on 2026-03-02.",
         "signature": "sig-Zm9vYmFy", "encrypted_content": "opaque-meta-1"}
ITEM = {"type": "compaction", "id": "cmp_0001", "encrypted_content": "gAAAAB-opaque-summary"}


class Stub:
    """What the stub server answers and what it received (validated request bodies)."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, Any], dict[str, str]]] = []
        self.anthropic_content: list[dict[str, Any]] = [BLOCK]
        self.stop_reason = "compaction"

    def answer(self, path: str, body: dict[str, Any], headers: dict[str, str]) -> tuple[int, dict[str, Any]]:
        from anthropic.types.beta.message_create_params import MessageCreateParamsNonStreaming
        from openai.types.responses import ResponseCompactParams

        if path == "/v1/messages":
            strict_validator(MessageCreateParamsNonStreaming)(body)
            self.requests.append((path, body, headers))
            return 200, {"id": "msg_01", "type": "message", "role": "assistant", "model": body["model"],
                         "content": self.anthropic_content, "stop_reason": self.stop_reason, "stop_sequence": None,
                         "usage": {"input_tokens": 812, "output_tokens": 64}}
        if path == "/v1/responses/compact":
            strict_validator(ResponseCompactParams)(body)
            self.requests.append((path, body, headers))
            users = [i for i in body["input"] if isinstance(i, dict) and i.get("role") == "user"]
            out = [{"type": "message", "id": f"msg_u{k}", "role": "user", "status": "completed",
                    "content": [{"type": "input_text", "text": u["content"] if isinstance(u["content"], str)
                                 else u["content"][0]["text"]}]} for k, u in enumerate(users)]
            return 200, {"id": "cmp_resp_1", "created_at": 1_780_000_000, "object": "response.compaction",
                         "output": [*out, ITEM],
                         "usage": {"input_tokens": 900, "output_tokens": 80, "total_tokens": 980,
                                   "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
                                   "output_tokens_details": {"reasoning_tokens": 0}}}
        return 404, {"error": {"type": "not_found", "message": path}}


@pytest.fixture
def stub() -> Iterator[tuple[Stub, str]]:
    state = Stub()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            body = json.loads(self.rfile.read(int(self.headers["content-length"])))
            try:
                code, out = state.answer(self.path, body, {k.lower(): v for k, v in self.headers.items()})
            except Exception as e:  # an invalid request: a 400 the SDK raises on
                code, out = 400, {"type": "error", "error": {"type": "invalid_request_error", "message": str(e)[:500]}}
            data = json.dumps(out).encode()
            self.send_response(code)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield state, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def material():
    a1 = assistant(calls=[("get_order", {"id": "A1"})])
    return [user("where is order A1?"), a1, *results(a1, ["order A1: shipped 2026-03-02 " * 30]),
            assistant("A1 shipped on 2026-03-02.")]


def test_anthropic_summarizer_sends_a_compaction_request_and_keeps_the_block_verbatim(stub):
    state, url = stub
    s = AnthropicNativeSummarizer("claude-sonnet-5-5", base_url=url, api_key="test", max_retries=0)
    got = s.summarize(material(), "The user is a returning customer.", 800)
    path, body, headers = state.requests[-1]
    assert path == "/v1/messages" and body["compaction"] == {"type": "summarize"}
    assert BETA in headers["anthropic-beta"]
    assert body["messages"][0]["role"] == "user" and "returning customer" in json.dumps(body["messages"][0])
    assert got.text == BLOCK["content"]
    assert got.detail["native"] == {"provider": "anthropic", "kind": "compaction", "raw": BLOCK}
    assert got.usage and got.usage["input_tokens"] == 812


def test_anthropic_failed_compaction_raises_so_the_stages_fall_back(stub):
    state, url = stub
    s = AnthropicNativeSummarizer(base_url=url, api_key="test", max_retries=0)
    state.anthropic_content = [{"type": "compaction", "content": None}]
    with pytest.raises(SummarizerError, match="null"):
        s.summarize(material(), None, 800)
    state.anthropic_content, state.stop_reason = [{"type": "text", "text": "hello"}], "end_turn"
    with pytest.raises(SummarizerError, match="stop_reason"):
        s.summarize(material(), None, 800)


def test_openai_summarizer_calls_responses_compact_and_keeps_the_items(stub):
    state, url = stub
    s = OpenAINativeSummarizer("gpt-5.6-sol", base_url=f"{url}/v1", api_key="test", max_retries=0)
    got = s.summarize(material(), None, 800)
    path, body, _ = state.requests[-1]
    assert path == "/v1/responses/compact" and body["model"] == "gpt-5.6-sol"
    assert any(i.get("type") == "function_call" for i in body["input"])
    native = got.detail["native"]
    assert native["raw"] == ITEM and native["items"][-1] == ITEM and native["items"][0]["role"] == "user"
    assert ITEM["id"] in got.text


def long_chat(n: int = 8) -> list:
    out = [system("You are a support agent.")]
    for k in range(n):
        a = assistant(calls=[("get_order", {"id": f"A{k}"})])
        out += [user(f"where is order A{k}?"), a, *results(a, [f"order A{k}: shipped, tracking {k} " * 25]),
                assistant(f"A{k} shipped.")]
    return out


@pytest.mark.parametrize("provider", ["anthropic", "openai_responses"])
def test_a_native_summary_is_kept_verbatim_counted_and_sent_on_its_own_wire(stub, provider):
    state, url = stub
    summarizer = (AnthropicNativeSummarizer(base_url=url, api_key="test", max_retries=0) if provider == "anthropic"
                  else OpenAINativeSummarizer(base_url=f"{url}/v1", api_key="test", max_retries=0))
    policy = Policy.preset("default", budget=3_000, unit="tokens", tokenizer="o200k_base", provider=provider,
                           bound_reasoning="off", edit_when="watermark", clearable_tools=[])
    with ContextManager("memory://", policy, summarizer=summarizer) as cm:
        s = cm.session("u", provider)
        msgs = long_chat(12)
        s.append(msgs[:1])
        summaries = []
        for k in range(1, len(msgs)):
            s.append([msgs[k]])
            if msgs[k].role == "user" and not msgs[k].tool_results:
                p = s.prepare()
                summaries += [m for m in p.messages if m.kind == "summary"]
                assert check(p.messages, policy.profile) == [] and check_wire(p.payload, provider) == []
        assert state.requests, "the budget must force a summary, or the test proves nothing"
        assert summaries
        if provider == "anthropic":  # the block verbatim, where the summary stands
            sent = [b for m in p.payload["messages"] for b in m["content"] if isinstance(m["content"], list)]
            assert BLOCK in sent
        else:  # the compaction item verbatim, after the returned user messages as input messages
            assert ITEM in p.payload
            at = p.payload.index(ITEM)
            assert p.payload[at - 1]["role"] == "user" and "id" not in p.payload[at - 1]
        assert any(e.stage == "summarizing" and e.detail["summarizer"] == summarizer.name for e in p.events) \
            or p.messages[1].kind == "summary"
        # counted: the summary's size covers the block's own JSON text
        from ctxwise.tokens import get_counter

        tok = get_counter("o200k_base")
        last = [m for m in p.messages if m.kind == "summary"][-1]
        assert tok.count_message(last) >= tok.count_message(user(json.dumps(ITEM if provider != "anthropic" else BLOCK))) - 8


def test_a_native_block_is_not_sent_to_another_provider(stub):
    """An Anthropic compaction block cannot be read by another provider: on an OpenAI session
    the summary is the block's text under ctxwise's header."""
    from ctxwise.compaction.summarizing import native_blocks

    native = {"provider": "anthropic", "kind": "compaction", "raw": BLOCK}
    assert native_blocks(native, "openai") is None
    assert [b.raw for b in native_blocks(native, "anthropic") or []] == [BLOCK]
