"""Resource keys: what each tool call reads or changes, so clearing sees the working set.

A coding or research agent's tool results are views of a few resources (files, pages,
queries, commands) it keeps coming back to. Each ``tool_use`` gets an :class:`Access`: a
resource key (``path:src/app.py``, ``url:https://…``, ``query:…``, ``command:…``), what the
call did to it (``view``, ``edit``, ``search``, ``run``) and, for a view of part of a file, the
line range. :func:`reuse_ranks` ranks every result of a context by how likely the agent is to
need its body again (ARCHITECTURE.md, "Words": working set):

* ``STALE`` (0): a view superseded by a later view covering it or by a later write of the whole
  resource, an earlier run of a command run again, an earlier search repeated, the result of an
  edit followed by a later edit or view of the same file. Cleared first.
* ``COLD`` (1): everything else outside the working set.
* ``WORKING`` (2): the latest views of a resource the agent is working on (edited in this
  context, or viewed within the last :data:`RECENT_CALLS` model calls, or read in one call with
  other files at least half of which were edited since), and the latest whole write of a file
  (its input is the file). Kept longest.

Which argument names the resource comes from:

* Claude Code: ``Read`` (view ``file_path``), ``Edit`` / ``MultiEdit`` / ``Write`` /
  ``NotebookEdit`` (edit ``file_path`` / ``notebook_path``), ``Grep`` / ``Glob`` (search
  ``pattern`` under ``path``), ``WebFetch`` (view ``url``), ``WebSearch`` (search ``query``),
  ``Bash`` (the shell rules below), ``Task`` (run, by ``description``);
* SWE-agent / OpenHands ``str_replace_editor``: ``command`` ``view`` is a view of ``path``
  (``view_range`` its lines), ``str_replace`` / ``insert`` / ``create`` / ``undo_edit`` edit it;
* OpenCode ``read`` / ``edit`` / ``write`` (``filePath``; ``read``'s ``offset`` is 1-based, see
  :func:`_read_lines`; ``write`` a whole write), ``grep`` /
  ``glob`` (search ``pattern``), ``bash`` (``command``);
* Codex ``shell``: ``command`` is an argv list (``["bash", "-lc", S]`` is the script ``S``, any
  other list its words joined as a shell quotes them) run in ``workdir``; ``apply_patch``: an
  edit of every file its patch text names (``*** Update File: P``, ``*** Add File: P``,
  ``*** Delete File: P``, ``*** Move to: P``), also as ``apply_patch <<EOF`` in a shell;
* a shell command (mini-swe-agent's ``bash``, any ``command`` / ``cmd`` / ``script``
  argument): ``cat``, ``nl``, ``head``, ``tail``, ``sed -n 'A,Bp'`` of one file are views of it
  (with lines where the command names them), ``sed -i`` and ``cat > FILE`` / ``tee FILE`` edit
  it, anything else is a run of that command (a leading ``cd DIR &&`` resolves relative paths);
* any other tool: the first of ``file_path``, ``path``, ``filename``, ``notebook_path``,
  ``target_file``, ``file``, ``absolute_path``, ``relative_path``, ``target_path`` in any
  spelling (``filePath``, ``file_name``; :data:`_PATH_ARGS`) (a file: an edit when the
  tool's name says it writes, :func:`writes_files`, else a view with the lines of
  ``view_range`` / ``offset`` and ``limit``), ``url`` (a view) or ``query`` (a search) it has,
  else no key; a tool whose name says it searches (grep, glob, search, find) given a
  ``pattern`` is a search, as ``Grep``. An MCP ``mcp__server__`` prefix is dropped from the
  name first.

One namespace: a file is ``path:`` + its normalized path whichever tool or rule names it, and a
relative path is the one absolute path ending with it (:func:`unify_paths`).
``Policy.tool_rules`` overrides the defaults per tool name: ``{"open_file": "path"}`` keys a
tool's results by that argument (a view), ``"argument:action"`` names the action too
(``"path:edit"``, ``"sql:run"``), and ``""`` gives the tool no key. A rule's value is keyed as
the defaults key it: a path (a path-like argument name or a file name) as ``path:`` with the
call's lines, a URL as ``url:``, a search as ``query:``, a run (or a ``command`` / ``cmd`` /
``script`` argument, or an argv list) as the shell command's access; another value as
``arg:NAME=VALUE``.

What a view or a run showed, for placeholders and summaries (:func:`shown_values`,
:func:`log_verdicts`): a view of a file keeps its path, the lines it showed and the symbols it
defines; a command's output its exit status and verdict lines (pytest's ``2 failed, 69
passed``, the ``FAILED`` / ``ERROR`` test names, the first traceback or error line).
"""

from __future__ import annotations

import functools
import posixpath
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from .messages import Message, ToolUseBlock

__all__ = ["ACTIONS", "Access", "Action", "access_of", "accesses_of", "is_whole_write", "parse_rule", "patch_text",
           "reuse_ranks", "working_views", "writes_files"]
"""Public: a user checks which resource key a tool call gets under their ``Policy.tool_rules``
(``access_of(use, rules)``), and how a context's results rank (``reuse_ranks``)."""

