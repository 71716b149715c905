"""LangChain 1.5.0's own agent unit tests with ctxwise's middleware FIRST in every ``create_agent``
(the other middlewares then edit the request after ctxwise: see the accepted differences)."""

from suite_langchain import DIST, NOT_APPLICABLE, PYTEST_ARGS, TEST_DEPS, TEST_PATHS, TIMEOUT_S  # noqa: F401

PLUGIN = "ctxwise_langchain_first_plugin"
ACCEPTED = "accepted_langchain_first.toml"
