"""Memory that survives compaction: pinned session facts and long-term user memory.

* :mod:`.facts`: :func:`extract_facts` (rule-based, English and Chinese) and :class:`FactBook`
  (supersede by slot, :meth:`FactBook.render` into one pinned block, :func:`quote_facts`).
* :mod:`.llm`: :class:`LLMFactExtractor` and :class:`LLMMemoryDecider`, optional facts extractor
  and long-term memory decider over an OpenAI-compatible endpoint; both fall back to the rules on
  any failure, and the decider's ops are held to the rules' limits.
* :mod:`.user`: long-term memory decisions (:func:`decide` → ADD / SUPERSEDE / RETRACT / CLEAR /
  NOOP) and :func:`render_user_memory`.
* :mod:`.repo`: the ``user_memory`` table (list/add/supersede/retract/clear, a DB-level claim,
  :func:`extract_and_store`). Imported lazily; it needs :mod:`ctxwise.store`.
"""

from .facts import FACTS_HEADER, FACT_KINDS, Fact, FactBook, extract_facts, quote_facts, split_clauses
from .llm import LLMDecision, LLMExtraction, LLMFactExtractor, LLMMemoryDecider
from .user import MemoryEntry, Op, apply_ops, decide, is_instruction, render_user_memory, similarity

__all__ = [
    "Fact", "FactBook", "extract_facts", "quote_facts", "split_clauses", "FACT_KINDS", "FACTS_HEADER",
    "LLMFactExtractor", "LLMExtraction", "LLMMemoryDecider", "LLMDecision",
    "MemoryEntry", "Op", "decide", "apply_ops", "is_instruction", "render_user_memory", "similarity",
]
