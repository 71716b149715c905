"""ctxwise: keep the working context of tool-using LLM agents inside a budget.

    from ctxwise import ContextManager, Policy

    with ContextManager("sqlite:///ctxwise.db", Policy(budget=8000, unit="tokens")) as cm:
        session = cm.session("user-1", "chat-1")        # opens the session, or resumes it
        session.append_openai(messages)                 # what arrived since the last call
        payload = session.prepare().payload             # compacted, checked, ready to send

Everything a user imports is a name of this package (:data:`__all__`); the subpackages
``ctxwise.formats`` (read and write other message shapes), ``ctxwise.tokens`` (counters) and
``ctxwise.providers`` (profiles and the payload check) are public too. Names are imported on
first use (PEP 562), so ``import ctxwise`` loads neither SQLAlchemy nor a tokenizer.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    # the engine
    "ContextManager": "manager", "Session": "engine", "Prepared": "engine",
    # configuration
    "Policy": "policy", "RuntimeSettings": "policy",
    # messages and their blocks
    "Message": "messages", "Block": "messages", "TextBlock": "messages", "ThinkingBlock": "messages",
    "ToolUseBlock": "messages", "ToolResultBlock": "messages", "ImageBlock": "messages",
    "DocumentBlock": "messages", "SearchResultBlock": "messages", "AudioBlock": "messages",
    "RefusalBlock": "messages", "ProviderBlock": "messages",
    "text_message": "messages", "Marker": "messages",
    # what compaction reports and changes
    "CompactionEvent": "compaction.events",
    "Replace": "changes", "Hide": "changes", "InsertSummary": "changes",
    # stores: the protocols, the SQL and in-memory implementations, the rows they return
    "SessionStore": "store.protocols", "MemoryStore": "store.protocols", "BaseStore": "store.base", "SqlStore": "store",
    "InMemoryStore": "store", "open_store": "store", "ContextRow": "store.types", "SessionState": "store.types",
    "SessionInfo": "store.types", "TranscriptRow": "store.types",
    # the recall tool: fetch a cleared tool result back by its id
    "RECALL_TOOL_NAME": "recall", "recall_tool_schema": "recall", "recall_tool_output": "recall",
    "find_original": "recall",
    # summarizers and counters
    "Summarizer": "summarizers", "SummaryResult": "summarizers", "DigestSummarizer": "summarizers",
    "OpenAISummarizer": "summarizers",
    "TokenCounter": "tokens", "get_counter": "tokens", "Counter": "tokens", "register_counter": "tokens",
    "list_counters": "tokens",
    # errors (every one has a .hint)
    "CtxwiseError": "errors", "ContextBudgetExceeded": "errors", "BudgetReport": "errors",
    "FormatError": "errors", "PayloadInvalid": "errors", "Violation": "errors", "PolicyError": "errors",
    "SessionConflict": "errors", "SessionNotFound": "errors", "MissingExtra": "errors",
    "SummarizerError": "errors", "MemoryBusy": "errors", "MemoryEntryNotFound": "errors",
    "NotStorable": "errors", "MessageNotStorable": "errors", "NotNewestMessage": "errors", "PolicyMismatch": "errors", "StoreSchemaError": "errors", "StoreUnavailable": "errors",
    "ToolResultNotFound": "errors",
    # open sessions kept between calls (the service's and the middlewares')
    "SessionPool": "pool",
}

__all__ = [
    "AudioBlock", "BaseStore", "Block", "BudgetReport", "CompactionEvent", "ContextBudgetExceeded", "ContextManager", "ContextRow", "Counter",
    "CtxwiseError", "DigestSummarizer", "DocumentBlock", "FormatError", "Hide", "ImageBlock", "InMemoryStore", "InsertSummary",
    "Marker", "MemoryBusy", "MemoryEntryNotFound", "MemoryStore", "Message", "MessageNotStorable", "MissingExtra",
    "NotNewestMessage", "NotStorable", "OpenAISummarizer", "PayloadInvalid", "Policy", "PolicyError", "PolicyMismatch", "Prepared", "ProviderBlock",
    "RECALL_TOOL_NAME", "RefusalBlock", "Replace", "RuntimeSettings", "SearchResultBlock", "Session", "SessionConflict", "SessionInfo", "SessionNotFound", "SessionPool", "SessionState",
    "SessionStore", "SqlStore", "StoreSchemaError", "StoreUnavailable", "Summarizer", "SummarizerError", "SummaryResult", "TextBlock",
    "ThinkingBlock", "TokenCounter", "ToolResultBlock", "ToolResultNotFound", "ToolUseBlock", "TranscriptRow",
    "Violation", "__version__", "find_original", "get_counter", "list_counters", "open_store", "recall_tool_output",
    "recall_tool_schema", "register_counter", "text_message",
]
"""What users import; pinned by tests/test_meta.py (add a name there and in ``_EXPORTS``)."""


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'ctxwise' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value  # the next lookup is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:  # what type checkers and IDEs see
    from .changes import Hide, InsertSummary, Replace
    from .compaction.events import CompactionEvent
    from .engine import Prepared, Session
    from .manager import ContextManager
    from .errors import (
        BudgetReport,
        ContextBudgetExceeded,
        CtxwiseError,
        FormatError,
        MemoryBusy,
        MemoryEntryNotFound,
        MessageNotStorable,
        MissingExtra,
        NotNewestMessage,
        NotStorable,
        PayloadInvalid,
        PolicyError,
        PolicyMismatch,
        SessionConflict,
        SessionNotFound,
        StoreSchemaError,
        StoreUnavailable,
        SummarizerError,
        ToolResultNotFound,
        Violation,
    )
    from .messages import (
        AudioBlock,
        Block,
        DocumentBlock,
        ImageBlock,
        Marker,
        Message,
        ProviderBlock,
        RefusalBlock,
        SearchResultBlock,
        TextBlock,
        ThinkingBlock,
        ToolResultBlock,
        ToolUseBlock,
        text_message,
    )
    from .policy import Policy, RuntimeSettings
    from .summarizers import DigestSummarizer, OpenAISummarizer, Summarizer, SummaryResult
    from .pool import SessionPool
    from .recall import RECALL_TOOL_NAME, recall_tool_output, recall_tool_schema
    from .store import InMemoryStore, SqlStore, open_store
    from .store.base import BaseStore
    from .store.protocols import MemoryStore, SessionStore
    from .store.types import ContextRow, SessionInfo, SessionState, TranscriptRow
    from .tokens import Counter, TokenCounter, get_counter, list_counters, register_counter
