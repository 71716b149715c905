"""Resource keys for agents whose tools are not Claude Code's (issue 26, What to build 2 and 4;
fresh-user report 26 items 2-5, 7, 12): a tool whose name says it writes is an edit, a rule's
key and a built-in key of one file are one key, a rule never makes a placeholder worse, the
argument shapes of OpenCode and Codex get keys, and tool rules come from the environment."""

from __future__ import annotations

import json

import pytest

from ctxwise import ContextManager, InMemoryStore, Policy
from ctxwise.errors import PolicyError
from ctxwise.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock, text_message
from ctxwise.summarizers import DigestSummarizer
from ctxwise.resources import COLD, STALE, WORKING, access_of, accesses_of, reuse_ranks, working_views, writes_files


def acc(name: str, rules: dict[str, str] | None = None, **inp: object) -> tuple[str, str, tuple[int, int] | None] | None:
    a = access_of(ToolUseBlock(id="x", name=name, input=dict(inp)), rules)
    return None if a is None else (a.key, a.action, a.lines)


def call(i: str, name: str, **inp: object) -> Message:
    return Message(id="a" + i, role="assistant", blocks=[ToolUseBlock(id=i, name=name, input=dict(inp))])


def out(i: str, text: str) -> Message:
    return Message(id="t" + i, role="tool", blocks=[ToolResultBlock(tool_use_id=i, name="t", output=[TextBlock(text=text)])])


# -- edit tools are recognized by kind, not by a list of names ------------------------------

@pytest.mark.parametrize("name", ["mcp__filesystem__write_file", "mcp__filesystem__edit_file", "mcp__my_srv__editFile",
                                  "replace_in_file", "multi_edit", "multiedit", "apply-edit", "insert_lines",
                                  "append_to_file", "create_file", "patch_file", "overwriteFile", "save_buffer",
                                  "StrReplace", "update_file", "delete_file"])
def test_a_tool_whose_name_says_it_writes_and_takes_a_path_is_an_edit(name):
    assert writes_files(name)
    assert acc(name, path="./src/app.py", old="a", new="b") == ("path:src/app.py", "edit", None)


@pytest.mark.parametrize("name", ["open_file", "read_file", "mcp__filesystem__read_text_file", "view_source",
                                  "list_directory", "mcp__git__show", "cat"])
def test_a_tool_whose_name_does_not_say_it_writes_is_a_view(name):
    assert not writes_files(name)
    assert acc(name, path="src/app.py") == ("path:src/app.py", "view", None)


def test_the_read_before_an_unseen_edit_tool_is_the_working_view_and_a_whole_write_supersedes_it():
    msgs = [text_message("u", "user", "Fix src/a.py."),
            call("1", "open_file", path="src/a.py"), out("1", "def f(): pass\n" * 50),
            call("2", "mcp__fs__edit_file", path="/repo/src/a.py", edits=[{"oldText": "f", "newText": "g"}]), out("2", "ok"),
            call("3", "open_file", path="src/b.py"), out("3", "def h(): pass\n" * 50),
            call("4", "mcp__fs__write_file", path="src/b.py", content="def h2(): pass\n"), out("4", "wrote")]
    ranks = reuse_ranks(msgs, recent=1)
    assert ranks["1"] == WORKING  # viewed, then edited: kept longest (it was STALE as a "view" superseded by the edit)
    assert ranks["3"] == STALE  # a whole write of b.py replaces what the view showed
    assert ranks["4"] == WORKING  # the whole write is now the latest text of b.py
    assert ranks["2"] == COLD  # an edit's one-line result is no view of the file
    assert {"1", "4"} <= working_views(msgs, recent=1)


# -- one key namespace --------------------------------------------------------------------

def test_a_rules_key_is_the_builtin_key_of_the_same_file_with_its_lines():
    rules = {"open_file": "path", "replace_in_file": "path:edit", "run": "cmd:run", "fetch_doc": "doc_id",
             "lookup": "q:search", "browse": "target"}
    assert acc("open_file", rules, path="./src/../src/a.py") == acc("Read", file_path="src/a.py") == ("path:src/a.py", "view", None)
    assert acc("open_file", rules, path="src/a.py", view_range=[10, 40]) == ("path:src/a.py", "view", (10, 40))
    assert acc("open_file", rules, path="src/a.py", offset=5, limit=10) == ("path:src/a.py", "view", (5, 14))
    assert acc("replace_in_file", rules, path="src/a.py", old="a", new="b") == ("path:src/a.py", "edit", None)
    assert acc("run", rules, cmd="cat ./src/a.py") == ("path:src/a.py", "view", None)
    assert acc("run", rules, cmd="sed -i 's/a/b/' src/a.py") == ("path:src/a.py", "edit", None)
    assert acc("run", rules, cmd="pytest  -q") == ("command:pytest -q", "run", None)
    assert acc("browse", rules, target="https://x.org/p") == ("url:https://x.org/p", "view", None)
    assert acc("lookup", rules, q="flash", path="lib") == ("query:flash@lib", "search", None)
    assert acc("fetch_doc", rules, doc_id="D-7") == ("arg:doc_id=D-7", "view", None)
    assert acc("fetch_doc", rules, doc_id={"nested": 1}) is None