Action = Literal["view", "edit", "search", "run"]
ACTIONS: tuple[str, ...] = ("view", "edit", "search", "run")

STALE, COLD, WORKING = 0, 1, 2
"""Re-use ranks (:func:`reuse_ranks`): cleared in this order, lowest first."""

RECENT_CALLS = 10
"""A resource viewed within this many latest model calls counts as being worked on."""

_VIEW_TOOLS = {"Read": "file_path", "NotebookRead": "notebook_path", "read_file": "path", "view_file": "path",
               "WebFetch": "url", "web_fetch": "url", "fetch": "url"}
_EDIT_TOOLS = {"Edit": "file_path", "MultiEdit": "file_path", "Write": "file_path",
               "NotebookEdit": "notebook_path", "write_file": "path", "edit_file": "path"}
_SEARCH_TOOLS = {"Grep": "pattern", "Glob": "pattern", "WebSearch": "query", "web_search": "query",
                 "search": "query", "grep": "pattern", "glob": "pattern"}
_EDITOR_EDITS = ("str_replace", "insert", "create", "undo_edit", "write")
_PATH_ARGS = ("filepath", "path", "filename", "notebookpath", "targetfile", "file", "absolutepath", "relativepath",
              "targetpath")
"""Argument names a tool's file comes from, first present wins, compared without ``_`` / ``-``
and case (:func:`_arg_name`): Claude Code ``file_path`` / ``notebook_path``, OpenCode
``filePath`` (``read`` / ``edit`` / ``write``, https://github.com/sst/opencode
packages/opencode/src/tool), SWE-agent / MCP filesystem / Cline ``path``, Cursor
``target_file``, Gemini CLI ``absolute_path``, ``file_name``."""
_DEFAULT_ARGS: tuple[tuple[str, Action], ...] = (*((a, "view") for a in _PATH_ARGS),
                                                 ("url", "view"), ("query", "search"))
_WRITE_WORDS = ("write", "edit", "replace", "patch", "create", "insert", "append", "overwrite", "save",
                "update", "modify", "delete")
"""A tool whose name has one of these as a word part (``write_file``, ``replace_in_file``,
``multiedit``, ``str_replace_based_edit_tool``, ``mcp__fs__edit_file``) changes the file it names."""
_WHOLE_WORDS = ("write", "create", "overwrite", "save")
_CONTENT_ARGS = ("content", "contents", "file_text", "text", "data")
"""With a :data:`_WHOLE_WORDS` name, an argument holding the file's whole new text (a whole write)."""
_MCP = re.compile(r"^mcp__.+?__(?=.)")
_NAME_PARTS = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")
_PATCH_FILE = re.compile(r"^\*\*\* (?:Update|Add|Delete) File: (.+?)\s*$|^\*\*\* Move to: (.+?)\s*$", re.M)
_PATCH_STARTS = ("*** Begin Patch", "*** Update File:", "*** Add File:", "*** Delete File:")
_SHELL_ARGS = ("command", "cmd", "script")
_CD = re.compile(r"^\s{0,16}cd\s{1,8}(\S{1,512})\s{0,8}(?:&&|;)\s{0,8}")
_VIEWERS = ("cat", "nl", "head", "tail", "less", "more", "bat")
_SED_RANGE = re.compile(r"^'?(\d{1,9})(?:,(\d{1,9}|\$))?p'?$")
_NUMBERED = re.compile(r"^\s{0,12}(\d{1,7})(?:\t|: |│|\||→| {1,2})", re.M)
_SYMBOL = re.compile(
    r"^(?:\s{0,12}\d{1,7}(?:\t|: |│|\||→| {1,2}))?\s{0,40}(?:export\s+)?(?:pub(?:\([\w:]+\))?\s+)?(?:async\s+)?"
    r"(?:def|defp|defmacro|class|function|fn|func|defmodule|struct|trait|interface|enum|impl)\s+"
    r"(?:\([^)]{0,80}\)\s*)?([A-Za-z_][\w.]{0,80}[?!]?)", re.M)
_COUNTS = re.compile(r"\b\d+ (?:failed|passed|errors?|skipped|xfailed|xpassed|deselected|warnings?)\b"
                     r"(?:, \d+ (?:failed|passed|errors?|skipped|xfailed|xpassed|deselected|warnings?))*"
                     r"|\bTests? run: \d+.{0,60}|\b\d+ tests?, \d+ failures?.{0,40}|\bOK \(\d+ tests?\)"
                     r"|^(?:FAILED|OK)(?: \(.{0,60}\))?$", re.M)
_FAILED = re.compile(r"^(?:FAILED|ERROR)\s+(\S{1,200})", re.M)
_ERROR = re.compile(r"^(?:E\s{1,8})?\s{0,8}(?:[\w.]{0,80}(?:Error|Exception|Failure)\b:?.{0,160}|error(?:\[\w+\])?:.{1,160}"
                    r"|fatal:.{1,160}|Traceback \(most recent call last\):)$", re.M)
_EXIT = re.compile(r"<returncode>\s*(-?\d{1,4})\s*</returncode>|\bexit(?:ed with)? (?:code|status)[:= ]\s*(-?\d{1,4})"
                   r"|\[Command finished with exit code (-?\d{1,4})\]", re.I)
