"""A raw OpenAI Chat Completions agent loop with ctxwise, offline (the real ``openai`` client over a
scripted HTTP transport: no network, no key).

    pip install 'ctxwise[llm]'          # the openai SDK
    python examples/raw_openai_loop.py

30 user turns; in each the model calls ``get_order`` (a long result: 40 order lines), then
answers. On turn 20 it asks for turn 2's cleared result back with the recall tool
(``recall_tool_schema("openai")`` is registered beside the app's own tool). The SDK's reply
objects (``ChatCompletionMessage``) go straight into ``session.append_openai``.
"""

from __future__ import annotations

import json
import os
import tempfile

import httpx
import openai

from ctxwise import RECALL_TOOL_NAME, ContextManager, Policy, recall_tool_output, recall_tool_schema

TOOLS = [{"type": "function", "function": {
    "name": "get_order", "description": "The full listing of an order.",
    "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]}}},
    recall_tool_schema("openai")]


def run_tool(name: str, args: dict, session) -> str:  # type: ignore[no-untyped-def]
    if name == RECALL_TOOL_NAME:
        return recall_tool_output(session, args)[0]
    n = int(args["order_id"].strip("#W")) - 1000
    return "\n".join([f"order #W{1000 + n}: status {'shipped' if n % 3 else 'pending'}, total ${37.5 * n:.2f}"] +
                     [f"  line {k}: SKU-{n:03d}-{k:02d} cable set {k}, qty {1 + k % 3}" for k in range(40)])


def scripted(request: httpx.Request) -> httpx.Response:
    """The model: a tool call after a user message, an answer after a tool result."""
    messages = json.loads(request.content)["messages"]
    last = messages[-1]
    asked = next(m["content"] for m in reversed(messages) if m["role"] == "user" and m["content"].startswith("Turn "))
    turn = int(asked.split()[1].rstrip(":"))
    if last["role"] == "user":
        name, args = ((RECALL_TOOL_NAME, {"tool_use_id": "call_2"}) if turn == 20
                      else ("get_order", {"order_id": f"#W{1000 + turn}"}))
        msg = {"role": "assistant", "content": None, "tool_calls": [
            {"id": f"call_{turn}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}]}
    else:
        msg = {"role": "assistant", "content": f"Found it: {last['content'].splitlines()[0][:70]}"}
    return httpx.Response(200, json={"id": "c", "object": "chat.completion", "created": 0, "model": "gpt-4.1",
                                     "choices": [{"index": 0, "message": msg, "finish_reason": "stop"}]})


def main() -> None:
    client = openai.OpenAI(api_key="offline", base_url="http://offline.invalid/v1",
                           http_client=httpx.Client(transport=httpx.MockTransport(scripted)))
    cm = ContextManager(f"sqlite:///{os.path.join(tempfile.mkdtemp(), 'ctxwise.db')}",
                        Policy(budget=5_000, unit="tokens", tokenizer="estimate", provider="openai"))
    session = cm.session("user-42", "chat-7", tools=TOOLS)
    session.append_openai([{"role": "system", "content": "You are a shop's order assistant."}])
    for turn in range(1, 31):
        session.append_openai([{"role": "user", "content": f"Turn {turn}: what about my order?"}])
        while True:
            prepared = session.prepare()
            reply = client.chat.completions.create(model="gpt-4.1", messages=prepared.payload, tools=TOOLS)
            message = reply.choices[0].message
            session.append_openai([message])                      # the SDK object as it came
            if not message.tool_calls:
                break
            session.append_openai([{"role": "tool", "tool_call_id": c.id,
                                    "content": run_tool(c.function.name, json.loads(c.function.arguments), session)}
                                   for c in message.tool_calls])
        did = ", ".join(f"{e.stage} ({e.size_before:,}->{e.size_after:,})" for e in prepared.events) or "-"
        print(f"turn {turn:>2}: sent {prepared.size:>5,} tokens; {did}; answer: {message.content[:60]}")
    stages = [e["stage"] for e in session.events()]
    print(f"\nevents: {', '.join(f'{s} x{stages.count(s)}' for s in sorted(set(stages)))}; "
          f"transcript rows: {len(session.transcript())}")
    cm.close()


if __name__ == "__main__":
    main()