def test_a_rule_for_one_tool_does_not_split_a_files_views_from_its_edits():
    rules = {"open_file": "path"}
    msgs = [text_message("u", "user", "Fix a.py."),
            call("1", "open_file", path="./src/a.py"), out("1", "x\n" * 50),
            call("2", "bash", command="sed -i 's/x/y/' src/a.py"), out("2", ""),
            call("3", "open_file", path="docs/old.md"), out("3", "y\n" * 50),
            call("4", "Read", file_path="docs/old.md"), out("4", "y\n" * 50)]
    ranks = reuse_ranks(msgs, rules, recent=1)
    assert ranks["1"] == WORKING  # the edited file's latest view (it was COLD: arg:path=./src/a.py != path:src/a.py)
    assert ranks["3"] == STALE  # superseded by the built-in Read of the same file


# -- a rule never makes a placeholder worse -------------------------------------------------

def _placeholders(rules: dict[str, str]) -> dict[str, str]:
    cm = ContextManager(InMemoryStore(), Policy(budget=5000, unit="tokens", tokenizer="estimate", provider="openai",
                                                tool_rules=rules, summarize=False))  # clearing, not a loop summary
    s = cm.session("u", "ph")
    s.append_openai([{"role": "system", "content": "agent"}, {"role": "user", "content": "Make the tests pass."}])

    def step(n: int, name: str, args: dict[str, object], result: str) -> None:
        s.prepare()
        s.append_openai([{"role": "assistant", "content": None, "tool_calls": [
            {"id": f"c{n}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}]}])
        s.append_openai([{"role": "tool", "tool_call_id": f"c{n}", "content": result}])

    step(0, "open_file", {"path": "src/calc.py", "view_range": [10, 40]},
         "\n".join(f"{i}\tclass Calc{i}:\n\tdef divide_{i}(self): pass" for i in range(10, 40)))
    step(1, "get_page", {"page_id": "p1", "path": "docs/p1.md"}, "def helper():\n  pass\n" + "Lorem ipsum " * 40)
    for n in range(2, 30):
        step(n, "open_file", {"path": f"docs/page{n}.md"}, "Lorem ipsum dolor sit amet " * 60)
    return {m["tool_call_id"]: m["content"] for m in s.prepare().payload if m.get("tool_call_id") in ("c0", "c1")}


def test_a_rule_keeps_the_path_line_range_and_defines_list_of_a_cleared_view():
    plain = _placeholders({})
    ruled = _placeholders({"open_file": "path", "get_page": "page_id"})
    assert "src/calc.py, lines 10-39; defines Calc10, divide_10" in plain["c0"]
    assert ruled["c0"] == plain["c0"]
    assert "docs/p1.md; defines helper" in plain["c1"] and "docs/p1.md; defines helper" in ruled["c1"]
    assert "docs/p1.md; defines helper" in _placeholders({"get_page": ""})["c1"]


# -- the argument shapes of OpenCode and Codex ---------------------------------------------

def test_opencode_read_edit_write_and_bash():
    # sst/opencode packages/opencode/src/tool/{read,edit,write,bash}.ts
    assert acc("read", filePath="/repo/src/app.py", offset=10, limit=50) == ("path:/repo/src/app.py", "view", (10, 59))
    assert acc("edit", filePath="/repo/src/app.py", oldString="a", newString="b") == ("path:/repo/src/app.py", "edit", None)
    assert acc("write", filePath="/repo/src/app.py", content="x") == ("path:/repo/src/app.py", "edit", None)
    assert acc("bash", command="cat /repo/src/app.py", description="show") == ("path:/repo/src/app.py", "view", None)
    assert acc("grep", pattern="divide", path="/repo/src", include="*.py") == ("query:divide@/repo/src", "search", None)
    msgs = [text_message("u", "user", "go"),
            call("1", "read", filePath="/repo/src/app.py"), out("1", "x\n" * 9),
            call("2", "write", filePath="/repo/src/app.py", content="y\n"), out("2", "ok")]
    assert reuse_ranks(msgs, recent=1) == {"1": STALE, "2": WORKING}  # write is a whole write: its input is the file


@pytest.mark.parametrize("arg", ["file_path", "filePath", "FilePath", "filepath", "file_name", "fileName", "target_file",
                                 "absolute_path", "relative_path", "notebook_path"])
def test_a_file_argument_is_read_whatever_its_spelling(arg):
    assert acc("view_it", **{arg: "./a/b.py", "offset": 3, "limit": 2}) == ("path:a/b.py", "view", (3, 4))
    assert acc("replace", **{arg: "a/b.py", "old_string": "x", "new_string": "y"}) == ("path:a/b.py", "edit", None)


@pytest.mark.parametrize("name", ["grep_files", "mcp__filesystem__search_files", "find_in_files", "ripgrep", "globFiles"])
def test_a_tool_whose_name_says_it_searches_for_a_pattern_is_a_search_not_a_view_of_its_directory(name):
    assert acc(name, pattern="def divide", path="src") == ("query:def divide@src", "search", None)


def test_codex_shell_takes_an_argv_list_run_in_its_workdir():
    # openai/codex codex-rs/core: the shell tool's "command" is an array of strings, "workdir" a string
    assert acc("shell", command=["bash", "-lc", "sed -n '1,80p' src/app.py"], workdir="/repo") == \
        ("path:/repo/src/app.py", "view", (1, 80))
    assert acc("shell", command=["bash", "-lc", "cd src && cat app.py"], workdir="/repo") == ("path:/repo/src/app.py", "view", None)
    assert acc("shell", command=["cat", "src/app.py"]) == ("path:src/app.py", "view", None)
    assert acc("shell", command=["sed", "-i", "s/a/b/", "src/app.py"]) == ("path:src/app.py", "edit", None)
    assert acc("shell", command=["pytest", "-q", "tests/test a.py"]) == ("command:pytest -q 'tests/test a.py'", "run", None)
    assert acc("shell", {"shell": "command"}, command=["bash", "-lc", "cat src/app.py"]) == ("path:src/app.py", "view", None)
    assert acc("shell", command=[1, 2]) is None
    # the string-command tools of newer Codex versions: shell_command (command), exec_command (cmd)
    assert acc("shell_command", command="nl -ba src/app.py | sed -n '5,9p'", workdir="/repo") == \
        ("path:/repo/src/app.py", "view", (5, 9))
    assert acc("exec_command", cmd="python -m pytest -q", workdir="/repo") == ("command:python -m pytest -q", "run", None)


PATCH = """*** Begin Patch
*** Update File: src/app.py
@@ def f():
-    return 1
+    return 2
*** Add File: src/new.py
+x = 1
*** Delete File: old/gone.py
*** Update File: src/mv.py
*** Move to: src/moved.py
@@
-a
+b
*** End Patch"""


def test_codex_apply_patch_edits_every_file_its_patch_names():
    got = accesses_of(ToolUseBlock(id="p", name="apply_patch", input={"input": PATCH}))
    assert [(a.key, a.action) for a in got] == [("path:src/app.py", "edit"), ("path:src/new.py", "edit"),
                                                ("path:old/gone.py", "edit"), ("path:src/mv.py", "edit"),
                                                ("path:src/moved.py", "edit")]
    heredoc = ToolUseBlock(id="h", name="shell", input={"command": ["bash", "-lc", f"apply_patch <<'EOF'\n{PATCH}\nEOF"],
                                                        "workdir": "/repo"})
    assert [a.key for a in accesses_of(heredoc)][:2] == ["path:/repo/src/app.py", "path:/repo/src/new.py"]
    ruled = accesses_of(ToolUseBlock(id="r", name="apply_patch", input={"input": PATCH}), {"apply_patch": "input:edit"})
    assert ruled == got  # a rule naming the patch argument keys the files, not the patch text
    # OpenCode's apply_patch takes the same patch as patchText (sst/opencode packages/opencode/src/tool/apply_patch.ts)
    opencode = ToolUseBlock(id="o", name="apply_patch", input={"patchText": PATCH})
    assert [a.key for a in accesses_of(opencode)] == [a.key for a in got]
    argv = ToolUseBlock(id="v", name="shell", input={"command": ["apply_patch", PATCH]})
    assert [a.key for a in accesses_of(argv)][:2] == ["path:src/app.py", "path:src/new.py"]
    # a file whose text merely mentions a patch is a whole write of that file, not a patch
    doc = ToolUseBlock(id="d", name="mcp__fs__write_file", input={"path": "NOTES.md", "content": "See:\n" + PATCH})
    assert [(a.key, a.action) for a in accesses_of(doc)] == [("path:NOTES.md", "edit")]
    msgs = [text_message("u", "user", "go"),
            call("1", "shell", command=["bash", "-lc", "cat src/app.py"]), out("1", "def f():\n    return 1\n"),
            call("2", "shell", command=["bash", "-lc", "cat src/mv.py"]), out("2", "a\n"),
            call("3", "apply_patch", input=PATCH), out("3", "Success. Updated the following files: ..."),
            call("4", "shell", command=["bash", "-lc", "cat docs/x.md"]), out("4", "y\n")]
    ranks = reuse_ranks(msgs, recent=1)
    assert ranks["1"] == WORKING and ranks["2"] == WORKING  # both files the patch edits
    assert ranks["4"] == WORKING and ranks["3"] == COLD


# -- tool rules from the environment, and bad rules ------------------------------------------

def test_tool_rules_from_the_environment_as_json():
    env = {"CTXWISE_TOOL_RULES": '{"open_file": "path", "run": "cmd:run"}'}
    assert Policy.from_env(env).tool_rules == {"open_file": "path", "run": "cmd:run"}
    for bad, says in (('{"open_file":', "CTXWISE_TOOL_RULES: not JSON"), ('["open_file"]', "got a JSON list"),
                      ('{"open_file": 3}', "expected a string rule"), ('{"t": "p:read"}', "'p:read' must be")):
        with pytest.raises(PolicyError) as e:
            Policy.from_env({"CTXWISE_TOOL_RULES": bad})
        assert "CTXWISE_TOOL_RULES" in str(e.value) and says in str(e.value)
        if "JSON" in says:
            assert '{"tool name": "argument"' in str(e.value)


@pytest.mark.parametrize("rules", [{"": "path"}, {"  ": "path"}])
def test_an_empty_tool_name_is_refused_naming_the_rule(rules):
    with pytest.raises(PolicyError, match="tool name is empty") as e:
        Policy(tool_rules=rules)
    assert repr(next(iter(rules))) in str(e.value)


def test_a_rules_value_of_the_wrong_shape_names_the_expected_shape():
    for bad in (["open_file"], "path", {"open_file": None}):
        with pytest.raises(PolicyError, match='"tool name": "argument" or "argument:action"'):
            Policy(tool_rules=bad)  # type: ignore[arg-type]


def test_a_loop_summary_names_every_file_a_patch_edits():
    msgs = [text_message("u", "user", "go"),
            call("1", "apply_patch", input=PATCH), out("1", "Success. Updated the following files: ..."),
            call("2", "shell", command=["bash", "-lc", "pytest -q"]), out("2", "1 passed\n<returncode>0</returncode>")]
    text = DigestSummarizer().summarize(msgs, None, 4000).text
    for path in ("src/app.py", "src/new.py", "old/gone.py", "src/mv.py", "src/moved.py"):
        assert path in text, (path, text)


def test_a_path_longer_than_the_limit_keeps_its_head_not_an_empty_item():
    from ctxwise.resources import Access, shown_values

    got = shown_values("def f():\n  pass\n", Access("path:" + "d/" * 400 + "x.py", "view"), 120)
    assert got.startswith("d/d/d/") and got.endswith("…") and len(got) <= 120


def test_opencode_read_offset_is_the_1_based_first_line():
    """OpenCode's ``read`` takes ``offset`` as "The line number to start reading from
    (1-indexed)" and prints each line as ``N: text`` from that number (anomalyco/opencode,
    formerly sst/opencode, packages/opencode/src/tool/read.ts; the same in opencode-ai 1.18.33).
    So ``offset=11, limit=10`` shows lines 11-20, and a later read of lines 1-20 covers it: the
    earlier view is stale. Read 0-based (lines 12-21) the later read would not cover it."""
    assert acc("read", filePath="/r/a.py", offset=11, limit=10) == ("path:/r/a.py", "view", (11, 20))
    assert acc("read", filePath="/r/a.py", offset=1, limit=3) == ("path:/r/a.py", "view", (1, 3))
    shown = "\n".join(f"{n}: line {n}" for n in range(11, 21))  # what OpenCode prints for it
    msgs = [text_message("u", "user", "go"),
            call("1", "read", filePath="/r/a.py", offset=11, limit=10), out("1", shown),
            call("2", "read", filePath="/r/a.py", offset=1, limit=20),
            out("2", "\n".join(f"{n}: line {n}" for n in range(1, 21)))]
    assert reuse_ranks(msgs, recent=1)["1"] == STALE