_FILE = re.compile(r"^[\w.~/+@-]{0,1024}[\w-]\.[A-Za-z0-9_]{1,12}$|^[\w.~+@-]{0,256}/[\w.~/+@-]{1,1024}$")


@dataclass(frozen=True)
class Access:
    """What one tool call does to one resource: its ``key`` (``path:…``, ``url:…``,
    ``query:…``, ``command:…``, ``task:…``, or ``arg:NAME=…`` from a tool rule whose value is no
    path, URL, query or command), the ``action``, and for a
    partial view of a file the 1-based inclusive ``lines`` (None: whole or unknown)."""

    key: str
    action: Action
    lines: tuple[int, int] | None = None

    @property
    def whole(self) -> bool:
        """Whether the view shows the whole resource (no line range)."""
        return self.lines is None

    def covers(self, other: "Access") -> bool:
        """Whether this view shows at least the lines ``other`` showed (same key)."""
        if self.key != other.key:
            return False
        if self.lines is None:
            return True
        if other.lines is None:
            return False
        return self.lines[0] <= other.lines[0] and other.lines[1] <= self.lines[1]


def parse_rule(rule: str) -> tuple[str, Action] | None:
    """A ``Policy.tool_rules`` value as ``(argument, action)``; None for ``""`` (no key).
    Raises ``ValueError`` naming the rule when the action is not one of :data:`ACTIONS`."""
    if not rule:
        return None
    arg, _, action = rule.partition(":")
    action = action or "view"
    if not arg or action not in ACTIONS:
        raise ValueError(f"tool rule {rule!r} must be 'argument' or 'argument:action' with action one of "
                         f"{', '.join(ACTIONS)}, or '' for no key")
    return arg, action  # type: ignore[return-value]


def _path(p: str, cwd: str | None = None) -> str:
    p = p.strip().strip("'\"")
    if cwd and not p.startswith(("/", "~")):
        p = posixpath.join(cwd, p)
    return posixpath.normpath(p) if p else p


def access_of(use: ToolUseBlock, rules: Mapping[str, str] | None = None) -> Access | None:
    """The :class:`Access` of one call (see the module doc for the rules), or None when the
    call names no resource; the first of :func:`accesses_of` for a call that changes several
    files (a patch). ``rules``: ``Policy.tool_rules``."""
    got = accesses_of(use, rules)
    return got[0] if got else None


def accesses_of(use: ToolUseBlock, rules: Mapping[str, str] | None = None) -> tuple[Access, ...]:
    """Every :class:`Access` of one call, in the one key namespace of the module doc: one for
    most calls, one edit per file a patch names (``*** Update File: P`` / ``Add`` / ``Delete``
    / ``Move to``), none when the call names no resource. ``rules``: ``Policy.tool_rules``
    (a rule's argument names the resource; its value is keyed as the defaults key it: a path,
    a URL, a query or a shell command). Pure."""
    inp: Mapping[str, Any] = use.input if isinstance(use.input, Mapping) else {}
    if rules and use.name in rules:
        rule = parse_rule(rules[use.name])
        if rule is None:
            return ()
        patched = _patch_edits({rule[0]: inp.get(rule[0])}) if rule[1] != "search" else ()
        if patched:  # a rule naming a patch argument: the files the patch edits
            return patched
        got = _rule_access(rule[0], rule[1], inp)
        return (got,) if got is not None else ()
    known = _known_tool_accesses(_MCP.sub("", use.name), inp)
    if known is not None:
        return known
    patched = _patch_edits(inp)
    if patched:
        return patched
    for arg in _SHELL_ARGS:
        cmd = _command_text(inp.get(arg))
        if cmd:
            return _shell_accesses(cmd, _workdir(inp))
    searched = _search_of(use.name, inp)
    if searched is not None:
        return (searched,)
    writes = writes_files(use.name)
    named = {_arg_name(k): v for k, v in reversed(list(inp.items()))}  # the first spelling wins
    for arg, action in _DEFAULT_ARGS:
        v = named.get(arg)
        if isinstance(v, str) and v:
            if arg in _PATH_ARGS:
                return (Access(f"path:{_path(v)}", "edit") if writes else Access(f"path:{_path(v)}", "view", _lines_of(inp)),)
            return (Access(f"url:{v}" if arg == "url" else f"query:{v}", action),)
    return ()


