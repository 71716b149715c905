"""The long-loop measures (task recall, edit-anchor recall, working-file freshness) on
hand-made lists whose answers are worked out by hand, and on a real recording sent whole."""

from __future__ import annotations

import pytest

from ctxwise.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock, text_message
from ctxwise.replay import metrics

from test_task_anchoring import CC, MSA, messages


def use(i: str, name: str, **inp) -> Message:
    return Message(id="a" + i, role="assistant", blocks=[ToolUseBlock(id=i, name=name, input=inp)])


def result(i: str, text: str, name: str = "tool") -> Message:
    return Message(id="t" + i, role="tool",
                   blocks=[ToolResultBlock(tool_use_id=i, name=name, output=[TextBlock(text=text)])])


VIEW = "    10→def area(r):\n    11→    return 3.14 * r * r\n"
TASK = text_message("u", "user", "Fix area() in geo.py.\nDo not change the tests.")


def session() -> tuple[list[Message], Message]:
    history = [TASK, use("c1", "Read", file_path="/repo/geo.py"), result("c1", VIEW, "Read")]
    edit = use("c2", "Edit", file_path="/repo/geo.py", old_string="def area(r):\n    return 3.14 * r * r",
               new_string="def area(r):\n    return math.pi * r * r")
    return history, edit


def test_an_edit_made_from_a_context_that_showed_its_anchor_counts():
    history, edit = session()
    r = metrics.edit_anchor_recall([history], [history], [edit])
    assert (r.supported, r.needed) == (1, 1)
    f = metrics.working_file_freshness([history], [history], [edit])
    assert (f.supported, f.needed) == (1, 1)


def test_a_cleared_view_fails_both_measures():
    history, edit = session()
    cleared = history[:2] + [result("c1", '[Read result cleared; recall_tool_result("c1")]', "Read")]
    assert metrics.edit_anchor_recall([history], [cleared], [edit]).value == 0.0
    assert metrics.working_file_freshness([history], [cleared], [edit]).value == 0.0


def test_an_anchor_the_history_never_showed_is_not_needed():
    history, _ = session()
    guess = use("c3", "Edit", file_path="/repo/geo.py", old_string="def volume(r):", new_string="x")
    assert metrics.edit_anchor_recall([history], [history], [guess]).needed == 0


def test_sed_patterns_are_anchors_only_when_literal():
    lit = ToolUseBlock(id="s", name="bash", input={"command": r"sed -i 's/3\.14 \* r/math.pi * r/' geo.py"})
    rx = ToolUseBlock(id="s", name="bash", input={"command": r"sed -i 's/^ *return.*$/x/' geo.py"})
    line = ToolUseBlock(id="s", name="bash", input={"command": "sed -i '11c\\    return 0' src/geo.py"})
    assert metrics.edit_anchors(lit) == ["3.14 * r"]
    assert metrics.edit_anchors(rx) == []
    assert metrics.edited_path(line) == "src/geo.py" and metrics.edited_path(lit) == "geo.py"
    view = ToolUseBlock(id="v", name="bash", input={"command": "nl -ba src/geo.py | sed -n '1,20p'"})
    assert metrics.viewed_path(view) == "src/geo.py"


def test_task_recall_counts_the_lines_of_the_instruction_in_force():
    notice = text_message("n", "user", "[Request interrupted by user for tool use]")
    history = [TASK, use("c1", "Read", file_path="geo.py"), result("c1", VIEW), notice]
    r = metrics.task_recall([history], [history[1:]])  # the task was dropped
    assert (r.supported, r.needed) == (0, 2)
    assert metrics.task_recall([history], [history]).value == 1.0


def test_lists_of_different_lengths_are_refused():
    with pytest.raises(ValueError):
        metrics.task_recall([[TASK]], [])


@pytest.mark.parametrize("path", [CC, MSA])
def test_sending_everything_scores_one_on_a_real_recording(path):
    ms = messages(path)
    calls = [i for i, m in enumerate(ms) if m.role == "assistant" and i > 0]
    histories = [ms[:i] for i in calls]
    outputs = [ms[i] for i in calls]
    for r in (metrics.task_recall(histories, histories), metrics.edit_anchor_recall(histories, histories, outputs),
              metrics.working_file_freshness(histories, histories, outputs)):
        assert r.supported == r.needed
    assert metrics.working_file_freshness(histories, histories, outputs).needed > 0 or path == MSA


def test_cache_breaks_count_the_calls_each_break_buys_and_the_tokens_sent_again():
    """Kind: payloads that grow by appending, then an edit deep in the list (a break), then
    more appends, then another break: the first break bought the calls up to the second."""
    from ctxwise.tokens import get_counter

    tok = get_counter("o200k_base")
    history, _ = session()
    more = [use("c3", "Read", file_path="/repo/b.py"), result("c3", "x = 1\n" * 50)]
    cleared = history[:2] + [result("c1", "[cleared]", "Read")]
    payloads = [history, history + more[:1], cleared + more, cleared + more + [TASK.model_copy(update={"id": "u2"})],
                cleared[:1] + cleared[2:] + more]
    br = metrics.cache_breaks(payloads, tok)
    assert br.calls == (2, 1)  # break at call 2 (buys calls 2 and 3), break at call 4 (to the end)
    sent_again = sum(tok.count_message(m) for m in cleared[2:] + more[:1]) + sum(
        tok.count_message(m) for m in cleared[2:] + more)
    assert br.rebilled == sent_again
    assert br.median == 1.5
    assert metrics.cache_breaks([history, history + more], tok).calls == ()
