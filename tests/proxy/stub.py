"""A stub provider on 127.0.0.1 for the proxy tests: OpenAI Chat Completions and Responses
(base URL ``<url>/v1``) and Anthropic Messages (base URL ``<url>``).

Every request is validated with the SDK's own request types (pydantic over the SDK's
TypedDicts, every lazily validated iterable consumed) and kept, bytes and headers, in
:attr:`Stub.requests`; an invalid one is answered 400 and kept in :attr:`Stub.invalid`. The
stub answers with the next scripted :class:`Reply` of the route's kind (streamed when the
request says ``stream: true``), in the shapes of ``openai/types/chat/chat_completion.py``,
``openai/types/responses/response.py``, ``anthropic/types/message.py`` and their stream events.
"""
from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from anthropic.types.message_create_params import MessageCreateParamsNonStreaming
from openai.types.chat.completion_create_params import CompletionCreateParamsNonStreaming
from openai.types.responses.response_create_params import ResponseCreateParamsNonStreaming
from pydantic import TypeAdapter, ValidationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

ADAPTERS = {
    "chat": TypeAdapter(CompletionCreateParamsNonStreaming),
    "responses": TypeAdapter(ResponseCreateParamsNonStreaming),
    "messages": TypeAdapter(MessageCreateParamsNonStreaming),
}


def force(value: Any) -> Any:
    """``value`` with every lazily validated iterable consumed (validation errors raise here)."""
    if isinstance(value, dict):
        return {k: force(v) for k, v in value.items()}
    if isinstance(value, (str, bytes, int, float, bool)) or value is None:
        return value
    if isinstance(value, list) or hasattr(value, "__iter__"):
        return [force(v) for v in value]
    return value


def validate(kind: str, body: dict[str, Any]) -> None:
    """Raise pydantic's ValidationError unless ``body`` is a valid request of ``kind``."""
    body = {k: v for k, v in body.items() if k != "stream"}
    force(ADAPTERS[kind].validate_python(body))


@dataclass
class Reply:
    """One scripted answer: ``text`` and ``calls`` (``(id, name, arguments dict)``), and
    ``thinking`` (Anthropic: a thinking block first, with a signature)."""

    text: str = ""
    calls: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)
    thinking: str | None = None
    raw: Any = None
    """The reply as written: chat the message dict, responses the output items, messages the
    content blocks (``text``/``calls``/``thinking`` are then not used)."""


