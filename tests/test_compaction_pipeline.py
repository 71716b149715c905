"""The Stage protocol and the Pipeline: stages return typed changes, the engine stores exactly
those, and a new stage is one class listed in a pipeline.

Fault kinds covered: (1) *changes guessed by the engine* -- a stage whose edit the engine
cannot infer from marker strings or list diffs must still be persisted as returned, and read
back on reopen; (2) *in-memory context and stored context drifting apart* -- after every
prepare(), the context a fresh process reads from the store equals the one the session holds.
"""

from __future__ import annotations

import time

import pytest

from builders import assistant, system, tool_turn, user
from ctxwise.changes import Hide, InsertSummary, Replace, apply_changes
from ctxwise.compaction import Budgeting, Pipeline, StageInput, StageResult, compact
from ctxwise import ContextManager
from ctxwise.errors import PayloadInvalid
from ctxwise.messages import TextBlock
from ctxwise.policy import Policy
from ctxwise.summarizers import DigestSummarizer
from ctxwise.tokens import get_counter


class RedactCardNumbers:
    """A toy stage, written the way a new stage is: a name and run(StageInput) -> StageResult.

    It rewrites user text holding ``4111-1111`` (a card number) to ``[card]``, a Replace the
    old engine could not have derived (it read ``cleared`` / ``truncated`` markers only)."""

    name = "redact_cards"

    def run(self, inp: StageInput) -> StageResult:
        t0 = time.perf_counter()
        changes = []
        for m in inp.messages:
            if m.role == "user" and "4111-1111" in m.text:
                new = m.model_copy(update={"blocks": [TextBlock(text=m.text.replace("4111-1111", "[card]"))]})
                changes.append(Replace(m.id, new, "pruned"))
        if not changes:
            return StageResult(inp.messages)
        b = inp.budgeting
        after = inp.size + sum(b.size_of(c.current) for c in changes) - sum(
            b.size_of(m) for m in inp.messages if m.id in {c.message_id for c in changes})
        ev = b.event("clearing", "card number in user text", inp.size, after, [c.message_id for c in changes], t0)
        return StageResult(inp.messages, [ev], changes)


def test_a_toy_stage_listed_in_the_pipeline_is_persisted_and_survives_reopen(tmp_path):
    url = f"sqlite:///{tmp_path / 'toy.db'}"
    policy = Policy.preset("default", budget=100_000)  # far below every watermark: only the toy fires
    pipeline = Pipeline(stages=[*Pipeline.default().stages, RedactCardNumbers()])
    cm = ContextManager(url, policy, pipeline=pipeline)
    s = cm.session("u1", "chat")
    s.append([system(), user("my card is 4111-1111, please refund order #W1")])
    prepared = s.prepare()
    assert [e.stage for e in prepared.events] == ["clearing"]
    assert "[card]" in prepared.messages[1].text and "4111-1111" not in prepared.messages[1].text
    cm.close()
    reopened = ContextManager(url, policy).session("u1", "chat", create=False)  # default pipeline
    assert reopened.messages == s.messages
    assert "[card]" in reopened.messages[1].text
    assert "4111-1111" in reopened.transcript()[0].text  # the transcript keeps what the user wrote
    assert reopened.events()[-1]["affected_ids"] == [s.messages[1].id]


def test_a_pipeline_refuses_an_object_that_is_not_a_stage():
    with pytest.raises(TypeError, match="Pipeline stages"):
        Pipeline(stages=[object()])


def test_a_stage_naming_a_message_it_was_not_given_is_refused():
    class Ghost:
        name = "ghost"

        def run(self, inp: StageInput) -> StageResult:
            return StageResult(inp.messages, [], [Hide(["no-such-id"], "trimmed")])

    b = Budgeting(Policy.preset("default", budget=100_000), get_counter("chars"))
    with pytest.raises(ValueError, match="no-such-id"):
        compact([system(), user("hi")], b, DigestSummarizer(), pipeline=Pipeline([Ghost()]))


def test_apply_changes_places_a_summary_where_its_anchor_stood():
    a, b_, c = user("one"), assistant("two"), user("three")
    s = user("summary").model_copy(update={"id": "summary-x"})
    out = apply_changes([a, b_, c], [InsertSummary(s, a.id), Hide([a.id, b_.id], "summarized")])
    assert [m.id for m in out] == ["summary-x", c.id]


def test_compact_validates_an_input_that_fires_no_stage():
    # kind: an invalid context passed through unchanged because no stage fired (issue 10)
    call = assistant(calls=[("search", {"q": "x"})])
    bad = [system(), user("hi"), call, user("next")]  # the call is never answered
    b = Budgeting(Policy.preset("default", budget=100_000), get_counter("chars"))
    with pytest.raises(PayloadInvalid, match="unanswered-tool-call"):
        compact(bad, b, DigestSummarizer())


@pytest.mark.parametrize("budget", [2_000, 2_500])
def test_the_stored_context_equals_the_session_context_after_every_prepare(tmp_path, budget):
    url = f"sqlite:///{tmp_path / 'drift.db'}"
    # the watermark triggers (cost-engine: the default waits for the hard limit, where clearing
    # alone keeps this session under budget) so the changes checked include summaries
    policy = Policy.preset("default", budget=budget, clearable_tools=["*"], edit_when="watermark")
    cm = ContextManager(url, policy, summarizer=DigestSummarizer())
    s = cm.session("u1", "long")
    s.append([system()])
    stages = set()
    for k in range(14):
        turn = tool_turn(f"Round {k}: order #W{1000 + k}, under 500 USD", [("search", {"q": f"q{k}"}, f"r{k} " + "x" * 700)],
                         f"Answer {k}")
        s.append([turn[0]])
        stages.update(e.stage for e in s.prepare().events)
        s.append(turn[1:3])
        stages.update(e.stage for e in s.prepare().events)
        s.append(turn[3:])
        fresh = ContextManager(url, policy).session("u1", "long", create=False)
        assert fresh.messages == s.messages, f"round {k}: stored context differs from the session's"
    assert {"clearing", "summarizing"} <= stages  # the changes checked include summaries
