"""AgentScope 2's own agent tests, every ``Agent`` with ctxwise's middleware in front.

The PyPI sdist of agentscope 2.0.11 ships no unit tests, so the agent tests (``agent_*``,
``hitl_*`` and ``middleware_test``: agents replying, calling tools, being interrupted, asking for
confirmation or an external result, and running other middlewares) are vendored from the
AgentScope repository (commit da00849f2c3db60b16edaf2371ae1d863f341ae2, Apache-2.0:
``vendor/agentscope_agents/LICENSE``; ``utils.py`` trimmed as its docstring says) and run against
the pinned agentscope 2.0.11. The runner uses :data:`ROOT` instead of downloading :data:`DIST`.
"""

from pathlib import Path

DIST = "agentscope==2.0.11"
ROOT = Path(__file__).resolve().parent / "vendor" / "agentscope_agents"
TEST_PATHS = ["."]
PLUGIN = "ctxwise_agentscope_agents_plugin"
ACCEPTED = "accepted_agentscope_agents.toml"
PYTEST_ARGS = ["-c", "pytest.ini", "--rootdir=.", "--confcutdir=.", "-p", "no:randomly", "-p", "no:cacheprovider"]
TIMEOUT_S = 600
TEST_DEPS: list[str] = []
"""Nothing beyond ctxwise's test extra (agentscope 2.0.11)."""
BASELINE = True
"""Run once without ctxwise first: the vendored tests (repository snapshot) that fail against
agentscope 2.0.11 on their own (event shapes that changed since 2.0.11) are n/a."""
