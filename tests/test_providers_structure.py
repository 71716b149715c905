"""Unit tests for the structural provider rules: pairing, system position, empty content,
user presence, Gemini call order, profile lookup."""

from __future__ import annotations

import pytest

from ctxwise.errors import PayloadInvalid, PolicyError
from ctxwise.messages import (
    ImageBlock,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    text_message,
)
from ctxwise.providers import PROFILES, RULES, check, get_profile, validate

ALL = sorted(PROFILES)


def sys(i: str = "s") -> Message:
    return text_message(i, "system", "You are helpful.")


def user(i: str, text: str = "hi") -> Message:
    return text_message(i, "user", text)


def asst(i: str, text: str = "ok") -> Message:
    return text_message(i, "assistant", text)


def call(i: str, *ids: str, text: str | None = None) -> Message:
    blocks: list = [TextBlock(text=text)] if text else []
    blocks += [ToolUseBlock(id=c, name="f", input={"q": c}) for c in ids]
    return Message(id=i, role="assistant", blocks=blocks)


def result(i: str, cid: str, body: str = "42") -> Message:
    out = [TextBlock(text=body)] if body is not None else []
    return Message(id=i, role="tool", blocks=[ToolResultBlock(tool_use_id=cid, output=out)])


def rules_at(violations) -> list[tuple[int, str]]:
    return [(v.index, v.rule) for v in violations]


# -- profiles -------------------------------------------------------------------------------


def test_known_profiles_and_unknown_name():
    assert {"openai", "deepseek", "anthropic", "qwen", "gemini"} <= set(PROFILES)
    assert get_profile("OpenAI") is PROFILES["openai"]
    assert get_profile(PROFILES["qwen"]) is PROFILES["qwen"]
    with pytest.raises(PolicyError) as e:
        get_profile("mistral")
    assert "anthropic" in str(e.value) and "deepseek" in str(e.value)
    with pytest.raises(PolicyError):
        check([user("u")], "nope")


def test_every_error_text_and_source_names_a_known_rule():
    for p in PROFILES.values():
        assert set(p.errors) <= set(RULES), p.name
        assert set(p.sources) <= set(RULES), p.name


# -- a valid agent loop passes everywhere ---------------------------------------------------


@pytest.mark.parametrize("provider", ALL)
def test_valid_tool_loop_passes(provider):
    msgs = [sys(), user("u1"), call("a1", "c1", "c2"), result("t1", "c1"), result("t2", "c2"),
            asst("a2"), user("u2")]
    assert check(msgs, provider) == []
    validate(msgs, provider)


# -- pairing ----------------------------------------------------------------------------------


@pytest.mark.parametrize("provider", ALL)
def test_orphan_result_after_cut(provider):
    # the naive cut of B01: the window starts on a tool result whose call was dropped
    msgs = [sys(), result("t1", "c1"), asst("a1"), user("u1")]
    v = check(msgs, provider)
    assert (1, "orphan-tool-result") in rules_at(v)


def test_orphan_result_with_unknown_id_in_cycle():
    msgs = [user("u"), call("a", "c1"), result("t1", "c1"), result("t2", "zz")]
    assert rules_at(check(msgs, "openai")) == [(3, "orphan-tool-result")]


def test_result_after_text_message_is_orphan():
    msgs = [user("u"), call("a", "c1"), result("t1", "c1"), asst("x"), result("t2", "c1")]
    assert rules_at(check(msgs, "openai")) == [(4, "orphan-tool-result")]


def test_unanswered_call_and_incomplete_parallel_batch():
    msgs = [user("u"), call("a", "c1", "c2", "c3"), result("t1", "c1"), result("t3", "c3"),
            user("u2")]
    v = check(msgs, "anthropic")
    assert rules_at(v) == [(1, "unanswered-tool-call")]
    assert "c2" in v[0].message
    assert v[0].provider_error and "tool_result" in v[0].provider_error


def test_call_at_end_without_result_is_unanswered():
    assert rules_at(check([user("u"), call("a", "c1")], "openai")) == [(1, "unanswered-tool-call")]


def test_duplicate_result():
    msgs = [user("u"), call("a", "c1"), result("t1", "c1"), result("t2", "c1"), asst("x")]
    assert rules_at(check(msgs, "openai")) == [(3, "duplicate-tool-result")]


def test_reused_call_ids_pair_within_their_cycle():
    # tau-bench reuses call ids: each cycle is matched on its own
    msgs = [user("u"), call("a1", "c"), result("t1", "c"), call("a2", "c"), result("t2", "c"),
            asst("x")]
    assert check(msgs, "openai") == []


def test_tool_result_outside_tool_message_and_tool_message_without_result():
    bad_user = Message(id="u2", role="user",
                       blocks=[ToolResultBlock(tool_use_id="c1", output=[TextBlock(text="x")])])
    empty_tool = Message(id="t", role="tool", blocks=[TextBlock(text="loose text")])
    msgs = [user("u"), call("a", "c1"), empty_tool, bad_user]
    got = rules_at(check(msgs, "openai"))
    assert (2, "orphan-tool-result") in got
    assert (3, "orphan-tool-result") in got
    assert (1, "unanswered-tool-call") in got


def test_openai_error_text_for_orphan():
    v = check([user("u"), result("t", "c9")], "openai")
    assert v[0].provider_error.startswith("messages with role 'tool' must be a response")


# -- system position --------------------------------------------------------------------------


