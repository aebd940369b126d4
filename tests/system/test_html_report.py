"""`agent2rl-tui report RUN --html`: one self-contained page, opened in a real headless browser.

The example run's page is written through the real CLI and opened in Debian's chromium
(skipped, saying why, where it is not installed): what the browser's DOM holds is checked,
not the file's text. A hostile run (built with tests/support/synthetic.py through the real store and
transcript recorder) puts markup, a script, an event handler, a ``javascript:`` link, ANSI
escapes and requests to a loopback server into every field the agent controls: the browser
must show them as text, create no element from them and request nothing. One test parses
the page with ``html.parser`` and runs everywhere.
"""

from __future__ import annotations

import http.server
import json
import shutil
import subprocess
import threading
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path

import pytest
from support.runs import cli
from support.synthetic import T0, add_revisions, add_transcript, make_run

from agent2rl_tui.record.store import RunStore
from agent2rl_tui.review.html_evidence import MAX_STEPS
from agent2rl_tui.review.html_report import render_html
from agent2rl_tui.review.runview import compare_items, read_rows
from agent2rl_tui.util.inert import one_line

CHROMIUM = shutil.which("chromium")
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="chromium is not installed (make setup installs it as root; else: sudo apt install chromium)")

OUR_TAGS = {
    "html", "head", "meta", "title", "style", "body", "h1", "h2", "h3", "h4", "nav", "a", "section", "dl", "dt", "dd",
    "b", "span", "code", "pre", "table", "thead", "tbody", "tr", "th", "td", "details", "summary", "p", "ul", "li",
    "br", "footer", "svg", "rect", "text", "g", "line", "polyline", "circle", "polygon",
}
"""Every element the page is made of (the trajectory's SVG included): anything else was made by the agent."""


class Dom(HTMLParser):
    """Elements with their attributes, all text, and the text under each element with an id."""

    VOID = {"meta", "br", "link", "img", "input", "hr", "source", "base", "col", "embed", "wbr", "area", "param"}

    def __init__(self, markup: str) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.by_id: dict[str, list[str]] = {}
        self.open: list[tuple[str, str | None]] = []
        self.feed(markup)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        self.elements.append((tag, attributes))
        if tag not in self.VOID:
            self.open.append((tag, attributes.get("id")))
            if attributes.get("id"):
                self.by_id.setdefault(attributes["id"], [])

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, dict(attrs)))

    def handle_endtag(self, tag: str) -> None:
        for i in range(len(self.open) - 1, -1, -1):
            if self.open[i][0] == tag:
                del self.open[i:]
                return

    def handle_data(self, data: str) -> None:
        self.text.append(data)
        for _, ident in self.open:
            if ident:
                self.by_id[ident].append(data)

    def under(self, ident: str) -> str:
        return "".join(self.by_id.get(ident, []))

    @property
    def all_text(self) -> str:
        return "".join(self.text)

    def tags(self, name: str) -> list[dict[str, str | None]]:
        return [attrs for tag, attrs in self.elements if tag == name]


def browser_dom(page: Path, profile: Path) -> str:
    """The DOM chromium built from ``page`` (headless, offline profile), serialized."""
    out = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions",
         "--disable-dev-shm-usage", f"--user-data-dir={profile}", "--virtual-time-budget=3000", "--dump-dom",
         page.resolve().as_uri()],
        capture_output=True, text=True, timeout=180)
    assert out.returncode == 0 and "<html" in out.stdout, out.stderr[-3000:]
    return out.stdout


def assert_nothing_loads(dom: Dom, svgs: int = 1) -> None:
    """No element that could load or run anything; links only to places on the page."""
    assert {tag for tag, _ in dom.elements} <= OUR_TAGS, {tag for tag, _ in dom.elements} - OUR_TAGS
    for tag, attrs in dom.elements:
        assert not any(name.startswith("on") for name in attrs), (tag, attrs)
        assert "src" not in attrs and "srcset" not in attrs and "style" not in attrs, (tag, attrs)
        if "href" in attrs:
            assert tag == "a" and (attrs["href"] or "").startswith("#"), (tag, attrs)
    csp = [m for m in dom.tags("meta") if (m.get("http-equiv") or "").lower() == "content-security-policy"]
    assert csp and csp[0]["content"] == "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
    assert len(dom.tags("svg")) == svgs


# -- the example run, in a browser --------------------------------------------------------

