"""Every error ctxwise raises on purpose. All derive from :class:`CtxwiseError`.

Each error says what went wrong in its ``str()`` (one line naming the place, e.g. the file or
the message index, and the rule that was broken) and what to do about it in ``hint`` (a
traceback shows it under the message, as an exception note). User mistakes (bad input files,
invalid payloads, an impossible budget) are reported by the CLI as the one line
``error: <message> (hint: <hint>)`` and exit code 2, never as a traceback.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


class CtxwiseError(Exception):
    """Base class of ctxwise's own errors.

    ``hint`` says what to do: every subclass sets one, ``hint=`` overrides it for one raise.
    ``str(error)`` is the message alone; :func:`with_hint` gives both on one line.
    """

    hint: str = "see the message; every ctxwise error names the place and the rule"

    def __init__(self, *args: Any, hint: str | None = None) -> None:
        super().__init__(*args)
        if hint:
            self.hint = hint
        if self.hint:
            self.add_note(f"hint: {self.hint}")


def with_hint(error: BaseException) -> str:
    """``<message> (hint: <hint>)``: the one line the CLI prints for a ctxwise error."""
    hint = getattr(error, "hint", "")
    return f"{error} (hint: {hint})" if hint else str(error)


class FormatError(CtxwiseError, ValueError):
    """Input that cannot be read as any supported format, or breaks the format's rules.

    ``place`` names where (``file.json: conversation 3, message 12``), ``rule`` what is wrong.
    """

    hint = ("give one of the supported shapes (see ctxwise.formats: OpenAI chat, Anthropic, Responses items, "
            "AgentScope, tau-bench); `ctxwise inspect FILE` shows how a file is read")

    def __init__(self, place: str, rule: str, *, hint: str | None = None) -> None:
        self.place = place
        self.rule = rule
        super().__init__(f"{place}: {rule}", hint=hint)


@dataclass(frozen=True)
class Violation:
    """One broken provider rule: message ``index``, ``rule`` slug, explanation, and the
    provider's own error text where known."""

    index: int
    rule: str
    message: str
    provider_error: str | None = None
    where: str = ""
    """Where the message came from when ``index`` alone could mislead: for an append, the
    item's position in the appended batch and its id (``index`` is its position in the
    session's context)."""

    def __str__(self) -> str:
        tail = f' (provider says: "{self.provider_error}")' if self.provider_error else ""
        where = f" ({self.where})" if self.where else ""
        return f"message {self.index}{where}: [{self.rule}] {self.message}{tail}"


class PayloadInvalid(CtxwiseError, ValueError):
    """A payload that the target provider would reject. ``violations`` lists every one."""

    hint = ("fix the messages named by index before sending or appending them (nothing was stored); "
            "the rule slugs are explained in ctxwise.providers.rules")

    def __init__(self, provider: str, violations: list[Violation], *, hint: str | None = None) -> None:
        self.provider = provider
        self.violations = list(violations)
        lines = "; ".join(str(v) for v in self.violations[:5])
        more = f" (+{len(self.violations) - 5} more)" if len(self.violations) > 5 else ""
        super().__init__(f"{len(self.violations)} {provider} rule violation(s): {lines}{more}", hint=hint)


@dataclass
class BudgetReport:
    """Sizes behind a :class:`ContextBudgetExceeded`, in the policy's unit (``unit``).

    ``budget``: the policy's effective budget (``budget - reserve_output``); ``pinned``: the
    size no stage can reduce; ``total``: the whole context. ``parts``: the whole context by
    part, in order (``system``, ``tools`` (tool schemas and the request's fixed framing),
    ``user memory``, ``pinned facts``, ``summary``, ``history`` (what stages may reduce),
    ``user input``, ``in-flight calls``; parts of size 0 left out); they sum to ``total``.
    ``fits_at``: the smallest ``Policy.budget`` (output reserve included) at whose hard limit
    the pinned content fits, None when unknown. ``culprit``: the message that takes the most
    room, when one does (``index`` in the session's context, ``id``, ``part``, ``size``,
    ``newest``: whether it is the newest message, the one ``Session.pop()`` removes;
    ``compaction``: whether it holds a provider's compaction block or item, which no stage
    folds or trims).
    ``details``: ``hard_limit`` (the hard limit as a size), ``events`` (stages that ran),
    ``messages`` (context length), ``early`` (raised before any stage ran)."""

    budget: int
    pinned: int
    total: int
    unit: str
    details: dict[str, Any] = field(default_factory=dict)
    parts: dict[str, int] = field(default_factory=dict)
    fits_at: int | None = None
    culprit: dict[str, Any] | None = None


