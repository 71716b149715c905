"""Time and the prompt cache (issue 25 item 7): a cache idle past its lifetime is cold, and an
edit made then re-bills nothing, so it is made (Claude Code clears old tool results on idle for
that reason). Real engine, real SQLite store, real chars counter; the recorded timestamps are
``Message.metadata["timestamp"]``."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from builders import assistant, results, system, tool_turn, user
from ctxwise import ContextManager
from ctxwise.compaction import Budgeting, clear_tool_results
from ctxwise.compaction.cost import idle_seconds, time_of
from ctxwise.errors import FormatError
from ctxwise.policy import Policy
from ctxwise.tokens import get_counter

T0 = datetime(2026, 12, 6, 12, 0, tzinfo=timezone.utc)


def stamped(messages: list, start: datetime = T0, step: float = 2.0) -> list:
    """``messages`` with ISO timestamps ``step`` seconds apart from ``start``."""
    return [m.model_copy(update={"metadata": {**m.metadata, "timestamp": (start + timedelta(seconds=k * step)).isoformat()}})
            for k, m in enumerate(messages)]


def two_turns_then_a_question(body: int = 500) -> list:
    """Two answered turns with one tool result each and long answers after them: clearing
    saves the results but re-bills the long answers (it does not pay on a warm cache)."""
    msgs = [system()]
    for k in range(2):
        msgs += tool_turn(f"Round {k}: order #W{k} status?", [("lookup", {"order": k}, f"order {k} " + "x" * body)],
                          f"Order {k} is on its way. " + "w" * 1200)
    return msgs


def policy() -> Policy:
    return Policy.preset("default", provider="anthropic", unit="chars", budget=6_000, keep_recent_cycles=1)


def test_cold_cache_edit_is_free_and_fires() -> None:
    """Anthropic's 5-minute cache (lifetime 300 s, docs.anthropic.com/en/docs/build-with-claude/
    prompt-caching): the same optional clearing held back on a warm cache fires once the cache
    has been idle past its lifetime, and says why."""
    msgs = two_turns_then_a_question()
    a = assistant(calls=[("lookup", {"order": 2})])
    msgs += [user("And the third order?"), a, *results(a, ["order 2 " + "y" * 300])]
    counter = get_counter("chars")
    p = policy()
    size = Budgeting(p, counter).size(msgs)
    assert p.level(p.clear_at) < size < p.level(p.summarize_at)
    assert clear_tool_results(msgs, Budgeting(p, counter, idle=60.0), size).events == []
    out = clear_tool_results(msgs, Budgeting(p, counter, idle=301.0), size)
    assert [e.stage for e in out.events] == ["clearing"]
    assert "cold" in out.events[0].trigger and out.events[0].size_after < size


def test_idle_is_read_from_message_timestamps() -> None:
    """The idle time runs from the latest assistant message (the previous call) to ``now`` or
    the newest timestamp; unknown when either is missing."""
    msgs = stamped([system(), user("hi"), assistant("hello"), user("later")], step=100.0)
    assert idle_seconds(msgs) == 100.0
    assert idle_seconds(msgs, now=time_of(T0) + 1000) == 800.0
    assert idle_seconds([system(), user("hi"), assistant("hello"), user("x")]) is None
    assert idle_seconds([system(), user("hi"), assistant("hello")], now=50.0, last_call=10.0) == 40.0
    assert time_of("2026-12-06T12:00:00Z") == time_of(T0) == time_of("2026-12-06T12:00:00")
    assert time_of("not a time") is None and time_of(True) is None


def run_session(tmp_path, messages: list, **prepare) -> list:
    """Append ``messages`` to a fresh session and prepare once; the event stages and triggers."""
    with ContextManager(f"sqlite:///{tmp_path / 'c.db'}", policy()) as cm:
        s = cm.session("u", "s")
        s.append(messages)
        return [(e.stage, e.trigger) for e in s.prepare(**prepare).events]


def test_prepare_sees_a_cold_cache_from_recorded_timestamps(tmp_path) -> None:
    """Message timestamps 10 minutes after the previous reply (Anthropic lifetime 300 s): the
    prepare clears; the same messages 30 s apart do not."""
    msgs = two_turns_then_a_question()
    warm = stamped(msgs, step=2.0) + stamped([user("And the third order?")], start=T0 + timedelta(seconds=60))
    cold = stamped(msgs, step=2.0) + stamped([user("And the third order?")], start=T0 + timedelta(minutes=10))
    (tmp_path / "w").mkdir()
    (tmp_path / "c").mkdir()
    assert run_session(tmp_path / "w", warm) == []
    fired = run_session(tmp_path / "c", cold)
    assert [s for s, _ in fired] == ["clearing"] and "cold" in fired[0][1]


def test_prepare_now_argument(tmp_path) -> None:
    """``prepare(now=...)`` gives the request time when the messages carry none after the
    previous reply; a bad value is a FormatError naming the argument, and nothing is stored."""
    msgs = stamped(two_turns_then_a_question(), step=2.0) + [user("And the third order?")]
    (tmp_path / "a").mkdir()
    fired = run_session(tmp_path / "a", msgs, now=T0 + timedelta(hours=1))
    assert [s for s, _ in fired] == ["clearing"]
    with ContextManager(f"sqlite:///{tmp_path / 'b.db'}", policy()) as cm:
        s = cm.session("u", "s")
        s.append(msgs)
        version = s.version
        with pytest.raises(FormatError, match=r"prepare\(now=\.\.\.\)"):
            s.prepare(now="yesterday")  # type: ignore[arg-type]
        assert s.version == version


def test_replay_uses_recorded_timestamps(tmp_path) -> None:
    """The replay passes the recorded request time to ``prepare(now=...)`` and prices a call
    made after the cache's lifetime with nothing served (Anthropic 5-minute TTL, docs above);
    the call after a 10-minute gap records its idle time and clears (free on a cold cache),
    the same recording with a 30-second gap does not."""
    from ctxwise.prices import ANTHROPIC
    from ctxwise.replay.runner import replay_conversation

    msgs = two_turns_then_a_question()
    a = assistant("The third order shipped.")
    late = stamped(msgs, step=2.0) + stamped([user("And the third order?"), a], start=T0 + timedelta(minutes=10))
    soon = stamped(msgs, step=2.0) + stamped([user("And the third order?"), a], start=T0 + timedelta(seconds=30))
    out = {}
    for name, conv in (("late", late), ("soon", soon)):
        with ContextManager(f"sqlite:///{tmp_path / (name + '.db')}", policy()) as cm:
            out[name] = replay_conversation(cm, "u", name, conv, name=name, source="test", format="canonical")
    late_calls, soon_calls = out["late"].calls, out["soon"].calls
    assert late_calls[-1].idle is not None and late_calls[-1].idle > ANTHROPIC.lifetime
    assert soon_calls[-1].idle is not None and soon_calls[-1].idle < ANTHROPIC.lifetime
    assert any("cold" in (e.get("trigger") or "") for e in late_calls[-1].events)
    assert not any("cold" in (e.get("trigger") or "") for c in soon_calls for e in c.events)
    m = out["late"].measures
    assert m.usage[-1][1] > 0  # a prefix was reused, but the cache had expired: nothing is served
    assert m.cost_under(ANTHROPIC) == sum(ANTHROPIC.call_cost(t, r) for t, r in m.usage[:-1]) \
        + ANTHROPIC.call_cost(m.usage[-1][0], 0)
    assert late_calls[-1].priced == ANTHROPIC.call_cost(late_calls[-1].tokens, 0)
