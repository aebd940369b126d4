"""The charts of the record: a run's score trajectory (report/trajectory.svg) and the scaling
across runs (improvement against time, tokens and submissions; expected best of k).

Runs are real run folders written through the store (``synthetic``), with known submissions,
metered calls and transcript tokens; the SVGs are parsed as XML and read back; the CLI runs as
a subprocess; the Compare screen is driven with Textual's pilot.
"""

from __future__ import annotations

import sqlite3
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from support.runs import cli
from support.synthetic import T0, add_llm_calls, add_transcript, claude_lines, make_run

from agent2rl_tui.record.store import RunStore
from agent2rl_tui.review.index import summarize
from agent2rl_tui.review.plots import nice_ticks, trajectory_svg, write_trajectory
from agent2rl_tui.review.report import build_report
from agent2rl_tui.review.scaling import FILES, Point, curves, group_runs, read_scaling, run_points, scaling_svgs

SVG = "{http://www.w3.org/2000/svg}"
HOSTILE = '<script>alert("x")</script>\x1b]52;c;aGk=\x07\u202e&'


def add_sub(run: Path, status: str, at: float, score: float | None = None) -> int:
    with RunStore.of_run(run) as store:
        sub_id = store.add_submission(kind="agent", status=status, model_path="output/x", score=score)
        store.update_submission(sub_id, received_at=at)
    return sub_id


def metered_run(root: Path, name: str = "20261122T233320-arith-example", **kw) -> Path:
    """Scores 44, 69, 50 at 30 s, 60 s, 90 s over a baseline of 3; a failed submission at 100 s,
    a refused one at 110 s, 60 at 120 s; metered calls at 10 s, 30 s, 45 s and 200 s."""
    run = make_run(root, name, scores=(44.0, 69.0, 50.0), baseline=3.0, n_items=100, **kw)
    add_sub(run, "failed", T0 + 100)
    add_sub(run, "rejected", T0 + 110)
    add_sub(run, "scored", T0 + 120, 60.0)
    add_llm_calls(run, [(T0 + 10, 1000, 100), (T0 + 30, 500, 50), (T0 + 45, 2000, 200), (T0 + 200, 9999, 1)])
    return run


def svg_of(text: str) -> ET.Element:
    return ET.fromstring(text)  # raises on anything not well-formed


def polylines(root: ET.Element) -> list[ET.Element]:
    return root.findall(f".//{SVG}polyline")


def coords(line: ET.Element) -> list[tuple[float, float]]:
    return [tuple(map(float, p.split(","))) for p in line.get("points").split()]


def legend(root: ET.Element) -> list[str]:
    return ["".join(t.itertext()) for t in root.findall(f".//{SVG}g[@class='legend']/{SVG}text")]


def test_run_points_follow_the_record(tmp_path: Path) -> None:
    run = metered_run(tmp_path)
    assert run_points(run) == [
        Point(1, 30.0, 1650, 1, 44.0, 44.0, 41.0),  # the call at the very moment of submitting counts
        Point(2, 60.0, 3850, 2, 69.0, 69.0, 66.0),
        Point(3, 90.0, 3850, 3, 50.0, 69.0, 66.0),  # worse than the best: the best so far holds
        Point(6, 120.0, 3850, 5, 60.0, 69.0, 66.0),  # the failed one counts, the refused one does not
    ]


def test_tokens_from_the_transcript_else_none(tmp_path: Path) -> None:
    streamed = make_run(tmp_path, "streamed", scores=(20.0, 40.0), n_items=100)
    add_transcript(streamed, claude_lines(30))  # 1,200 in and 40 out every 6 s from T0
    assert [(p.elapsed_s, p.tokens, p.improvement) for p in run_points(streamed)] == [(30.0, 6 * 1240, 17.0),
                                                                                      (60.0, 10 * 1240, 37.0)]
    bare = make_run(tmp_path, "bare", scores=(20.0,), n_items=100)
    assert [p.tokens for p in run_points(bare)] == [None]
    with RunStore.of_run(bare) as store:
        store.update_run(budget_start=None)  # the agent never started
    assert run_points(bare) == []


def test_nice_ticks_cover_the_range() -> None:
    assert nice_ticks(0, 45) == [0, 10, 20, 30, 40, 50]
    assert nice_ticks(-3.2, 1.5) == [-4, -3, -2, -1, 0, 1, 2]
    assert nice_ticks(1, 3, integer=True) == [1, 2, 3]


