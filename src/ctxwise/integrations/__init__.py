"""Drop-in integrations with agent frameworks, one module per framework, each an optional extra
(``pip install 'ctxwise[langchain]'``, ...). Nothing here is imported by ``import ctxwise``.

* :mod:`ctxwise.integrations.openai_agents`: ``CtxwiseSession``, an OpenAI Agents SDK
  ``Session`` (``pip install 'ctxwise[openai-agents]'``).
"""
