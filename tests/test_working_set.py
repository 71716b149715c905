"""Resource keys and working-set-aware clearing (issue 26, items 2 and 3): every call gets a
key, superseded views and repeated runs are cleared first, the latest view of a file being
worked on is kept longest, and a clearing inside a tool loop frees room for many calls."""

from __future__ import annotations

import pytest

from ctxwise import Policy
from ctxwise.resources import COLD, STALE, WORKING, Access, access_of, reuse_ranks, run_named, shell_access, working_views
from ctxwise.formats import load
from ctxwise.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock, text_message
from ctxwise.replay import metrics

from longloops import drive
from test_task_anchoring import MSA


def call(i: str, name: str, **inp) -> Message:
    return Message(id="a" + i, role="assistant", blocks=[ToolUseBlock(id=i, name=name, input=inp)])


def out(i: str, text: str) -> Message:
    return Message(id="t" + i, role="tool", blocks=[ToolResultBlock(tool_use_id=i, name="t", output=[TextBlock(text=text)])])


def key(name: str, **inp) -> tuple[str, str, tuple[int, int] | None] | None:
    a = access_of(ToolUseBlock(id="x", name=name, input=inp))
    return None if a is None else (a.key, a.action, a.lines)


def test_keys_for_claude_code_editor_and_shell_calls():
    assert key("Read", file_path="/r/a.py") == ("path:/r/a.py", "view", None)
    assert key("Read", file_path="/r/a.py", offset=100, limit=50) == ("path:/r/a.py", "view", (100, 149))
    assert key("Edit", file_path="/r/a.py", old_string="x", new_string="y") == ("path:/r/a.py", "edit", None)
    assert key("str_replace_editor", command="view", path="/w/m.c", view_range=[282, 449]) == ("path:/w/m.c", "view", (282, 449))
    assert key("str_replace_editor", command="str_replace", path="/w/m.c", old_str="a") == ("path:/w/m.c", "edit", None)
    assert key("bash", command="cd /testbed && sed -n '10,40p' a/b.py") == ("path:/testbed/a/b.py", "view", (10, 40))
    assert key("bash", command="nl -ba d/x.py | head -n 250 | tail -n 50") == ("path:d/x.py", "view", (201, 250))
    assert key("bash", command="sed -i 's/a/b/' x/y.py") == ("path:x/y.py", "edit", None)
    assert key("bash", command="cat <<'EOF' > repro.py\nimport a; b | c\nEOF") == ("path:repro.py", "edit", None)
    assert key("bash", command="cat a.py | grep foo") == ("command:cat a.py | grep foo", "run", None)
    assert key("Grep", pattern="flash", path="/r/lib") == ("query:flash@/r/lib", "search", None)
    assert key("WebFetch", url="https://x.org/a", prompt="p") == ("url:https://x.org/a", "view", None)
    assert key("finish", message="done") is None
    assert shell_access("python   repro.py").key == "command:python repro.py"


def test_tool_rules_override_the_defaults_and_a_bad_rule_is_refused():
    rules = {"fetch_doc": "doc_id", "run_sql": "sql:run", "Read": ""}
    use = ToolUseBlock(id="x", name="fetch_doc", input={"doc_id": "D-7"})
    assert access_of(use, rules).key == "arg:doc_id=D-7"
    assert access_of(ToolUseBlock(id="y", name="run_sql", input={"sql": "select 1"}), rules).action == "run"
    assert access_of(ToolUseBlock(id="z", name="Read", input={"file_path": "/a"}), rules) is None
    with pytest.raises(ValueError, match="tool_rules|tool rule"):
        Policy(tool_rules={"t": "arg:delete"})


def test_superseded_views_and_repeated_runs_rank_stale_the_working_file_last():
    msgs = [text_message("u", "user", "Fix a.py."),
            call("1", "bash", command="cat a.py"), out("1", "old a"),
            call("2", "bash", command="python t.py"), out("2", "1 failed"),
            call("3", "bash", command="cat b.py"), out("3", "b"),
            call("4", "bash", command="cat a.py"), out("4", "a again"),
            call("5", "bash", command="sed -i 's/x/y/' a.py"), out("5", ""),
            call("6", "bash", command="python t.py"), out("6", "1 passed")]
    ranks = reuse_ranks(msgs, recent=2)
    assert ranks["1"] == STALE and ranks["2"] == STALE  # viewed again; run again
    assert ranks["4"] == WORKING  # the latest view of the file being edited
    assert ranks["3"] == COLD and ranks["6"] == COLD


def test_a_tool_loop_keeps_its_working_files_and_one_break_buys_many_calls():
    """Kind: a real mini-swe-agent loop at 32,000 tokens, summaries off (clearing alone). With the
    low watermark the last-resort clearing stops once ``shrink_calls`` calls of room are free,
    ranked by re-use; clearing everything instead (``shrink_calls=0``) loses working files the
    agent then edits."""
    from ctxwise.tokens import get_counter

    path = MSA.parent / "msa_sympy__sympy-13091.json"
    h, p, o, ev = drive(path, 32_000, summarize=False)  # clearing alone (a loop summary comes first otherwise)
    fresh = metrics.working_file_freshness(h, p, o)
    last = [e for call in ev for e in call if e.stage == "clearing" and e.detail.get("last_resort")]
    assert last and all(e.size_after > 0.5 * 32_000 for e in last)  # stopped at the low watermark
    h0, p0, o0, _ = drive(path, 32_000, summarize=False, shrink_calls=0)
    fresh0 = metrics.working_file_freshness(h0, p0, o0)
    assert fresh.value > fresh0.value and fresh.value >= 0.9
    assert metrics.edit_anchor_recall(h, p, o).value == 1.0
    assert metrics.cache_breaks(p, get_counter("o200k_base")).median >= 8
    assert not metrics.validator_errors(p, "openai", references=h)


