r"""The OpenAI Agents SDK's own tests with ``CtxwiseSession`` standing in for its session stores.

Run: ``python tests/suites/runner.py openai_agents``. The plugin (``plugin_openai_agents``)
replaces ``SQLiteSession`` and the tests' ``SimpleListSession`` family with ctxwise stand-ins at a
10M-char budget, user memory off. TEST_PATHS are the sdist's test modules that use either name
(``grep -rl "SQLiteSession\|SimpleListSession\|simple_session" tests``); a failure of a test that
built no stand-in is counted n/a by the runner (the ``ctxwise_stand_ins`` JUnit property).
"""

DIST = "openai-agents==0.24.0"
"""Must equal the installed ``openai-agents`` (the tests import the installed package)."""

TEST_DEPS = ["pytest-asyncio==1.5.0", "pytest-timeout==2.4.0"]
"""The sdist's test plugin ctxwise's own environment does not have (asyncio_mode = "auto"), and
pytest-timeout so that a hanging test is one failure, not a hung run."""

PLUGIN = "plugin_openai_agents"
ACCEPTED = "accepted_openai_agents.toml"
PYTEST_ARGS = ["-p", "no:randomly", "-p", "no:cacheprovider", "-p", "no:xdist", "--timeout=120"]
TIMEOUT_S = 1500

TEST_PATHS = [
    "tests/deferred_session_writes/test_compaction.py",
    "tests/deferred_session_writes/test_filters.py",
    "tests/deferred_session_writes/test_max_turns.py",
    "tests/deferred_session_writes/test_pending_write.py",
    "tests/deferred_session_writes/test_recovery.py",
    "tests/deferred_session_writes/test_resume.py",
    "tests/extensions/memory/test_advanced_sqlite_session.py",
    "tests/extensions/memory/test_async_sqlite_session.py",
    "tests/extensions/memory/test_encrypt_session.py",
    "tests/memory/test_compaction_model_visibility.py",
    "tests/memory/test_compaction_suffix.py",
    "tests/memory/test_openai_conversations_session.py",
    "tests/memory/test_openai_responses_compaction_session.py",
    "tests/memory/test_session.py",
    "tests/memory/test_session_limit.py",
    "tests/models/test_openai_chatcompletions_stream.py",
    "tests/sandbox/test_memory.py",
    "tests/sandbox/test_runtime.py",
    "tests/test_agent_runner.py",
    "tests/test_agent_runner_streamed.py",
    "tests/test_cancel_streaming.py",
    "tests/test_error_logging_redaction.py",
    "tests/test_handoff_history_duplication.py",
    "tests/test_hitl_session_scenario.py",
    "tests/test_invalid_final_output_handler.py",
    "tests/test_max_turns.py",
    "tests/test_native_tool_failure_history.py",
    "tests/test_programmatic_tool_calling.py",
    "tests/test_prompt_cache_key.py",
    "tests/test_run_impl_resume_paths.py",
    "tests/test_run_state_pending_input.py",
    "tests/test_runner_guardrail_resume.py",
    "tests/test_runner_tracing_disabled.py",
    "tests/test_runtime_symmetry_contract.py",
    "tests/test_soft_cancel.py",
    "tests/test_tool_batch_failure_history.py",
    "tests/test_tool_failure_boundaries.py",
    "tests/tracing/test_import_side_effects.py",
    "tests/utils/test_simple_session.py",
]
BASELINE = True
"""Run once with the SDK's own sessions first: tests failing there (version skew of the installed
``openai``, the environment) are n/a."""
