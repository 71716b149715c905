"""Edit anchors and working-file freshness in long tool loops (issue 26), one test per mechanism,
on real recordings (../shared/data/long) and small constructed loops: what the agent's next edit
copies, and the latest view of the file it edits, stay in the context it is produced from."""

from __future__ import annotations

from ctxwise import Policy
from ctxwise.compaction import Budgeting
from ctxwise.compaction.oversize import REPLY_NOTE, cut_oversized_replies, cut_reply_text
from ctxwise.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock, text_message
from ctxwise.replay import metrics
from ctxwise.tokens import get_counter

from conftest import SHARED
from longloops import drive

LONG = SHARED / "data" / "long"
MSA = LONG / "mini-swe-agent_gemini-3-pro"


def call(i: str, command: str) -> Message:
    return Message(id="a" + i, role="assistant", blocks=[ToolUseBlock(id=i, name="bash", input={"command": command})])


def out(i: str, text: str) -> Message:
    return Message(id="t" + i, role="tool",
                   blocks=[ToolResultBlock(tool_use_id=i, name="bash", output=[TextBlock(text=text)])])


# --------------------------------------------------------------------------- oversized replies


def test_a_degenerate_reply_is_cut_head_and_tail_and_the_working_file_stays():
    """Kind: one reply larger than the budget (a plan repeated to the output limit, then a format
    error). Before: the summary and the hard trim took the span around it, with the file view the
    next edits copy from (scikit-learn-25102: a 55,000-token reply at 32,000 left 2,352 tokens).
    Now the reply alone is cut, its head and tail kept, and every edit finds its anchor."""
    path = MSA / "msa_scikit-learn__scikit-learn-25102.json"
    for budget in (32_000, 64_000):
        h, p, o, ev = drive(path, budget)
        assert metrics.edit_anchor_recall(h, p, o).value == 1.0
        assert metrics.working_file_freshness(h, p, o).value == 1.0
        cut = [e for call_events in ev for e in call_events if e.detail.get("oversized")]
        assert cut and cut[0].affected_ids == ["m0020"]
        tok = get_counter("o200k_base")
        for payload in p:
            assert tok.count(payload) <= budget
            reply = next((m for m in payload if m.id == "m0020"), None)
            if reply is not None:
                assert "from the middle of this reply" in reply.text
                assert reply.text.startswith(h[-1][20].text[:200])  # the head, verbatim
        assert not metrics.validator_errors(p, "openai", references=h)


def test_only_an_oversized_reply_is_cut_and_only_above_the_hard_limit():
    tok = get_counter("o200k_base")
    pol = Policy.preset("default", budget=4_000, unit="tokens", provider="openai")
    b = Budgeting(pol, tok)
    plan = "I will edit a.py next. " + "Let me think about the plan again. " * 600 + "Done planning."
    msgs = [text_message("s", "system", "sys"), text_message("u", "user", "Fix a.py."),
            call("1", "cat a.py"), out("1", "def f():\n    return 1\n"),
            text_message("big", "assistant", plan),
            text_message("n", "user", "Please always provide EXACTLY ONE action in triple backticks."),
            call("2", "sed -i 's/return 1/return 2/' a.py"), out("2", "")]
    size = b.size(msgs)
    assert size > 4_000
    res = cut_oversized_replies(msgs, b, size)
    assert [c.message_id for c in res.changes] == ["big"]
    after = res.messages
    assert b.size(after) <= 4_000 * 0.5 and res.events[0].size_after == b.size(after)
    big = next(m for m in after if m.id == "big")
    assert big.text.startswith("I will edit a.py next.") and big.text.endswith("Done planning.")
    assert [m.text for m in after if m.id != "big"] == [m.text for m in msgs if m.id != "big"]
    # under the hard limit nothing is cut, and a reply under half of it is never cut
    assert not cut_oversized_replies(msgs, Budgeting(pol.with_(budget=40_000), tok), size).changes
    small = [m if m.id != "big" else text_message("big", "assistant", plan[:4000]) for m in msgs]
    assert not cut_oversized_replies(small, b, b.size(small) + 10_000).changes


