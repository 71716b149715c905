"""The user's task in a long tool loop: which user-role messages are the person's own
instructions, which are the agent harness's boilerplate, and which lines of an instruction
must stay verbatim (the *task lines*).

A coding or research agent runs one instruction through hundreds of tool calls. Its harness
also writes user-role messages: format-error replies (mini-swe-agent's "Please always provide
EXACTLY ONE action in triple backticks", SWE-agent's "Your output was not formatted
correctly", OpenHands' "Parameter 'command' is expected to be one of ..."), Claude Code's
"[Request interrupted by user]" and ``<task-notification>`` notices, and the same
paragraph again and again. Those are not what the user asked for: compaction keeps the
user's own instructions (:func:`instruction_indices`) in place, and the digest summarizer and
the pinned facts quote no harness text.

Rules, by kind (none names a session):

* **harness notice**: a text that starts with a known harness notice (:data:`HARNESS_NOTICES`:
  format errors, argument errors, interruptions) or is wrapped whole in a harness tag
  (:data:`HARNESS_TAGS`, e.g. ``<task-notification>…</task-notification>``);
* **repeated boilerplate**: a user-role block (at least :data:`REPEAT_MIN_CHARS` characters
  and :data:`REPEAT_MIN_LINES` lines) equal to an earlier user-role text of the same list once digits and spacing are ignored
  ("found 2 actions" = "found 0 actions"): a person does not paste the same paragraph twice,
  a harness does;
* **task lines** (:func:`task_lines`): every line of an instruction with something to say
  (no blank line, bare list marker ``1.``/``-``, fence or lone tag); when those lines are more
  than ``whole_chars`` characters, the head (``head_chars``) plus every line that states a
  protocol or a constraint (must, never, do not, only, exactly, submit, ...) and the lines of a
  code block such a line introduces (the submit command an agent must type at the end).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from .messages import Message
from .units import is_user_input

__all__ = [
    "HARNESS_NOTICES", "HARNESS_TAGS", "REPEAT_MIN_CHARS", "REPEAT_MIN_LINES", "first_instruction_run", "instruction_indices",
    "is_harness_text", "is_protocol_line", "latest_instruction_run", "task_lines",
]

HARNESS_NOTICES = (
    r"Please always provide EXACTLY ONE action",  # mini-swe-agent's format error
    r"Your output was not formatted correctly",  # SWE-agent's format error
    r"Your last output did not use any tool calls",  # SWE-agent (function calling)
    r"Parameter '[^']{1,64}' is expected to be one of",  # OpenHands' argument check
    r"\[Request interrupted by user",  # Claude Code
)
"""Starts of the user-role notices agent harnesses write themselves (format errors, argument
errors, interruptions), as regular expressions matched at the text's start."""
HARNESS_TAGS = ("task-notification", "system-reminder", "local-command-stdout", "local-command-stderr",
                "bash-stdout", "bash-stderr", "user-prompt-submit-hook")
"""Tags a harness wraps its own user-role notices in (Claude Code): a text that is one such
element, whole, is a notice. ``<command-message>`` / ``<command-args>`` hold the user's own
slash command and are not here."""
REPEAT_MIN_CHARS = 120
"""A repeated user-role text shorter than this may be a person's ("yes", "thanks"): only longer
repeats count as boilerplate."""
REPEAT_MIN_LINES = 3
"""... and only blocks of at least this many non-blank lines: a person's templated one-liner
("next question 3 ...") is no boilerplate."""

_NOTICE = re.compile(r"\A\s{0,64}(?:" + "|".join(HARNESS_NOTICES) + ")")
_DIGITS = re.compile(r"\d{1,256}")
_SPACE = re.compile(r"\s{1,256}")


def _tagged(text: str) -> bool:
    """Whether ``text`` is one harness-tag element (:data:`HARNESS_TAGS`), whole, followed at most
    by one line with no tag (Claude Code's "Read the output file ..." after a notification)."""
    t = text.strip()
    for tag in HARNESS_TAGS:
        close = f"</{tag}>"
        if t.startswith(f"<{tag}>") and close in t:
            after = t[t.rindex(close) + len(close):].strip()
            return "<" not in after and "\n" not in after
    return False


def _shape(text: str) -> str:
    """``text`` with digits and spacing ignored: what repeated boilerplate has in common."""
    return _SPACE.sub(" ", _DIGITS.sub("#", text)).strip()


def is_harness_text(text: str, earlier: Sequence[str] = ()) -> bool:
    """Whether a user-role ``text`` is the agent harness's own notice or boilerplate, not the
    user's words (see the module doc); ``earlier`` are the user-role texts before it in the same
    conversation (for the repetition rule)."""
    if _NOTICE.match(text) or _tagged(text):
        return True
    if _repeatable(text) and earlier:
        shape = _shape(text)
        return any(_repeatable(e) and _shape(e) == shape for e in earlier)
    return False


