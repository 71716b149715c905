"""LangChain v1: content blocks ctxwise does not hold itself, through the real ChatOpenAI.

``ChatOpenAI`` (langchain-openai 1.7.4, the openai 3.63.0 SDK) talks to a stub OpenAI server on
127.0.0.1 that plays back Responses / Chat Completions bodies (validated against the SDK's
``Response`` / ``ChatCompletion`` types before they are served) and keeps every request body.
Kinds of fault covered: a run that fails on a block ctxwise cannot read (Responses-mode
``function_call`` items, LangChain v1 ``tool_call`` blocks, a PDF ``file`` part, ``input_audio``);
a part dropped or altered on its way to the model; a tool call and its result unpaired on the wire.
"""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver
from openai.types.chat import ChatCompletion
from openai.types.responses import Response

from ctxwise import ContextManager, Policy
from ctxwise.integrations.langchain import CtxwiseMiddleware
from ctxwise.providers import check_wire

PDF = base64.b64encode(b"%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n").decode()
WAV = base64.b64encode(b"RIFF\x24\x00\x00\x00WAVEfmt " + bytes(28)).decode()


class Stub:
    """A stub OpenAI server: ``replies`` (JSON bodies) are served in order to POSTs on
    ``/v1/responses`` and ``/v1/chat/completions``; ``requests`` keeps each request body."""

    def __init__(self) -> None:
        self.replies: list[dict[str, Any]] = []
        self.requests: list[dict[str, Any]] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                stub.requests.append(body)
                out = json.dumps(stub.replies.pop(0)).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"


@pytest.fixture
def stub() -> Iterator[Stub]:
    s = Stub()
    yield s
    s.server.shutdown()


def response(output: list[dict[str, Any]], n: int) -> dict[str, Any]:
    """A Responses API body holding ``output`` items, checked against the SDK's ``Response``."""
    body = {"id": f"resp_{n}", "object": "response", "created_at": 1_760_000_000 + n, "model": "gpt-5",
            "status": "completed", "output": output, "parallel_tool_calls": True, "tool_choice": "auto",
            "tools": [], "usage": {"input_tokens": 50, "output_tokens": 20, "total_tokens": 70,
                                   "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
                                   "output_tokens_details": {"reasoning_tokens": 8}}}
    Response.model_validate(body)
    return body


def chat_completion(message: dict[str, Any], n: int) -> dict[str, Any]:
    """A Chat Completions body with one choice, checked against the SDK's ``ChatCompletion``."""
    body = {"id": f"chatcmpl-{n}", "object": "chat.completion", "created": 1_760_000_000 + n, "model": "gpt-4o",
            "choices": [{"index": 0, "message": message, "finish_reason": "stop", "logprobs": None}],
            "usage": {"prompt_tokens": 50, "completion_tokens": 10, "total_tokens": 60}}
    ChatCompletion.model_validate(body)
    return body


@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}, 21 C"


def manager(tmp_path: Path) -> ContextManager:
    return ContextManager(f"sqlite:///{tmp_path / 'ctx.db'}",
                          Policy.preset("default", budget=10_000, unit="tokens", tokenizer="o200k_base", provider="openai"))


