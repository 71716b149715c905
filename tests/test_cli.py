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


def test_replay_demo_shows_every_layer_with_its_reason_and_the_cost_under_each_price_model(tmp_path):
    """Issue 28 item 3: the demo shows each layer fire with the rule that fired it, and what it
    cost against sending everything under each price model, with the two plain sentences; the
    figures are the run's own (the JSON of the same replay holds them)."""
    from ctxwise.replay.render import n, price_models

    r = runner.invoke(app, ["replay", *db(tmp_path)])
    assert r.exit_code == 0, r.output
    text = r.output
    assert "demo_session.json" in text
    assert "pruned thinking" in text and "cleared" in text and "summarized rounds" in text
    assert "what fired and why" in text and "> clear_at" in text and "> summarize_at" in text
    calls = json.loads(runner.invoke(app, ["replay", "--json", *db(tmp_path)]).stdout)["sessions"][0]["calls"]
    why = [e["trigger"] for c in calls for e in c["events"] if e["stage"] == "summarizing"]
    assert why and all(w.endswith("; the hard limit is crossed") for w in why)  # the default waits for it
    assert "compaction off" in text and "support recall" in text
    doc = json.loads(runner.invoke(app, ["replay", "--json", *db(tmp_path)]).stdout)
    on, off = doc["summary"]["ctxwise"]["cost_by_price_model"], doc["summary"]["off"]["cost_by_price_model"]
    assert {"thinking", "clearing", "summarizing"} <= set(doc["summary"]["ctxwise"]["events"])
    for model in price_models():
        row = next(ln for ln in text.splitlines() if ln.startswith(f"│ {model.name} "))
        assert n(on[model.name]) in row and n(off[model.name]) in row, row
        dearer = on[model.name] >= off[model.name]
        assert (("+" in row.split("│")[-2]) == dearer), row
    flat = " ".join(text.split())
    money = flat[flat.index("Money:"):flat.index("Validity:")]
    assert ("It costs more under deepseek (hits ×0.02)" in money) == (on["deepseek"] >= off["deepseek"])
    calls, over = doc["summary"]["off"]["calls"], doc["summary"]["off"]["over_budget"]
    assert f"Validity: sent whole, {over} of {calls} calls would exceed the budget of 4,000 tokens" in flat
    assert "ctxwise keeps every call inside it" in flat and doc["summary"]["ctxwise"]["over_budget"] == 0


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


# -- replay: a provider per recording, sessions that cannot run, help text, progress -------------

LONG = TRAJECTORIES.parent / "long"
CLAUDE_CODE = LONG / "claude-code_spotter" / "cc_8463c716-a2ea-4c14-9efa-87158ebd9f20__agent-a7be2f0.json"
GEMINI = LONG / "mini-swe-agent_gemini-3-pro" / "msa_django__django-12155.json"
SWE_AGENT = LONG / "swe-agent"


def recordings(tmp_path: Path, *files: Path) -> Path:
    """A directory holding (links to) the given real recordings."""
    d = tmp_path / "recordings"
    d.mkdir()
    for f in files:
        (d / f.name).symlink_to(f)
    return d


def test_each_recording_is_replayed_and_priced_as_its_own_provider(tmp_path):
    """Issue 28 item 4: one directory of a Claude Code, a Gemini and a SWE-agent (GPT-4)
    recording: each replayed and priced as its own provider (Claude Code's unsigned reasoning
    alone would have read as DeepSeek); --provider still forces one for all."""
    d = recordings(tmp_path, CLAUDE_CODE, GEMINI, SWE_AGENT / "sa_ctf_katy.json")
    r = runner.invoke(app, ["replay", str(d), "--budget", "6000", "--no-baseline", "--json", *db(tmp_path)])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    got = {s["name"]: (s["provider"], s["measures"]["prices"]) for s in doc["sessions"]}
    assert got == {CLAUDE_CODE.name: ("anthropic", "anthropic"), GEMINI.name: ("gemini", "gemini"),
                   "sa_ctf_katy.json": ("openai", "openai")}
    reasons = {s["name"]: s["provider_reason"] for s in doc["sessions"]}
    assert "claude-haiku-4-5" in reasons[CLAUDE_CODE.name] and "gemini-3-pro" in reasons[GEMINI.name]
    assert doc["summary"]["providers"] == {"anthropic": 1, "gemini": 1, "openai": 1}
    assert doc["summary"]["ctxwise"]["validator_errors"] == 0 and doc["summary"]["ctxwise"]["wire_errors"] == 0
    forced = runner.invoke(app, ["replay", str(d), "--budget", "6000", "--no-baseline", "--json", "--provider",
                                 "openai", *db(tmp_path)])
    assert forced.exit_code == 0, forced.output
    sessions = json.loads(forced.stdout)["sessions"]
    assert {(s["provider"], s["measures"]["prices"], s["provider_reason"]) for s in sessions} == {
        ("openai", "openai", "--provider openai")}


