"""pytest plugin: :mod:`ctxwise_langchain_plugin` with ctxwise FIRST in every middleware list."""

import os

os.environ["CTXWISE_SUITE_POSITION"] = "first"

from ctxwise_langchain_plugin import (created, create_agent, manager, pytest_configure,  # noqa: E402,F401
                                      pytest_report_header, pytest_terminal_summary)
