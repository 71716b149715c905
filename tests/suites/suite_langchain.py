"""LangChain 1.5.0's own agent unit tests with ctxwise's middleware LAST in every ``create_agent``.

Run: ``python tests/suites/runner.py langchain`` with a Python that also has :data:`TEST_DEPS`
(LangChain's test dependency group); ``suite_langchain_first`` is the same with ctxwise first.
"""

DIST = "langchain==1.5.0"
TEST_PATHS = ["tests/unit_tests/agents"]
PLUGIN = "ctxwise_langchain_plugin"
ACCEPTED = "accepted_langchain.toml"
PYTEST_ARGS = ["-p", "no:randomly", "-p", "no:cacheprovider", "-o", "addopts=", "--snapshot-warn-unused",
               "-n", "0"]
TIMEOUT_S = 1200
TEST_DEPS = ["pytest-asyncio==1.5.0", "pytest-mock==3.17.0", "syrupy==5.5.3", "blockbuster==1.5.29",
             "forbiddenfruit==0.1.4", "pytest-socket==0.8.1", "toml==0.10.2", "langchain-tests==1.1.9",
             "langchain-openai==1.7.4", "vcrpy==8.5.0", "wrapt==2.5.2", "pytest-recording==0.15.0",
             "pytest-benchmark==5.3.1", "pytest-codspeed==5.0.4", "py-cpuinfo2==10.1.1"]
"""LangChain's ``test`` dependency group, as far as ``tests/unit_tests/agents`` imports it, pinned
(with what blockbuster and langchain-tests import, e.g. ``forbiddenfruit``, ``vcrpy``: the runner
installs without dependencies)."""
_SNAPSHOT = ("fails without ctxwise too: LangChain's Mermaid snapshot predates langgraph 1.2.24, which draws "
             "the tools node's metadata (`tools<hr/>... __tools = ...`)")
NOT_APPLICABLE: dict[str, str] = {
    "tests/unit_tests/agents/middleware/core/test_framework.py::test_create_agent_jump[memory]": _SNAPSHOT,
    "tests/unit_tests/agents/middleware/core/test_framework.py::test_simple_agent_graph": _SNAPSHOT,
    "tests/unit_tests/agents/middleware/core/test_framework.py::test_agent_graph_with_jump_to_end_as_after_agent": _SNAPSHOT,
    "tests/unit_tests/agents/test_return_direct_graph.py::test_agent_graph_without_return_direct_tools": _SNAPSHOT,
    "tests/unit_tests/agents/test_return_direct_graph.py::test_agent_graph_with_return_direct_tool": _SNAPSHOT,
    "tests/unit_tests/agents/test_return_direct_graph.py::test_agent_graph_with_mixed_tools": _SNAPSHOT,
    "tests/unit_tests/agents/middleware/implementations/test_tool_emulator.py::TestLLMToolEmulatorModelConfiguration::"
    "test_default_model_deprecated_and_missing_langchain_anthropic_raises_clear_error":
        "fails without ctxwise too wherever langchain-anthropic is installed: the test asserts it is missing",
    "tests/unit_tests/agents/middleware/implementations/test_tool_retry.py::test_tool_retry_constant_backoff":
        "asserts wall-clock time (three retries under 0.5 s): failed once at 2.2 s on the loaded 2-core machine, "
        "passes alone with ctxwise first or last",
}
