"""AgentScope 2's own formatter tests, every formatter formatting ctxwise's middleware view.

The PyPI sdist of agentscope 2.0.11 ships no unit tests, so the formatter tests are vendored
from the AgentScope repository (commit da00849f2c3db60b16edaf2371ae1d863f341ae2, Apache-2.0:
``vendor/agentscope/LICENSE``) and run against the pinned agentscope 2.0.11. The runner uses
:data:`ROOT` instead of downloading :data:`DIST`.
"""

from pathlib import Path

DIST = "agentscope==2.0.11"
ROOT = Path(__file__).resolve().parent / "vendor" / "agentscope"
TEST_PATHS = ["."]
PLUGIN = "ctxwise_agentscope_plugin"
ACCEPTED = "accepted_agentscope.toml"
PYTEST_ARGS = ["-c", "pytest.ini", "--rootdir=.", "--confcutdir=.", "-p", "no:randomly", "-p", "no:cacheprovider"]
TIMEOUT_S = 600
TEST_DEPS: list[str] = []
"""Nothing beyond ctxwise's test extra (agentscope 2.0.11)."""

_DRIFT = ("fails without ctxwise too: the vendored test (repository snapshot) and agentscope 2.0.11 "
          "differ on {}")
NOT_APPLICABLE: dict[str, str] = {
    f"formatter_{f}_test.py::Test{c}Formatter::{t}": _DRIFT.format(why)
    for f, c, t, why in [
        ("dashscope", "DashScope", "test_chat_formatter_url_image_in_tool_result", "the shortuuid patch target"),
        ("gemini", "Gemini", "test_chat_formatter_base64_image_in_tool_result", "the shortuuid patch target"),
        ("gemini", "Gemini", "test_chat_formatter_complex_multi_step", "how tool responses are grouped"),
        ("moonshot", "Moonshot", "test_chat_formatter_url_image_in_tool_result", "the shortuuid patch target"),
        ("ollama", "Ollama", "test_chat_formatter_base64_image_in_tool_result", "the shortuuid patch target"),
        ("openai_chat", "OpenAI", "test_chat_formatter_url_image_in_tool_result", "the shortuuid patch target"),
        ("openai_response", "OpenAIResponse", "test_chat_formatter_url_image_in_tool_result",
         "the shortuuid patch target"),
    ]
}
