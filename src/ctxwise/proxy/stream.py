"""Server-sent event streams read as they pass: the reply assembled from the events.

:class:`Assembler` is fed the upstream's bytes exactly as they are handed to the client
(:meth:`Assembler.feed`) and, once the stream ended normally, gives the reply in the shape of
the route's non-streamed answer (:meth:`Assembler.reply`, None when the stream stopped short).
Event shapes: ``openai/types/chat/chat_completion_chunk.py`` (``data: [DONE]`` last),
``openai/types/responses/response_stream_event.py`` (``response.completed`` carries the whole
response), ``anthropic/types/raw_message_stream_event.py`` (``message_start``,
``content_block_start`` / ``_delta`` / ``_stop``, ``message_delta``, ``message_stop``).
"""
from __future__ import annotations

import json
from typing import Any

from .wire import Kind


class Assembler:
    """Reads one SSE stream of route kind ``kind`` (chat, responses or messages)."""

    def __init__(self, kind: Kind) -> None:
        self.kind = kind
        self.buffer = b""
        self.done = False
        self.message: dict[str, Any] = {}
        self.blocks: dict[int, dict[str, Any]] = {}
        self.partial: dict[int, str] = {}
        self.calls: dict[int, dict[str, Any]] = {}
        self.response: dict[str, Any] | None = None
        self.errors = 0

    def feed(self, chunk: bytes) -> None:
        """Take the next bytes of the stream (any split); complete events are read at once."""
        self.buffer += chunk.replace(b"\r\n", b"\n")
        while b"\n\n" in self.buffer:
            raw, self.buffer = self.buffer.split(b"\n\n", 1)
            data = b"\n".join(line[5:].lstrip(b" ") for line in raw.split(b"\n") if line.startswith(b"data:"))
            if data:
                self._event(data)

    def _event(self, data: bytes) -> None:
        if data.strip() == b"[DONE]":
            self.done = True
            return
        try:
            event = json.loads(data)
        except ValueError:
            self.errors += 1
            return
        if isinstance(event, dict):
            {"chat": self._chat, "responses": self._responses}.get(self.kind, self._anthropic)(event)

    def _chat(self, chunk: dict[str, Any]) -> None:
        for choice in chunk.get("choices") or []:
            if choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            m = self.message
            m.setdefault("role", delta.get("role") or "assistant")
            for key in ("content", "reasoning_content"):
                if isinstance(delta.get(key), str):
                    m[key] = m.get(key, "") + delta[key]
            for tc in delta.get("tool_calls") or []:
                c = self.calls.setdefault(tc.get("index", 0), {"id": None, "type": "function",
                                                               "function": {"name": "", "arguments": ""}})
                if tc.get("id"):
                    c["id"] = tc["id"]
                fn = tc.get("function") or {}
                c["function"]["name"] += fn.get("name") or ""
                c["function"]["arguments"] += fn.get("arguments") or ""

    def _responses(self, event: dict[str, Any]) -> None:
        if event.get("type") == "response.completed" and isinstance(event.get("response"), dict):
            self.response = event["response"]
            self.done = True

    def _anthropic(self, event: dict[str, Any]) -> None:
        t = event.get("type")
        if t == "message_start":
            self.message = dict(event.get("message") or {})
        elif t == "content_block_start":
            self.blocks[event.get("index", 0)] = dict(event.get("content_block") or {})
        elif t == "content_block_delta":
            i, d = event.get("index", 0), event.get("delta") or {}
            b = self.blocks.setdefault(i, {})
            dt = d.get("type")
            if dt == "text_delta":
                b["text"] = b.get("text", "") + d.get("text", "")
            elif dt == "thinking_delta":
                b["thinking"] = b.get("thinking", "") + d.get("thinking", "")
            elif dt == "signature_delta":
                b["signature"] = b.get("signature", "") + d.get("signature", "")
            elif dt == "input_json_delta":
                self.partial[i] = self.partial.get(i, "") + d.get("partial_json", "")
            elif dt == "citations_delta":
                b.setdefault("citations", []).append(d.get("citation"))
        elif t == "content_block_stop":
            i = event.get("index", 0)
            if i in self.partial:
                raw = self.partial.pop(i)
                self.blocks.setdefault(i, {})["input"] = json.loads(raw) if raw.strip() else {}
        elif t == "message_delta":
            self.message.update({k: v for k, v in (event.get("delta") or {}).items() if v is not None})
        elif t == "message_stop":
            self.done = True

    def reply(self) -> dict[str, Any] | None:
        """The reply as the route's non-streamed answer would carry it (chat: ``{"choices":
        [{"message"}]}``; responses: the completed response; messages: the message with its
        ``content``); None unless the stream ended normally."""
        if not self.done:
            return None
        if self.kind == "chat":
            m = dict(self.message) or {"role": "assistant"}
            if self.calls:
                m["tool_calls"] = [self.calls[i] for i in sorted(self.calls)]
            m.setdefault("content", None)
            return {"choices": [{"index": 0, "message": m}]}
        if self.kind == "responses":
            return self.response
        return {**self.message, "content": [self.blocks[i] for i in sorted(self.blocks)]}
