"""Agent frameworks through the proxy with only the base URL changed (the ctxwise key in its
path): the OpenAI Agents SDK (Responses) and LangChain's ChatOpenAI / ChatAnthropic, each
running a tool loop against the stub."""
from __future__ import annotations

import asyncio
from typing import Any

from .conftest import PROVIDER_KEY, Live
from .stub import Reply
from .test_routes import session_messages


def test_openai_agents_sdk_tool_loop(live: Live) -> None:
    from agents import Agent, OpenAIResponsesModel, Runner, function_tool, set_tracing_disabled
    from openai import AsyncOpenAI

    set_tracing_disabled(True)
    seen: list[str] = []

    @function_tool
    def get_weather(city: str) -> str:
        """Weather of a city."""
        seen.append(city)
        return f"{city}: 12C and windy"

    live.stub.queue("responses", Reply(calls=[("call_ag", "get_weather", {"city": "Wellington"})]),
                    Reply(text="Wellington is 12C and windy."))
    client = AsyncOpenAI(base_url=f"{live.url}/k/{live.keys['a']}/v1", api_key=PROVIDER_KEY, max_retries=0)
    agent = Agent(name="weather", instructions="Answer with the tool.", tools=[get_weather],
                  model=OpenAIResponsesModel(model="gpt-5", openai_client=client))
    result = asyncio.run(Runner.run(agent, "Weather in Wellington?"))
    assert result.final_output == "Wellington is 12C and windy." and seen == ["Wellington"]
    assert live.stub.invalid == []
    reqs = live.stub.of("responses")
    assert len(reqs) == 2 and reqs[0].json["instructions"] == "Answer with the tool."
    assert [i.get("type", "message") for i in reqs[1].json["input"]] == ["message", "function_call",
                                                                        "function_call_output"]


def _loop(model: Any, live: Live, kind: str, sid: str) -> str:
    from langchain_core.messages import HumanMessage, SystemMessage, ToolMessage
    from langchain_core.tools import tool

    @tool
    def get_weather(city: str) -> str:
        """Weather of a city."""
        return f"{city}: 30C"

    bound = model.bind_tools([get_weather])
    msgs: list[Any] = [SystemMessage("Use the tool."), HumanMessage("Weather in Cairo?")]
    ai = bound.invoke(msgs)
    msgs.append(ai)
    for call in ai.tool_calls:
        msgs.append(ToolMessage(get_weather.invoke(call["args"]), tool_call_id=call["id"]))
    final = bound.invoke(msgs)
    return str(final.content if isinstance(final.content, str) else final.text)


def test_langchain_chat_openai(live: Live) -> None:
    from langchain_openai import ChatOpenAI

    live.stub.queue("chat", Reply(calls=[("call_lc", "get_weather", {"city": "Cairo"})]), Reply(text="Hot: 30C."))
    model = ChatOpenAI(model="gpt-4o", base_url=f"{live.url}/k/{live.keys['a']}/v1", api_key=PROVIDER_KEY,
                       max_retries=0, default_headers={"X-Ctxwise-Session": "lc-openai"})
    assert _loop(model, live, "chat", "lc-openai") == "Hot: 30C."
    assert live.stub.invalid == [] and len(live.stub.of("chat")) == 2
    assert [m.role for m in session_messages(live, "acme", "proxy", "lc-openai")] == \
        ["system", "user", "assistant", "tool", "assistant"]


def test_langchain_chat_anthropic(live: Live) -> None:
    from langchain_anthropic import ChatAnthropic

    live.stub.queue("messages", Reply(calls=[("toolu_lc", "get_weather", {"city": "Cairo"})]), Reply(text="Hot: 30C."))
    model = ChatAnthropic(model="claude-sonnet-4-5", base_url=f"{live.url}/k/{live.keys['a']}",
                          api_key=PROVIDER_KEY, max_retries=0,  # type: ignore[call-arg]
                          default_headers={"X-Ctxwise-Session": "lc-anth"})
    assert _loop(model, live, "messages", "lc-anth") == "Hot: 30C."
    assert live.stub.invalid == [] and len(live.stub.of("messages")) == 2
    assert [m.role for m in session_messages(live, "acme", "proxy", "lc-anth")] == \
        ["system", "user", "assistant", "tool", "assistant"]
