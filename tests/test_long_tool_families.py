"""Edit-anchor recall and working-file freshness for agents whose tools are not Claude Code's
nor mini-swe-agent's: each tool family's own view and edit calls, on small built sessions (a
view of ``src/geo.py``, then an edit of it copying two of its lines), with the view whole
(both measures 1 of 1) and cleared (0 of 1). Before, the measures read only Claude Code /
``str_replace_editor`` / ``sed`` calls, so every case here measured nothing (0 needed)."""

from __future__ import annotations

from typing import Any

import pytest

from ctxwise import Policy
from ctxwise.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock, text_message
from ctxwise.replay import metrics

FILE = "import math\n\n\ndef area(r):\n    return 3.14 * r * r\n"
OLD = "def area(r):\n    return 3.14 * r * r"
PATCH = ("*** Begin Patch\n*** Update File: src/geo.py\n@@\n def area(r):\n-    return 3.14 * r * r\n"
         "+    return math.pi * r * r\n*** End Patch\n")
TASK = text_message("u", "user", "Use math.pi in area().")


def use(i: str, name: str, inp: dict[str, Any]) -> Message:
    return Message(id="a" + i, role="assistant", blocks=[ToolUseBlock(id=i, name=name, input=inp)])


def result(i: str, text: str, name: str) -> Message:
    return Message(id="t" + i, role="tool",
                   blocks=[ToolResultBlock(tool_use_id=i, name=name, output=[TextBlock(text=text)])])


FAMILIES: dict[str, tuple[str, dict[str, Any], str, str, dict[str, Any]]] = {
    # family: (view tool, its input, the view's text, edit tool, its input)
    "MCP filesystem": ("mcp__filesystem__read_file", {"path": "/repo/src/geo.py"}, FILE,
                       "mcp__filesystem__edit_file",
                       {"path": "/repo/src/geo.py", "edits": [{"oldText": OLD, "newText": "x"}]}),
    "Cline": ("read_file", {"path": "src/geo.py"}, FILE, "replace_in_file",
              {"path": "src/geo.py", "diff": f"------- SEARCH\n{OLD}\n=======\nx\n+++++++ REPLACE"}),
    "Roo apply_diff": ("read_file", {"path": "src/geo.py"}, FILE, "apply_diff",
                       {"path": "src/geo.py",
                        "diff": f"<<<<<<< SEARCH\n:start_line:4\n-------\n{OLD}\n=======\nx\n>>>>>>> REPLACE"}),
    "OpenCode": ("read", {"filePath": "/repo/src/geo.py", "offset": 1, "limit": 2000},
                 "\n".join(f"{n}: {x}" for n, x in enumerate(FILE.splitlines(), 1)),
                 "edit", {"filePath": "/repo/src/geo.py", "oldString": OLD, "newString": "x"}),
    "Codex apply_patch": ("shell", {"command": ["bash", "-lc", "cat src/geo.py"], "workdir": "/repo"}, FILE,
                          "apply_patch", {"input": PATCH}),
    "Codex shell argv": ("shell", {"command": ["cat", "src/geo.py"], "workdir": "/repo"}, FILE,
                         "shell", {"command": ["apply_patch", PATCH], "workdir": "/repo"}),
    "Gemini CLI": ("read_file", {"absolute_path": "/repo/src/geo.py"}, FILE, "replace",
                   {"file_path": "/repo/src/geo.py", "old_string": OLD, "new_string": "x"}),
}


def built(family: str) -> tuple[list[Message], list[Message], Message]:
    """``(history, the same with the view cleared, the edit call)`` for one family."""
    vname, vinp, text, ename, einp = FAMILIES[family]
    history = [TASK, use("v", vname, vinp), result("v", text, vname)]
    cleared = history[:2] + [result("v", '[result cleared; recall_tool_result("v")]', vname)]
    return history, cleared, use("e", ename, einp)


@pytest.mark.parametrize("family", FAMILIES)
def test_each_tool_family_is_measured(family):
    history, cleared, edit = built(family)
    assert metrics.edit_anchor_recall([history], [history], [edit]) == metrics.Recall(1, 1)
    assert metrics.working_file_freshness([history], [history], [edit]) == metrics.Recall(1, 1)
    assert metrics.edit_anchor_recall([history], [cleared], [edit]) == metrics.Recall(0, 1)
    assert metrics.working_file_freshness([history], [cleared], [edit]) == metrics.Recall(0, 1)


