"""Provider-reported cache usage stored with a reply and shown beside the cost model's
prediction (issue 25 item 7). Real SDK response types (anthropic 2.17, openai 3.63), real engine
and SQLite store, real o200k counter."""

from __future__ import annotations

import pytest
from anthropic.types import Message as AnthropicMessage
from openai.types.chat import ChatCompletion
from openai.types.responses import Response

from builders import assistant, system, user
from ctxwise import ContextManager
from ctxwise.errors import FormatError
from ctxwise.policy import Policy
from ctxwise.usage import reported_usage


def anthropic_reply(read: int, written: int, uncached: int, miss: dict | None = None) -> AnthropicMessage:
    return AnthropicMessage.model_validate({
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-5",
        "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn", "stop_sequence": None,
        "usage": {"input_tokens": uncached, "output_tokens": 3, "cache_read_input_tokens": read,
                  "cache_creation_input_tokens": written},
        "diagnostics": {"cache_miss_reason": miss} if miss else None})


def test_anthropic_usage_and_cache_miss_reason() -> None:
    """anthropic 2.17 types/usage.py: ``input_tokens`` is the uncached part, beside
    ``cache_read_input_tokens`` and ``cache_creation_input_tokens``; types/diagnostics.py
    ``cache_miss_reason`` (``messages_changed`` with ``cache_missed_input_tokens``)."""
    u = reported_usage(anthropic_reply(1000, 200, 50, {"type": "messages_changed", "cache_missed_input_tokens": 300}))
    assert u is not None
    assert (u.api, u.input_tokens, u.cached_tokens, u.cache_write_tokens) == ("anthropic", 1250, 1000, 200)
    assert (u.miss_reason, u.missed_tokens) == ("messages_changed", 300)
    # the same from JSON dicts, usage alone with its diagnostics kept apart
    d = anthropic_reply(1000, 200, 50).model_dump(mode="json")
    assert reported_usage(d["usage"], {"cache_miss_reason": {"type": "tools_changed", "cache_missed_input_tokens": 9}}) \
        == reported_usage(d["usage"]).__class__("anthropic", 1250, 1000, 200, "tools_changed", 9)


def test_openai_chat_usage() -> None:
    """openai 3.63 types/completion_usage.py: ``prompt_tokens`` is all input;
    ``prompt_tokens_details.cached_tokens`` read, ``.cache_write_tokens`` written."""
    c = ChatCompletion.model_validate({
        "id": "c", "object": "chat.completion", "created": 0, "model": "gpt-5.6", "choices": [],
        "usage": {"prompt_tokens": 3000, "completion_tokens": 5, "total_tokens": 3005,
                  "prompt_tokens_details": {"cached_tokens": 1024, "cache_write_tokens": 1976}}})
    u = reported_usage(c)
    assert u is not None and (u.api, u.input_tokens, u.cached_tokens, u.cache_write_tokens) == ("openai_chat", 3000, 1024, 1976)
    # a usage with no token details (a gateway's) reports no cache figures: unknown, not 0
    bare = reported_usage({"prompt_tokens": 10, "completion_tokens": 1})
    assert bare is not None and (bare.input_tokens, bare.cached_tokens, bare.cache_write_tokens) == (10, None, None)


def test_openai_responses_usage_and_prompt_cache_diagnostics() -> None:
    """openai 3.63 types/responses/response_usage.py (``input_tokens_details.cached_tokens`` /
    ``cache_write_tokens``) and response.py ``prompt_cache_diagnostics`` (``cache_miss``:
    ``reason``, ``cache_missed_tokens``)."""
    r = Response.model_construct(
        id="resp_1", usage={"input_tokens": 5000, "output_tokens": 1, "total_tokens": 5001,
                            "input_tokens_details": {"cached_tokens": 4096, "cache_write_tokens": 904},
                            "output_tokens_details": {"reasoning_tokens": 0}},
        prompt_cache_diagnostics={"type": "cache_miss", "reason": "input_changed", "cache_missed_tokens": 700})
    u = reported_usage(r)
    assert u is not None and (u.api, u.input_tokens, u.cached_tokens, u.cache_write_tokens) == ("openai_responses", 5000, 4096, 904)
    assert (u.miss_reason, u.missed_tokens) == ("input_changed", 700)
    assert reported_usage({"nothing": 1}) is None


def policy() -> Policy:
    return Policy.preset("default", provider="anthropic", budget=50_000)


