"""One fixture per provider rule of issue 25 items 4 and 5 (and the Gemini chat wire): what
the renderer converts, what the wire check refuses. Each test names its source."""

from __future__ import annotations

import re

import pytest

from ctxwise import ContextManager, Policy
from ctxwise.messages import ImageBlock, Message, TextBlock, ToolResultBlock, ToolUseBlock, text_message
from ctxwise.providers import PROFILES, check, check_wire, render
from ctxwise.providers.convert import MAX_CALL_ID_CHARS, convert, safe_call_id
from ctxwise.providers.profiles import (
    ANTHROPIC_NATIVE_SYSTEM,
    IMAGE_NOTE,
    LEAD_USER_TEXT,
    MID_SYSTEM_HEADER,
)
from ctxwise.providers.render import conversions

ALL = sorted(PROFILES)
ANTHROPIC_ID = re.compile(r"^[a-zA-Z0-9_-]+$")


def sys(i: str, text: str = "You are helpful.") -> Message:
    return text_message(i, "system", text)


def user(i: str, text: str = "hi") -> Message:
    return text_message(i, "user", text)


def asst(i: str, text: str = "ok") -> Message:
    return text_message(i, "assistant", text)


def cycle(n: int, call_id: str, name: str = "get_order", extra: dict | None = None) -> list[Message]:
    return [Message(id=f"a{n}", role="assistant", blocks=[ToolUseBlock(id=call_id, name=name, input={"n": n},
                                                                       extra=extra or {})]),
            Message(id=f"t{n}", role="tool", blocks=[ToolResultBlock(tool_use_id=call_id, output=[TextBlock(text="ok")])])]


def rules(violations) -> set[str]:
    return {v.rule for v in violations}


# -- mid-conversation system messages ----------------------------------------------------------

REMINDER = [sys("s0"), user("u1"), asst("a1"), sys("s1", "Mode: plan only."), user("u2", "go on")]


@pytest.mark.parametrize("provider", ALL)
def test_mid_system_is_valid_input_and_a_valid_payload_everywhere(provider):
    """Issue 25 item 4: never the reason a request is refused. Sources: each profile's
    ``sources["system-not-first"]`` (OpenAI: platform.openai.com/docs/api-reference/chat/create;
    Anthropic: docs.anthropic.com/en/api/messages, top-level system; Qwen3 chat_template.jinja)."""
    assert check(REMINDER, provider) == []
    assert check_wire(render(REMINDER, provider), provider) == []


@pytest.mark.parametrize("provider", ["openai", "openai_responses"])
def test_openai_takes_a_mid_system_message_as_is(provider):
    """OpenAI Chat Completions and Responses take system / developer messages anywhere
    (SDK openai 3.63 ``types/chat/chat_completion_message_param.py``,
    ``types/responses/easy_input_message_param.py``)."""
    payload = render(REMINDER, provider)
    assert [m["role"] for m in payload] == ["system", "user", "assistant", "system", "user"]
    assert conversions(REMINDER, provider) == []


def test_anthropic_folds_it_into_the_next_user_turn_and_keeps_the_original():
    """Anthropic Messages takes no ``role: "system"`` input message
    (https://docs.anthropic.com/en/api/messages): folded under a header, the canonical list
    untouched."""
    payload = render(REMINDER, "anthropic")
    assert payload["system"] == "You are helpful."
    assert [m["role"] for m in payload["messages"]] == ["user", "assistant", "user"]
    assert payload["messages"][2]["content"] == [{"type": "text", "text": f"{MID_SYSTEM_HEADER}\nMode: plan only."},
                                                 {"type": "text", "text": "go on"}]
    (c,) = conversions(REMINDER, "anthropic")
    assert (c.rule, c.index, c.message_id) == ("system-not-first", 3, "s1")
    assert REMINDER[3].role == "system"  # the caller's list is not changed