def test_trajectory_svg_draws_the_run(tmp_path: Path) -> None:
    run = metered_run(tmp_path)
    report = build_report(run)
    path = write_trajectory(run, report)
    assert path == run / "report" / "trajectory.svg"
    root = svg_of(path.read_text(encoding="utf-8"))
    assert path.read_text(encoding="utf-8") == trajectory_svg(report)
    subs, best = polylines(root)
    assert len(coords(subs)) == 4 and len(root.findall(f".//{SVG}circle")) == 4  # the four scored submissions
    # Best so far as a step line to the budget's end: 44, 69, 69, 69 then held; 4 points + the end, with corners.
    steps = coords(best)
    assert len(steps) == 9 and len({y for _, y in steps}) == 2
    mark = root.find(f".//{SVG}polygon[@class='mark']")
    assert mark.find(f"{SVG}title").text == "best: #2"
    mark_y = float(mark.get("points").split()[1].split(",")[1])  # the diamond's right corner: its centre's height
    assert mark_y == min(y for _, y in coords(subs))  # the highest point is the best one
    ref = root.find(f".//{SVG}line[@class='ref']")
    assert ref.find(f"{SVG}title").text == "baseline"
    assert "baseline 3" in legend(root) and "best (#2)" in legend(root)
    # The x axis runs over the budget (300 s: 5 minutes), the step line reaches its end.
    assert max(x for x, _ in steps) == max(float(t.get("x")) for t in root.findall(f".//{SVG}text[@class='xtick']"))
    assert [t.text for t in root.findall(f".//{SVG}text[@class='xtick']")][-1] == "5"


def three_runs(root: Path) -> list:
    a1 = metered_run(root, "a1")  # improvement 66, metered
    a2 = make_run(root, "a2", scores=(30.0, 43.0), baseline=3.0, n_items=100)  # improvement 40, no tokens
    b1 = make_run(root, "b1", agent="codex", scores=(13.0,), baseline=3.0, n_items=100)  # improvement 10
    return [summarize(r) for r in (a1, a2, b1)]


def test_scaling_curves_and_svgs(tmp_path: Path) -> None:
    runs = three_runs(tmp_path)
    groups = group_runs(runs)
    base = "tiny-llama (weights h3.0)"  # the base model with its weights' hash: two models never share a line
    a, b = f"arith · - · example · scripted · {base}", f"arith · - · codex · scripted · {base}"
    assert list(groups) == [b, a] and [r.id for r in groups[a]] == ["a1", "a2"]
    scaling = read_scaling(groups)
    assert curves(scaling, "k") == {b: [(b, [(1.0, 10.0)])], a: [(a, [(1.0, 53.0), (2.0, 66.0)])]}
    assert curves(scaling, "time")[a] == [("a1", [(0.5, 41.0), (1.0, 66.0), (1.5, 66.0), (2.0, 66.0)]),
                                          ("a2", [(0.5, 27.0), (1.0, 40.0)])]
    assert curves(scaling, "submissions")[a][0][1] == [(1.0, 41.0), (2.0, 66.0), (3.0, 66.0), (5.0, 66.0)]
    assert curves(scaling, "tokens") == {b: [], a: [("a1", [(1650.0, 41.0), (3850.0, 66.0), (3850.0, 66.0),
                                                            (3850.0, 66.0)])]}
    svgs = scaling_svgs(groups)
    assert sorted(svgs) == sorted(FILES.values())
    for axis, runs_drawn in (("time", 3), ("submissions", 3), ("tokens", 1), ("k", 2)):
        root = svg_of(svgs[FILES[axis]])
        lines = polylines(root)
        assert len(lines) == runs_drawn, axis  # one per run (per group for k)
        assert legend(root)[:2] == [b, a]
        colours = {line.find(f"{SVG}title").text: line.get("stroke") for line in lines}
        if axis in ("time", "submissions"):
            assert colours["a1"] == colours["a2"] != colours["b1"]  # a colour per group
    assert "2 of 3 runs have no points here" in legend(svg_of(svgs[FILES["tokens"]]))


def assert_inert(svg: str) -> ET.Element:
    root = svg_of(svg)
    assert not any(el.tag.endswith("script") for el in root.iter())
    assert "<script" not in svg and "\u202e" not in svg
    assert all(c in "\n" or ord(c) >= 32 for c in svg) and not any(0x7F <= ord(c) <= 0x9F for c in svg)
    return root