class ContextBudgetExceeded(CtxwiseError):
    """Pinned content alone (system prompt, current input, in-flight tool cycle, summary,
    facts, user memory) does not fit the budget: no valid request within budget exists.

    ``report`` (:class:`BudgetReport`) has the sizes by part; the message lists them and the
    hint says how to get out for this case (which message to pop, which budget would fit)."""

    hint = ("raise Policy.budget or lower reserve_output, or send less pinned content (a shorter system "
            "prompt or user input, smaller tool results in the current call)")

    def __init__(self, report: BudgetReport, *, hint: str | None = None) -> None:
        self.report = report
        limit = (report.details or {}).get("hard_limit")
        under = (f" (its hard limit {limit} {report.unit})"
                 if isinstance(limit, int) and limit != report.budget else "")
        parts = ", ".join(f"{name} {size}" for name, size in report.parts.items())
        by_part = f"; by part ({report.unit}): {parts}" if parts else ""
        super().__init__(
            f"context budget exceeded: pinned content is {report.pinned} {report.unit}, "
            f"the whole context {report.total} {report.unit}, the budget {report.budget} {report.unit}{under}"
            f"{by_part}",
            hint=hint,
        )


class SessionConflict(CtxwiseError):
    """Another writer changed the session since it was read (optimistic version check).
    Reload and retry."""

    hint = "another writer changed this session: open it again with cm.session(user_id, session_id) and retry"


class NotNewestMessage(CtxwiseError, ValueError):
    """A store write that names the newest stored message (``pop`` / ``amend`` with
    ``message_id``) found another message newest: typically a reply left out of the context
    (:mod:`ctxwise.normalize`) stored after it. Nothing was written. ``newest`` is the id the
    store holds as newest, ``given`` the id the caller named."""

    hint = "open the session again (cm.session(...)) and retry: the newest stored message is another one"

    def __init__(self, op: str, newest: str | None, given: str | None) -> None:
        self.op, self.newest, self.given = op, newest, given
        super().__init__(f"{op}: the last appended message is {newest!r}, not {given!r}")


class SessionNotFound(CtxwiseError, KeyError):
    """No session with that ``(user_id, session_id)``."""

    hint = ("check the user_id and session_id (sessions are scoped by user), or open it without create=False "
            "to start it")

    def __str__(self) -> str:  # KeyError quotes its argument; keep the plain sentence
        return str(self.args[0]) if self.args else "session not found"


class ToolResultNotFound(CtxwiseError, KeyError):
    """No tool result with that ``tool_use_id`` in the session (the recall tool's lookup;
    scoped by user: another user's result is not found)."""

    hint = ("pass a tool_use_id a placeholder in the context names (recall_tool_result); results of other "
            "sessions or users are not reachable")

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "tool result not found"


class PolicyError(CtxwiseError, ValueError):
    """A configuration value that is out of range or unknown."""

    hint = ("see the field's description (Policy.model_fields[name].description) or the README's "
            "Configuration section")


class MissingExtra(CtxwiseError, ImportError):
    """An optional part of ctxwise was used without its dependencies installed.

    ``extra`` is the name to install (``pip install 'ctxwise[extra]'``), ``package`` the missing
    import. Raised where the part is used (opening a PostgreSQL store, a real tokenizer, the
    OpenAI summarizer, the CLI), never at ``import ctxwise``.
    """

    hint = "install the extra the message names: pip install 'ctxwise[NAME]' (or 'ctxwise[all]')"

    def __init__(self, what: str, extra: str, package: str) -> None:
        self.extra = extra
        self.package = package
        super().__init__(f"{what} needs {package!r}, which is not installed",
                         hint=f"pip install 'ctxwise[{extra}]'")


class SummarizerError(CtxwiseError):
    """A summarizer could not produce a usable summary (timeout, refusal, bad finish...).
    The pipeline records a ``summarizer_failed`` event and goes on with the other stages."""

    hint = ("the other stages keep the context in budget meanwhile; check the summarizer's endpoint, key and "
            "model (summarizer_base_url, OPENAI_API_KEY, summarizer_model) or use summarizer='digest'")