def test_a_session_that_cannot_run_is_listed_with_its_reason_and_the_others_go_on(tmp_path):
    """Issue 28 item 4: in a directory of three real recordings at 1,450 tokens, two system
    prompts alone are over the budget: the third is replayed, the two are listed (one error line
    each, and in --json with the reason), exit code 1."""
    from ctxwise import get_counter
    from ctxwise.formats import load

    names = ["sa_ctf_flash.json", "sa_ctf_katy.json", "sa_marshmallow-1867_function_calling.json"]
    d = recordings(tmp_path, *(SWE_AGENT / name for name in names))
    args = ["replay", str(d), "--budget", "1450", "--no-baseline", *db(tmp_path)]
    r = runner.invoke(app, [*args, "--json"])
    assert r.exit_code == 1, r.output
    doc = json.loads(r.stdout)
    assert [s["name"] for s in doc["sessions"]] == [names[2]] and doc["sessions"][0]["calls"]
    tok = get_counter("o200k_base")
    for name, e in zip(names[:2], doc["errors"]):
        system = sum(tok.count_message(m) for m in load(SWE_AGENT / name)[0].messages if m.role == "system")
        assert system > 1450
        assert (e["place"], e["error"]) == (name, "ContextBudgetExceeded")
        assert e["reason"] == f"its system prompt alone is {system:,} tokens, over the budget of 1,450 tokens"
        assert e["source"].endswith(name)
    text = runner.invoke(app, args)
    assert text.exit_code == 1
    lines = [ln for ln in text.stderr.splitlines() if ln.startswith("error:")]
    assert len(lines) == 2 and all("system prompt alone" in ln for ln in lines)
    assert "1 session(s) replayed, 2 failed" in text.stdout



def test_json_lists_the_errors_when_no_session_could_run(tmp_path):
    """Kind: a machine-readable mode that goes silent on the failure it promises to list (every
    session over the budget): --json still prints the document with each error, exit 2."""
    names = ["sa_ctf_flash.json", "sa_ctf_katy.json"]
    d = recordings(tmp_path, *(SWE_AGENT / name for name in names))
    r = runner.invoke(app, ["replay", str(d), "--budget", "1450", "--no-baseline", "--json", *db(tmp_path)])
    assert r.exit_code == 2, r.output
    doc = json.loads(r.stdout)
    assert doc["sessions"] == [] and sorted(e["place"] for e in doc["errors"]) == sorted(names)


def test_a_store_url_naming_a_driver_not_installed_is_one_error_line(tmp_path):
    """Kind: a driver the URL names but the machine lacks (postgresql+asyncpg, +pg8000): one
    ``error:`` line with the password hidden, never a traceback."""
    r = runner.invoke(app, ["replay", "--no-baseline", "--db", "postgresql+asyncpg://u:secret@127.0.0.1:1/db"])
    assert r.exit_code == 2, r.output
    assert "Traceback" not in r.output and "secret" not in r.output
    assert [ln for ln in r.stderr.splitlines() if ln.startswith("error:")] == [
        "error: postgresql+asyncpg://u:***@127.0.0.1:1/db: cannot use the store (ModuleNotFoundError: No module "
        "named 'asyncpg')"]

HELP_PATHS = [[], ["inspect"], ["replay"], ["serve"], ["memory", "add"], ["memory", "list"], ["db", "upgrade"],
              ["keys", "create"]]


@pytest.mark.parametrize("path", HELP_PATHS, ids=lambda p: " ".join(p) or "ctxwise")
def test_help_breaks_lines_only_where_the_terminal_ends(path):
    """Issue 28 item 4: typer kept the docstring's own line breaks, so at 80 columns a sentence
    broke mid-line ("...since the last call and is" / "prepared under..."). Every line of the
    prose is now either a paragraph's end or full (the next word would not fit), and no option
    text is cut with an ellipsis."""
    r = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "80"})
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    assert max(len(ln) for ln in lines) <= 80
    prose = [ln.strip() for ln in lines[:next(i for i, ln in enumerate(lines) if ln.startswith("╭"))]]
    for a, b in zip(prose, prose[1:]):
        if a and b:
            assert len(a) + 1 + len(b.split()[0]) > 78, f"line broken before the edge:\n{a}\n{b}"
    assert "…" not in r.output


def _read_all(fd: int, into: list[bytes]) -> None:
    import os

    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # the other end closed
            return
        if not chunk:
            return
        into.append(chunk)


def test_progress_bar_on_a_terminal_and_not_in_a_pipe(tmp_path):
    """Issue 28 item 4: a run of several sessions draws a progress bar on stderr when stderr is
    a terminal (a pseudo-terminal here), and nothing when it is a pipe; stdout stays clean JSON."""
    import os
    import pty
    import threading

    d = recordings(tmp_path, SWE_AGENT / "sa_ctf_katy.json", SWE_AGENT / "sa_marshmallow-1867_function_calling.json")
    argv = [sys.executable, "-m", "ctxwise", "replay", str(d), "--budget", "4000", "--no-baseline", "--json",
            *db(tmp_path)]
    env = {**os.environ, "TERM": "xterm", "COLUMNS": "100"}
    master, slave = pty.openpty()
    seen: list[bytes] = []
    reader = threading.Thread(target=_read_all, args=(master, seen), daemon=True)
    reader.start()
    proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=slave, env=env, timeout=300)
    os.close(slave)
    reader.join(timeout=30)
    os.close(master)
    assert proc.returncode == 0
    assert json.loads(proc.stdout)["summary"]["sessions"] == 2
    assert b"replaying" in b"".join(seen)
    piped = subprocess.run(argv, capture_output=True, env=env, timeout=300)
    assert piped.returncode == 0 and json.loads(piped.stdout)["summary"]["sessions"] == 2
    assert b"replaying" not in piped.stderr and b"\x1b[" not in piped.stderr