def test_reply_usage_is_stored_and_recorded_beside_the_prediction(tmp_path) -> None:
    """A reply appended with ``metadata["usage"]`` after a prepare is stored with it and one
    ``cache_usage`` event puts the reported cache tokens beside the predicted ones (the second
    call re-sends the first call's payload: predicted cached is that prefix by Anthropic's rule,
    none below its 1,024-token minimum)."""
    long_system = system("You are an agent. " + "Follow the house rules carefully. " * 400)
    with ContextManager(f"sqlite:///{tmp_path / 'u.db'}", policy()) as cm:
        s = cm.session("u", "s")
        s.append([long_system, user("Hello")])
        s.prepare()
        first = anthropic_reply(0, 2600, 10).model_dump(mode="json")
        s.append([assistant("Hi.").model_copy(update={"metadata": {"usage": first["usage"]}})])
        s.append([user("And now?")])
        s.prepare()
        second = anthropic_reply(2600, 30, 5).model_dump(mode="json")
        reply = assistant("Now this.").model_copy(update={"metadata": {"usage": second["usage"]}})
        s.append([reply])
        events = [e for e in s.events() if e["stage"] == "cache_usage"]
        assert len(events) == 2
        first_ev, second_ev = events
        assert first_ev["detail"]["predicted"]["cached"] == 0  # nothing cached before the first call
        predicted = second_ev["detail"]["predicted"]
        assert second_ev["detail"]["reported"]["cached_tokens"] == 2600
        assert predicted["tokens"] > predicted["cached"] > 1024 and predicted["prices"] == "anthropic"
        assert second_ev["affected_ids"] == [reply.id]
        assert f"predicted {predicted['cached']:,} of {predicted['tokens']:,}" in second_ev["trigger"]
        stored = s.messages[-1]
        assert stored.metadata["usage"]["cache_read_input_tokens"] == 2600


def test_record_usage_takes_the_sdk_reply_and_refuses_what_it_cannot_read(tmp_path) -> None:
    """``Session.record_usage`` takes the SDK reply itself; a value with no usage is a
    FormatError and nothing is written."""
    with ContextManager(f"sqlite:///{tmp_path / 'r.db'}", policy()) as cm:
        s = cm.session("u", "s")
        s.append([system(), user("Hello")])
        s.prepare()
        s.append([assistant("Hi.")])
        ev = s.record_usage(anthropic_reply(0, 0, 40, {"type": "previous_message_not_found"}))
        assert ev.stage == "cache_usage" and ev.detail["reported"]["miss_reason"] == "previous_message_not_found"
        version = s.version
        with pytest.raises(FormatError, match="record_usage"):
            s.record_usage({"no": "usage"})
        assert s.version == version and [e["stage"] for e in s.events()] == ["cache_usage"]


def test_replay_shows_predicted_beside_reported_cache_tokens(tmp_path) -> None:
    """The replay keeps, per call, the cache tokens the price model predicts for the replayed
    payload and the usage the recording kept with the reply (tau2-bench stores LiteLLM's
    ``usage``: ``prompt_tokens`` only, so the cache figures are unknown, not 0); the HTML
    report lists them per call."""
    from ctxwise.replay.report import render_html
    from ctxwise.replay.run import run
    from tests.conftest import TRAJECTORIES

    f = TRAJECTORIES / "tau2-bench" / "retail_gpt-4.1_1trial.json"
    res = run([str(f)], Policy.preset("default", unit="tokens", budget=6000), db=f"sqlite:///{tmp_path / 'r.db'}",
              limit=1, baseline=False)
    calls = res.sessions[0].calls
    reported = [c.reported for c in calls if c.reported]
    assert reported and all(r["input_tokens"] > 0 and r["cached_tokens"] is None for r in reported)
    assert any(c.predicted_cached > 0 for c in calls)  # later calls re-send a prefix over OpenAI's 1,024 minimum
    assert all(c.predicted_cached <= c.cached for c in calls)
    html = render_html(res)
    assert "predicted cached" in html and f"<td>{reported[0]['input_tokens']:,}</td>" in html


def test_inspector_timeline_puts_reported_usage_on_its_call(tmp_path) -> None:
    """The inspector's event timeline (server pages) shows the ``cache_usage`` event with
    predicted and reported tokens, on the model call whose output it names."""
    from ctxwise import open_store
    from ctxwise.server.calls import session_calls
    from ctxwise.server.pages import timeline

    db = f"sqlite:///{tmp_path / 'i.db'}"
    with ContextManager(db, policy()) as cm:
        s = cm.session("u", "s")
        s.append([system(), user("Hello")])
        s.prepare()
        usage = anthropic_reply(0, 0, 40).model_dump(mode="json")["usage"]
        s.append([assistant("Hi.").model_copy(update={"metadata": {"usage": usage}})])
    store = open_store(db)
    try:
        state, events = store.load("u", "s", include_hidden=True), store.events("u", "s")
        calls = session_calls(state, events, store.transcript("u", "s"))
    finally:
        store.close()
    html = timeline(events, calls, {})
    assert "cache_usage" in html and "reported 0 of 40 input tokens cached" in html and "predicted 0 of" in html
    row = next(r for r in html.split("<tr class='ev'>") if "cache_usage" in r)
    assert "<td>1</td>" in row  # call 1, the call whose output the usage came with