def _known_tool_accesses(name: str, inp: Mapping[str, Any]) -> tuple[Access, ...] | None:
    """The accesses of a built-in tool (Claude Code, OpenCode search, a ``str_replace_editor``
    command), or None when ``name`` / ``inp`` is none of them."""
    for table, action in ((_VIEW_TOOLS, "view"), (_EDIT_TOOLS, "edit")):
        arg = table.get(name)
        if arg and isinstance(inp.get(arg), str) and inp[arg]:
            key = f"url:{inp[arg]}" if arg == "url" else f"path:{_path(inp[arg])}"
            return (Access(key, action, _read_lines(inp) if action == "view" else None),)  # type: ignore[arg-type]
    if name in _SEARCH_TOOLS:
        arg = _SEARCH_TOOLS[name]
        where = inp.get("path") or inp.get("glob") or inp.get("include") or ""
        return (Access(f"query:{inp.get(arg, '')}@{where}", "search"),) if inp.get(arg) else ()
    if name == "Task":
        what = inp.get("description") or inp.get("prompt")
        return (Access(f"task:{what}", "run"),) if isinstance(what, str) and what else ()
    editor = inp.get("command")
    if isinstance(editor, str) and isinstance(inp.get("path"), str) and (editor == "view" or editor in _EDITOR_EDITS):
        key = f"path:{_path(inp['path'])}"
        if editor == "view":
            return (Access(key, "view", _range(inp.get("view_range"))),)
        return (Access(key, "edit"),)
    return None


def _search_of(tool: str, inp: Mapping[str, Any]) -> Access | None:
    """A search by a tool whose name says it searches (a word part grep, glob, search or find:
    Codex ``grep_files``, MCP ``search_files``) given a ``pattern`` / ``regex``: keyed
    ``query:PATTERN@WHERE`` as ``Grep`` is; None otherwise."""
    what = next((inp[k] for k in ("pattern", "regex") if isinstance(inp.get(k), str) and inp[k]), None)
    if what is None:
        return None
    parts = [w.lower() for w in _NAME_PARTS.findall(_MCP.sub("", tool))]
    if not any(p.startswith(w) or p.endswith(w) for p in parts for w in ("grep", "glob", "search", "find")):
        return None
    where = inp.get("path") or inp.get("glob") or inp.get("include") or ""
    return Access(f"query:{what}@{where}", "search")


def _arg_name(name: str) -> str:
    """An argument name as :data:`_PATH_ARGS` spells it: ``filePath``, ``file_path`` and
    ``file-path`` are ``filepath``."""
    return name.replace("_", "").replace("-", "").lower()


def writes_files(tool: str) -> bool:
    """Whether a tool's name says it changes the file it names: one of its word parts (split
    at ``_``, ``-``, ``.`` and case changes, an MCP ``mcp__server__`` prefix dropped) is,
    starts or ends with write, edit, replace, patch, create, insert, append, overwrite, save,
    update, modify or delete (``write_file``, ``replace_in_file``, ``multiedit``,
    ``mcp__filesystem__edit_file``, ``apply_patch``). Pure."""
    parts = [w.lower() for w in _NAME_PARTS.findall(_MCP.sub("", tool))]
    return any(p == w or p.startswith(w) or p.endswith(w) for p in parts for w in _WRITE_WORDS)


def _rule_access(arg: str, action: Action, inp: Mapping[str, Any]) -> Access | None:
    """A tool rule's :class:`Access`: a value that is a path (a path-like argument name, or a
    file name) is ``path:`` with the call's lines, a URL ``url:``, a search ``query:V@where``,
    a run, or a ``command`` / ``cmd`` / ``script`` argument or an argv list, the shell
    command's access (``cat F`` a view of F, ``sed -i`` an edit, else ``command:``); other
    values ``arg:NAME=V``."""
    raw = inp.get(arg)
    if action == "run" or action != "search" and (arg in _SHELL_ARGS or isinstance(raw, (list, tuple))):
        cmd = _command_text(raw)
        if cmd:
            got = _shell_accesses(cmd, _workdir(inp))
            return got[0] if got else None
    if isinstance(raw, bool) or not isinstance(raw, (str, int, float)) or raw == "":
        return None
    v = str(raw)
    if action == "search":
        where = inp.get("path") or inp.get("glob") or inp.get("include") or ""
        return Access(f"query:{v}@{where}", "search")
    if re.match(r"^[a-z][a-z0-9+.-]{1,16}://", v):
        return Access(f"url:{v}", action)
    if isinstance(raw, str) and action in ("view", "edit") and (
            "path" in arg.lower() or "file" in arg.lower() or _FILE.match(v.strip())):
        return Access(f"path:{_path(v)}", action, _lines_of(inp) if action == "view" else None)
    return Access(f"arg:{arg}={v}", action)


def _command_text(v: Any) -> str:
    """A shell argument as one command line: a string as is; an argv list (Codex ``shell``'s
    ``command``) as the script of ``bash -lc S`` / ``sh -c S``, else its words joined as a
    shell would quote them; ``""`` for anything else."""
    if isinstance(v, str):
        return v if v.strip() else ""
    if isinstance(v, (list, tuple)) and v and all(isinstance(x, str) for x in v):
        if len(v) >= 3 and posixpath.basename(v[0]) in ("bash", "sh", "zsh", "dash") and v[1] in ("-c", "-lc", "-cl", "-ic"):
            return str(v[2])
        return shlex.join(v)
    return ""


def _workdir(inp: Mapping[str, Any]) -> str | None:
    """The directory a shell call runs in (Codex ``workdir``, ``cwd``), or None."""
    for arg in ("workdir", "cwd"):
        v = inp.get(arg)
        if isinstance(v, str) and v.strip():
            return v.strip()
    return None


