"""tests/suites holds the frameworks' own suites, run by runner.py one at a time: the main test
run collects none of it (the vendored AgentScope tests import what only that suite installs)."""

collect_ignore_glob = ["vendor/*", "suite_*.py", "ctxwise_*_plugin.py", "runner.py"]
