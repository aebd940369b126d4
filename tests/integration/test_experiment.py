"""The paper's experiment from one command (issue 42, 3): a real campaign, two modes x two base models x
two seeds, through `campaign start` and `campaign report --html`.

The agent is a shell script (the `command` agent, contained) that reads its mode from its
instructions: in sft-only mode it runs an SFT script and submits once; in free mode, on base model
a, it runs SFT, submits, runs GRPO, submits again; on base model b it submits nothing. The grader
is real with a scripted eval worker: the baseline scores 10, a run's first submission 30, its second
60. So, by hand: a·free +50 (route SFT then RL), a·sft-only +20 (SFT), b·free +0 with 0 of 2 valid
(none), b·sft-only +20 (SFT); six best routes with training, all six supervised.
"""

from __future__ import annotations

import csv
import json
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest
from support.agent_scripts import MUTATE, SUBMIT, stand_in_trainer
from support.runs import cli, scripted_env, toml_inline, wait_for

from agent2rl_tui.run.campaign import Campaign
from agent2rl_tui.tasks.tinymodel import build_tiny_model

SCORES = json.dumps({"scores": {"0": 10.0, "1": 30.0, "2": 60.0}, "default_score": 0.0})

AGENT = r"""
set -e
mkdir -p code output
if grep -q "SFT-only mode" instructions.md; then
  printf '%s' "$SFT_CODE" > code/sft.py && "$PY" code/sft.py
  "$PY" -c "$MUTATE_CODE" output/m1 1 && "$PY" -c "$SUBMIT_CODE" output/m1
elif [ "$BASE_MODEL" = tiny-a ]; then
  printf '%s' "$SFT_CODE" > code/sft.py && "$PY" code/sft.py
  "$PY" -c "$MUTATE_CODE" output/m1 1 && "$PY" -c "$SUBMIT_CODE" output/m1
  printf '%s' "$GRPO_CODE" > code/grpo.py && "$PY" code/grpo.py
  "$PY" -c "$MUTATE_CODE" output/m2 2 && "$PY" -c "$SUBMIT_CODE" output/m2
fi
sleep 2
"""

CAMPAIGN = """
name = "modes"
tasks = ["arith"]
base_models = ["{a}", "{b}"]
modes = ["free", "sft-only"]
seeds = [0, 1]
budget = "3m"
max_parallel = 2

[[agents]]
agent = "command"
command = '''{agent}'''

[options]
grace = "2s"
env = {env}
"""


class Sections(HTMLParser):
    """The text of each <section id=...> of the page, and every tag seen."""

    def __init__(self, markup: str) -> None:
        super().__init__()
        self.current: str | None = None
        self.text: dict[str, str] = {}
        self.tags: set[str] = set()
        self.feed(markup)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        if tag == "section":
            self.current = dict(attrs).get("id")
            self.text[self.current or ""] = ""

    def handle_data(self, data: str) -> None:
        if self.current is not None:
            self.text[self.current] += data