def patch_text(inp: Mapping[str, Any]) -> str | None:
    """The patch text among a call's arguments, or None: a string argument that starts with
    the patch (``*** Begin Patch``, ``*** Update File:``, ...: Codex ``apply_patch``'s
    ``input``, OpenCode ``patch``'s ``patchText``), a shell ``apply_patch <<EOF`` (from
    ``*** Begin Patch`` on), or an argv list ``["apply_patch", PATCH]`` (Codex ``shell``).
    Format: https://github.com/openai/codex codex-rs/apply-patch. Pure."""
    for v in inp.values():
        if isinstance(v, (list, tuple)) and len(v) == 2 and all(isinstance(x, str) for x in v) \
                and posixpath.basename(v[0]) == "apply_patch" and v[1].lstrip().startswith(_PATCH_STARTS):
            return str(v[1]).lstrip()
        text = _command_text(v).lstrip()
        if text.startswith(_PATCH_STARTS):
            return text
        if text.startswith("apply_patch") and "*** Begin Patch" in text:
            return text[text.index("*** Begin Patch"):]
    return None


def _patch_edits(inp: Mapping[str, Any]) -> tuple[Access, ...]:
    """One edit per file the call's patch text (:func:`patch_text`) names: ``*** Update File:
    P``, ``*** Add File: P``, ``*** Delete File: P``, ``*** Move to: P``."""
    text = patch_text(inp)
    if text is None:
        return ()
    paths = [m.group(1) or m.group(2) for m in _PATCH_FILE.finditer(text)]
    cwd = _workdir(inp)
    return tuple(Access(f"path:{_path(p, cwd)}", "edit") for p in dict.fromkeys(paths))


def _lines_of(inp: Mapping[str, Any]) -> tuple[int, int] | None:
    """A view's line range from the common argument shapes: ``view_range`` ``[A, B]``, Cursor
    ``start_line_one_indexed`` / ``end_line_one_indexed_inclusive``, ``offset`` / ``limit``."""
    rng = _range(inp.get("view_range"))
    if rng is not None:
        return rng
    lo, hi = inp.get("start_line_one_indexed"), inp.get("end_line_one_indexed_inclusive")
    if isinstance(lo, int) and isinstance(hi, int):
        return (lo, hi)
    return _read_lines(inp)


def _read_lines(inp: Mapping[str, Any]) -> tuple[int, int] | None:
    """A read's ``offset`` / ``limit`` as a line range (None: the whole file): ``offset`` is
    the 1-based first line shown (``offset=10, limit=50`` shows lines 10-59; none or ``0``:
    from line 1). Claude Code ``Read``; OpenCode ``read`` (``filePath``, ``offset`` "The line
    number to start reading from (1-indexed)", an offset below 1 refused: anomalyco/opencode
    (formerly sst/opencode) packages/opencode/src/tool/read.ts, and the same schema text in
    the opencode-ai 1.18.33 binary CI runs; OpenCode releases before that change took a 0-based
    offset, one line off here)."""
    off, lim = inp.get("offset"), inp.get("limit")
    if not isinstance(off, int) and not isinstance(lim, int):
        return None
    start = off if isinstance(off, int) and off > 0 else 1
    return (start, start + lim - 1) if isinstance(lim, int) and lim > 0 else (start, 10**9)


def _range(v: Any) -> tuple[int, int] | None:
    if isinstance(v, (list, tuple)) and len(v) == 2 and all(isinstance(x, int) for x in v):
        lo, hi = int(v[0]), int(v[1])
        return (lo, hi if hi > 0 else 10**9)
    return None


def _shell_accesses(command: str, cwd: str | None = None) -> tuple[Access, ...]:
    """A shell command's accesses: the patch edits of ``apply_patch <<EOF`` (:func:`_patch_edits`),
    else :func:`shell_access` (``cwd``: the directory it runs in)."""
    patched = _patch_edits({"command": command, "workdir": cwd} if cwd else {"command": command})
    return patched or (shell_access(command, cwd),)


def shell_access(command: str, cwd: str | None = None) -> Access:
    """The :class:`Access` of one shell command (see the module doc): a view or an edit of one
    file, or a run keyed by the command itself (whitespace collapsed). Only the first line is
    read (a here-document's body is data), and a view piped through ``head`` / ``tail`` /
    ``sed -n`` has the lines that pipeline prints; through anything else it is a run.
    ``cwd``: the directory it runs in (relative paths resolve against it)."""
    rest = command.strip().split("\n", 1)[0]
    m = _CD.match(rest)
    if m:
        cwd, rest = posixpath.join(cwd or "", m.group(1).strip("'\"")) or None, rest[m.end():]
    stages = [_words(x) for x in re.split(r"\s*(?:\|\||&&|;)\s*", rest.strip(), maxsplit=1)[0].split("|")]
    got = _shell_file_access(stages[0], rest, cwd) if stages[0] else None
    if got is not None and len(stages) > 1 and got.action == "view":
        got = _piped(got, stages[1:])
    return got or Access("command:" + " ".join(command.split()), "run")


def _words(text: str) -> list[str]:
    """The shell words of ``text`` (whitespace-split when it does not parse), a new list."""
    return list(_split(text))