def test_qwen_gets_a_trailing_reminder_as_a_user_message_and_leading_systems_merged():
    """Qwen3 template: "System message must be at the beginning." (vllm-project/vllm#36432)."""
    msgs = [sys("s0"), sys("s0b", "Tools: none."), user("u1"), asst("a1"), sys("s1", "Wrap up.")]
    payload = render(msgs, "qwen")
    assert [m["role"] for m in payload] == ["system", "user", "assistant", "user"]
    assert payload[0]["content"] == [{"type": "text", "text": "You are helpful."}, {"type": "text", "text": "Tools: none."}]
    assert payload[3]["content"] == f"{MID_SYSTEM_HEADER}\nWrap up."
    assert check_wire(payload, "qwen") == []


def test_gemini_calls_after_a_folded_reminder_follow_a_user_turn():
    """Gemini: a function-call turn comes right after a user or function-response turn
    (https://ai.google.dev/gemini-api/docs/function-calling); the folded reminder is a user turn."""
    msgs = [sys("s0"), user("u1"), sys("s1", "Be careful."), *cycle(1, "c1"), asst("done")]
    assert check(msgs, "gemini") == []
    assert check_wire(render(msgs, "gemini"), "gemini") == []


def test_anthropic_native_mid_system_is_an_opt_in():
    """Anthropic's beta mid-conversation system message (SDK anthropic 2.17
    ``types/beta/beta_system_message_param.py``): sent as is only with the opt-in profile."""
    payload = render(REMINDER, ANTHROPIC_NATIVE_SYSTEM)
    assert payload["messages"][2] == {"role": "system", "content": [{"type": "text", "text": "Mode: plan only."}]}
    assert not [v for v in check_wire(payload, ANTHROPIC_NATIVE_SYSTEM) if v.rule == "wire-schema"]
    assert [v.rule for v in check_wire(payload, "anthropic") if v.index == 2]  # the GA API refuses it


def test_a_wire_payload_with_a_late_system_message_is_refused_where_the_provider_takes_none():
    """The wire check refuses what the renderer never sends (Qwen3 template error text)."""
    payload = [{"role": "user", "content": "u"}, {"role": "system", "content": "s"}, {"role": "user", "content": "u2"}]
    assert "system-not-first" in rules(check_wire(payload, "deepseek"))
    assert "system-not-first" not in rules(check_wire(payload, "openai"))


# -- tool call ids ------------------------------------------------------------------------------


def test_openai_long_foreign_call_ids_are_renamed_within_40_chars():
    """OpenAI refuses tool call ids over 40 characters ("string too long. Expected a string
    with maximum length 40", issue 25)."""
    long_id = "toolu_" + "x" * 60
    msgs = [user("u"), *cycle(1, long_id), asst("done")]
    payload = render(msgs, "openai")
    sent = payload[1]["tool_calls"][0]["id"]
    assert len(sent) <= 40 and payload[2]["tool_call_id"] == sent
    assert check_wire(payload, "openai") == []
    assert convert(msgs, "openai").call_ids == {sent: long_id}
    assert render(msgs, "openai") == payload  # stable across calls


