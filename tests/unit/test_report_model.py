"""The typed report (``review.report_model.Report``): the same report.json, report.md and
report.html bytes as version 1 wrote, any old or damaged report.json read without a crash and
written back as found.

The golden files (tests/fixtures/report_v1/) were written by the report before it was typed, for
the runs of tests/support/report_golden.py (fixed times, so the comparison is exact; only the time the
report was written, report.json's ``generated_at`` and the page's footer, is normalised).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from support.report_golden import GOLDEN, RUNS, build, normalised, normalised_page
from support.runs import cli

from agent2rl_tui.review.html_report import render_html
from agent2rl_tui.review.plots import trajectory_svg
from agent2rl_tui.review.report import build_report, read_report, render_markdown, write_report
from agent2rl_tui.review.report_model import REPORT_VERSION, Report, SubmissionEntry
from agent2rl_tui.review.typed_json import Node


def golden(name: str) -> tuple[str, str]:
    """The version-1 report.json (normalised) and report.md of a golden run."""
    return ((GOLDEN / f"{name}.report.json").read_text(encoding="utf-8"),
            (GOLDEN / f"{name}.report.md").read_text(encoding="utf-8"))


def golden_page(name: str) -> str:
    """The version-1 report.html (normalised) of a golden run."""
    return (GOLDEN / f"{name}.report.html").read_text(encoding="utf-8")


def untyped(node: Any, where: str = "") -> set[str]:
    """Every key a node (and the nodes under it) kept in ``rest``: unknown or unreadable."""
    if isinstance(node, list):
        return set().union(*(untyped(n, f"{where}[]") for n in node))
    if isinstance(node, dict):
        return set().union(*(untyped(n, f"{where}.{k}") for k, n in node.items()))
    if not isinstance(node, Node):
        return set()
    found = {f"{where}.{k}".lstrip(".") for k in node.rest}
    for name, value in vars(node).items():
        if name not in ("rest", "order"):
            found |= untyped(value, f"{where}.{name}")
    return found


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The golden runs, each built once and its report written by today's code."""
    root = tmp_path_factory.mktemp("golden-runs")
    runs = {name: build(root, name) for name in RUNS}
    for run in runs.values():
        write_report(run)
    return runs


@pytest.mark.parametrize("name", RUNS)
def test_report_files_keep_their_version_1_bytes(built: dict[str, Path], name: str) -> None:
    old_json, old_md = golden(name)
    out = built[name] / "report"
    assert normalised((out / "report.json").read_text(encoding="utf-8")) == old_json
    assert (out / "report.md").read_text(encoding="utf-8") == old_md
    data = json.loads(old_json)  # iterations.jsonl: report.json's iterations, one a line
    assert (out / "iterations.jsonl").read_text(encoding="utf-8") == "".join(
        json.dumps(it) + "\n" for it in data["iterations"])
    assert (out / "trajectory.svg").read_text(encoding="utf-8") == trajectory_svg(Report.from_json(data))
    assert normalised_page(render_html(built[name])) == golden_page(name)


@pytest.mark.parametrize("name", RUNS)
def test_a_version_1_file_reads_back_exactly_and_renders_the_same(built: dict[str, Path], name: str) -> None:
    old_json, old_md = golden(name)
    data = json.loads(old_json)
    report = Report.from_json(data)
    assert report.to_json() == data and json.dumps(report.to_json(), indent=2) == old_json
    assert render_markdown(report) == old_md  # read back from disk, report.md is the same
    assert normalised_page(render_html(built[name], report)) == golden_page(name)  # and so is the page
    assert report.version == REPORT_VERSION == Report.REPORT_VERSION == 1
    # Every key of today's files is typed: nothing but the containment event's own extra key is left over.
    assert untyped(report) <= {"containment.requested"}


def test_the_typed_tree_holds_the_run(built: dict[str, Path]) -> None:
    report = build_report(built["example"])
    assert (report.run_id, report.task, report.best and report.best.submission_id) == (
        "20261122T233320-arith-example", "arith", 2)
    first, second = report.submissions
    assert isinstance(first, SubmissionEntry) and first.significance is not None
    assert second.significance is not None and second.significance.vs_previous_best is not None
    assert second.significance.vs_previous_best.label == "better" and second.significance.previous_best == 1
    assert report.route == "SFT → GRPO" and [it.train_type for it in report.iterations] == ["SFT", "GRPO"]
    assert report.iterations[0].key_config["lr"].value == "0.002"
    assert report.narrative is not None and report.narrative.entries[2].error == "the summarizer answered 500"
    assert report.usage is not None and report.usage.source == "none"
    assert report.contamination is not None and report.contamination.files_scanned == 6
    assert report.containment.contained is True and report.containment.rest == {"requested": True}
    assert report.vitals.samples == 3 and report.agent_sessions is not None and report.agent_sessions.files == 1
    history = build_report(built["history"])
    assert history.baseline.strict is not None and history.baseline.strict.rule == "the last number on the last line"
    assert history.baseline.judged is not None and history.baseline.judged.judge_model == "judge-1"
    assert [w.kind for w in history.warnings] == ["grader_restarted"]
    assert history.metrics.base_copy_count == 1 and history.contamination_found is history.contamination
    assert "version" not in history.to_json()  # version 1 writes no version key


