"""Kind of fault: what a user said written to the logs (issue 28, "Privacy in logs"). Every
compaction event went to the ``ctxwise`` logger at INFO whole, and the facts-evicted lines
carried the user's words ("my card ends 4242", "I live at 12 Elm St"), with no switch to turn
it off. Events are logged with ids, sizes and stages only now; the full event (message text,
facts) goes to the ``ctxwise.content`` logger at DEBUG only when ``CTXWISE_LOG_CONTENT=1``."""

from __future__ import annotations

import logging

import pytest

from ctxwise import ContextManager, Policy
from ctxwise.compaction.events import CONTENT_LOGGER, CompactionEvent
from ctxwise.formats import load
from ctxwise.replay.runner import replay_conversation
from ctxwise.replay.sources import conversation_label
from tests.conftest import TRAJECTORIES

RECORDING = TRAJECTORIES / "tau2-bench" / "retail_gpt-4.1_1trial.json"


def _replay(tmp_path, caplog) -> tuple[list[str], list[str], str]:
    """Replay a real recording at a budget that clears, summarizes and evicts facts, with every
    logger captured at DEBUG. Returns the user texts, the evicted facts, and the log text."""
    conv = next(c for c in load(RECORDING) if conversation_label(c) == "task 60")
    policy = Policy.preset("default", unit="chars", budget=8000, facts_share=0.02, edit_when="watermark")
    cm = ContextManager(f"sqlite:///{tmp_path / 'r.db'}", policy)
    with caplog.at_level(logging.DEBUG):
        replay_conversation(cm, "u", "s", conv.messages, name="t60", source="t60", format=conv.format)
    events = cm.session("u", "s").events()
    cm.close()
    users = [m.text for m in conv.messages if m.role == "user" and len(m.text) >= 20]
    facts = [f for e in events if e["stage"] == "facts_evicted" for f in e["detail"]["evicted"]]
    assert users and facts and {"clearing", "summarizing"} & {e["stage"] for e in events}
    return users, facts, "\n".join(r.getMessage() for r in caplog.records)


def test_a_replay_logs_no_user_text_at_any_level(tmp_path, caplog, monkeypatch):
    monkeypatch.delenv("CTXWISE_LOG_CONTENT", raising=False)
    users, facts, logged = _replay(tmp_path, caplog)
    assert "ctxwise.compaction" in logged  # the events are logged: ids, sizes, stages
    leaked = [t for t in users + facts if t in logged]
    assert not leaked, leaked[:3]
    assert not [r for r in caplog.records if r.name == CONTENT_LOGGER]


def test_the_switch_sends_content_to_its_own_logger_at_debug(tmp_path, caplog, monkeypatch):
    monkeypatch.setenv("CTXWISE_LOG_CONTENT", "1")
    users, facts, _ = _replay(tmp_path, caplog)
    content = [r for r in caplog.records if r.name == CONTENT_LOGGER]
    assert content and all(r.levelno == logging.DEBUG for r in content)
    text = "\n".join(r.getMessage() for r in content)
    assert any(f in text for f in facts)
    info = "\n".join(r.getMessage() for r in caplog.records if r.name != CONTENT_LOGGER)
    assert not [t for t in users + facts if t in info]


@pytest.mark.parametrize("detail", [
    {"evicted": ["my card ends 4242", "I live at 12 Elm St"]},
    {"messages": [{"index": 3, "id": "m3", "rules": ["blank-text-dropped"], "original": ["I live at 12 Elm St"]}]},
    {"error": "model said: I live at 12 Elm St", "key": "sum-1"},
])
def test_log_record_keeps_ids_sizes_and_stages_only(detail):
    ev = CompactionEvent(stage="facts_evicted", trigger="facts over 2 % of the budget", unit="chars",
                         size_before=900, size_after=800, affected_ids=["m1", "m2"], detail=detail)
    rec = ev.log_record()
    assert "Elm St" not in str(rec) and "4242" not in str(rec)
    assert rec["stage"] == "facts_evicted" and rec["affected_ids"] == ["m1", "m2"]
    assert (rec["size_before"], rec["size_after"]) == (900, 800)