@functools.lru_cache(maxsize=4096)
def _split(text: str) -> tuple[str, ...]:
    """:func:`_words` kept per text (a session's calls are read again at every edit; bounded,
    least recently used dropped)."""
    try:
        return tuple(shlex.split(text, posix=True))
    except ValueError:
        return tuple(text.split())


def _count(words: list[str], default: int = 10) -> int | None:
    """The ``-n N`` / ``-N`` / ``-nN`` count of a ``head`` or ``tail`` (None when unreadable)."""
    for k, w in enumerate(words[1:], 1):
        if w == "-n" and k + 1 < len(words) and words[k + 1].lstrip("+").isdigit():
            return int(words[k + 1].lstrip("+"))
        if re.fullmatch(r"-n?\d+", w):
            return int(w.lstrip("-n"))
    return default if len(words) == 1 else None


def _piped(view: Access, stages: list[list[str]]) -> Access | None:
    """``view`` narrowed by the ``head`` / ``tail`` / ``sed -n`` stages it is piped through;
    None when another program filters it (then the call is keyed as a run)."""
    lo, hi = view.lines or (1, 10**9)
    for st in stages:
        tool = posixpath.basename(st[0]) if st else ""
        if tool == "head" and (n := _count(st)) is not None:
            hi = min(hi, lo + n - 1)
        elif tool == "tail" and (n := _count(st)) is not None and hi < 10**9:
            lo = max(lo, hi - n + 1)
        elif tool == "sed" and "-n" in st and (r := next((x for x in map(_SED_RANGE.match, st[1:]) if x), None)):
            a, b = int(r.group(1)), r.group(2)
            lo, hi = lo + a - 1, hi if b == "$" else min(hi, lo + int(b or a) - 1)
        else:
            return None
    return Access(view.key, "view", (lo, hi))


def _shell_file_access(words: list[str], text: str, cwd: str | None) -> Access | None:
    """A view (``cat`` / ``nl`` / ``head`` / ``tail`` / ``sed -n``) or an edit (``sed -i``,
    ``cat > FILE``, ``tee FILE``) of one file, or None."""
    tool = posixpath.basename(words[0])
    files = [w for w in words[1:] if not w.startswith("-") and _FILE.match(w)]
    if ">" in text and tool in ("cat", "echo", "printf"):
        target = text.rsplit(">", 1)[1].split()
        if target and _FILE.match(target[0].strip("'\"")):
            return Access(f"path:{_path(target[0], cwd)}", "edit")
    if tool == "tee" and files:
        return Access(f"path:{_path(files[-1], cwd)}", "edit")
    if tool == "sed":
        if any(w.startswith("-i") or w == "--in-place" for w in words[1:]) and files:
            return Access(f"path:{_path(files[-1], cwd)}", "edit")
        if "-n" in words and files:
            rng = next((r for r in (_SED_RANGE.match(w) for w in words[1:]) if r), None)
            lines = None
            if rng:
                hi = rng.group(2)
                lines = (int(rng.group(1)), 10**9 if hi == "$" else int(hi or rng.group(1)))
            return Access(f"path:{_path(files[-1], cwd)}", "view", lines)
        return None
    if tool in _VIEWERS and len(files) == 1:
        lines = None
        if tool == "head":
            lines = (1, _count(words) or 10)
        elif tool == "tail":
            lines = (10**9, 10**9)  # the end: covered only by a whole view
        return Access(f"path:{_path(files[0], cwd)}", "view", lines)
    return None


def unify_paths(keys: Sequence[str]) -> dict[str, str]:
    """One spelling per file: a relative ``path:`` key maps to the one absolute key that ends
    with it (``path:django/db/x.py`` → ``path:/testbed/django/db/x.py``); other keys to
    themselves."""
    paths = sorted({k for k in keys if k.startswith("path:")}, key=len, reverse=True)
    out = {k: k for k in keys}
    for k in paths:
        short = k[5:].lstrip("./")
        longer = [p for p in paths if len(p) > len(k) and p.endswith("/" + short)]
        if len(longer) >= 1:
            out[k] = out[longer[0]]
    return out


def call_accesses(messages: Sequence[Message], rules: Mapping[str, str] | None = None) -> list[tuple[str, int, Access]]:
    """``(tool_use_id, index of the assistant message that called it, Access)`` for every
    access of every call of ``messages`` (:func:`accesses_of`: a patch has one per file), in
    call order, with path keys unified (:func:`unify_paths`)."""
    raw: list[tuple[str, int, Access]] = []
    by = f"/{sorted(rules.items()) if rules else ''}"
    for i, m in enumerate(messages):
        if m.role != "assistant":
            continue
        for u in m.tool_uses:
            memo = m.memo()
            slot = f"ctxwise/accesses/{u.id}{by}"
            got = memo.get(slot)
            if got is None:
                got = memo[slot] = accesses_of(u, rules)
            raw.extend((u.id, i, a) for a in got)
    names = unify_paths([a.key for _, _, a in raw])
    return [(uid, i, Access(names[a.key], a.action, a.lines) if names[a.key] != a.key else a) for uid, i, a in raw]