def chat_json(r: Reply, model: str) -> dict[str, Any]:
    msg: dict[str, Any] = {"role": "assistant", "content": r.text or None, "refusal": None, "annotations": []}
    if r.calls:
        msg["tool_calls"] = [{"id": i, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
                             for i, n, a in r.calls]
    if r.raw is not None:
        msg = r.raw
    return {"id": f"chatcmpl-{uuid.uuid4().hex[:12]}", "object": "chat.completion", "created": int(time.time()),
            "model": model, "choices": [{"index": 0, "message": msg, "logprobs": None,
                                         "finish_reason": "tool_calls" if r.calls else "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}


def chat_chunks(r: Reply, model: str) -> Iterator[dict[str, Any]]:
    base = {"id": f"chatcmpl-{uuid.uuid4().hex[:12]}", "object": "chat.completion.chunk", "created": int(time.time()),
            "model": model}
    text, calls = r.text, [(i, n, json.dumps(a)) for i, n, a in r.calls]
    if r.raw is not None:  # the message as written, streamed as it is
        text = r.raw.get("content") or ""
        calls = [(c["id"], c["function"]["name"], c["function"]["arguments"]) for c in r.raw.get("tool_calls") or []]
    yield {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]}
    for k in range(0, len(text), 7):
        yield {**base, "choices": [{"index": 0, "delta": {"content": text[k:k + 7]}, "finish_reason": None}]}
    for n, (i, name, args) in enumerate(calls):
        yield {**base, "choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": n, "id": i, "type": "function", "function": {"name": name, "arguments": ""}}]},
            "finish_reason": None}]}
        for k in range(0, len(args), 5):
            yield {**base, "choices": [{"index": 0, "delta": {"tool_calls": [
                {"index": n, "function": {"arguments": args[k:k + 5]}}]}, "finish_reason": None}]}
    yield {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls" if calls else "stop"}]}


def responses_json(r: Reply, model: str) -> dict[str, Any]:
    output: list[dict[str, Any]] = []
    if r.text:
        output.append({"type": "message", "id": f"msg_{uuid.uuid4().hex[:12]}", "status": "completed",
                       "role": "assistant", "content": [{"type": "output_text", "text": r.text, "annotations": []}]})
    for i, name, a in r.calls:
        output.append({"type": "function_call", "id": f"fc_{uuid.uuid4().hex[:12]}", "call_id": i, "name": name,
                       "arguments": json.dumps(a), "status": "completed"})
    if r.raw is not None:
        output = r.raw
    return {"id": f"resp_{uuid.uuid4().hex[:12]}", "object": "response", "created_at": time.time(), "model": model,
            "status": "completed", "output": output, "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
            "error": None, "incomplete_details": None, "instructions": None, "metadata": {}, "temperature": 1.0,
            "top_p": 1.0, "usage": {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15,
                                    "input_tokens_details": {"cached_tokens": 0},
                                    "output_tokens_details": {"reasoning_tokens": 0}}}


def responses_events(r: Reply, model: str) -> Iterator[dict[str, Any]]:
    full = responses_json(r, model)
    yield {"type": "response.created", "sequence_number": 0,
           "response": {**full, "status": "in_progress", "output": []}}
    n = 1
    for k, item in enumerate(full["output"]):
        yield {"type": "response.output_item.added", "sequence_number": n, "output_index": k, "item": item}
        n += 1
        if item["type"] == "message":
            text = item["content"][0]["text"]
            for j in range(0, len(text), 7):
                yield {"type": "response.output_text.delta", "sequence_number": n, "item_id": item["id"],
                       "output_index": k, "content_index": 0, "delta": text[j:j + 7], "logprobs": []}
                n += 1
        yield {"type": "response.output_item.done", "sequence_number": n, "output_index": k, "item": item}
        n += 1
    yield {"type": "response.completed", "sequence_number": n, "response": full}


def anthropic_json(r: Reply, model: str) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if r.thinking is not None:
        content.append({"type": "thinking", "thinking": r.thinking, "signature": "sig-" + uuid.uuid4().hex})
    if r.text:
        content.append({"type": "text", "text": r.text})
    for i, name, a in r.calls:
        content.append({"type": "tool_use", "id": i, "name": name, "input": a})
    if r.raw is not None:
        content = r.raw
    return {"id": f"msg_{uuid.uuid4().hex[:12]}", "type": "message", "role": "assistant", "model": model,
            "content": content, "stop_reason": "tool_use" if r.calls else "end_turn", "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 5}}


def anthropic_events(r: Reply, model: str) -> Iterator[dict[str, Any]]:
    full = anthropic_json(r, model)
    yield {"type": "message_start", "message": {**full, "content": [], "stop_reason": None}}
    for k, b in enumerate(full["content"]):
        if b["type"] == "thinking":
            yield {"type": "content_block_start", "index": k, "content_block": {"type": "thinking", "thinking": "",
                                                                                 "signature": ""}}
            yield {"type": "content_block_delta", "index": k, "delta": {"type": "thinking_delta", "thinking": b["thinking"]}}
            yield {"type": "content_block_delta", "index": k, "delta": {"type": "signature_delta",
                                                                        "signature": b["signature"]}}
        elif b["type"] == "text":
            yield {"type": "content_block_start", "index": k, "content_block": {"type": "text", "text": ""}}
            for j in range(0, len(b["text"]), 7):
                yield {"type": "content_block_delta", "index": k, "delta": {"type": "text_delta",
                                                                            "text": b["text"][j:j + 7]}}
        else:
            yield {"type": "content_block_start", "index": k, "content_block": {**b, "input": {}}}
            args = json.dumps(b["input"])
            for j in range(0, len(args), 5):
                yield {"type": "content_block_delta", "index": k, "delta": {"type": "input_json_delta",
                                                                            "partial_json": args[j:j + 5]}}
        yield {"type": "content_block_stop", "index": k}
    yield {"type": "message_delta", "delta": {"stop_reason": full["stop_reason"], "stop_sequence": None},
           "usage": {"output_tokens": 5}}
    yield {"type": "message_stop"}


async def sse(events: Iterator[dict[str, Any]], named: bool, done: bool,
              gate: threading.Event | None = None) -> AsyncIterator[bytes]:
    """The events as SSE; with ``gate``: after the first event, wait until it is set."""
    for n, e in enumerate(events):
        head = f"event: {e['type']}\n" if named else ""
        yield f"{head}data: {json.dumps(e)}\n\n".encode()
        while n == 0 and gate is not None and not gate.is_set():
            await asyncio.sleep(0.01)
    if done:
        yield b"data: [DONE]\n\n"


@dataclass
class Seen:
    """One request the stub received: route ``kind``, the raw ``body`` bytes, ``headers``."""

    kind: str
    body: bytes
    headers: dict[str, str]

    @property
    def json(self) -> dict[str, Any]:
        return json.loads(self.body)


class Stub:
    """The stub upstream; :meth:`start` runs it under uvicorn on a free port of 127.0.0.1."""

    def __init__(self) -> None:
        self.script: dict[str, list[Reply]] = {"chat": [], "responses": [], "messages": []}
        self.requests: list[Seen] = []
        self.replies: list[dict[str, Any]] = []  # every non-streamed reply made, in order
        self.invalid: list[tuple[str, str]] = []
        self.count_tokens: list[Seen] = []
        self.url = ""
        self.status: int | None = None  # answer every request with this error status when set
        self.gate: threading.Event | None = None  # a stream waits after its first event until set
        self.responder: Any = None  # responder(kind, body) -> Reply, instead of the script when set
        self.set_cookie: str | None = None  # a Set-Cookie header on every non-streamed reply when set
        self.fail_next: list[int] = []  # the next requests answered with these error statuses, one each
        self.delay_next: list[float] = []  # the next requests answered these seconds late, one each (0: at once)
        self.app = Starlette(routes=[
            Route("/v1/chat/completions", self._route("chat"), methods=["POST"]),
            Route("/v1/responses", self._route("responses"), methods=["POST"]),
            Route("/v1/messages", self._route("messages"), methods=["POST"]),
            Route("/v1/messages/count_tokens", self._count, methods=["POST"]),
            Route("/{rest:path}", self._other, methods=["GET", "POST", "DELETE"]),
        ])
        self.other: list[tuple[str, str, str, dict[str, str]]] = []  # (method, path, query, headers)

    def queue(self, kind: str, *replies: Reply) -> None:
        self.script[kind].extend(replies)

    def _route(self, kind: str) -> Any:
        async def handle(request: Request) -> Response:
            raw = await request.body()
            body = json.loads(raw)
            self.requests.append(Seen(kind, raw, dict(request.headers)))
            try:
                validate(kind, body)
            except ValidationError as e:
                self.invalid.append((kind, str(e)[:2000]))
                return JSONResponse({"error": {"message": str(e)[:500], "type": "invalid_request_error"}}, 400)
            status = self.fail_next.pop(0) if self.fail_next else self.status
            if status is not None:
                return JSONResponse({"type": "error", "error": {"type": "overloaded_error", "message": "stub busy"}}
                                    if kind == "messages" else
                                    {"error": {"message": "stub busy", "type": "server_error", "param": None,
                                               "code": None}}, status)
            if self.responder is not None:
                reply = self.responder(kind, body)
            else:
                reply = self.script[kind].pop(0) if self.script[kind] else Reply(text="done.")
            late = self.delay_next.pop(0) if self.delay_next else 0.0
            if late:
                await asyncio.sleep(late)
            model = body.get("model", "stub")
            if body.get("stream"):
                events = {"chat": chat_chunks, "responses": responses_events, "messages": anthropic_events}[kind](reply, model)
                return StreamingResponse(sse(events, named=kind != "chat", done=kind == "chat", gate=self.gate),
                                         media_type="text/event-stream")
            made = {"chat": chat_json, "responses": responses_json, "messages": anthropic_json}[kind](reply, model)
            self.replies.append(made)
            return JSONResponse(made, headers={"set-cookie": self.set_cookie} if self.set_cookie else None)
        return handle

    async def _count(self, request: Request) -> Response:
        raw = await request.body()
        self.count_tokens.append(Seen("count_tokens", raw, dict(request.headers)))
        return JSONResponse({"input_tokens": len(raw) // 4})

    async def _other(self, request: Request) -> Response:
        """The endpoints the proxy passes through unmanaged: OpenAI's model list and embeddings,
        Anthropic's batch list (the SDK response types' shapes); anything else a 404."""
        await request.body()
        path = request.url.path
        self.other.append((request.method, path, request.url.query, dict(request.headers)))
        if path == "/v1/models" and request.method == "GET":
            return JSONResponse({"object": "list", "data": [{"id": "stub-model", "object": "model", "created": 0,
                                                             "owned_by": "stub"}]})
        if path == "/v1/embeddings" and request.method == "POST":
            return JSONResponse({"object": "list", "model": "stub-embed",
                                 "data": [{"object": "embedding", "index": 0, "embedding": [0.25, 0.5]}],
                                 "usage": {"prompt_tokens": 1, "total_tokens": 1}})
        if path == "/v1/messages/batches" and request.method == "GET":
            return JSONResponse({"data": [], "has_more": False, "first_id": None, "last_id": None})
        return JSONResponse({"error": {"message": f"stub: no route {path}", "type": "invalid_request_error"}}, 404)

    def start(self) -> tuple[uvicorn.Server, threading.Thread]:
        return serve(self.app, self)

    def of(self, kind: str) -> list[Seen]:
        return [r for r in self.requests if r.kind == kind]


def serve(app: Any, holder: Any) -> tuple[uvicorn.Server, threading.Thread]:
    """``app`` under uvicorn in a thread on a free port of 127.0.0.1; ``holder.url`` set."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the server did not start"
        time.sleep(0.02)
    holder.url = f"http://127.0.0.1:{port}"
    return server, thread
