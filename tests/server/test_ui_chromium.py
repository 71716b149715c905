"""The web inspector in real Chromium (the Debian package, driven by Playwright; no browser is
downloaded) against a real uvicorn server on 127.0.0.1 over a database `ctxwise replay` wrote.

Kinds covered: a page that throws or logs an error in the browser; a page that loads anything
from another origin; the two records or the chart missing for a replayed session; a cleared
result that cannot be opened to its original; a live session that needs a reload to show what
was appended.

Screenshots go to the test's tmp dir; ``CTXWISE_SCREENSHOTS=docs`` writes them to docs/ instead
(that is how docs/inspector-*.png were made).
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlencode

import pytest
from typer.testing import CliRunner

from ctxwise import ContextManager, Policy, open_store
from ctxwise.cli import app as cli

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]
REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve(db: str, tmp: Path) -> tuple[subprocess.Popen, str]:
    """``ctxwise serve --db DB`` (a URL or a SQLite file path) on a free loopback port; returns
    the process and its base URL."""
    port = free_port()
    log = open(tmp / f"serve-{port}.log", "w")
    proc = subprocess.Popen([sys.executable, "-m", "ctxwise", "serve", "--db", db, "--host", "127.0.0.1",
                             "--port", str(port), "--log-level", "warning"], stdout=log, stderr=subprocess.STDOUT,
                            cwd=tmp)
    base = f"http://127.0.0.1:{port}"
    for _ in range(300):
        if proc.poll() is not None:
            raise AssertionError((tmp / f"serve-{port}.log").read_text())
        try:
            with urllib.request.urlopen(base + "/healthz", timeout=1):
                return proc, base
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise AssertionError("the server did not start")


@pytest.fixture(scope="module")
def replay_db(tmp_path_factory) -> tuple[str, Path]:
    d = tmp_path_factory.mktemp("ui")
    db = f"sqlite:///{d / 'replay.db'}"
    r = CliRunner().invoke(cli, ["replay", "--db", db])  # the built-in demo, compaction on and off
    assert r.exit_code == 0, r.output
    # and once under Ragent's rule (clearing whenever above clear_at), at the demo's budget
    cfg = d / "watermark.toml"
    cfg.write_text('budget = 4000\nunit = "tokens"\nprovider = "deepseek"\nedit_when = "watermark"\n')
    r = CliRunner().invoke(cli, ["replay", "--config", str(cfg), "--no-baseline", "--db", db])
    assert r.exit_code == 0, r.output
    return db, d


@pytest.fixture(scope="module")
def server(replay_db):
    db, d = replay_db
    proc, base = serve(str(d / "replay.db"), d)  # a file path, as `ctxwise serve --db ctxwise.db`
    yield base
    proc.terminate()
    proc.wait(timeout=20)


@pytest.fixture(scope="module")
def browser():
    if not Path(CHROMIUM).exists():
        pytest.fail("chromium is not installed (apt-get install -y chromium); the inspector tests need it")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


class Watched:
    """A page whose console errors, uncaught exceptions, failed requests, HTTP errors and
    requests to another origin are collected."""

    def __init__(self, browser, base: str) -> None:
        self.page = browser.new_page(viewport={"width": 1400, "height": 1000})
        self.problems: list[str] = []
        self.page.on("console", lambda m: m.type in ("error", "warning") and self.problems.append(f"console: {m.text}"))
        self.page.on("pageerror", lambda e: self.problems.append(f"pageerror: {e}"))
        self.page.on("requestfailed", lambda r: self.problems.append(f"failed: {r.url}"))
        self.page.on("response", lambda r: r.status >= 400 and self.problems.append(f"{r.status}: {r.url}"))
        self.page.on("request", lambda r: not r.url.startswith((base, "data:"))
                     and self.problems.append(f"other origin: {r.url}"))

    def close(self) -> None:
        self.page.close()


def shot(page, name: str, tmp: Path, **kw) -> Path:
    where = REPO / "docs" if os.environ.get("CTXWISE_SCREENSHOTS") == "docs" else tmp
    where.mkdir(exist_ok=True)
    out = where / name
    page.screenshot(path=str(out), **kw)
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000  # a real page, not a blank one
    return out


def compacted_session(db: str) -> tuple[str, str]:
    store = open_store(db)
    try:
        info = next(s for s in store.list_sessions() if s.user_id.startswith("replay/"))
        return info.user_id, info.session_id
    finally:
        store.close()


def session_url(base: str, user: str, session: str) -> str:
    return f"{base}/ui/session?{urlencode({'user': user, 'id': session})}"


def test_pages_load_with_no_console_errors(server, browser, replay_db):
    w = Watched(browser, server)
    page = w.page
    page.goto(server + "/ui")
    rows = page.locator("table.sessions tr").count() - 1
    assert rows == 3                        # the demo, compaction on and off, and under Ragent's rule
    page.fill("input[name=q]", "replay-off")
    page.click("form.search button")
    page.wait_for_url(re.compile(r"q=replay-off"))
    assert page.locator("table.sessions tr").count() - 1 == 1
    page.fill("input[name=q]", "no such session anywhere")
    page.click("form.search button")
    page.wait_for_selector("#no-sessions")
    user, sid = compacted_session(replay_db[0])
    page.goto(session_url(server, user, sid))
    page.wait_for_selector("svg.chart")
    page.wait_for_timeout(2000)                                # a few live polls
    assert w.problems == []
    # an unknown session is a 404 page, and the only problem the browser reports is that status
    page.goto(session_url(server, user, "not-a-session"))
    assert page.locator("h1").inner_text() == "Not found"
    assert len(w.problems) == 2 and w.problems[0].startswith("404: ") and "404" in w.problems[1]
    w.close()


def test_the_two_records_and_the_chart_render_for_a_replayed_session(server, browser, replay_db, tmp_path):
    db = replay_db[0]
    user, sid = compacted_session(db)
    store = open_store(db)
    state = store.load(user, sid, include_hidden=True)
    transcript = store.transcript(user, sid)
    store.close()
    w = Watched(browser, server)
    page = w.page
    page.goto(session_url(server, user, sid))
    chart = page.locator("svg.chart")
    chart.wait_for()
    box = chart.bounding_box()
    assert box and box["width"] > 800 and box["height"] > 250
    # one bar per model call: the demo makes 32 calls; markers where compaction fired
    assert page.locator("svg.chart text.rn").count() == 32
    assert page.locator("svg.chart g.marker").count() >= 5
    labels = page.locator("svg.chart text").evaluate_all("els => els.map(e => e.textContent)")
    assert {"clear 2,000", "summarize 3,200", "budget 4,000"} <= set(labels)   # the watermarks (demo budget 4,000)
    # the two records: every context message and every transcript row, side by side
    assert page.locator(".ccell .msg").count() == len(state.rows)
    assert page.locator(".tcell .trow:not(.none)").count() == len(transcript)
    first_pair = page.locator(".pair").nth(1)
    t_box, c_box = first_pair.locator(".tcell").bounding_box(), first_pair.locator(".ccell").bounding_box()
    assert t_box and c_box and c_box["x"] > t_box["x"] + t_box["width"] - 1 and abs(c_box["y"] - t_box["y"]) < 2
    # aligned by message id: the transcript row's ids are the ids of the messages beside it
    for i in range(1, 6):
        pair = page.locator(".pair").nth(i)
        ids = pair.locator(".ccell .msg").evaluate_all("els => els.map(e => e.dataset.id)")
        row = next((t for t in transcript if t.message_ids and t.message_ids[0] in ids), None)
        if row is not None:
            assert ids == row.message_ids
    # the summary names what it replaced, and a folded message links back to it
    summary = page.locator(".msg:has(.st.kind)").first
    assert re.search(r"replaces \d+ messages", summary.inner_text())
    folded = page.locator(".msg.hidden .link a").first
    assert folded.get_attribute("href") == "#" + summary.get_attribute("id")
    shot(page, "inspector-session.png", tmp_path)
    page.evaluate("document.querySelector('.records').scrollIntoView({block: 'start'})")
    shot(page, "inspector-records.png", tmp_path)
    assert w.problems == []
    w.close()


def test_expanding_a_cleared_result_shows_the_original(server, browser, replay_db, tmp_path):
    db = replay_db[0]
    store = open_store(db)
    states = [store.load(s.user_id, s.session_id, include_hidden=True) for s in store.list_sessions()
              if s.user_id.startswith("replay/")]
    store.close()
    state = next(st for st in states if any(r.state == "cleared" for r in st.rows))
    user, sid = state.user_id, state.session_id
    row = next(r for r in state.rows if r.state == "cleared")
    cleared = row.current.tool_results[0].text
    original = row.original.tool_results[0].text if row.original else ""
    assert original and original != cleared
    w = Watched(browser, server)
    page = w.page
    page.goto(session_url(server, user, sid))
    msg = page.locator(f".msg[data-id='{row.message_id}']")
    assert "result cleared" in msg.locator("pre.tx").first.inner_text()   # what is sent: the placeholder
    panel = msg.locator("details.orig")
    assert panel.locator("pre").inner_text() == ""
    panel.locator("summary").click()
    page.wait_for_function("el => el.dataset.loaded === '1'", arg=panel.locator("pre").element_handle())
    text = panel.locator("pre").inner_text()
    assert original.splitlines()[0] in text and original.splitlines()[-1] in text
    assert "result cleared" not in text
    page.evaluate("id => document.querySelector(`.msg[data-id='${id}']`).scrollIntoView({block: 'start'})",
                  row.message_id)
    page.evaluate("window.scrollBy(0, -70)")                  # below the sticky column heads
    shot(page, "inspector-original.png", tmp_path)
    assert w.problems == []
    w.close()


def test_a_live_append_appears_without_reload(server, browser, replay_db):
    db = replay_db[0]
    policy = Policy(budget=3000, unit="chars", provider="openai")
    with ContextManager(db, policy) as cm:
        s = cm.session("live-user", "live-chat")
        s.append_openai([{"role": "system", "content": "You help with orders."},
                         {"role": "user", "content": "Where is order A-100?"}])
        w = Watched(browser, server)
        page = w.page
        page.goto(session_url(server, "live-user", "live-chat"))
        page.wait_for_selector(".msg[data-id]")
        page.evaluate("window.__same_page = 'yes'")
        version = page.locator("b.version").inner_text()
        s.prepare()
        s.append_openai([{"role": "assistant", "content": "It ships on 2026-12-03, tracking ZX-981."}])
        page.wait_for_selector("text=tracking ZX-981", timeout=15_000)
        assert page.evaluate("window.__same_page") == "yes"        # updated in place, not reloaded
        assert page.locator("b.version").inner_text() != version
        assert page.locator(".tcell .trow.assistant").count() == 1
        # and a second append shows too, in the transcript and in the context
        s.append_openai([{"role": "user", "content": "Can I change the address to 9 Elm Road?"}])
        page.wait_for_selector(".tcell >> text=9 Elm Road", timeout=15_000)
        assert page.locator(".ccell >> text=9 Elm Road").count() == 1
        assert page.evaluate("window.__same_page") == "yes"
        assert w.problems == []
        w.close()


def test_markup_in_a_session_is_shown_as_text_never_run(server, browser, replay_db):
    """Kind: text from a session (a message, a tool input, an id) reaching the page as markup."""
    db = replay_db[0]
    evil = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'
    user, sid = 'u"><b>x', "s'><svg onload=alert(1)>"
    with ContextManager(db, Policy(budget=3000, unit="chars")) as cm:
        s = cm.session(user, sid)
        s.append_openai([{"role": "user", "content": evil},
                         {"role": "assistant", "content": None, "tool_calls": [
                             {"id": "c1", "type": "function", "function": {"name": "look<up>", "arguments": '{"q": "</pre><i>"}'}}]},
                         {"role": "tool", "tool_call_id": "c1", "content": evil}])
    w = Watched(browser, server)
    page = w.page
    page.on("dialog", lambda d: (w.problems.append(f"dialog: {d.message}"), d.dismiss()))
    page.goto(server + "/ui?" + urlencode({"q": "svg onload"}))
    page.click("a.sess")
    page.wait_for_selector(".msg[data-id]")
    assert page.evaluate("window.__pwned") is None
    assert page.locator(".ccell pre.tx", has_text="<script>window.__pwned = 1</script>").count() == 2
    assert page.locator("h1.sname").inner_text() == sid
    assert page.locator(".ccell", has_text='"q": "</pre><i>"').count() == 1
    page.wait_for_timeout(1600)                                # a live poll with those ids in its URL
    assert w.problems == []
    w.close()


def test_serve_db_names_a_missing_file_in_one_line(tmp_path):
    """Kind: a mistyped database path silently served as a new, empty database."""
    r = subprocess.run([sys.executable, "-m", "ctxwise", "serve", "--db", "nope.db", "--port", str(free_port())],
                       capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert r.returncode == 2 and r.stderr.count("\n") == 1
    assert "nope.db: no such database file" in r.stderr and "sqlite:///nope.db" in r.stderr
    assert not (tmp_path / "nope.db").exists()
