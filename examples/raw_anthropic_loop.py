"""A raw Anthropic Messages agent loop with ctxwise, offline (the real ``anthropic`` client over a
scripted HTTP transport: no network, no key).

    pip install 'ctxwise[anthropic]'
    python examples/raw_anthropic_loop.py

30 user turns; in each the model calls ``get_order`` (a long result), then answers. On turn 20 it
asks for turn 2's cleared result back with the recall tool (``recall_tool_schema("anthropic")``
beside the app's own tool). The SDK's ``Message`` replies go straight into
``session.append_anthropic``.
"""

from __future__ import annotations

import json
import os
import tempfile

import anthropic
import httpx2  # the anthropic SDK's own httpx fork: its http_client must come from it

from ctxwise import RECALL_TOOL_NAME, ContextManager, Policy, recall_tool_output, recall_tool_schema

TOOLS = [{"name": "get_order", "description": "The full listing of an order.",
          "input_schema": {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]}},
         recall_tool_schema("anthropic")]


def run_tool(name: str, args: dict, session) -> tuple[str, bool]:  # type: ignore[no-untyped-def]
    if name == RECALL_TOOL_NAME:
        return recall_tool_output(session, args)
    n = int(args["order_id"].strip("#W")) - 1000
    return "\n".join([f"order #W{1000 + n}: status {'shipped' if n % 3 else 'pending'}, total ${37.5 * n:.2f}"] +
                     [f"  line {k}: SKU-{n:03d}-{k:02d} cable set {k}, qty {1 + k % 3}" for k in range(40)]), False


def _text(content) -> str:  # type: ignore[no-untyped-def]
    return content if isinstance(content, str) else " ".join(b.get("text", "") for b in content if isinstance(b, dict))


def scripted(request: httpx2.Request) -> httpx2.Response:
    """The model: a tool call after the user's question, an answer after the tool result."""
    messages = json.loads(request.content)["messages"]
    asked = next(_text(m["content"]) for m in reversed(messages) if m["role"] == "user"
                 and _text(m["content"]).startswith("Turn "))
    turn = int(asked.split()[1].rstrip(":"))
    last = messages[-1]["content"]
    result = [b for b in last if isinstance(b, dict) and b.get("type") == "tool_result"] if isinstance(last, list) else []
    if not result:
        name, args = ((RECALL_TOOL_NAME, {"tool_use_id": "toolu_2"}) if turn == 20
                      else ("get_order", {"order_id": f"#W{1000 + turn}"}))
        content, stop = [{"type": "tool_use", "id": f"toolu_{turn}", "name": name, "input": args}], "tool_use"
    else:
        body = result[0]["content"]
        first = (body if isinstance(body, str) else body[0]["text"]).splitlines()[0][:70]
        content, stop = [{"type": "text", "text": f"Found it: {first}"}], "end_turn"
    return httpx2.Response(200, json={"id": "m", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
                                      "content": content, "stop_reason": stop, "stop_sequence": None,
                                      "usage": {"input_tokens": 0, "output_tokens": 0}})


def main() -> None:
    client = anthropic.Anthropic(api_key="offline", http_client=httpx2.Client(transport=httpx2.MockTransport(scripted)))
    cm = ContextManager(f"sqlite:///{os.path.join(tempfile.mkdtemp(), 'ctxwise.db')}",
                        Policy(budget=5_000, unit="tokens", tokenizer="estimate", provider="anthropic"))
    session = cm.session("user-42", "chat-7", tools=TOOLS)
    session.append_anthropic({"system": "You are a shop's order assistant.", "messages": []})
    for turn in range(1, 31):
        session.append_anthropic([{"role": "user", "content": f"Turn {turn}: what about my order?"}])
        while True:
            prepared = session.prepare()
            reply = client.messages.create(model="claude-sonnet-4-5", max_tokens=1024, tools=TOOLS,
                                           **prepared.payload)          # {"system", "messages"}
            session.append_anthropic(reply)                            # the SDK Message as it came
            if reply.stop_reason != "tool_use":
                break
            results = []
            for b in reply.content:
                if b.type == "tool_use":
                    text, is_error = run_tool(b.name, b.input, session)
                    results.append({"type": "tool_result", "tool_use_id": b.id, "content": text, "is_error": is_error})
            session.append_anthropic([{"role": "user", "content": results}])
        did = ", ".join(f"{e.stage} ({e.size_before:,}->{e.size_after:,})" for e in prepared.events) or "-"
        answer = reply.content[0].text if reply.content and reply.content[0].type == "text" else ""
        print(f"turn {turn:>2}: sent {prepared.size:>5,} tokens; {did}; answer: {answer[:60]}")
    stages = [e["stage"] for e in session.events()]
    print(f"\nevents: {', '.join(f'{s} x{stages.count(s)}' for s in sorted(set(stages)))}; "
          f"transcript rows: {len(session.transcript())}")
    cm.close()


if __name__ == "__main__":
    main()
