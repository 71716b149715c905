"""Every error ctxwise raises on purpose. All derive from :class:`CtxwiseError`.

User mistakes (bad input files, invalid payloads, an impossible budget) are reported by the
CLI as one line and exit code 2, never as a traceback. Each error's ``str()`` names the place
(file, message index) and the rule that was broken.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


class CtxwiseError(Exception):
    """Base class of ctxwise's own errors."""


class FormatError(CtxwiseError, ValueError):
    """Input that cannot be read as any supported format, or breaks the format's rules.

    ``place`` names where (``file.json: conversation 3, message 12``), ``rule`` what is wrong.
    """

    def __init__(self, place: str, rule: str) -> None:
        self.place = place
        self.rule = rule
        super().__init__(f"{place}: {rule}")


@dataclass(frozen=True)
class Violation:
    """One broken provider rule: message ``index``, ``rule`` slug, explanation, and the
    provider's own error text where known."""

    index: int
    rule: str
    message: str
    provider_error: str | None = None

    def __str__(self) -> str:
        tail = f' (provider says: "{self.provider_error}")' if self.provider_error else ""
        return f"message {self.index}: [{self.rule}] {self.message}{tail}"


class PayloadInvalid(CtxwiseError, ValueError):
    """A payload that the target provider would reject. ``violations`` lists every one."""

    def __init__(self, provider: str, violations: list[Violation]) -> None:
        self.provider = provider
        self.violations = list(violations)
        lines = "; ".join(str(v) for v in self.violations[:5])
        more = f" (+{len(self.violations) - 5} more)" if len(self.violations) > 5 else ""
        super().__init__(f"{len(self.violations)} {provider} rule violation(s): {lines}{more}")


@dataclass
class BudgetReport:
    """Sizes behind a :class:`ContextBudgetExceeded`, in the policy's unit."""

    budget: int
    pinned: int
    total: int
    unit: str
    details: dict[str, Any] = field(default_factory=dict)


class ContextBudgetExceeded(CtxwiseError):
    """Pinned content alone (system prompt, current input, in-flight tool cycle, summary,
    facts, user memory) does not fit the budget: no valid request within budget exists."""

    def __init__(self, report: BudgetReport) -> None:
        self.report = report
        super().__init__(
            f"context budget exceeded: pinned content is {report.pinned} {report.unit}, "
            f"the whole context {report.total} {report.unit}, the budget {report.budget} {report.unit}"
        )


class SessionConflict(CtxwiseError):
    """Another writer changed the session since it was read (optimistic version check).
    Reload and retry."""


class SessionNotFound(CtxwiseError, KeyError):
    """No session with that ``(user_id, session_id)``."""

    def __str__(self) -> str:  # KeyError quotes its argument; keep the plain sentence
        return str(self.args[0]) if self.args else "session not found"


class PolicyError(CtxwiseError, ValueError):
    """A configuration value that is out of range or unknown."""
