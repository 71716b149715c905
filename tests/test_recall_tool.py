"""Recall by id (issue 11, item 8): the tool schema in each provider's format and its handler,
which returns a cleared result's original body from the store, scoped to the session's user."""

from __future__ import annotations

import json

import pytest
from pydantic import TypeAdapter, ValidationError

from builders import system, tool_turn, user
from ctxwise import ContextManager, Policy
from ctxwise.errors import FormatError, ToolResultNotFound
from ctxwise.messages import ToolResultBlock
from ctxwise.recall import RECALL_TOOL_NAME, recall_tool_output, recall_tool_result, recall_tool_schema


def test_schema_matches_each_sdk_tool_type():
    """Kind: a tool declaration in the wrong provider's shape (rejected by the API with 400)."""
    from anthropic.types import ToolParam
    from openai.types.chat import ChatCompletionToolParam
    from openai.types.responses import FunctionToolParam

    for provider, sdk_type in (("openai", ChatCompletionToolParam), ("deepseek", ChatCompletionToolParam),
                               ("anthropic", ToolParam), ("openai_responses", FunctionToolParam)):
        schema = recall_tool_schema(provider)
        TypeAdapter(sdk_type).validate_python(schema)
        assert RECALL_TOOL_NAME in json.dumps(schema)
    assert "input_schema" in recall_tool_schema("anthropic") and "function" in recall_tool_schema("openai")
    with pytest.raises(ValidationError):  # each format's own keys: the Anthropic shape is no chat tool
        TypeAdapter(ChatCompletionToolParam).validate_python(recall_tool_schema("anthropic"))
    with pytest.raises(FormatError, match="unknown provider"):
        recall_tool_schema("cohere")


def _strict_ok(schema: dict) -> list[str]:
    """What OpenAI's strict mode (Structured Outputs) refuses in a JSON Schema object: a
    property missing from "required", additionalProperties not false (checked recursively)."""
    bad = []
    if schema.get("type") == "object" or "properties" in schema:
        props = schema.get("properties", {})
        if set(schema.get("required", [])) != set(props):
            bad.append(f"required {schema.get('required')} != properties {sorted(props)}")
        if schema.get("additionalProperties") is not False:
            bad.append("additionalProperties is not false")
        for v in props.values():
            bad += _strict_ok(v)
    return bad


def test_a_strict_tool_lists_every_property_as_required():
    """Kind: a function tool declared ``strict`` with an optional property (the Responses API
    refuses the request: in strict mode every property is required, optional ones nullable)."""
    for provider in ("openai", "deepseek", "qwen", "gemini", "anthropic", "openai_responses"):
        schema = recall_tool_schema(provider)
        strict = schema.get("strict") or schema.get("function", {}).get("strict")
        params = schema.get("parameters") or schema.get("input_schema") or schema["function"]["parameters"]
        if strict:
            assert _strict_ok(params) == [], provider
    params = recall_tool_schema("openai_responses")["parameters"]
    assert params["properties"]["message_id"]["type"] == ["string", "null"]
    assert recall_tool_schema("openai")["function"]["parameters"]["required"] == ["tool_use_id"]


@pytest.fixture
def cleared_session(tmp_path):
    """A session small enough that clearing fires: the prepared context holds placeholders."""
    # the watermark trigger (clearing above clear_at): the test is about recall, not when clearing pays
    policy = Policy.preset("default", budget=4000, unit="chars", clear_min_batch=0.0, edit_when="watermark")
    cm = ContextManager(f"sqlite:///{tmp_path / 'r.db'}", policy)
    s = cm.session("alice", "chat-1")
    msgs = [system()]
    for k in range(3):
        msgs += tool_turn(f"Round {k}: where is order #W{100 + k}?",
                          [("get_order_details", {"order_id": f"#W{100 + k}"},
                            json.dumps({"order_id": f"#W{100 + k}", "price": 10.5 + k, "notes": "n" * 900}))],
                          f"Order #W{100 + k} is on its way.")
    s.append(msgs + [user("And the first one again?")])
    prepared = s.prepare()
    yield cm, s, prepared, msgs
    cm.close()


def test_recall_returns_the_original_a_placeholder_names(cleared_session):
    cm, s, prepared, msgs = cleared_session
    cleared = [b for m in prepared.messages for b in m.blocks
               if isinstance(b, ToolResultBlock) and b.tool_use_id in b.text]
    assert cleared, "clearing fired and the placeholder names its id"
    for b in cleared:
        original = next(r.text for m in msgs for r in m.tool_results if r.tool_use_id == b.tool_use_id)
        assert recall_tool_result(s, b.tool_use_id) == original != b.text
        text, is_error = recall_tool_output(s, json.dumps({"tool_use_id": b.tool_use_id}))
        assert (text, is_error) == (original, False)
        # as a strict (Responses API) call sends it: every property present, the unused one null
        assert recall_tool_output(s, {"tool_use_id": b.tool_use_id, "message_id": None}) == (original, False)
        # the placeholder's call copied whole, or the id in its quotes (a model copies what it sees)
        for copied in (f'recall_tool_result("{b.tool_use_id}")', f'"{b.tool_use_id}"'):
            assert recall_tool_output(s, {"tool_use_id": copied}) == (original, False), copied