def accesses(messages: Sequence[Message], rules: Mapping[str, str] | None = None) -> dict[str, tuple[int, Access]]:
    """``tool_use_id -> (index of the assistant message that called it, Access)`` for every
    call of ``messages`` that names a resource (its first access, :func:`call_accesses`), with
    path keys unified (:func:`unify_paths`)."""
    out: dict[str, tuple[int, Access]] = {}
    for uid, i, a in call_accesses(messages, rules):
        out.setdefault(uid, (i, a))
    return out


def run_named(acc: Mapping[str, tuple[int, Access]], since: int) -> set[str]:
    """The ``path:`` keys of ``acc`` (:func:`accesses`) that a run or search made at message
    index ``since`` or later names as a word of its command's first line (``python3 repro.py``,
    ``pytest tests/test_x.py``, ``grep -n f src/a.py``; a leading ``cd DIR &&`` resolves
    relative paths; a word and a key name one file when one ends with ``/`` + the other). Pure."""
    paths = {a.key[5:] for _, a in acc.values() if a.key.startswith("path:")}
    out: set[str] = set()
    for i, a in acc.values():
        if i < since or a.action not in ("run", "search") or not a.key.startswith("command:"):
            continue
        line = a.key[8:].split("\n", 1)[0]
        cwd = None
        m = _CD.match(line)
        if m:
            cwd, line = m.group(1).strip("'\""), line[m.end():]
        for w in _words(line):
            if w.startswith("-") or not _FILE.match(w):
                continue
            named = _path(w, cwd)
            out.update(p for p in paths if p == named or p.endswith("/" + named.lstrip("./"))
                       or named.endswith("/" + p.lstrip("./")))
    return {"path:" + p for p in out}


def reuse_ranks(messages: Sequence[Message], rules: Mapping[str, str] | None = None,
                recent: int = RECENT_CALLS) -> dict[str, int]:
    """``tool_use_id -> rank`` (:data:`STALE`, :data:`COLD`, :data:`WORKING`; see the module
    doc) for every call of ``messages``; calls with no resource key are ``COLD``."""
    acc = call_accesses(messages, rules)
    calls = [i for i, m in enumerate(messages) if m.role == "assistant"]
    recent_from = calls[-recent] if len(calls) >= recent else 0
    edited = {a.key for _, _, a in acc if a.action == "edit"}
    out: dict[str, int] = {}
    later: dict[str, list[tuple[str, Access]]] = {}
    whole = {u.id: is_whole_write(u) for m in messages if m.role == "assistant" for u in m.tool_uses}
    batch: dict[int, set[str]] = {}
    for _, i, a in acc:
        if a.action == "view" and a.key.startswith("path:"):
            batch.setdefault(i, set()).add(a.key)
    # a batch of views mostly edited since: the agent read those files to work on them together
    worked = {i for i, keys in batch.items() if len(keys) > 1 and 2 * len(keys & edited) >= len(keys)}
    for uid, i, a in reversed(acc):
        nxt = later.setdefault(a.key, [])
        if a.action == "view":
            superseded = any(b.action == "view" and b.covers(a) for _, b in nxt) or any(
                b.action == "edit" and whole[j] for j, b in nxt)
            if superseded:
                rank = STALE
            elif a.key in edited or i >= recent_from or i in worked:
                rank = WORKING
            else:
                rank = COLD
        elif a.action in ("run", "search"):
            rank = STALE if any(b.action == a.action for _, b in nxt) else COLD
        elif whole[uid] and not any(b.action == "view" and b.whole or b.action == "edit" and whole[j] for j, b in nxt):
            rank = WORKING  # the latest whole write of a file: its input is the file, as a view would be
        else:  # an edit's own result: its echo matters until the file is touched again
            rank = STALE if nxt else COLD
        out[uid] = max(out.get(uid, STALE), rank)  # a call of several files ranks by the one needed most
        nxt.append((uid, a))
    for m in messages:
        for u in m.tool_uses if m.role == "assistant" else ():
            out.setdefault(u.id, COLD)
    return out


def working_views(messages: Sequence[Message], rules: Mapping[str, str] | None = None,
                  recent: int = RECENT_CALLS, *, by_commands: bool = False) -> set[str]:
    """The ``tool_use_id`` s of the views the agent is working with: each a latest view of a
    resource being worked on (:data:`WORKING`, :func:`reuse_ranks`), or a write of a whole file
    (``Write``, a ``create`` command, a shell here-document) that no later view or write
    superseded (its input is then the file), that the agent edited after that view or write,
    or made within the last ``recent`` model calls; with ``by_commands`` also one of a file a
    command of those calls names (:func:`run_named`: ``python3 repro.py``). What a summary's
    cut keeps verbatim, within its bounds."""
    ranks = reuse_ranks(messages, rules, recent)
    acc = call_accesses(messages, rules)
    last_edit = {a.key: i for _, i, a in acc if a.action == "edit"}
    uses = {u.id: u for m in messages if m.role == "assistant" for u in m.tool_uses}
    wrote = {uid for uid, _, a in acc if a.action == "edit" and is_whole_write(uses[uid])}
    latest = {a.key: uid for uid, _, a in acc if a.action == "view" or uid in wrote}
    calls = [i for i, m in enumerate(messages) if m.role == "assistant"]
    recent_from = calls[-recent] if len(calls) >= recent else 0
    first: dict[str, tuple[int, Access]] = {}
    for uid, i, a in acc:
        first.setdefault(uid, (i, a))
    named = run_named(first, recent_from) if by_commands else set()
    return {uid for uid, i, a in acc
            if (ranks.get(uid) == WORKING and a.action == "view" or uid in wrote and latest.get(a.key) == uid)
            and (i >= recent_from or last_edit.get(a.key, -1) > i or a.key in named)}


