"""The HTML report: self-contained, and rendered by headless Chromium with the chart visible."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ctxwise.cli import app
from ctxwise.replay.report import nice_step

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or "/usr/bin/chromium"


def chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    if not Path(CHROMIUM).exists():
        pytest.fail("chromium is not installed (apt-get install -y chromium); the report test needs it")
    profile = tmp_path / "chromium-profile"
    return subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--user-data-dir={profile}", *args],
        capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("report")
    out = d / "demo.html"
    r = CliRunner().invoke(app, ["replay", "--report", str(out), "--db", f"sqlite:///{d / 'r.db'}"])
    assert r.exit_code == 0, r.output
    return out


def test_report_is_self_contained(report):
    html = report.read_text(encoding="utf-8")
    assert "<svg class=\"chart\"" in html
    assert not re.search(r"""(src|href)=["']https?://""", html), "the page must not load anything from the network"
    assert "summarizing" in html and "clearing" in html   # the event list
    assert html.count('class="marker"') >= 2                # markers where compaction fired


def test_chromium_renders_the_chart(report, tmp_path):
    dom = chromium(tmp_path, "--dump-dom", report.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert '<svg class="chart" id="chart-0"' in dom.stdout
    assert dom.stdout.count('class="seg"') >= 14            # at least one segment per round
    png = tmp_path / "report.png"
    shot = chromium(tmp_path, f"--screenshot={png}", "--window-size=1200,900", report.as_uri())
    assert shot.returncode == 0, shot.stderr[-2000:]
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000   # a real page, not a blank one


@pytest.mark.parametrize("span, step", [(9.0, 2), (16384, 5000), (4400, 1000), (130, 50)])
def test_nice_step(span, step):
    assert nice_step(span) == step
