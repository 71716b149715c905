"""Issue 25, planning and render side: a provider's compaction block / item is pinned (never
folded by a summary, never trimmed; a ContextBudgetExceeded names it when it alone cannot fit).
Real sessions on the memory store, the ``estimate`` tokenizer, summaries by the digest."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ctxwise import ContextManager, Policy
from ctxwise.errors import ContextBudgetExceeded

_N = [0]


def sess(provider: str, budget: int, **kw: Any) -> Any:
    _N[0] += 1
    pol = Policy(budget=budget, unit="tokens", tokenizer="estimate", reserve_output=0, provider=provider, **kw)
    return ContextManager("memory://", pol).session("u", f"r{_N[0]}")


ANN = "Earlier: user is Ann, order #W42, refund approved for $321.18."


def test_anthropic_compaction_block_survives_summaries() -> None:
    """Source: anthropic 2.17 ``types/beta/beta_compaction_block_param.py``. 30 turns at budget
    2,500 summarize several times; the compaction block's text is in every payload, first, and
    the summary stands after it."""
    s = sess("anthropic", 2500)
    s.append_anthropic({"system": "sys", "messages": [
        {"role": "assistant", "content": [{"type": "compaction", "content": ANN}]}]})
    for i in range(30):
        s.append_anthropic([{"role": "user", "content": f"question {i} " + "detail " * 60}])
        p = s.prepare()
        assert p.payload["messages"][0]["content"][0] == {"type": "compaction", "content": ANN}, i
        s.append_anthropic([{"role": "assistant", "content": [{"type": "text", "text": f"answer {i} " + "words " * 60}]}])
    assert any(e["stage"] == "summarizing" for e in s.events())
    assert "[Summary of the earlier conversation" in json.dumps(p.payload["messages"][1])
    assert all("msg-000002" not in e["affected_ids"] for e in s.events())


def test_responses_compaction_item_survives_summaries() -> None:
    """Source: openai ``types/responses/response_compaction_item_param_param.py``."""
    s = sess("openai_responses", 2500)
    item = {"type": "compaction", "id": "cmp_1", "encrypted_content": "C" * 3000}
    s.append_responses([{"role": "system", "content": "sys"}, item])
    for i in range(30):
        s.append_responses([{"role": "user", "content": f"question {i} " + "detail " * 60}])
        p = s.prepare()
        assert p.payload[1] == item, i
        assert p.size <= 2500
        s.append_responses([{"type": "message", "id": f"msg_{i}", "role": "assistant", "status": "completed",
                             "content": [{"type": "output_text", "text": f"answer {i} " + "words " * 60,
                                          "annotations": []}]}])
    assert any(e["stage"] == "summarizing" for e in s.events())


def test_compaction_too_large_alone_is_named() -> None:
    """A compaction item larger than the budget: no stage drops it; the error names it."""
    s = sess("openai_responses", 1000)
    s.append_responses([{"role": "system", "content": "sys"},
                        {"type": "compaction", "id": "cmp_big", "encrypted_content": "C" * 8000}])
    s.append_responses([{"role": "user", "content": "hi"}])
    with pytest.raises(ContextBudgetExceeded) as e:
        s.prepare()
    c = e.value.report.culprit
    assert c is not None and c["index"] == 1 and c["size"] > 1000
    assert c["compaction"] and "message 1 (the provider's compaction block" in (e.value.hint or "")
    assert len(s.messages) == 3


def _chat_turns(s: Any, reasoning: bool) -> None:
    s.append_openai([{"role": "system", "content": "sys"}, {"role": "user", "content": "q1"}])
    for i in range(3):
        a: dict[str, Any] = {"role": "assistant", "content": f"answer {i}"}
        if reasoning:
            a["reasoning_content"] = "R" * 2000
        s.append_openai([a, {"role": "user", "content": f"q{i + 2}"}])


@pytest.mark.parametrize("budget", [100_000, 600])
def test_reasoning_the_target_does_not_send_is_not_counted(budget: int) -> None:
    """Chat replies with ``reasoning_content`` sent to ``openai_responses``: the reasoning has no
    ``rs_`` item id, the render leaves it out (block-not-sendable), and the size is the size of
    the same conversation without it; at a budget where that fits, nothing is edited."""
    s, plain = sess("openai_responses", budget), sess("openai_responses", budget)
    _chat_turns(s, True)
    _chat_turns(plain, False)
    p, q = s.prepare(), plain.prepare()
    assert [c.rule for c in p.conversions] == ["block-not-sendable"] * 3
    assert p.payload == q.payload
    assert p.size == q.size < 600
    assert s.events() == []


def test_unsigned_thinking_to_anthropic_is_not_counted() -> None:
    """Thinking with no signature (read from a chat reply) is not sent to Anthropic
    (``anthropic/types/thinking_block_param.py``: signature required) and not counted."""
    s, plain = sess("anthropic", 100_000), sess("anthropic", 100_000)
    _chat_turns(s, True)
    _chat_turns(plain, False)
    p, q = s.prepare(), plain.prepare()
    assert p.payload == q.payload and p.size == q.size


REASONING_BATCHES = {
    "append_responses": [{"role": "user", "content": "q"},
                         {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "thought"}],
                          "encrypted_content": "E" * 400},
                         {"type": "message", "role": "assistant",
                          "content": [{"type": "output_text", "text": "a", "annotations": []}]},
                         {"role": "user", "content": "more"}],
    "append_openai": [{"role": "user", "content": "q"},
                      {"role": "assistant", "content": "a", "reasoning_content": "R" * 400},
                      {"role": "user", "content": "more"}],
}


@pytest.mark.parametrize("meth", sorted(REASONING_BATCHES))
def test_reasoning_left_out_on_openai_chat_is_reported(meth: str) -> None:
    """Source: ``openai/types/chat/chat_completion_assistant_message_param.py`` (no reasoning
    field): a Responses reasoning item or a chat ``reasoning_content`` sent to provider
    ``openai`` is left out, and a ``block-not-sendable`` conversion says so at its index."""
    s = sess("openai", 100_000)
    getattr(s, meth)(REASONING_BATCHES[meth])
    p = s.prepare()
    assert "R" * 400 not in json.dumps(p.payload) and "thought" not in json.dumps(p.payload)
    convs = [(c.rule, c.index) for c in p.conversions]
    assert convs == [("block-not-sendable", 1)]
    assert "1 reasoning" in p.conversions[0].detail


def test_library_doc_names_the_loop_close_note_in_the_payload() -> None:
    """docs/library.md says which ctxwise-written messages reach the payload; the loop-close note
    (``LOOP_CLOSE_TEXT``, sent as a user message) is among them, by its opening words."""
    from pathlib import Path

    from ctxwise.compaction.loop_close import LOOP_CLOSE_TEXT

    doc = " ".join((Path(__file__).parent.parent / "docs" / "library.md").read_text().split())
    assert "own notes never reach it" not in doc
    assert LOOP_CLOSE_TEXT.split("]")[0] + "]" in doc


MID_SYSTEM = {"system": "sys", "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"},
                                            {"role": "user", "content": "next"},
                                            {"role": "system", "content": "Mode: plan only"},
                                            {"role": "assistant", "content": "ok"}, {"role": "user", "content": "go"}]}


@pytest.mark.parametrize("native", [False, True])
def test_anthropic_native_system_is_a_policy_setting(native: bool) -> None:
    """Source: anthropic 2.17 ``types/message_param.py`` (``MessageParam`` includes
    ``SystemMessageParam``): ``Policy(native_system=True)`` sends a later system message as
    ``role: "system"`` and the standard (not beta) ``MessageCreateParams`` accepts the payload;
    the default folds it into the user turn (``system-not-first``)."""
    from anthropic.types import MessageCreateParams
    from pydantic import TypeAdapter

    s = sess("anthropic", 100_000, native_system=native)
    s.append_anthropic(MID_SYSTEM)
    p = s.prepare()
    roles = [m["role"] for m in p.payload["messages"]]
    assert ("system" in roles) == native
    assert [c.rule for c in p.conversions] == ([] if native else ["system-not-first"])
    assert p.beta == []
    TypeAdapter(MessageCreateParams).validate_python({"model": "m", "max_tokens": 10, **p.payload})
    if native:
        assert p.payload["messages"][3] == {"role": "system", "content": [{"type": "text", "text": "Mode: plan only"}]} \
            or p.payload["messages"][3] == {"role": "system", "content": "Mode: plan only"}


def test_native_system_on_another_provider_is_refused() -> None:
    with pytest.raises(ValueError, match="native_system is an Anthropic setting"):
        Policy(budget=1000, provider="openai", native_system=True)


def test_anthropic_cache_marks_over_the_limit_are_reported() -> None:
    """Source: https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching (at most 4
    ``cache_control`` blocks per request): the system mark and the 3 newest are sent; each message
    whose mark is left out gets a ``cache-mark-dropped`` conversion (the 1h ttl named)."""
    s = sess("anthropic", 100_000)
    s.append_anthropic({"system": [{"type": "text", "text": "sys", "cache_control": {"type": "ephemeral"}}],
                        "messages": []})
    for i in range(6):
        s.append_anthropic([{"role": "user", "content": [{"type": "text", "text": f"q{i}", "cache_control": {
            "type": "ephemeral", "ttl": "1h" if i == 0 else "5m"}}]}])
        s.append_anthropic([{"role": "assistant", "content": f"a{i}"}])
    s.append_anthropic([{"role": "user", "content": "last"}])
    p = s.prepare()
    assert json.dumps(p.payload).count("cache_control") == 4
    convs = [(c.rule, c.index) for c in p.conversions]
    assert convs == [("cache-mark-dropped", 1), ("cache-mark-dropped", 3), ("cache-mark-dropped", 5)]
    assert "ttl 1h" in p.conversions[0].detail
    kept = [m for m in p.payload["messages"] if "cache_control" in json.dumps(m)]
    assert [m["content"][0]["text"] for m in kept] == ["q3", "q4", "q5"]


@pytest.mark.parametrize("provider", ["openai", "openai_responses"])
@pytest.mark.parametrize("block", [
    {"type": "image", "source": {"type": "file", "file_id": "file_1"}},
    {"type": "document", "source": {"type": "file", "file_id": "file_1"}},
])
def test_anthropic_file_id_to_openai_is_refused(provider: str, block: dict[str, Any]) -> None:
    """A Files-API id is valid only at the provider that issued it: an Anthropic ``file`` source
    (``anthropic/types/file_image_source_param.py``) sent to OpenAI is refused with
    ``foreign-provider-block`` naming the id, and nothing is stored; Anthropic takes it back."""
    from ctxwise.errors import PayloadInvalid

    s = sess(provider, 100_000)
    with pytest.raises(PayloadInvalid, match=r"foreign-provider-block.*'file_1' was issued by anthropic"):
        s.append_anthropic([{"role": "user", "content": [block, {"type": "text", "text": "see"}]}])
    assert s.messages == []
    a = sess("anthropic", 100_000)
    a.append_anthropic([{"role": "user", "content": [block, {"type": "text", "text": "see"}]}])
    assert a.prepare().payload["messages"][0]["content"][0] == block