LATER_KEYS = ("prompt_profile", "decoding_row", "resolution", "route", "iterations", "diagnosis_error", "narrative",
              "agent_sessions", "usage", "containment", "contamination")
"""Keys report.json gained over time: an early file has none of them."""


def test_an_early_report_json_reads_renders_and_is_written_back_as_found() -> None:
    data = json.loads(golden("example")[0])
    for name in LATER_KEYS:
        del data[name]
    for sub in data["submissions"]:
        for name in ("strict", "judged", "significance"):
            del sub[name]
    report = Report.from_json(data)
    assert report.to_json() == data and list(report.to_json()) == list(data)
    assert report.usage is None and report.iterations == [] and report.narrative is None and report.resolution is None
    assert report.contamination_found is None and report.containment.contained is None
    md = render_markdown(report)
    assert md.startswith("# Run 20261122T233320-arith-example\n") and "contamination check: not run" in md
    assert "Paired on the same items" not in md and "## Iterations" not in md
    assert "| 2 | 1m00s | scored | 69.00 | 66.00 | 2.4 | 3 | `output/v2` |" in md


def test_unknown_keys_and_wrong_types_are_kept_where_they_were() -> None:
    data = json.loads(golden("history")[0])
    data = {"version": 2, **data, "later_key": {"x": [1]}}
    data["submissions"][1]["score"] = "high"
    data["submissions"][1]["later"] = 1
    data["metrics"] = {"n_valid": 4.0, "novel_metric": 0.5, **{k: v for k, v in data["metrics"].items() if k != "n_valid"}}
    report = Report.from_json(data)
    assert report.to_json() == data and list(report.to_json()) == list(data)
    assert list(report.to_json()["metrics"]) == list(data["metrics"])
    assert report.version == 2 and report.rest["later_key"] == {"x": [1]}
    assert report.submissions[1].score is None and report.submissions[1].rest == {"score": "high", "later": 1}
    assert report.metrics.n_valid is None and ("novel_metric", 0.5) in report.metrics.rows()
    assert "| novel_metric | 0.500 |" in render_markdown(report)
    assert Report(run_id="r", version=2).to_json()["version"] == 2  # a later version writes its key first
    assert next(iter(Report(run_id="r", version=2).to_json())) == "version"


DAMAGED_VALUES: list[Any] = [None, [], [1, "x"], "text", 7, -1.5, True, {}, {"unexpected": [None]}]


def _damaged(base: dict[str, Any]) -> list[dict[str, Any]]:
    """``base`` with one value replaced by each damaged value: every key of the report, of its
    first submission, of the baseline, of the first iteration and of the first paired comparison."""
    out = []
    paths: list[tuple[Any, ...]] = [(k,) for k in base]
    paths += [("submissions", 0, k) for k in base["submissions"][0]]
    paths += [("baseline", k) for k in base["baseline"]]
    paths += [("iterations", 0, k) for k in base["iterations"][0]]
    paired = [i for i, sub in enumerate(base["submissions"]) if (sub["significance"] or {}).get("vs_baseline")]
    paths += [("submissions", i, "significance", "vs_baseline", k)
              for i in paired[:1] for k in base["submissions"][i]["significance"]["vs_baseline"]]
    for path in paths:
        for value in DAMAGED_VALUES:
            data = copy.deepcopy(base)
            here: Any = data
            for step in path[:-1]:
                here = here[step]
            here[path[-1]] = value
            out.append(data)
    return out