def test_a_loop_summary_lists_every_file_edited_with_its_whole_path_and_commands_with_verdicts():
    """Kind: a real Claude Code loop summarized by the digest: every file an edit changed is
    named with its complete path (none cut mid-way), and a test run keeps its verdict."""
    from ctxwise.summarizers import DigestSummarizer
    from test_task_anchoring import CC

    conv = load(str(CC))
    msgs = list((conv[0] if isinstance(conv, list) else conv).messages)[2:200]
    text = DigestSummarizer().summarize(msgs, None, 3000).text
    edited = {metrics.edited_path(u) for m in msgs for u in m.tool_uses} - {None}
    assert len(edited) >= 8
    for path in edited:
        assert f"- {path}" in text, path
    log = ("<returncode>1</returncode>\n" + "x\n" * 50 + "FAILED tests/test_a.py::test_b\n== 1 failed, 9 passed in 2s ==\n")
    loop = [call("1", "bash", command="cd /testbed && python -m pytest tests"), out("1", log),
            call("2", "Task", description="Explore the parser", prompt="find it", subagent_type="Explore"),
            out("2", "The parser lives in src/parse.py.\n\nDetails follow.\n- `parse()` at src/parse.py:40 reads tokens\n"
                     + "filler line\n" * 200 + "- `lex()` at src/lex.py:12 splits them\n")]
    s = DigestSummarizer().summarize(loop, None, 3000).text
    assert "exit 1; 1 failed, 9 passed; FAILED tests/test_a.py::test_b" in s
    assert "Explore the parser: The parser lives in src/parse.py." in s
    assert "src/parse.py:40" in s and "src/lex.py:12" in s and "filler" not in s


def test_a_file_a_recent_command_names_is_being_worked_on():
    """A script written long ago and run again lately (``python3 repro.py``), or a test file a
    recent ``pytest`` names, is a working view when commands count (``by_commands``: what a
    summary keeps verbatim); not named lately, neither is. The latest whole write of a file
    ranks WORKING either way (its input is the file); a later whole write supersedes it."""
    def msgs(run: str) -> list[Message]:
        return [text_message("u", "user", "Fix it."),
                call("1", "bash", command="cat <<'EOF' > repro.py\nprint(1)\nEOF"), out("1", ""),
                call("2", "bash", command="cat tests/test_x.py"), out("2", "def test_x(): pass"),
                call("3", "bash", command="sed -i 's/pass/1/' tests/test_x.py"), out("3", ""),
                call("4", "bash", command="ls -la"), out("4", "b"),
                call("5", "bash", command=run), out("5", "1 passed")]
    named = msgs("cd /w && python3 repro.py && pytest -q tests/test_x.py")
    assert "1" in working_views(named, recent=2, by_commands=True)
    assert "1" not in working_views(named, recent=2)
    assert reuse_ranks(named, recent=2)["1"] == WORKING
    other = msgs("python3 other.py")
    assert "1" not in working_views(other, recent=2, by_commands=True)
    rewritten = other[:5] + [call("1b", "bash", command="cat <<'EOF' > repro.py\nprint(2)\nEOF"), out("1b", "")]
    assert reuse_ranks(rewritten, recent=2)["1"] == STALE
    # a relative word names the absolute key that ends with it, and only commands since the index count
    acc = {"v": (0, Access("path:/testbed/src/a.py", "view")), "r": (2, Access("command:pytest src/a.py", "run"))}
    assert run_named(acc, 1) == {"path:/testbed/src/a.py"} and run_named(acc, 3) == set()


def test_a_batch_of_views_mostly_edited_since_keeps_its_other_files_working():
    """Files read together in one call are read to be worked on together: once at least half
    of the batch's files are edited, its other latest views rank WORKING; a batch with fewer
    edited stays COLD."""
    def batch(edits: int) -> list[Message]:
        reads = Message(id="a1", role="assistant", blocks=[
            ToolUseBlock(id=f"r{k}", name="Read", input={"file_path": f"/p/f{k}.py"}) for k in range(4)])
        results = Message(id="t1", role="tool", blocks=[
            ToolResultBlock(tool_use_id=f"r{k}", name="Read", output=[TextBlock(text=f"body {k}")]) for k in range(4)])
        later = [m for k in range(edits) for m in (call(f"e{k}", "Edit", file_path=f"/p/f{k}.py", old_string="body",
                                                        new_string="x"), out(f"e{k}", "ok"))]
        fill = [m for k in range(3) for m in (call(f"l{k}", "bash", command=f"ls {k}"), out(f"l{k}", "x"))]
        return [text_message("u", "user", "Change f0-f3."), reads, results, *later, *fill]
    ranks = reuse_ranks(batch(2), recent=2)
    assert ranks["r0"] == WORKING and ranks["r3"] == WORKING
    ranks = reuse_ranks(batch(1), recent=2)
    assert ranks["r0"] == WORKING and ranks["r3"] == COLD