@needs_chromium
def test_example_run_page_in_a_browser(example_run: tuple[Path, str], tmp_path: Path) -> None:
    run_dir = tmp_path / example_run[0].name  # a copy: the shared run is not written to
    shutil.copytree(example_run[0], run_dir)
    proc = cli("report", str(run_dir), "--html")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    page = run_dir / "report" / "report.html"
    assert f"html: {page}" in proc.stdout
    report = json.loads((run_dir / "report" / "report.json").read_text())
    dom = Dom(browser_dom(page, tmp_path / "profile"))
    from agent2rl_tui.review.curves import read_curves

    curves = read_curves(run_dir)  # SFT's loss, GRPO's reward: what the example agent's trainers logged
    assert {"loss", "reward"} <= set(curves.series) and curves.skipped == 0
    # The trajectory, a chart per logged metric (issue 43, 1) and CPU and memory over the run (43, 3).
    assert_nothing_loads(dom, svgs=1 + len(curves.series) + 2)
    vitals = dom.under("vitals")
    assert "CPU use of the machine" in vitals and "the agent's processes" in vitals
    training = dom.under("training")
    assert "loss as the agent's trainers logged it" in training and "reward as the agent's trainers logged it" in training
    assert "submission #1" in training and "submission #2" in training  # each submission marked on the curves

    assert dom.under("run-id") == report["run_id"] == run_dir.name
    assert report["route"] == "SFT → GRPO" and dom.under("route") == "SFT → GRPO"
    assert len(report["iterations"]) == 2
    for it in report["iterations"]:  # each iteration, its learning rate and where it is set
        shown = dom.under(f"iteration-{it['iteration']}")
        lr = it["key_config"]["lr"]
        assert f"Iteration {it['iteration']}: submission {it['submission_id']}, {it['train_type']}" in shown
        assert lr["value"] in shown and f"{lr['path']}:{lr['line']}" in shown
    assert {"0.002", "0.0005"} <= {it["key_config"]["lr"]["value"] for it in report["iterations"]}

    svg = dom.under("trajectory")
    assert "score over run time" in svg and dom.tags("polyline")

    last = report["submissions"][-1]["submission_id"]  # its flips against the baseline, item by item
    flips = compare_items(read_rows(run_dir, last), read_rows(run_dir, 0))
    assert flips.solved
    shown = dom.under(f"items-{last}")
    assert f"vs the baseline: {len(flips.solved)} solved, {len(flips.broken)} broken" in shown
    assert one_line(flips.solved[0].prompt) in shown and flips.solved[0].gold in shown

    with RunStore.of_run(run_dir) as store:
        texts = [r[0] for r in store.conn.execute("SELECT text FROM steps ORDER BY seq LIMIT 5")]
        total = store.conn.execute("SELECT COUNT(*) FROM steps").fetchone()[0]
    transcript = dom.under("transcript")
    assert f"{total:,} steps" in transcript and all(one_line(t) in one_line(transcript) for t in texts)
    assert "scored" in dom.under("submissions") and "valid_submission_rate" in dom.under("metrics")


# -- a hostile run --------------------------------------------------------------------------

class Beacon(http.server.BaseHTTPRequestHandler):
    hits: list[str] = []

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        Beacon.hits.append(self.path)
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def beacon() -> Iterator[int]:
    """A loopback server that counts requests: the page must never call it."""
    Beacon.hits = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Beacon)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def hostile_text(port: int) -> str:
    return ("<script>alert(1)</script>" '"><img src=x onerror=alert(1)>' "\x1b[31mred\x1b]0;title\x07"
            '<a href="javascript:alert(1)">click</a>' f'<img src="http://127.0.0.1:{port}/beacon.png">'
            f'<link rel="stylesheet" href="https://127.0.0.1:{port}/x.css"><style>body{{display:none}}</style>'
            "\u202eevil")