def test_recall_is_scoped_to_the_sessions_user(cleared_session):
    """Kind: reading another user's data by guessing an id. The same session id under another
    user holds nothing of alice's."""
    cm, s, prepared, msgs = cleared_session
    some_id = next(r.tool_use_id for m in msgs for r in m.tool_results)
    mallory = cm.session("mallory", "chat-1")
    with pytest.raises(ToolResultNotFound, match="user 'mallory'"):
        recall_tool_result(mallory, some_id)
    text, is_error = recall_tool_output(mallory, {"tool_use_id": some_id})
    assert is_error and "no tool result" in text


def test_bad_arguments_answer_the_model_with_an_error_not_an_exception(cleared_session):
    _, s, _, _ = cleared_session
    for bad in ("not json", "{}", {"tool_use_id": 3}, {"id": "x"}):
        text, is_error = recall_tool_output(s, bad)
        assert is_error and "tool_use_id" in text
    with pytest.raises(ToolResultNotFound):
        recall_tool_result(s, "call_nope")


def _big_log(chars: int) -> str:
    line = "tests/test_mod.py::test_case_{:07d} PASSED                                  [ 50%]\n"
    body = "============ test session starts ============\n"
    while len(body) < chars:
        body += line.format(len(body))
    return body + "FAILED tests/test_mod.py::test_the_one - AssertionError: boom\n==== 1 failed ====\n"


def test_recall_pages_are_sized_from_the_budget_and_land_whole():
    """Kind (fresh report, item 9): fixed 40,000-character pages at a 9,000-token budget: the
    recalled page was itself cut in the middle, characters no call could ever show."""
    from ctxwise import InMemoryStore
    from ctxwise.recall import RECALL_PAGE_CHARS, RECALL_PAGE_MIN_CHARS, RECALL_PAGE_SHARE
    from ctxwise.tokens import get_counter

    policy = Policy(budget=9_000, unit="tokens", tokenizer="o200k_base", provider="openai")
    cm = ContextManager(InMemoryStore(), policy)
    s = cm.session("u", "big")
    body = _big_log(200_000)
    s.append_openai([{"role": "system", "content": "agent"}, {"role": "user", "content": "Run the tests."},
                     {"role": "assistant", "content": None, "tool_calls": [{"id": "call_big", "type": "function",
                      "function": {"name": "run", "arguments": json.dumps({"cmd": "pytest -v"})}}]},
                     {"role": "tool", "tool_call_id": "call_big", "content": body}])
    s.prepare()
    room = policy.effective_budget * RECALL_PAGE_SHARE
    tok = get_counter("o200k_base")
    got, offset, pages = "", 0, 0
    while True:
        text, err = recall_tool_output(s, {"tool_use_id": "call_big", "offset": offset})
        assert not err and tok.count_text(text) <= room and RECALL_PAGE_MIN_CHARS <= len(text) < RECALL_PAGE_CHARS
        pages += 1
        page, sep, note = text.partition("\n[ctxwise: characters ")
        got += page
        if not sep:
            break
        offset = int(note.split("offset=")[1].rstrip(")]"))
    assert got == body and pages > 5
    # a page recalled into the context lands there whole, its next-page call visible
    args = json.dumps({"tool_use_id": "call_big", "offset": 80_000})
    out, _ = recall_tool_output(s, args)
    s.append_openai([{"role": "assistant", "content": None, "tool_calls": [{"id": "call_r", "type": "function",
                      "function": {"name": RECALL_TOOL_NAME, "arguments": args}}]},
                     {"role": "tool", "tool_call_id": "call_r", "content": out}])
    sent = [m for m in s.prepare().payload if m.get("tool_call_id") == "call_r"][0]["content"]
    assert sent == out and 'recall_tool_result("call_big", offset=' in sent
    # without a policy (any RecallSession), pages of RECALL_PAGE_CHARS
    class Bare:
        user_id, session_id = s.user_id, s.session_id
        original = s.original
    text, _ = recall_tool_output(Bare(), {"tool_use_id": "call_big"})
    assert RECALL_PAGE_CHARS - 4_000 < len(text) <= RECALL_PAGE_CHARS + 200


def test_a_cut_recalled_page_names_where_its_cut_characters_start():
    """A recalled page cut anyway (a context crowded by what is pinned) says where the cut
    characters start in the original and the call from there; a page without a next-page note
    says recalling it again returns the same page."""
    from ctxwise.compaction.trimming import RECALLED_AGAIN, head_and_tail
    from ctxwise.recall import page

    original = "".join(f"row {k:05d}\n" for k in range(5_000))
    text, _ = page(original, 1_000, "call_9", 3_000)
    cut = head_and_tail(text, 0.3, "call_r", recalled=True)
    head = cut.split("\n[ctxwise cut ", 1)[0]
    start = 1_000 + len(head)
    assert f'they start at character {start} of the original: recall_tool_result("call_9", offset={start})' in cut
    assert original[1_000:start] == head  # the call resumes exactly where the page was cut
    last, _ = page(original, len(original) - 2_000, "call_9", 3_000)  # the last page: no note
    assert RECALLED_AGAIN in head_and_tail(last, 0.3, "call_r", recalled=True)
