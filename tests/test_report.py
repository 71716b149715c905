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
from ctxwise.replay.run import DEMO_POLICY

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
    assert "send everything" in html and "<p>Money: " in html and "<p>Validity: " in html  # the cost, per price model


def test_chromium_renders_the_chart(report, tmp_path):
    dom = chromium(tmp_path, "--dump-dom", report.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert '<svg class="chart" id="chart-0"' in dom.stdout
    assert dom.stdout.count('class="seg ') >= 14            # at least one segment per round
    png = tmp_path / "report.png"
    shot = chromium(tmp_path, f"--screenshot={png}", "--window-size=1200,900", report.as_uri())
    assert shot.returncode == 0, shot.stderr[-2000:]
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000   # a real page, not a blank one


@pytest.mark.parametrize("span, step", [(9.0, 2), (16384, 5000), (4400, 1000), (130, 50)])
def test_nice_step(span, step):
    assert nice_step(span) == step


def test_scale_follows_the_budget_and_clips_the_uncompacted_record(report):
    """The demo's uncompacted record reaches ~15k tokens at a 4,000 budget: the axis stops near
    the budget so the bars sent are readable, and the record is a clipped outline with its size."""
    svg = report.read_text(encoding="utf-8").split('id="chart-0"')[1].split("</svg>")[0]
    ticks = [int(v.replace(",", "")) for v in re.findall(r'class="yl"[^>]*>([\d,]+)<', svg)]
    budget = DEMO_POLICY["budget"]
    assert budget < max(ticks) <= budget + 1000
    assert re.search(r'class="clip"[^>]*>↑1\d\.\dk', svg)
    # watermark labels sit in the right margin, right of every bar
    bars_end = max(float(x) + float(w) for x, w in re.findall(r'class="seg k\d" d="M([\d.]+) [\d.]+h([\d.]+)', svg))
    labels = re.findall(r'<text class="e\d" x="([\d.]+)"[^>]*>(clear|summarize|budget) ', svg)
    assert len(labels) == 3 and all(float(x) > bars_end for x, _ in labels)


def test_report_of_several_sessions_has_a_contents_table_and_no_fake_bars(tmp_path):
    """tau2 sessions end on a user message with no recorded answer: that round draws no bar
    (it used to look like the context dropped to 0) and its table row shows –."""
    from ctxwise.policy import Policy
    from ctxwise.replay.report import render_html
    from ctxwise.replay.run import run
    from tests.conftest import TRAJECTORIES

    res = run([str(TRAJECTORIES / "tau2-bench" / "retail_gpt-4.1_1trial.json")],
              Policy.preset("default", unit="tokens", budget=4000), db=f"sqlite:///{tmp_path / 'r.db'}", limit=2)
    html = render_html(res)
    for i, s in enumerate(res.sessions):
        assert f"<a href='#s{i}'>{s.name}</a>" in html and f"id='s{i}'" in html
        last = s.rounds[-1]
        assert last.calls == 0
        svg = html.split(f'id="chart-{i}"')[1].split("</svg>")[0]
        group = svg.split(f"<title>round {last.round}: ")[1].split("</g>")[0]
        assert group.startswith("no model call") and "no call</text>" in group
        assert 'class="seg' not in group                   # no bar: it used to look like a drop to 0
        assert len(re.findall(r'class="seg ', svg)) >= len(s.rounds) - 1
    assert "no model call</td>" in html and "<td>–</td>" in html
    assert "style=" not in html.split("</head>")[1]       # colours live in the stylesheet, once
