"""Memory that survives compaction: pinned session facts and long-term user memory.

* :mod:`.facts`: :func:`extract_facts` (rule-based, English and Chinese) and :class:`FactBook`
  (supersede by slot, :meth:`FactBook.render` into one pinned block, :func:`quote_facts`).
* :mod:`.llm`: :class:`LLMFactExtractor`, an optional extractor over an OpenAI-compatible endpoint
  that falls back to the rules on any failure.
* :mod:`.user`: long-term memory decisions (:func:`decide` → ADD / SUPERSEDE / RETRACT / CLEAR /
  NOOP) and :func:`render_user_memory`.
* :mod:`.repo`: the ``user_memory`` table (list/add/supersede/retract/clear, a DB-level claim,
  :func:`extract_and_store`). Imported lazily; it needs :mod:`ctxwise.store`.
"""

from .facts import FACTS_HEADER, FACT_KINDS, Fact, FactBook, extract_facts, quote_facts, split_clauses
from .llm import LLMExtraction, LLMFactExtractor
from .user import MemoryEntry, Op, apply_ops, decide, is_instruction, render_user_memory, similarity

__all__ = [
    "Fact", "FactBook", "extract_facts", "quote_facts", "split_clauses", "FACT_KINDS", "FACTS_HEADER",
    "LLMFactExtractor", "LLMExtraction",
    "MemoryEntry", "Op", "decide", "apply_ops", "is_instruction", "render_user_memory", "similarity",
]
