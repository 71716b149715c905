"""The upstreams from the settings file's [proxy] table, below the flags and variables."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from ctxwise import Policy, PolicyError
from ctxwise.proxy.routes import Upstreams
from ctxwise.server import create_app_from_env

REPO = Path(__file__).resolve().parents[2]

FILE = """budget = 9000
unit = "chars"

[proxy]
openai_upstream = "http://127.0.0.1:9/v1/"
anthropic_upstream = "http://127.0.0.1:9"
"""


def test_the_file_gives_the_upstreams_and_the_policy_ignores_the_table(tmp_path: Path) -> None:
    f = tmp_path / "ctxwise.toml"
    f.write_text(FILE, encoding="utf-8")
    assert Upstreams.from_toml(f) == Upstreams(openai="http://127.0.0.1:9/v1", anthropic="http://127.0.0.1:9")
    assert Policy.from_toml(f).budget == 9000
    # a variable (what the serve flags set) wins over the file, key by key
    up = Upstreams.from_env({"CTXWISE_CONFIG": str(f), "CTXWISE_ANTHROPIC_UPSTREAM": "http://10.0.0.1:8080/"})
    assert up == Upstreams(openai="http://127.0.0.1:9/v1", anthropic="http://10.0.0.1:8080")
    assert Upstreams.from_env({}) == Upstreams()  # the providers' own URLs


def test_the_served_app_reads_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = tmp_path / "ctxwise.toml"
    f.write_text(FILE, encoding="utf-8")
    for var in ("CTXWISE_OPENAI_UPSTREAM", "CTXWISE_ANTHROPIC_UPSTREAM"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("CTXWISE_CONFIG", str(f))
    monkeypatch.setenv("CTXWISE_DB", f"sqlite:///{tmp_path / 'c.db'}")
    app = create_app_from_env()
    try:
        assert app.proxy.upstreams == Upstreams(openai="http://127.0.0.1:9/v1",  # type: ignore[attr-defined]
                                                anthropic="http://127.0.0.1:9")
    finally:
        app.state.server.close()


@pytest.mark.parametrize("table, needle", [
    ('[proxy]\nopenai_upsteam = "http://x"\n', "proxy.openai_upsteam: unknown setting"),
    ('[proxy]\nanthropic_upstream = "api.anthropic.com"\n', "proxy.anthropic_upstream = 'api.anthropic.com'"),
    ('proxy = "http://x"\n', "proxy: expected a table"),
])
def test_a_bad_table_is_one_error_naming_the_key(tmp_path: Path, table: str, needle: str) -> None:
    f = tmp_path / "bad.toml"
    f.write_text(table, encoding="utf-8")
    with pytest.raises(PolicyError, match="bad.toml") as e:
        Upstreams.from_toml(f)
    assert needle in str(e.value)


def test_serve_stops_on_a_bad_table_with_one_line(tmp_path: Path) -> None:
    f = tmp_path / "bad.toml"
    f.write_text('[proxy]\nopenai_upstream = "ftp://x"\n', encoding="utf-8")
    r = subprocess.run([str(REPO / ".venv" / "bin" / "ctxwise"), "serve", "--config", str(f), "--db",
                        f"sqlite:///{tmp_path / 's.db'}", "--port", "0"], capture_output=True, text=True, timeout=120,
                       env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO / "src")})
    assert r.returncode != 0
    assert "proxy.openai_upstream = 'ftp://x'" in r.stderr and "Traceback" not in r.stderr