@pytest.mark.parametrize("output_version", ["responses/v1", "v1"])
def test_responses_mode_tool_calls_and_a_pdf_reach_the_model_paired(stub, tmp_path, output_version):
    # kind: ChatOpenAI(use_responses_api=True) puts reasoning and function_call items in the
    # AIMessage's content (LangChain v1 puts tool_call blocks there): ctxwise raised FormatError
    # on the second model call and the run failed
    stub.replies = [
        response([{"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "check weather"}]},
                  {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "get_weather",
                   "arguments": json.dumps({"city": "Paris"}), "status": "completed"}], 1),
        response([{"type": "message", "id": "msg_2", "role": "assistant", "status": "completed",
                   "content": [{"type": "output_text", "text": "Sunny, 21 C.", "annotations": []}]}], 2),
    ]
    cm = manager(tmp_path)
    mw = CtxwiseMiddleware(cm, user_id="u")
    model = ChatOpenAI(model="gpt-5", api_key="sk-test", base_url=stub.url, use_responses_api=True,
                       output_version=output_version)
    agent = create_agent(model, [get_weather], system_prompt="You answer briefly.", middleware=[mw],
                         checkpointer=InMemorySaver())
    question = HumanMessage(content=[
        {"type": "text", "text": "What does the attached report say, and the weather in Paris?"},
        {"type": "file", "base64": PDF, "mime_type": "application/pdf", "filename": "report.pdf"}])
    out = agent.invoke({"messages": [question]}, {"configurable": {"thread_id": "t"}})

    assert out["messages"][-1].text == "Sunny, 21 C."
    assert len(stub.requests) == 2
    second = stub.requests[1]["input"]
    calls = [i for i in second if i.get("type") == "function_call"]
    results = [i for i in second if i.get("type") == "function_call_output"]
    assert [c["call_id"] for c in calls] == ["call_1"] and [r["call_id"] for r in results] == ["call_1"]
    assert results[0]["output"] == "sunny in Paris, 21 C"
    # the PDF went to the model both times as LangChain wrote it (an input_file part)
    for req in stub.requests:
        files = [p for i in req["input"] if isinstance(i.get("content"), list) for p in i["content"]
                 if p.get("type") == "input_file"]
        assert len(files) == 1 and PDF in files[0]["file_data"] and files[0]["filename"] == "report.pdf"
    # ctxwise's own payload is a valid chat request, the file held as a short text
    assert check_wire(mw.last_prepared.payload, "openai") == []
    held = [m for m in mw.session(agent.get_state({"configurable": {"thread_id": "t"}}).values).messages
            if m.role == "user"][0]
    assert "[file part report.pdf" in held.text and PDF not in held.text


def test_input_audio_goes_to_the_model_as_written(stub, tmp_path):
    # kind: an input_audio part (a v1 audio block) made prepare() raise FormatError
    stub.replies = [chat_completion({"role": "assistant", "content": "I heard a short beep."}, 1)]
    cm = manager(tmp_path)
    mw = CtxwiseMiddleware(cm, user_id="u")
    model = ChatOpenAI(model="gpt-4o-audio-preview", api_key="sk-test", base_url=stub.url)
    agent = create_agent(model, [], middleware=[mw], checkpointer=InMemorySaver())
    spoken = HumanMessage(content=[{"type": "text", "text": "What is in this clip?"},
                                   {"type": "audio", "base64": WAV, "mime_type": "audio/wav"}])
    out = agent.invoke({"messages": [spoken]}, {"configurable": {"thread_id": "a"}})
    assert out["messages"][-1].text == "I heard a short beep."
    parts = stub.requests[0]["messages"][-1]["content"]
    assert parts[1] == {"type": "input_audio", "input_audio": {"data": WAV, "format": "wav"}}


def test_an_invalid_call_with_an_empty_id_and_its_error_result_stay_paired(tmp_path):
    # kind: an invalid tool call with id "" was dropped while create_agent's error ToolMessage for
    # it (tool_call_id "") was kept: PayloadInvalid [orphan-tool-result]
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel

    class FakeWithTools(GenericFakeChatModel):
        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self  # the replies are scripted: the tools are only listed

    bad = AIMessage(content="", invalid_tool_calls=[{"type": "invalid_tool_call", "id": "", "name": "get_weather",
                                                     "args": "{\"city\": ", "error": "truncated"}])
    model = FakeWithTools(messages=iter([bad, AIMessage(content="Sorry, let me retry later.")]))
    cm = manager(tmp_path)
    mw = CtxwiseMiddleware(cm, user_id="u")
    agent = create_agent(model, [get_weather], middleware=[mw], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "i"}}
    agent.invoke({"messages": [{"role": "user", "content": "weather?"}]}, config)  # ends on the invalid call
    # the next turn's request holds create_agent's error ToolMessage for it (tool_call_id "")
    out = agent.invoke({"messages": [{"role": "user", "content": "and now?"}]}, config)
    assert out["messages"][-1].content == "Sorry, let me retry later."
    payload = mw.last_prepared.payload
    assert check_wire(payload, "openai") == []
    call = [m for m in payload if m.get("tool_calls")][0]["tool_calls"][0]
    result = [m for m in payload if m["role"] == "tool"][0]
    assert result["tool_call_id"] == call["id"] and "malformed" in result["content"]
    # the next turn goes on without a branch (the error result's id is the same at every call)
    model.messages = iter([AIMessage(content="Still here.")])
    agent.invoke({"messages": [{"role": "user", "content": "still?"}]}, config)
    session = mw.session(agent.get_state(config).values)
    assert [e["stage"] for e in session.events() if e["stage"] == "branched"] == []
    # the state keeps create_agent's own record: the invalid call and its repair, tool_call_id ""
    repairs = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert [(m.tool_call_id, m.status) for m in repairs] == [("", "error")]


def test_wrap_model_call_called_directly_as_langchains_own_middleware_tests_do(tmp_path):
    # kind: a middleware not usable the way the framework's own middlewares are tested: outside a
    # LangGraph run get_config() raised and so did wrap_model_call
    from langchain.agents.middleware import ModelRequest, ModelResponse
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import SystemMessage

    mw = CtxwiseMiddleware(manager(tmp_path), user_id="u")
    seen: list[ModelRequest] = []

    def handler(request: ModelRequest) -> ModelResponse:
        seen.append(request)
        return ModelResponse(result=[AIMessage(content="hello back")])

    messages = [HumanMessage(content="hello", id="h1")]
    request = ModelRequest(model=GenericFakeChatModel(messages=iter([])), messages=messages,
                           system_message=SystemMessage(content="Be brief."), tools=[], tool_choice=None,
                           response_format=None, state={"messages": messages}, runtime=None)
    result = mw.wrap_model_call(request, handler)
    assert result.model_response.result[0].content == "hello back"
    assert [m.content for m in seen[0].messages] == ["hello"] and seen[0].messages[0] is messages[0]
    record = result.command.update["ctxwise"]["ctxwise"]
    assert record["last"] == "h1" and record["session_id"].endswith(":ctxwise")


def test_with_ctxwise_first_a_later_middleware_editing_the_request_in_place_is_honoured(tmp_path):
    # kind: ctxwise visible when nothing is compacted: first in the list, it handed the next
    # middleware a new message list, so a middleware appending to request.messages in place (as
    # LangChain's own tests do) lost its message from the agent's state
    from langchain.agents.middleware import AgentMiddleware
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel

    class Remind(AgentMiddleware):
        def wrap_model_call(self, request, handler):
            request.messages.append(HumanMessage("remember to be nice!"))
            return handler(request)

    mw = CtxwiseMiddleware(manager(tmp_path), user_id="u", recall=False)
    model = GenericFakeChatModel(messages=iter([AIMessage(content="hi, nicely")]))
    agent = create_agent(model, [], system_prompt="Be kind.", middleware=[mw, Remind()])
    out = agent.invoke({"messages": [HumanMessage("Hello")]})
    assert [m.content for m in out["messages"]] == ["Hello", "remember to be nice!", "hi, nicely"]