def test_an_edit_of_another_file_needs_no_freshness():
    history, _, _ = built("OpenCode")
    other = use("e", "edit", {"filePath": "/repo/src/other.py", "oldString": "y = 1", "newString": "y = 2"})
    assert metrics.working_file_freshness([history], [history], [other]).needed == 0
    assert metrics.edit_anchor_recall([history], [history], [other]).needed == 0  # never shown


def test_patch_anchors_are_each_hunks_old_lines():
    patch = ("*** Begin Patch\n*** Add File: new.py\n+print(1)\n*** Update File: a.py\n@@ def f():\n"
             "     x = 1\n-    y = 2\n+    y = 3\n@@\n-z = 0\n+z = 1\n*** End Patch")
    u = ToolUseBlock(id="p", name="apply_patch", input={"input": patch})
    assert metrics.edit_anchors(u) == ["    x = 1\n    y = 2", "z = 0"]
    assert metrics.edited_paths(u) == ["a.py"]  # an added file is written whole, not edited


def test_whole_writes_of_other_families_are_views_of_their_file():
    """MCP ``write_file`` and OpenCode ``write`` put the file's text in the call: the latest
    view of that file for a later edit (as Claude Code ``Write``)."""
    for name, inp in (("mcp__fs__write_file", {"path": "src/geo.py", "content": FILE}),
                      ("write", {"filePath": "src/geo.py", "content": FILE})):
        write = use("w", name, inp)
        history = [TASK, write, result("w", "ok", name)]
        edit = use("e", "edit", {"filePath": "src/geo.py", "oldString": OLD, "newString": "x"})
        assert metrics.written_path(write.blocks[0]) == "src/geo.py"  # type: ignore[arg-type]
        assert metrics.edited_paths(edit.blocks[0]) == ["src/geo.py"]  # type: ignore[arg-type]
        assert metrics.working_file_freshness([history], [history], [edit]) == metrics.Recall(1, 1)


def test_policy_tool_rules_name_the_file_of_a_custom_tool():
    """A tool the defaults cannot read (its file in ``doc``) is measured under the policy's
    rules: ``open_doc`` views ``doc``, ``patch_doc`` edits it."""
    rules = Policy(tool_rules={"open_doc": "doc", "patch_doc": "doc:edit"}).tool_rules
    history = [TASK, use("v", "open_doc", {"doc": "src/geo.py"}), result("v", FILE, "open_doc")]
    edit = use("e", "patch_doc", {"doc": "src/geo.py", "old_string": OLD, "new_string": "x"})
    assert metrics.working_file_freshness([history], [history], [edit]).needed == 0  # defaults: no file
    assert metrics.working_file_freshness([history], [history], [edit], rules) == metrics.Recall(1, 1)
    cleared = history[:2] + [result("v", "[cleared]", "open_doc")]
    assert metrics.working_file_freshness([history], [cleared], [edit], rules) == metrics.Recall(0, 1)


def test_shell_writes_other_than_sed_stay_unmeasured():
    """A shell ``echo … > f`` replaces the file (no copied text): no edit of a viewed file,
    as before (the shared long set's figures rest on it)."""
    echo = ToolUseBlock(id="x", name="bash", input={"command": "echo 'x = 1' > src/geo.py"})
    assert metrics.edited_paths(echo) == []


def test_the_replay_measures_under_its_policys_rules():
    """``ctxwise replay`` (replay_conversation) reads a custom tool's views and edits by the
    policy's ``tool_rules``, as clearing does: the edit of a file a custom tool showed is
    counted for freshness with the rules, and not without them."""
    from ctxwise import ContextManager
    from ctxwise.replay.runner import replay_conversation

    conv = [TASK, use("v", "open_doc", {"doc": "src/geo.py"}), result("v", FILE, "open_doc"),
            use("e", "patch_doc", {"doc": "src/geo.py", "before": "3.14", "after": "math.pi"}),
            result("e", "patched", "patch_doc"), text_message("done", "assistant", "Done.")]
    got = {}
    for rules in ({}, {"open_doc": "doc", "patch_doc": "doc:edit"}):
        policy = Policy.preset("default", budget=32_000, unit="tokens", provider="openai", tool_rules=rules)
        with ContextManager("memory://", policy) as cm:
            r = replay_conversation(cm, "u", "s", conv, name="t", source="built", format="ctxwise")
        got[bool(rules)] = (r.measures.fresh_supported, r.measures.fresh_needed)
    assert got == {False: (0, 0), True: (1, 1)}