@pytest.mark.parametrize("provider", ALL)
def test_a_mid_conversation_system_message_is_valid_canonical_input(provider):
    """Never the reason a session refuses input (issue 25 item 4): render converts it."""
    msgs = [sys("s0"), user("u"), asst("a"), sys("s1"), user("u2")]
    assert check(msgs, provider) == []


def test_anthropic_system_in_messages_is_refused_on_the_wire():
    """What the renderer never sends: a role "system" message in Anthropic's ``messages``
    (https://docs.anthropic.com/en/api/messages: top-level ``system``)."""
    from ctxwise.providers import check_wire

    payload = {"messages": [{"role": "user", "content": "u"}, {"role": "system", "content": "s"},
                            {"role": "user", "content": "u2"}]}
    assert any(v.index == 1 for v in check_wire(payload, "anthropic"))


def test_qwen_system_error_text():
    """Qwen3 chat template: "System message must be at the beginning." for a later system
    message in the payload (the renderer folds it, so only a hand-built payload has one)."""
    from ctxwise.providers import check_wire

    v = [x for x in check_wire([{"role": "user", "content": "u"}, {"role": "system", "content": "s"}], "qwen")
         if x.rule == "system-not-first"]
    assert v and v[0].provider_error == "System message must be at the beginning."


# -- empty content ----------------------------------------------------------------------------


@pytest.mark.parametrize("provider", ALL)
def test_empty_and_blank_content(provider):
    msgs = [
        sys(),
        Message(id="u0", role="user", blocks=[]),
        text_message("u1", "user", "   \n"),
        Message(id="a1", role="assistant", blocks=[TextBlock(text="fine"), TextBlock(text="")]),
        user("u2"),
        call("a2", "c1"),
        result("t1", "c1", body=" "),
        asst("a3"),
        user("u3"),
    ]
    assert rules_at(check(msgs, provider)) == [
        (1, "empty-content"),
        (2, "blank-text-block"),
        (3, "blank-text-block"),
        (6, "empty-tool-result"),
    ]


def test_final_assistant_may_be_empty():
    msgs = [user("u"), Message(id="a", role="assistant", blocks=[])]
    assert check(msgs, "anthropic") == []
    # ... but not a non-final one
    msgs2 = [user("u"), Message(id="a", role="assistant", blocks=[]), user("u2")]
    assert rules_at(check(msgs2, "anthropic")) == [(1, "empty-content")]


def test_tool_result_with_image_only_is_not_empty():
    img = ToolResultBlock(tool_use_id="c1", output=[ImageBlock(media_type="image/png", data="AA")])
    msgs = [user("u"), call("a", "c1"), Message(id="t", role="tool", blocks=[img]), asst("x")]
    assert check(msgs, "anthropic") == []


def test_tool_result_with_no_output_is_empty():
    msgs = [user("u"), call("a", "c1"), result("t", "c1", body=None), asst("x")]
    assert rules_at(check(msgs, "openai")) == [(2, "empty-tool-result")]


def test_thinking_only_message_counts_as_content_for_anthropic_only():
    only = Message(id="a", role="assistant", blocks=[ThinkingBlock(thinking="hm", signature="s")])
    msgs = [user("u"), only, user("u2")]
    assert check(msgs, "anthropic") == []
    assert rules_at(check(msgs, "openai")) == [(1, "empty-content")]


def test_empty_content_error_text_anthropic():
    v = check([user("u"), text_message("a", "assistant", ""), user("u2")], "anthropic")
    assert v[0].provider_error.startswith("text content blocks must contain non-whitespace")


# -- qwen: a user message ---------------------------------------------------------------------


def test_qwen_needs_user_message():
    msgs = [sys(), call("a", "c1"), result("t", "c1")]
    v = check(msgs, "qwen")
    assert rules_at(v) == [(0, "no-user-message")]
    assert v[0].provider_error == "No user query found in messages."
    assert check(msgs, "openai") == []
    assert check([sys(), user("u"), call("a", "c1"), result("t", "c1")], "qwen") == []


def test_qwen_tool_result_carrier_is_not_a_user_query():
    carrier = Message(id="u", role="user",
                      blocks=[ToolResultBlock(tool_use_id="c", output=[TextBlock(text="x")])])
    assert "no-user-message" in [v.rule for v in check([sys(), carrier], "qwen")]


# -- gemini: call order -----------------------------------------------------------------------


def test_gemini_call_must_follow_user_or_tool():
    msgs = [sys(), user("u"), asst("a0"), call("a1", "c1"), result("t", "c1"), call("a2", "c2"),
            result("t2", "c2"), asst("x")]
    v = check(msgs, "gemini")
    assert rules_at(v) == [(3, "tool-call-order")]
    assert "function call turn comes immediately after" in v[0].provider_error
    assert check(msgs, "openai") == []


def test_gemini_call_right_after_system_is_flagged():
    msgs = [sys(), call("a1", "c1"), result("t", "c1"), user("u")]
    assert rules_at(check(msgs, "gemini")) == [(1, "tool-call-order")]


# -- validate ---------------------------------------------------------------------------------


def test_validate_lists_every_violation():
    msgs = [result("t0", "c0"), Message(id="e1", role="user", blocks=[]), user("u"), call("a", "c1"),
            text_message("x", "user", "")]
    with pytest.raises(PayloadInvalid) as e:
        validate(msgs, "anthropic")
    err = e.value
    assert err.provider == "anthropic"
    assert rules_at(err.violations) == [
        (0, "orphan-tool-result"),
        (1, "empty-content"),
        (3, "unanswered-tool-call"),
        (4, "blank-text-block"),
    ]
    assert "message 0: [orphan-tool-result]" in str(err)
    assert all(v.provider_error for v in err.violations)
