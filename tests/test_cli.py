"""The command line: inspect and replay on the built-in sessions, real recordings and bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import os

import pytest
from typer.testing import CliRunner

from ctxwise.cli import app
from tests.conftest import TRAJECTORIES

REPO = Path(__file__).resolve().parents[1]
CTXWISE = REPO / ".venv" / "bin" / "ctxwise"
RETAIL = TRAJECTORIES / "tau2-bench" / "retail_gpt-4.1_1trial.json"
runner = CliRunner()


def db(tmp_path: Path) -> list[str]:
    return ["--db", f"sqlite:///{tmp_path / 'replay.db'}"]


def one_line_error(result, code: int = 2) -> str:
    """The command failed with ``code``, one ``error:`` line and no traceback."""
    assert result.exit_code == code, result.output
    text = result.output  # stdout and stderr interleaved
    assert "Traceback" not in text
    lines = [ln for ln in text.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1, text
    return lines[0]


# -- inspect ---------------------------------------------------------------------------------


def test_inspect_builtin_sample_shows_every_category():
    r = runner.invoke(app, ["inspect"])
    assert r.exit_code == 0, r.output
    for word in ("built-in sample", "dialogue", "tool calls", "tool results", "thinking", "15 messages", "agentscope"):
        assert word in r.output


def test_inspect_real_tau2_file_lists_all_40_conversations():
    r = runner.invoke(app, ["inspect", str(RETAIL)])
    assert r.exit_code == 0, r.output
    assert "40 conversations" in r.output
    assert r.output.count("task ") == 40
    assert "total" in r.output


@pytest.mark.parametrize("content, rule", [
    ("{not json", "JSON"),
    ('{"context": [{"role": "USER", "content": [{"type": "hologram", "text": "x"}]}]}', "hologram"),
    ('{"context": [{"role": "USER", "content": [{"type": "text", "text": "hi"}]},'
     ' {"role": "TOOL", "content": [{"type": "tool_result", "id": "c9", "name": "q", "state": "success",'
     ' "output": [{"type": "text", "text": "x"}]}]}]}', "c9"),
])
def test_inspect_bad_input_is_one_line_exit_2(tmp_path, content, rule):
    f = tmp_path / "bad.json"
    f.write_text(content)
    line = one_line_error(runner.invoke(app, ["inspect", str(f)]))
    assert "bad.json" in line and rule in line


def test_inspect_refuses_a_50_mb_file_without_reading_it(tmp_path):
    f = tmp_path / "huge.json"
    with f.open("wb") as fh:
        fh.truncate(50 * 1024 * 1024)
    line = one_line_error(runner.invoke(app, ["inspect", str(f)]))
    assert "huge.json" in line


def test_inspect_missing_file(tmp_path):
    line = one_line_error(runner.invoke(app, ["inspect", str(tmp_path / "nope.json")]))
    assert "nope.json" in line


# -- replay ----------------------------------------------------------------------------------


def test_replay_demo_shows_clearing_and_summarizing(tmp_path):
    r = runner.invoke(app, ["replay", *db(tmp_path)])
    assert r.exit_code == 0, r.output
    assert "demo_session.json" in r.output
    assert "pruned thinking" in r.output and "summarized rounds" in r.output
    assert "compaction off" in r.output and "support recall" in r.output


def test_replay_json_document_parses_and_holds_the_measures(tmp_path):
    r = runner.invoke(app, ["replay", "--json", *db(tmp_path)])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    on, off = doc["summary"]["ctxwise"], doc["summary"]["off"]
    assert doc["summary"]["sessions"] == 1 and doc["errors"] == []
    assert on["validator_errors"] == 0 and on["over_budget"] == 0
    assert on["events"].get("summarizing") and on["events"].get("thinking")
    assert on["cost"] < off["cost"]
    assert off["events"] == {} and off["over_budget"] > 0
    assert on["input_tokens"] < off["input_tokens"]
    s = doc["sessions"][0]
    assert len(s["rounds"]) == 14 and sum(r["calls"] for r in s["rounds"]) == len(s["calls"])
    assert all(c["size"] <= doc["policy"]["budget"] for c in s["calls"])


def test_replay_tau2_retail_at_4000_tokens(tmp_path):
    r = runner.invoke(app, ["replay", str(RETAIL), "--unit", "tokens", "--budget", "4000", "--json", *db(tmp_path)])
    doc = json.loads(r.stdout)
    on, off = doc["summary"]["ctxwise"], doc["summary"]["off"]
    assert doc["summary"]["sessions"] + doc["summary"]["failed"] == 40
    assert on["validator_errors"] == 0 and on["over_budget"] == 0
    assert off["over_budget"] > 0
    assert 0 < on["support_recall"] <= 1 and on["cost"] > 0 and off["cost"] > 0
    # Any failure is a one-line error naming the session, and the exit code says so.
    assert r.exit_code == (1 if doc["errors"] else 0)
    for e in doc["errors"]:
        assert e["message"].startswith("retail_gpt-4.1_1trial.json · task ")


def test_replay_missing_and_broken_files_fail_alone(tmp_path):
    broken = tmp_path / "broken.json"
    broken.write_text('{"context": [{"role": "USER", "content": [{"type": "nope"}]}]}')
    sample = REPO / "src" / "ctxwise" / "data" / "sample_session.json"
    r = runner.invoke(app, ["replay", str(sample), str(broken), str(tmp_path / "missing.json"), *db(tmp_path)])
    assert r.exit_code == 1
    assert "Traceback" not in r.output
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 2
    assert any("broken.json" in e for e in errors) and any("missing.json" in e for e in errors)
    assert "sample_session.json" in r.stdout and "1 session(s) replayed, 2 failed" in r.stdout


def test_replay_more_than_3_sessions_says_the_tables_are_left_out(tmp_path):
    args = ["replay", str(RETAIL), "--unit", "tokens", "--budget", "4000", *db(tmp_path)]
    r = runner.invoke(app, [*args, "--limit", "4"])
    assert r.exit_code == 0, r.output
    assert "4 sessions: per-session tables omitted; use --json or --report" in r.stdout
    assert "what happened" not in r.stdout and "summary: 4 session(s)" in r.stdout
    r = runner.invoke(app, [*args, "--limit", "3"])
    assert r.exit_code == 0, r.output
    assert "omitted" not in r.stdout and r.stdout.count("what happened") == 3
    assert "no model call" in r.stdout   # tau2 ends on a user message with no recorded answer


@pytest.mark.parametrize("args, word", [
    (["--preset", "nope"], "nope"),
    (["--tokenizer", "klingon", "--unit", "tokens"], "klingon"),
    (["--provider", "acme"], "acme"),
])
def test_replay_usage_errors_exit_2(tmp_path, args, word):
    line = one_line_error(runner.invoke(app, ["replay", *args, *db(tmp_path)]))
    assert word in line


@pytest.mark.parametrize("argv, words", [
    (["replay", "--bogus"], ["No such option: --bogus", "replay --help"]),
    (["nosuchcmd"], ["No such command", "--help"]),
    (["replay", "--budget", "abc"], ["'--budget'", "integer"]),
    (["replay", "--unit", "parsecs"], ["'--unit'", "parsecs"]),
    (["memory", "forget"], ["Missing argument"]),
])
def test_usage_mistakes_are_one_error_line_with_exit_2(argv, words):
    # issue 15: typer framed these in a usage box; the command prints one `error:` line
    r = subprocess.run([sys.executable, "-m", "ctxwise", *argv], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stderr
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    assert all(w in lines[0] for w in words), lines[0]
    assert "╭" not in r.stderr + r.stdout and "Traceback" not in r.stderr


def test_replay_config_file(tmp_path):
    cfg = tmp_path / "ctxwise.toml"
    cfg.write_text('[ctxwise]\npreset = "ragent"\nbudget = 20000\n')
    r = runner.invoke(app, ["replay", "--config", str(cfg), "--json", *db(tmp_path)])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["policy"]["name"] == "ragent" and doc["policy"]["budget"] == 20000


# -- the installed console script -------------------------------------------------------------


def test_console_script_inspect_and_replay(tmp_path):
    r = subprocess.run([str(CTXWISE), "inspect"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "tool results" in r.stdout
    r = subprocess.run([str(CTXWISE), "replay", "--limit", "3", str(TRAJECTORIES), "--unit", "tokens",
                        "--budget", "6000", *db(tmp_path)], capture_output=True, text=True, timeout=300)
    assert r.returncode in (0, 1), r.stderr
    assert "summary: 3 session(s)" in r.stdout or "failed" in r.stdout
    assert "Traceback" not in r.stderr


def test_console_script_bad_file_exit_2(tmp_path):
    f = tmp_path / "x.json"
    f.write_text("[1, 2")
    r = subprocess.run([str(CTXWISE), "inspect", str(f)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "x.json" in r.stderr and "Traceback" not in r.stderr


def test_replay_file_budget_alone_counts_tokens_like_the_picked_budget(tmp_path):
    """Kind: an option whose meaning silently changes with another option's absence. Before the
    fix, `replay FILE --budget 4000` counted characters while the picked budget (no --budget) and
    the demo counted tokens, so the same number meant a 4x smaller context."""
    db = f"sqlite:///{tmp_path / 'r.db'}"
    given = runner.invoke(app, ["replay", str(RETAIL), "--budget", "4000", "--limit", "1", "--db", db, "--no-baseline"])
    assert given.exit_code == 0, given.output
    assert "budget 4,000 tokens" in given.output
    picked = runner.invoke(app, ["replay", str(RETAIL), "--limit", "1", "--db", db, "--no-baseline"])
    assert picked.exit_code == 0, picked.output
    header = next(line for line in picked.output.splitlines() if line.lstrip().startswith("budget "))
    assert " tokens" in header, header
    chars = runner.invoke(app, ["replay", str(RETAIL), "--budget", "40000", "--unit", "chars", "--limit", "1",
                                "--db", db, "--no-baseline"])
    assert chars.exit_code == 0, chars.output
    assert "budget 40,000 chars" in chars.output


@pytest.mark.parametrize("argv", [[b"memory", b"add", b"I like tea\xff", b"--user", b"bob"],
                                  [b"memory", b"list", b"--user", b"b\xffob"],
                                  [b"memory", b"forget", b"1", b"--user", b"b\xffob"]])
def test_arguments_that_are_not_utf8_are_one_line_errors(tmp_path, argv):
    """Kind: input the database cannot hold reaching the store from the command line (a
    fresh user's non-UTF-8 argument gave a 50-68 line traceback on SQLite and PostgreSQL)."""
    import subprocess

    env = {"PATH": os.environ.get("PATH", ""), "CTXWISE_DB": f"sqlite:///{tmp_path / 'm.db'}"}
    r = subprocess.run([str(CTXWISE).encode(), *argv], capture_output=True, env=env, timeout=120)
    err = r.stderr.decode("utf-8", "replace")
    assert r.returncode == 2 and "Traceback" not in err, err
    assert [ln for ln in err.splitlines() if ln.startswith("error:")] == [err.strip()] and "UTF-8" in err