def _repeatable(text: str) -> bool:
    """Long enough to count as boilerplate when repeated: :data:`REPEAT_MIN_CHARS` characters
    and :data:`REPEAT_MIN_LINES` non-blank lines (a person's message repeated with another
    number in it is one line; a harness's reply is a block)."""
    return len(text) >= REPEAT_MIN_CHARS and sum(1 for x in text.splitlines() if x.strip()) >= REPEAT_MIN_LINES


def instruction_indices(messages: Sequence[Message]) -> list[int]:
    """Positions of the user's own instructions in ``messages``: user inputs (user role, no
    tool result, not a ctxwise block) that are not harness text. O(n) in the messages, with
    one shape per long user text."""
    out: list[int] = []
    shapes: set[str] = set()
    for i, m in enumerate(messages):
        if not is_user_input(m) or m.kind is not None:
            continue
        notice, shape = _classified(m)
        if notice:
            continue
        if shape is not None:
            if shape in shapes:
                continue
            shapes.add(shape)
        out.append(i)
    return out


def _classified(m: Message) -> tuple[bool, str | None]:
    """``(is a harness notice, its shape when long enough to count as a repeat)`` for a user
    message, memoised on the message (it never changes)."""
    memo = m.memo()
    got = memo.get("task/harness")
    if got is None:
        text = m.text
        got = memo["task/harness"] = (bool(_NOTICE.match(text) or _tagged(text)),
                                      _shape(text) if _repeatable(text) else None)
    return got


def _run_from(messages: Sequence[Message], own: list[int], k: int, step: int) -> list[int]:
    """The run of own instructions at ``own[k]`` extended by ``step`` (+1 later, -1 earlier)
    while the next own instruction is the very next message (no reply in between)."""
    run = [own[k]]
    while 0 <= k + step < len(own) and own[k + step] == run[-1] + step:
        k += step
        run.append(own[k])
    return sorted(run)


def first_instruction_run(messages: Sequence[Message]) -> list[int]:
    """The task: the first own instruction and the own instructions right after it with no
    reply between (a slash command and the skill prompt it expands to; a demonstration and
    the issue); ``[]`` when there is none."""
    own = instruction_indices(messages)
    return _run_from(messages, own, 0, 1) if own else []


def latest_instruction_run(messages: Sequence[Message]) -> list[int]:
    """The latest own instruction and the own instructions right before it with no reply
    between; ``[]`` when there is none."""
    own = instruction_indices(messages)
    return _run_from(messages, own, len(own) - 1, -1) if own else []


_LIST_MARKER = re.compile(r"^(?:\(?\d{1,3}[.)]|\(?[a-zA-Z][.)]|[-*•+>#]{1,16}|\d{1,3})$")
_LONE_TAG = re.compile(r"^</?[A-Za-z][\w-]{0,64}>$")
_PROTOCOL = re.compile(
    r"\b(?:must|never|do not|don't|dont|does not|cannot|can't|only|always|exactly|required?|requirements?|"
    r"should(?: not)?|shall|make sure|ensure|important|critical|forbidden|avoid|submit|submission|"
    r"before|after|until|unless|instead|minimal|no more than|at most|at least)\b",
    re.IGNORECASE)
_FENCE = re.compile(r"^\s{0,64}(?:```|~~~)")


def is_protocol_line(line: str) -> bool:
    """Whether ``line`` states a protocol or a constraint (must, never, do not, only, exactly,
    submit, before, unless, ...)."""
    return bool(_PROTOCOL.search(line))


def _meaningful(line: str) -> bool:
    s = line.strip()
    return any(ch.isalnum() for ch in s) and not _LIST_MARKER.match(s) and not _LONE_TAG.match(s)


def task_lines(text: str, *, whole_chars: int = 4000, head_chars: int = 1500) -> list[str]:
    """The lines of an instruction that must stay verbatim, stripped, in order, each once.

    Every meaningful line (see the module doc) when they total at most ``whole_chars``
    characters; else the lines of the first ``head_chars`` characters plus every protocol or
    constraint line (:func:`is_protocol_line`) and the lines of each code block right after
    such a line (a submit command). Characters are counted on the stripped lines."""
    raw = text.splitlines()
    lines: list[str] = []
    keep: list[bool] = []
    intro = False  # the last meaningful line outside a block states a protocol
    in_block = False
    for line in raw:
        if _FENCE.match(line):
            in_block = not in_block
            continue
        s = line.strip()
        if not _meaningful(s):
            continue
        protocol = is_protocol_line(s)
        keep.append(protocol or (in_block and intro))
        lines.append(s)
        if not in_block:
            intro = protocol
    if sum(len(s) for s in lines) <= whole_chars:
        return _once(lines)
    out: list[str] = []
    used = 0
    for s, k in zip(lines, keep):
        if used < head_chars:
            used += len(s)
            out.append(s)
        elif k:
            out.append(s)
    return _once(out)


def _once(lines: list[str]) -> list[str]:
    seen: set[str] = set()
    out = []
    for s in lines:
        if s not in seen:
            seen.add(s)
            out.append(s)
    return out