def test_cut_reply_text_is_proportional_and_names_what_was_cut():
    text = "".join(f"line {i}\n" for i in range(10_000))
    cut = cut_reply_text(text, 2_000)
    assert cut.startswith("line 0\n") and cut.endswith("line 9999\n")
    assert 1_900 < len(cut) < 2_000 + len(REPLY_NOTE) + 40
    assert f"of {len(text)} characters" in cut
    assert cut_reply_text("short", 2_000) == "short"


# --------------------------------------------------------------------------- the agent's own edit text


def test_a_summary_keeps_the_text_the_latest_edits_wrote(monkeypatch):
    """Kind: the text an agent's edit put into a file is in no view, only in its own edit call
    (``sed -i 's/with open.*$/print("GENERATING")/'``); its next edit of that text copies it from
    there. Before: the summary named the file edited and lost the text, and the next ``sed``
    anchor was in no context (sphinx-9229 at 32,000). Now the summary keeps what the latest edits
    of each file wrote."""
    from ctxwise.compaction.summarizing import _Cutter
    from ctxwise.summarizers import DigestSummarizer

    # this mechanism alone: the summary's cut as the turn rule makes it (no working views kept)
    monkeypatch.setattr(_Cutter, "keep_working", lambda self, messages, older, cut: cut)
    h, p, o, _ = drive(MSA / "msa_sphinx-doc__sphinx-9229.json", 32_000)
    assert metrics.edit_anchor_recall(h, p, o).value == 1.0
    wrote = next(i for i, m in enumerate(o) if m.id == "m0186")
    gone = [k for k in range(wrote + 1, len(p)) if not any(m.id == "m0186" for m in p[k])]
    assert gone  # the edit call that wrote the text is summarized at these calls ...
    for k in gone[:20]:  # ... and a summary keeps its text and its file while it is the latest
        summary = "\n".join(m.text for m in p[k] if m.kind == "summary")
        assert 'sphinx/ext/autodoc/__init__.py: `sed -i' in summary
    k = gone[0]
    assert 'print("GENERATING")' in "\n".join(m.text for m in p[k] if m.kind == "summary")

    loop = [text_message("u", "user", "Fix it."),
            call("1", "cat a.py"), out("1", "x = 1\n"),
            Message(id="e", role="assistant", blocks=[ToolUseBlock(id="2", name="str_replace_editor", input={
                "command": "str_replace", "path": "/r/a.py", "old_str": "x = 1", "new_str": "x = 2\ny = 3"})]),
            out("2", "edited")]
    loop += [b for i in range(3, 7) for b in (call(str(i), f"sed -i 's/y = {i}/y = {i + 1}/' /r/a.py"), out(str(i), ""))]
    text = DigestSummarizer().summarize(loop, None, 4_000).text
    edits = [x for x in text.splitlines() if x.startswith("- /r/a.py: ")]
    assert len(edits) == 3 and edits[-1] == "- /r/a.py: `sed -i 's/y = 6/y = 7/' /r/a.py`"  # the latest three
    one = DigestSummarizer().summarize(loop[:5], None, 4_000).text
    assert '- /r/a.py: wrote "x = 2 ⏎ y = 3"' in one


# --------------------------------------------------------------------------- the summary's cut