NESTED_DAMAGE: list[dict[str, Any]] = [
    {"submissions": {"1": {"submission_id": 1}}},
    {"iterations": [5, {"iteration": "one"}, {"iteration": 1, "time": {"idle_s": "x"}, "key_config": {"lr": 3}}]},
    {"vitals": {"samples": 3, "gpus": {"0": {"util_pct_max": "x", "mem_used_max": None}}, "mem_total": "64"}},
    {"vitals": {"samples": 2, "gpus": [1, 2], "agent_rss_max": 1.5}},
    {"usage": {"source": "metered", "meter": {"metered": True, "caps": {"max_tokens": "x", "max_cost_usd": [1]}}}},
    {"usage": {"source": "metered", "tokens_in": "many"}},
    {"contamination": {"hits": [{"path": 3}]}, "narrative": {"model": "m", "entries": [{"text": "no iteration"}]}},
    {"revisions": {"count": "x", "capture_rules": "abc", "left_out_at_end": [1]}, "transcript": {"by_kind": [1]}},
    {"resolution": {"n": "many", "points": None}, "best": {"submission_id": "x"}, "containment": {"contained": "yes"}},
    {"warnings": [None, {"at": 5, "message": ["x"]}], "agent_sessions": {"folders": "x", "files": -1}},
    {"baseline": {"strict": {"score": "x", "rule": 5}, "judged": {"win_rate": "x", "judge_model": 3}}},
]
"""Damage below the first level: each part read as far as it can be, the rest kept."""


@pytest.mark.parametrize("name", ["example", "history"])
def test_a_damaged_report_json_never_raises_and_still_renders(built: dict[str, Path], name: str) -> None:
    base = json.loads(golden(name)[0])
    cases: list[Any] = _damaged(base) + [None, [], "report", 3, [base], *NESTED_DAMAGE]
    for data in cases:
        report = Report.from_json(data)
        if isinstance(data, dict):
            assert report.to_json() == data
        assert render_markdown(report).startswith("# Run ")
        assert trajectory_svg(report).startswith("<svg")
    for data in cases[:: max(1, len(cases) // 40)]:  # the page too (it reads the run folder besides)
        assert "</html>" in render_html(built[name], Report.from_json(data))


def test_a_partly_readable_list_keeps_its_readable_items() -> None:
    data = json.loads(golden("example")[0])
    data["submissions"].insert(1, "not a submission")
    data["iterations"].insert(0, {"iteration": "one"})
    report = Report.from_json(data)
    assert [s.submission_id for s in report.submissions] == [1, 2]
    assert [it.iteration for it in report.iterations] == [1, 2]
    assert report.to_json() == data
    md = render_markdown(report)
    assert "| 2 | 1m00s | scored | 69.00 |" in md and "### Iteration 2: submission 2, GRPO" in md


def test_the_cli_reads_report_json_through_the_typed_report(built: dict[str, Path], tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    from agent2rl_tui.cli.runs import _print_result

    run = built["history"]
    _print_result(run)
    printed = capsys.readouterr().out
    assert "baseline: 10.00" in printed and "submission 2: scored    score 10.00" in printed
    assert "submission 3: failed    score -  (cannot load output/v2: config.json missing)" in printed
    assert "best: 30.00 (submission 4)" in printed and "improvement: 20.00" in printed
    damaged = tmp_path / "damaged"
    (damaged / "report").mkdir(parents=True)
    (damaged / "run.db").write_bytes((run / "run.db").read_bytes())
    data = json.loads((run / "report" / "report.json").read_text(encoding="utf-8"))
    data.update(baseline=[1], best="x", submissions=[{"submission_id": 9, "error": 5}, 3])
    (damaged / "report" / "report.json").write_text(json.dumps(data), encoding="utf-8")
    _print_result(damaged)
    printed = capsys.readouterr().out
    assert "baseline: -" in printed and "submission 9: -         score -" in printed and "best: -" in printed
    (damaged / "report" / "report.json").write_text("{not json", encoding="utf-8")
    assert read_report(damaged) is None
    _print_result(damaged)
    assert "baseline:" not in capsys.readouterr().out


def test_run_show_json_is_the_report_with_the_runs_status(built: dict[str, Path]) -> None:
    proc = cli("run", "show", "--json", str(built["history"]))
    assert proc.returncode == 0, proc.stderr
    shown = json.loads(proc.stdout)
    expected = json.loads(golden("history")[0])
    assert list(shown) == list(expected)
    assert {k: v for k, v in shown.items() if k != "generated_at"} == {
        k: v for k, v in expected.items() if k != "generated_at"}


def test_the_supervisors_result_line(built: dict[str, Path]) -> None:
    from agent2rl_tui.run.closing import result_line

    report = build_report(built["history"])
    assert result_line(report) == "result: baseline 10.00, best 30.00, improvement 20.00, 6 submission(s)"