@pytest.fixture(scope="module")
def campaign(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("experiment")
    a = build_tiny_model(tmp / "tiny-a", seed=0)
    b = build_tiny_model(tmp / "tiny-b", seed=0, weights_seed=1)  # another model: other weights
    env = {"SFT_CODE": stand_in_trainer("SFT", 3), "GRPO_CODE": stand_in_trainer("GRPO", 3), "MUTATE_CODE": MUTATE,
           "SUBMIT_CODE": SUBMIT, "PY": sys.executable}
    spec = CAMPAIGN.format(a=a, b=b, agent=AGENT, env=toml_inline(env))
    path = tmp / "campaign.toml"
    path.write_text(spec, encoding="utf-8")
    proc = cli("campaign", "start", str(path), root=tmp / "root", timeout=120, env=scripted_env(script=SCORES))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "4 cells x 2 seeds = 8 runs" in proc.stdout
    folder = Path(next(x.split(": ", 1)[1] for x in proc.stdout.splitlines() if x.startswith("campaign folder: ")))
    with Campaign(folder) as c:
        wait_for(lambda: c.meta().ended_at, timeout=1200, interval=1, what="the campaign to end")
    return folder


def test_the_campaign_report_gives_the_papers_outputs_checked_by_hand(campaign: Path, tmp_path: Path) -> None:
    out = tmp_path / "report"
    proc = cli("campaign", "report", str(campaign), "--html", "--out", str(out), root=campaign.parent.parent)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    text = proc.stdout
    # The table: a row per agent x driver x base model x mode; the base models told apart by their weights.
    with (out / "table.csv").open(newline="") as fh:
        table = {(r["base_model"].split(" ")[0], r["mode"]): r for r in csv.DictReader(fh)}
    assert sorted(table) == [("tiny-a", "free"), ("tiny-a", "sft-only"), ("tiny-b", "free"), ("tiny-b", "sft-only")]
    expected = {("tiny-a", "free"): (50.0, 2), ("tiny-a", "sft-only"): (20.0, 2),
                ("tiny-b", "free"): (0.0, 0), ("tiny-b", "sft-only"): (20.0, 2)}
    for key, (mean, valid) in expected.items():
        row = table[key]
        assert (float(row["improvement_mean"]), int(row["runs"]), int(row["valid"])) == (mean, 2, valid), row
        assert row["ci95_low"] == ""  # two runs: no interval
    assert table[("tiny-a", "free")]["base_model"] != table[("tiny-b", "free")]["base_model"]
    assert "+0.00 too few runs for an interval; n=2; 0 of 2 valid" in text  # b·free: counted at 0, not dropped
    # The heatmap: mode x task, one per base model.
    with (out / "heatmap.csv").open(newline="") as fh:
        heat = {(r["who"].split(" · ")[2].split(" ")[0], r["mode"]): float(r["improvement_mean"])
                for r in csv.DictReader(fh)}
    assert heat == {("tiny-a", "free"): 50.0, ("tiny-a", "sft-only"): 20.0,
                    ("tiny-b", "free"): 0.0, ("tiny-b", "sft-only"): 20.0}
    # Where the best routes came from.
    with (out / "routes.csv").open(newline="") as fh:
        routes = {r["group"]: r for r in csv.DictReader(fh)}
    totals = {k: sum(int(r[k]) for r in routes.values()) for k in ("SFT", "RL", "SFT then RL", "other", "none")}
    assert totals == {"SFT": 4, "RL": 0, "SFT then RL": 2, "other": 0, "none": 2}
    assert "supervised (SFT alone or first): 6 of 6 best routes with training seen" in text
    # Each run's score at each submission, and the expected best of k.
    with (out / "submissions.csv").open(newline="") as fh:
        subs = list(csv.DictReader(fh))
    free_a = [s for s in subs if "tiny-a" in s["group"] and "free" in s["group"]]
    assert sorted((s["submission"], float(s["score"])) for s in free_a) == [("1", 30.0), ("1", 30.0), ("2", 60.0),
                                                                            ("2", 60.0)]
    with (out / "best_of_k.csv").open(newline="") as fh:
        best_k = [(r["group"], r["k"], float(r["expected_best"])) for r in csv.DictReader(fh)]
    assert [(k, v) for g, k, v in best_k if "tiny-b" in g and "free" in g] == [("1", 10.0), ("2", 10.0)]
    # The sft-only runs kept to their mode (their SFT was seen running).
    for sub in (s for s in subs if "sft-only" in s["group"]):
        assert sub["best_route"] == "SFT"
    # One page, no script: the same numbers.
    page = (out / "experiment.html").read_text(encoding="utf-8")
    dom = Sections(page)
    assert "script" not in dom.tags and "Content-Security-Policy" in page
    assert "6 of 6" in dom.text["routes"] and "+50.00" in dom.text["heatmap"] and "+20.00" in dom.text["heatmap"]
    assert "0 of 2 valid" in dom.text["table"] and "too few runs for an interval" in dom.text["table"]
    assert page.count("<svg") >= 4  # the scaling charts, inline


@pytest.mark.asyncio
async def test_the_campaign_screen_shows_the_same_tables(campaign: Path) -> None:
    from support.tui import open_runs, settle, table_rows
    from textual.widgets import DataTable

    from agent2rl_tui.ui.app import Agent2RLApp
    from agent2rl_tui.ui.screens.campaign import CampaignScreen, CampaignsScreen
    from agent2rl_tui.ui.screens.experiment import ExperimentScreen

    app = Agent2RLApp(root=campaign.parent.parent)
    async with app.run_test(size=(200, 60)) as pilot:
        await open_runs(pilot)
        await pilot.press("g")
        await settle(pilot, lambda: isinstance(app.screen, CampaignsScreen), what="Campaigns")
        await pilot.press("enter")
        await settle(pilot, lambda: isinstance(app.screen, CampaignScreen) and app.screen.loaded, what="the campaign")
        await pilot.press("e")
        await settle(pilot, lambda: isinstance(app.screen, ExperimentScreen) and app.screen.experiment is not None,
                     timeout=60, what="the experiment's tables")
        screen = app.screen
        rows = {r[0].split(" · ")[2].split(" ")[0] + " " + r[0].split(" · ")[3]: r[1]
                for r in table_rows(screen.query_one("#experiment-table", DataTable))}
        assert rows["tiny-a free"].startswith("+50.00 too few runs for an interval; n=2; 2 of 2 valid")
        assert rows["tiny-b free"].startswith("+0.00 too few runs for an interval; n=2; 0 of 2 valid")
        heat = {r[0].split(" · ")[2].split(" ")[0] + " " + r[0].split(" · ")[-1]: r[1]
                for r in table_rows(screen.query_one("#experiment-heatmap", DataTable))}
        assert heat == {"tiny-a free": "+50.00", "tiny-a sft-only": "+20.00", "tiny-b free": "+0.00",
                        "tiny-b sft-only": "+20.00"}
        routes = table_rows(screen.query_one("#experiment-routes", DataTable))
        assert sum(int(r[3]) for r in routes) == 2 and sum(int(r[1]) for r in routes) == 4  # SFT then RL, SFT