def test_a_summary_cut_keeps_the_latest_view_of_a_file_the_agent_edits(monkeypatch):
    """Kind: a summary's cut falls right after the view of a file the agent edits next (the cut
    keeps ``summary_keep_recent`` of the budget, and a harness notice after the edit is a turn
    start). Before: the view was summarized and the later edits of that file were made without
    it (django-14351 at 32,000: 7 of 8). Now the cut moves back before that view's call, within
    ``WORKING_SHARE`` of the budget."""
    from ctxwise.compaction.context import Budgeting as B
    from ctxwise.compaction.summarizing import WORKING_SHARE, _Cutter, plan_summary

    h, p, o, ev = drive(MSA / "msa_django__django-14351.json", 32_000)
    edits = [k for k, m in enumerate(o) for u in m.tool_uses
             if (metrics.edited_path(u) or "").endswith("fields/related_lookups.py")]
    assert len(edits) >= 2
    for k in edits:  # every edit of the file is made with its latest view in the context, whole
        view = next(v for v in reversed(metrics._latest_views(h[k])) if v[0].endswith("fields/related_lookups.py"))
        assert any(r.tool_use_id == view[1] and r.text == view[2] for m in p[k] for r in m.tool_results)
    assert metrics.edit_anchor_recall(h, p, o).value == 1.0
    assert any(e.stage == "summarizing" for call_events in ev for e in call_events)

    # a constructed loop: the view of b.py is the latest of a file edited after it
    tok = get_counter("o200k_base")
    pol = Policy.preset("default", budget=6_000, unit="tokens", provider="openai")
    b = B(pol, tok)
    filler = "".join(f"    value_{i} = compute({i})\n" for i in range(120))
    msgs = [text_message("s", "system", "sys"), text_message("u", "user", "Fix b.py.")]
    for i in range(6):
        msgs += [call(f"r{i}", f"python run_{i}.py"), out(f"r{i}", filler)]
    msgs += [call("v", "cat b.py"), out("v", "def g():\n    return 0\n"),
             call("r9", "python run_9.py"), out("r9", filler),
             text_message("n1", "user", "Please always provide EXACTLY ONE action in triple backticks."),
             call("e", "sed -i 's/return 0/return 1/' b.py"), out("e", ""),
             call("r10", "python run_10.py"), out("r10", "ok"),
             text_message("n2", "user", "Please always provide EXACTLY ONE action in triple backticks.")]
    size = b.size(msgs)
    plan = plan_summary(msgs, b, size)
    assert plan is not None
    kept = [m.id for m in msgs[plan.cut:]]
    assert "av" in kept and "tv" in kept  # the view's call and result stay verbatim
    assert sum(b.size_of(m) for m in msgs[plan.cut:]) <= b.level(WORKING_SHARE) + b.level(pol.summary_keep_recent) + 2_000
    # the cut the turn rule alone makes (keep_working left out) summarizes the view
    monkeypatch.setattr(_Cutter, "keep_working", lambda self, messages, older, cut: cut)
    base = plan_summary(msgs, b, size)
    assert base is not None and base.cut > plan.cut and "tv" not in [m.id for m in msgs[base.cut:]]


# --------------------------------------------------------------------------- the measure


def test_freshness_counts_a_whole_write_as_the_latest_view_of_its_file():
    """After a whole write the file is what the write's input says; a view from before it shows
    a file that no longer is. Before: the measure asked for the older view (a payload holding
    the write whole and that view cleared counted as stale; one holding the outdated view
    counted as fresh); a file only written, never viewed, was not counted at all."""
    read = Message(id="a1", role="assistant", blocks=[ToolUseBlock(id="r", name="Read", input={"file_path": "/p/a.ex"})])
    seen = Message(id="t1", role="tool", blocks=[ToolResultBlock(tool_use_id="r", name="Read",
                                                                 output=[TextBlock(text="1→old text\n2→more")])])
    write = Message(id="a2", role="assistant", blocks=[ToolUseBlock(id="w", name="Write", input={
        "file_path": "/p/a.ex", "content": "new text\nmore"})])
    done = Message(id="t2", role="tool", blocks=[ToolResultBlock(tool_use_id="w", name="Write",
                                                                 output=[TextBlock(text="File written")])])
    edit = Message(id="a3", role="assistant", blocks=[ToolUseBlock(id="e", name="Edit", input={
        "file_path": "/p/a.ex", "old_string": "new text", "new_string": "newer text"})])
    task = text_message("u", "user", "Change the text.")
    history = [task, read, seen, write, done]
    cleared_view = [task, read, Message(id="t1", role="tool", blocks=[ToolResultBlock(
        tool_use_id="r", name="Read", output=[TextBlock(text="[cleared]")])]), write, done]
    cleared_write = [task, read, seen, Message(id="a2", role="assistant", blocks=[ToolUseBlock(
        id="w", name="Write", input={"file_path": "/p/a.ex", "content": "[cleared to save context, 13 characters]"})]), done]
    assert metrics.working_file_freshness([history], [cleared_view], [edit]) == metrics.Recall(1, 1)
    assert metrics.working_file_freshness([history], [cleared_write], [edit]) == metrics.Recall(0, 1)
    only_written = [task, write, done]
    assert metrics.working_file_freshness([only_written], [only_written], [edit]) == metrics.Recall(1, 1)
    heredoc = ToolUseBlock(id="h", name="bash", input={"command": "cat <<'EOF' > repro.py\nprint(1)\nEOF"})
    assert metrics.written_path(heredoc) == "repro.py"
    assert metrics.written_path(ToolUseBlock(id="c", name="bash", input={"command": "cat repro.py"})) is None