def hostile_run(root: Path, port: int) -> tuple[Path, str]:
    """A finished run whose every agent-made field holds ``hostile_text``: a failed submission's
    model path and error, item prompts and outputs, a file name and code lines, transcript steps."""
    bad = hostile_text(port)
    run = make_run(root, '20261122T233320-arith-x"><b onmouseover=alert(1)>', scores=(40.0, 70.0))
    with RunStore.of_run(run) as store:
        sub = store.add_submission(kind="agent", status="failed", model_path=f"output/{bad}",
                                   error=f"cannot load output/{bad}")
        store.update_submission(sub, received_at=T0 + 120)
    for results in run.glob("evals/*/results.jsonl"):
        items = [json.loads(line) for line in results.read_text().splitlines()]
        for item in items:
            item["prompt"] = f"{bad} {item['prompt']}"
            item["output"] = f"{item['output']} {bad}"
        results.write_text("".join(json.dumps(i) + "\n" for i in items))
    add_revisions(run, [
        {"code/train.py": f"# {bad}\nlearning_rate = 1e-3\n"},
        {"code/train.py": f"# {bad}\nlearning_rate = 3e-4\nfrom trl import SFTTrainer\ntrainer = SFTTrainer()\n",
         'code/x"><img src=x onerror=alert(1)>.py': f"print('{bad}')\n"},
    ])
    lines = [
        {"type": "assistant", "message": {"id": "m1", "content": [{"type": "text", "text": f"plan: {bad}"}]}},
        {"type": "assistant", "message": {"id": "m2", "content": [
            {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": f"echo '{bad}'"}}]}},
        {"type": "user", "message": {"content": [{"type": "tool_result", "tool_use_id": "t1", "content": bad}]}},
    ]
    add_transcript(run, [(json.dumps(ev), T0 + 5 + i) for i, ev in enumerate(lines)])
    return run, bad


def assert_shown_as_text(dom: Dom, bad: str) -> None:
    shown = one_line(bad)  # what a reader sees: the characters, controls as escapes
    assert "\x1b" not in dom.all_text and "\u202e" not in dom.all_text
    assert shown in dom.under("submissions")  # the model path and the error
    assert shown[:150] in dom.under("items")  # a flipped item's prompt and output (cut at 200 characters)
    assert shown in dom.under("transcript")
    assert "\\x1b[31mred" in dom.under("transcript") and "\\u202eevil" in dom.under("transcript")
    assert 'code/x"><img src=x onerror=alert(1)>.py' in dom.under("iterations")  # a file name
    assert dom.under("run-id") == '20261122T233320-arith-x"><b onmouseover=alert(1)>'


def test_hostile_page_parsed(tmp_path: Path) -> None:
    """Everywhere, without a browser: the page as Python's HTML parser reads it."""
    run, bad = hostile_run(tmp_path, 9)
    assert cli("report", str(run)).returncode == 0  # report.json, as the CLI writes it
    page = render_html(run)
    dom = Dom(page)
    assert_nothing_loads(dom)
    assert_shown_as_text(dom, bad)
    assert "<script" not in page and "<img" not in page and "<link" not in page and page.count("<style") == 1
    assert 'href=&quot;javascript:alert(1)&quot;' in page and 'href="javascript' not in page


@needs_chromium
def test_hostile_page_in_a_browser(tmp_path: Path, beacon: int) -> None:
    run, bad = hostile_run(tmp_path, beacon)
    out = tmp_path / "elsewhere" / "page.html"
    proc = cli("report", str(run), "--out", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"html: {out}" in proc.stdout and not (run / "report" / "report.html").exists()
    dom = Dom(browser_dom(out, tmp_path / "profile"))
    assert_nothing_loads(dom)  # no <script>, no onerror, no element the agent's text made
    assert_shown_as_text(dom, bad)
    assert Beacon.hits == []  # and nothing was requested


def test_page_size_is_capped(tmp_path: Path) -> None:
    """A transcript far past the caps: the page stays a few MB and says what it left out."""
    run = make_run(tmp_path, "20261122T233320-arith-big")
    long = "&\"<" * 1_000 + "x" * 3_000  # escaped, its first 2,000 characters are five times as long
    add_transcript(run, [(json.dumps({"type": "assistant", "message": {"id": f"m{i}", "content": [
        {"type": "text", "text": f"step {i} {long}"}]}}), T0 + i) for i in range(MAX_STEPS + 500)])
    page = render_html(run)
    assert len(page.encode()) < 7_000_000
    dom = Dom(page)
    transcript = dom.under("transcript")
    assert f"{MAX_STEPS + 500:,} steps" in transcript and "the page's size cap" in transcript
    assert "more characters" in transcript and 'step 0 &"<&"<' in transcript


# -- the experiment's page (issue 42, 3) ------------------------------------------------------------

def experiment_page(root: Path, port: int) -> tuple[Path, str]:
    """Three runs of an agent with a hostile name, the experiment's page written by `compare --report --html`."""
    from agent2rl_tui.review.experiment_html import render_experiment_html  # noqa: F401 - the module under test

    bad = hostile_text(port)
    for name, scores in (("r1", (30.0,)), ("r2", (50.0,)), ("r3", ())):
        make_run(root, f"20261122T23332{name[-1]}-arith-{name}", agent=bad, scores=scores, baseline=10.0)
    out = root.parent / "experiment"
    proc = cli("compare", "--report", str(out), "--html", root=root)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out / "experiment.html", bad


def assert_experiment_shown(dom: Dom, bad: str) -> None:
    assert_nothing_loads(dom, svgs=4)  # the four scaling charts, inline
    table = dom.under("table")
    assert "+20.00 [" in table and "n=3; 2 of 3 valid" in table  # (20 + 40 + 0) / 3: the silent run counts at 0
    assert one_line(bad) in table and "\x1b" not in dom.all_text.replace("\\x1b", "")
    # Synthetic runs have no report (no iterations): no training seen, every route "none".
    assert "0 of 0" in dom.under("supervised") and "none" in dom.under("routes")


def test_experiment_page_parsed(tmp_path: Path) -> None:
    page, bad = experiment_page(tmp_path / "root", 9)
    assert_experiment_shown(Dom(page.read_text(encoding="utf-8")), bad)


@needs_chromium
def test_experiment_page_in_a_browser(tmp_path: Path, beacon: int) -> None:
    page, bad = experiment_page(tmp_path / "root", beacon)
    assert_experiment_shown(Dom(browser_dom(page, tmp_path / "profile")), bad)
    assert Beacon.hits == []