class MemoryBusy(CtxwiseError):
    """Another extraction held the user's memory claim for longer than the wait allowed.
    Retry later, or raise ``wait_s``."""

    hint = "another process is updating this user's memory: retry later, or raise wait_s"


class MemoryEntryNotFound(CtxwiseError, KeyError):
    """No active entry with that id for that user (ids of other users are never visible)."""

    hint = "`ctxwise memory list --user USER` shows the active entries and their ids"

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "memory entry not found"


class NotStorable(CtxwiseError, ValueError):
    """Input the store cannot hold (a key, an event, a message), refused before anything is
    written, identically on every backend."""

    hint = "nothing was stored; fix what the message names and send it again"


class MessageNotStorable(NotStorable):
    """A message the store cannot hold as it is, refused before anything is written: ``index``
    is its position (in the batch for the store, in the session for ``Session.append``),
    ``rule`` one of ``id-too-long`` (message or tool-call id over 255 characters),
    ``nul-character`` (U+0000: PostgreSQL cannot store it in text), ``lone-surrogate`` (text
    decoded with ``errors="surrogateescape"``: not valid Unicode), ``duplicate-message-id``,
    ``not-json``, ``too-deep`` (a tool input, ``metadata`` or a block's ``extra`` nested deeper
    than :data:`ctxwise.nesting.MAX_DEPTH`). Every backend refuses the same messages."""

    hint = ("nothing was stored: remove NUL characters, decode bytes with errors='replace', keep ids at most "
            "255 characters (hash long ones), use a new id for a new message, send deeply nested data as text")

    def __init__(self, index: int, rule: str, message: str) -> None:
        self.index = index
        self.rule = rule
        self.detail = message
        super().__init__(f"message {index}: [{rule}] {message}")

    def at(self, base: int) -> "MessageNotStorable":
        """The same error with the index shifted by ``base`` (batch position → session position)."""
        return MessageNotStorable(self.index + base, self.rule, self.detail)


class PolicyMismatch(CtxwiseError, ValueError):
    """A session was reopened with a policy that sets a session setting to another value than
    the one stored with the session.

    ``fields`` maps each differing policy field (flat name, ``clear_at``) to ``(stored, given)``;
    the message names them by stage (``clearing.clear_at``). Process settings
    (:class:`~ctxwise.policy.RuntimeSettings`) and fields the given policy leaves unset are
    never compared."""

    hint = ("pass migrate_policy=True to session() to adopt the given settings (recorded as a "
            "policy_migrated event), or leave those fields unset (a ContextManager built without a "
            "policy uses the stored one)")

    def __init__(self, session_id: str, fields: dict[str, tuple[Any, Any]], *,
                 names: dict[str, str] | None = None) -> None:
        """``names``: the name to show for a field (``{"clear_at": "clearing.clear_at"}``;
        a field not in it is shown as it is)."""
        self.session_id = session_id
        self.fields = dict(fields)
        names = names or {}
        shown = ", ".join(f"{names.get(k, k)}: stored {a!r}, given {b!r}"
                          for k, (a, b) in list(self.fields.items())[:6])
        more = f" (+{len(self.fields) - 6} more)" if len(self.fields) > 6 else ""
        super().__init__(f"session {session_id!r} was created with other session settings ({shown}{more}); "
                         "pass migrate_policy=True to adopt them, or leave them unset to keep the stored ones")


class StoreSchemaError(CtxwiseError):
    """The database holds a ctxwise schema this version cannot use (written by a newer ctxwise,
    or a table in the way)."""

    hint = "upgrade ctxwise (pip install -U ctxwise), or point --db (or the schema option) at another database"


class StoreUnavailable(CtxwiseError):
    """The store could not be opened: a URL SQLAlchemy cannot parse or has no driver for, or a
    database that refuses the connection. The message names the URL's scheme and the cause."""

    hint = ("give a SQLAlchemy URL such as sqlite:///ctxwise.db or postgresql+psycopg://user@host/db "
            "(pip install 'ctxwise[postgres]' for PostgreSQL), or pass store=InMemoryStore()")