def is_whole_write(use: ToolUseBlock) -> bool:
    """Whether the call writes a whole file, its text in the call's input: Claude Code
    ``Write``, a ``create`` command, a shell here-document (not a patch), or a tool whose name
    says it writes, creates, overwrites or saves (:func:`writes_files`) given the text as
    ``content`` / ``contents`` / ``file_text`` / ``text`` / ``data`` (MCP ``write_file``,
    OpenCode ``write``). Pure."""
    inp = use.input if isinstance(use.input, Mapping) else {}
    if use.name == "Write" or inp.get("command") == "create":
        return True
    cmd = next((_command_text(v) for k, v in inp.items() if k in _SHELL_ARGS), "")
    if "<<" in cmd.split("\n", 1)[0]:
        return not _patch_edits(inp)
    if not any(isinstance(inp.get(c), str) for c in _CONTENT_ARGS):
        return False
    parts = [w.lower() for w in _NAME_PARTS.findall(_MCP.sub("", use.name))]
    return any(p == w or p.startswith(w) or p.endswith(w) for p in parts for w in _WHOLE_WORDS)


def shown_values(body: str, acc: Access | None, limit: int) -> str:
    """What a view of code or a command's output ``body`` shows that a placeholder or a summary
    keeps, at most ``limit`` characters, cut between whole items; ``""`` when the call (its
    :class:`Access` ``acc``) is neither a view of a file nor a run or edit with a verdict.

    A view: ``P, lines A-B; defines f, g, C`` (the symbols a ``def`` / ``class`` /
    ``function`` / ``fn`` / ``func`` / ``defmodule`` / ``defp`` line defines; never a CSS class
    or a number). A run: ``exit 1; 2 failed, 69 passed; FAILED tests/t.py::test_x; error
    ValueError: bad`` (:func:`log_verdicts`). Pure: kept per ``(body, acc, limit)``, since a
    clearing that is held back builds the same placeholders again at the next call."""
    return _shown(body, acc, limit)


@functools.lru_cache(maxsize=2048)
def _shown(body: str, acc: Access | None, limit: int) -> str:
    """:func:`shown_values`, computed (bounded, least recently used dropped)."""
    if limit <= 0:
        return ""
    items: list[str] = []
    if acc is not None and acc.action == "view" and acc.key.startswith("path:"):
        nums = [int(x) for x in _NUMBERED.findall(body[:200_000])]
        lines = (min(nums), max(nums)) if nums else acc.lines
        items.append(acc.key[5:] + (f", lines {lines[0]}-{lines[1]}" if lines and lines[1] < 10**9 else ""))
        symbols = list(dict.fromkeys(_SYMBOL.findall(body[:200_000])))
        if symbols:
            items.append("defines " + ", ".join(symbols))
    elif acc is not None and acc.action in ("run", "edit") or _COUNTS.search(body) or _EXIT.search(body):
        items.extend(log_verdicts(body))
    else:
        return ""
    return _fit(items, limit)


def log_verdicts(body: str) -> list[str]:
    """A command output's verdict lines, in this order: ``exit N``, the test counts lines,
    the ``FAILED`` / ``ERROR`` names, the first error or traceback line."""
    out: list[str] = []
    ex = _EXIT.search(body)
    if ex:
        out.append("exit " + next(g for g in ex.groups() if g is not None))
    out.extend(dict.fromkeys(m.group(0).strip() for m in _COUNTS.finditer(body)))
    failed = list(dict.fromkeys(_FAILED.findall(body)))
    if failed:
        out.append("FAILED " + ", ".join(failed))
    err = _ERROR.search(body)
    if err:
        out.append("error " + err.group(0).strip())
    return out


def _fit(items: list[str], limit: int) -> str:
    """``items`` joined by ``"; "`` within ``limit`` characters: whole items first, then the
    first that does not fit cut between its comma-separated parts, then ``"; …"`` (a first
    part longer than ``limit``: its head and ``"…"``)."""
    out: list[str] = []
    used = 0
    for k, item in enumerate(items):
        if used + len(item) + 2 <= limit - 3:
            out.append(item)
            used += len(item) + 2
            continue
        parts = item.split(", ")
        kept: list[str] = []
        for part in parts:
            if used + len(part) + 2 > limit - 5:
                break
            kept.append(part)
            used += len(part) + 2
        if kept:
            out.append(", ".join(kept) + ", …")
        elif not out:  # one part longer than the limit (a very long path): its head
            return item[:max(0, limit - 1)] + "…"
        return "; ".join(out) + ("" if k == len(items) - 1 and kept == parts else "; …")
    return "; ".join(out)
