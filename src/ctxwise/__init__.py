"""ctxwise: keep the working context of tool-using LLM agents inside a budget.

    from ctxwise import ContextManager, Policy
    cm = ContextManager("sqlite:///ctxwise.db", Policy.preset("default", budget=8000, unit="tokens"))
    s = cm.session("user-1", "chat-1"); s.append(messages); payload = s.prepare().payload
"""

from .engine import ContextManager, Prepared, Session
from .errors import (
    ContextBudgetExceeded,
    CtxwiseError,
    FormatError,
    PayloadInvalid,
    PolicyError,
    SessionConflict,
    SessionNotFound,
)
from .messages import Message
from .policy import Policy

__version__ = "0.1.0"

__all__ = [
    "ContextManager", "Session", "Prepared", "Policy", "Message",
    "CtxwiseError", "ContextBudgetExceeded", "FormatError", "PayloadInvalid", "PolicyError",
    "SessionConflict", "SessionNotFound",
]