def test_hostile_names_come_out_escaped_and_inert(tmp_path: Path) -> None:
    run = make_run(tmp_path, "hostile", agent=HOSTILE, task="arith", scores=(20.0,), n_items=100)
    with RunStore.of_run(run) as store:
        store.conn.execute("UPDATE run SET id = ?", (HOSTILE,))
    root = assert_inert(trajectory_svg(build_report(run)))
    title = "".join(root.find(f".//{SVG}text[@class='title']").itertext())
    assert title.startswith('<script>alert("x")</script>\\x1b]52;c;aGk=\\x07\\u202e&: score')  # as text, escaped
    svgs = scaling_svgs(group_runs([summarize(run)]))
    for svg in svgs.values():
        root = assert_inert(svg)
        assert legend(root)[0] == ('arith · - · <script>alert("x")</script>\\x1b]52;c;aGk=\\x07\\u202e& · scripted · '
                                   'tiny-llama (weights h3.0)')
    line = polylines(svg_of(svgs[FILES["time"]]))[0]
    assert line.find(f"{SVG}title").text == '<script>alert("x")</script>\\x1b]52;c;aGk=\\x07\\u202e&'


def test_cli_writes_the_plots(tmp_path: Path) -> None:
    root = tmp_path / "root"
    three_runs(root)
    out = tmp_path / "plots"
    proc = cli("compare", "--plots", str(out), root=root)
    assert proc.returncode == 0, proc.stderr
    assert [line for line in proc.stdout.splitlines() if line.endswith(".svg")] == [str(out / f) for f in FILES.values()]
    assert len(polylines(svg_of((out / FILES["time"]).read_text(encoding="utf-8")))) == 3


def test_campaign_results_writes_the_plots(tmp_path: Path, tiny_model: Path) -> None:
    from agent2rl_tui.run.campaign import create_campaign

    root = tmp_path / "root"
    spec = (f'name = "scale"\ntasks = ["arith"]\nbase_models = ["{tiny_model}"]\nseeds = [0, 1]\nbudget = "4m"\n\n'
            '[[agents]]\nagent = "command"\ncommand = "echo nothing"\n')
    folder = create_campaign(spec, root)
    runs = [make_run(folder, f"r{i}", agent="command", driver=None, scores=scores, baseline=3.0, n_items=100)
            for i, scores in enumerate(((10.0,), (20.0, 33.0)))]
    db = sqlite3.connect(folder / "campaign.db", isolation_level=None)
    for i, run in enumerate(runs, start=1):
        db.execute("UPDATE runs SET run_dir = ?, started_at = ? WHERE id = ?", (str(run), T0, i))
    db.close()
    out = tmp_path / "plots"
    proc = cli("campaign", "results", str(folder), "--plots", str(out), root=root)
    assert proc.returncode == 0, proc.stderr
    assert str(out / FILES["k"]) in proc.stdout.splitlines()
    k_line = polylines(svg_of((out / FILES["k"]).read_text(encoding="utf-8")))
    assert len(k_line) == 1 and len(coords(k_line[0])) == 2  # one group of two runs: k = 1, 2
    assert len(polylines(svg_of((out / FILES["time"]).read_text(encoding="utf-8")))) == 2


@pytest.mark.asyncio
async def test_compare_screen_plots_the_scaling_and_v_switches_the_axis(tmp_path: Path) -> None:
    from support.tui import footer_keys, open_runs, settle

    from agent2rl_tui.ui.app import Agent2RLApp
    from agent2rl_tui.ui.screens.compare import CompareScreen

    runs = three_runs(tmp_path)
    app = Agent2RLApp(root=tmp_path, clock=lambda: T0 + 400, refresh_s=3600)
    async with app.run_test(size=(160, 48)) as pilot:
        await open_runs(pilot)
        screen = CompareScreen(runs)
        app.push_screen(screen)
        await settle(pilot, lambda: screen.scaling is not None, what="the scaling to be read")
        plot = screen.query_one("#scaling")
        assert plot.size.height >= 10
        await pilot.pause()
        drawn = plot.render().plain
        assert "best improvement over the baseline vs time" in drawn and "minutes since the budget" in drawn
        assert "example" in drawn and "codex" in drawn  # the groups' legend
        assert footer_keys(screen).get("v") == "Scaling axis"
        for key_axis, words in (("tokens", "tokens used by the agent"), ("submissions", "submissions made"),
                                ("k", "expected best improvement of k runs"), ("time", "minutes since")):
            await pilot.press("v")
            assert screen.axis == key_axis
            await pilot.pause()
            assert words in plot.render().plain, key_axis
        assert len(screen.query_one("#compare").rows) == 2  # the table is still there