def test_the_wire_check_refuses_a_long_call_id():
    """Source: profiles.OPENAI ``sources["call-id-too-long"]``."""
    long_id = "c" * 41
    payload = [{"role": "user", "content": "u"},
               {"role": "assistant", "content": None,
                "tool_calls": [{"id": long_id, "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
               {"role": "tool", "tool_call_id": long_id, "content": "ok"}]
    v = [x for x in check_wire(payload, "openai") if x.rule == "call-id-too-long"]
    assert [x.index for x in v] == [1, 2] and "maximum length 40" in v[0].provider_error


def test_anthropic_foreign_ids_are_renamed_into_its_charset():
    """Anthropic tool_use ids match ``^[a-zA-Z0-9_-]+$`` (docs.anthropic.com/en/api/messages;
    SDK anthropic 2.17 ``types/tool_use_block_param.py``); Kimi-style ids do not."""
    msgs = [user("u"), *cycle(1, "functions.get_order:0"), *cycle(2, "functions.get_order:1"), asst("done")]
    payload = render(msgs, "anthropic")
    ids = [b["id"] for m in payload["messages"] if isinstance(m["content"], list)
           for b in m["content"] if b.get("type") == "tool_use"]
    results = [b["tool_use_id"] for m in payload["messages"] if isinstance(m["content"], list)
               for b in m["content"] if b.get("type") == "tool_result"]
    assert ids == results and len(set(ids)) == 2 and all(ANTHROPIC_ID.match(i) for i in ids)
    assert check_wire(payload, "anthropic") == []
    assert sorted(convert(msgs, "anthropic").call_ids.values()) == ["functions.get_order:0", "functions.get_order:1"]


def test_the_wire_check_refuses_an_id_outside_the_anthropic_charset():
    """Source: profiles.ANTHROPIC ``sources["call-id-charset"]``."""
    payload = {"messages": [{"role": "user", "content": "u"},
                            {"role": "assistant", "content": [{"type": "tool_use", "id": "a.b:0", "name": "f", "input": {}}]},
                            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a.b:0", "content": "ok"}]}]}
    assert [(v.index, v.rule) for v in check_wire(payload, "anthropic") if v.rule == "call-id-charset"] == \
        [(1, "call-id-charset"), (2, "call-id-charset")]


def test_a_repeated_id_is_renamed_by_a_stable_hash_that_does_not_depend_on_the_rest():
    """Anthropic: "tool_use ids must be unique" (docs.anthropic.com/en/docs/build-with-claude/tool-use).
    The rename of a repeat depends on the id and its message only: trimming earlier turns or
    appending later ones leaves it as it was."""
    cid = "call_" + "y" * 35
    msgs = [user("u"), *cycle(1, cid), *cycle(2, cid), *cycle(3, cid), asst("done")]
    third = convert(msgs, "openai").messages[5].tool_uses[0].id
    assert third == safe_call_id(cid, "a3:0") and len(third) <= MAX_CALL_ID_CHARS
    trimmed = convert([msgs[0], *msgs[3:]], "openai").messages
    assert trimmed[1].tool_uses[0].id == cid and trimmed[3].tool_uses[0].id == third


# -- first message role, images ---------------------------------------------------------------


def test_anthropic_history_starting_with_a_greeting_gets_a_lead_user_turn():
    """Anthropic: 'messages: first message must use the "user" role'
    (docs.anthropic.com/en/api/messages)."""
    msgs = [sys("s0"), asst("g", "Hello! How can I help?"), user("u1")]
    payload = render(msgs, "anthropic")
    assert payload["messages"][0] == {"role": "user", "content": LEAD_USER_TEXT}
    assert check_wire(payload, "anthropic") == []
    assert [c.rule for c in conversions(msgs, "anthropic")] == ["first-message-role"]
    bad = {"messages": [{"role": "assistant", "content": "Hello"}, {"role": "user", "content": "hi"}]}
    assert "first-message-role" in rules(check_wire(bad, "anthropic"))
    assert render(msgs, "openai")[1]["role"] == "assistant"  # only where the rule holds


def test_deepseek_gets_images_as_a_text_note():
    """DeepSeek chat completions take text only (api-docs.deepseek.com/api/create-chat-completion)."""
    msgs = [user("u0"), Message(id="u", role="user", blocks=[TextBlock(text="what is this?"),
                                                            ImageBlock(url="https://example.com/a.png")])]
    payload = render(msgs, "deepseek")
    assert payload[1]["content"] == [{"type": "text", "text": "what is this?"}, {"type": "text", "text": IMAGE_NOTE}]
    assert check_wire(payload, "deepseek") == []
    assert [c.rule for c in conversions(msgs, "deepseek")] == ["image-not-supported"]
    assert "image-not-supported" in rules(check_wire(render(msgs, "openai"), "deepseek"))
    assert render(msgs, "openai")[1]["content"][1]["type"] == "image_url"


# -- Gemini on the OpenAI-compatible chat wire ------------------------------------------------


SIG = {"extra_content": {"google": {"thought_signature": "CiQBcsjafE..."}}}


def test_gemini_thought_signatures_and_tool_names_round_trip():
    """Gemini 3: every function-call step of the current turn carries its thought signature,
    ``extra_content.google.thought_signature`` on the tool call
    (https://ai.google.dev/gemini-api/docs/thought-signatures); tool messages carry ``name``
    (https://ai.google.dev/gemini-api/docs/openai)."""
    msgs = [sys("s0"), user("u1"), *cycle(1, "c1", extra=SIG), *cycle(2, "c2", extra=SIG), asst("done")]
    payload = render(msgs, "gemini")
    assert payload[2]["tool_calls"][0]["extra_content"] == SIG["extra_content"]
    assert payload[3] == {"role": "tool", "tool_call_id": "c1", "content": "ok", "name": "get_order"}
    assert check_wire(payload, "gemini") == []
    assert "extra_content" not in render(msgs, "openai")[2]["tool_calls"][0]  # OpenAI refuses the key


def test_the_wire_check_refuses_a_dropped_signature_and_a_nameless_tool_message():
    """Gemini's 400 "Function call is missing a thought_signature in functionCall parts"
    (https://ai.google.dev/gemini-api/docs/thought-signatures)."""
    msgs = [user("u1"), *cycle(1, "c1", extra=SIG), *cycle(2, "c2", extra=SIG), asst("done")]
    payload = render(msgs, "gemini")
    del payload[3]["tool_calls"][0]["extra_content"]
    del payload[2]["name"]
    found = {(v.index, v.rule) for v in check_wire(payload, "gemini")}
    assert (3, "thought-signature-missing") in found and (2, "tool-message-name") in found


def test_gemini_signature_survives_append_and_prepare(tmp_path):
    """End to end: stored at append (OpenAI-compatible shape), sent back at prepare."""
    s = ContextManager(f"sqlite:///{tmp_path / 'g.db'}", Policy.preset("default", provider="gemini")).session("u", "g")
    s.append_openai([{"role": "system", "content": "x"}, {"role": "user", "content": "where is W1?"},
                     {"role": "assistant", "content": None, "tool_calls": [
                         {"id": "c1", "type": "function", "function": {"name": "get_order", "arguments": "{}"},
                          **SIG}]},
                     {"role": "tool", "tool_call_id": "c1", "content": "shipped"}])
    p = s.prepare()
    assert p.payload[2]["tool_calls"][0]["extra_content"] == SIG["extra_content"]
    assert p.payload[3]["name"] == "get_order"


# -- the engine: accepted, converted, reported ----------------------------------------------------


def test_a_session_accepts_a_reminder_and_reports_the_fold(tmp_path):
    """Issue 25 item 4 end to end: the append is stored as sent, the payload folded, the
    call's conversions say so and a ``rendered`` event goes to ``on_event`` (not stored, not a
    compaction event), the transcript keeps the system message."""
    seen = []
    cm = ContextManager(f"sqlite:///{tmp_path / 'a.db'}", Policy.preset("default", provider="anthropic"),
                        on_event=seen.append)
    s = cm.session("u", "a")
    s.append([sys("s0"), user("u1"), asst("a1")])
    s.append([sys("s1", "Mode: plan only."), user("u2", "go on")])
    p = s.prepare()
    assert [m["role"] for m in p.payload["messages"]] == ["user", "assistant", "user"]
    assert [m.role for m in s.messages] == ["system", "user", "assistant", "system", "user"]
    assert [c.rule for c in p.conversions] == ["system-not-first"] and p.events == []
    (ev,) = [e for e in seen if e.stage == "rendered"]
    assert ev.detail["rules"] == {"system-not-first": 1} and ev.affected_ids == ["s1"]
    assert all(e.stage != "rendered" for e in s.events())
