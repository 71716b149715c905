"""The digest summary credits each participant's words to its author (issue 29): in a
multi-agent conversation (LangChain ``AIMessage(name="Bob")``, AgentScope ``Msg(name="Bob")``)
another agent's words are not "the assistant's", and a named user is named."""

from __future__ import annotations

import tempfile

import pytest

from ctxwise import ContextManager, Message, Policy, TextBlock
from ctxwise.summarizers.digest import DigestSummarizer


def msg(i: int, role: str, text: str, name: str | None = None) -> Message:
    return Message(id=f"m{i}", role=role, name=name, blocks=[TextBlock(text=text)])  # type: ignore[arg-type]


def test_digest_names_the_author_of_each_message() -> None:
    material = [msg(0, "user", "Please compare the two offers and keep it under 100 euros.", "host"),
                msg(1, "assistant", "Offer A costs 80 euros and ships tomorrow.", "Alice"),
                msg(2, "assistant", "Offer B is cheaper at 60 euros.", "Bob"),
                msg(3, "user", "Thanks, go on.", "user")]
    text = DigestSummarizer().summarize(material, None, 4000).text
    assert 'The user (host) said: "Please compare the two offers' in text
    assert 'Alice said: "Offer A costs 80 euros' in text
    assert 'Bob said: "Offer B is cheaper' in text
    assert 'Where the conversation stood: Bob last said "Offer B is cheaper' in text
    assert "The assistant told the user" not in text


def test_unnamed_messages_keep_the_roles() -> None:
    text = DigestSummarizer().summarize([msg(0, "user", "Book the cheapest flight to Lisbon."),
                                         msg(1, "assistant", "The cheapest flight leaves at 9.")], None, 4000).text
    assert 'The user said: "Book the cheapest flight to Lisbon."' in text
    assert 'The assistant told the user: "The cheapest flight leaves at 9."' in text
    assert 'the assistant last said "The cheapest flight leaves at 9."' in text


def test_langchain_summary_credits_the_other_agent() -> None:
    pytest.importorskip("langchain")
    from langchain.agents import create_agent
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage, HumanMessage
    from langgraph.checkpoint.memory import InMemorySaver

    from ctxwise.integrations.langchain import CtxwiseMiddleware

    cm = ContextManager(f"sqlite:///{tempfile.mkdtemp()}/c.db", Policy(budget=1200, unit="tokens", provider="openai"))
    model = GenericFakeChatModel(messages=iter([AIMessage(f"Alice reply {i} " + "ok " * 60, name="Alice") for i in range(50)]))
    mw = CtxwiseMiddleware(cm, user_id="u", recall=False)
    agent = create_agent(model, [], name="Alice", middleware=[mw], checkpointer=InMemorySaver())
    cfg = {"configurable": {"thread_id": "t"}}
    for k in range(10):
        agent.invoke({"messages": [AIMessage(f"Bob claims {k}. " + "hmm " * 60, name="Bob"),
                                   HumanMessage(f"Alice, round {k}", name="host")]}, cfg)
    summaries = [m for m in mw.last_prepared.messages if m.kind == "summary"]
    assert summaries, "the budget made no summary"
    text = summaries[0].text
    assert 'Where the conversation stood: Bob last said "Bob claims' in text
    assert 'The user (host) said: "Alice, round 0"' in text
    assert "the assistant" not in text.split("]", 1)[1]  # only the header speaks of the assistant
