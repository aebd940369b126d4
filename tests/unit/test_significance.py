"""Paired comparisons of two evaluations on the same items (review/significance.py).

Checked against values a reader can verify by hand or with scipy: the exact McNemar test is a
two-sided binomial test on the discordant pairs; the paired bootstrap's interval covers the
true difference of a known distribution.
"""

from __future__ import annotations

import random

import pytest

from agent2rl_tui.review.significance import BETTER, NOISE, WORSE, compare, mcnemar_exact, paired_interval, resolution


def test_mcnemar_exact_is_the_two_sided_binomial_test_on_the_flipped_items() -> None:
    assert mcnemar_exact(0, 0) == 1.0
    assert mcnemar_exact(6, 0) == pytest.approx(2 / 64)  # six flips all one way: 2 x 0.5^6
    assert mcnemar_exact(5, 0) == pytest.approx(2 / 32)  # five are not enough at 5%
    assert mcnemar_exact(10, 2) == pytest.approx(2 * (1 + 12 + 66) / 4096)  # scipy.stats.binomtest(2, 12): 0.0386
    assert mcnemar_exact(3, 3) == 1.0


def test_a_gain_of_a_few_flipped_items_is_within_noise_and_a_clear_one_is_better() -> None:
    base = [0] * 100
    few = [1] * 5 + [0] * 95  # +5 points, all five flips one way: p = 0.0625
    assert compare(base, few).label == NOISE
    many = [1] * 12 + [0] * 88
    c = compare(base, many)
    assert c.label == BETTER and c.gained == 12 and c.lost == 0 and c.diff == pytest.approx(12.0)
    assert 0 < c.low < 12 < c.high
    assert compare(many, base).label == WORSE
    # The same means, but items that swap places: a net +2 out of 40 flips is noise.
    rng = random.Random(1)
    before = [rng.randint(0, 1) for _ in range(200)]
    after = list(before)
    flips = [i for i, v in enumerate(before) if v == 0][:21] + [i for i, v in enumerate(before) if v == 1][:19]
    for i in flips:
        after[i] = 1 - after[i]
    c = compare(before, after)
    assert (c.gained, c.lost, c.label) == (21, 19, NOISE)


def test_episode_rewards_are_compared_by_the_paired_bootstrap() -> None:
    rng = random.Random(0)
    before = [rng.random() for _ in range(300)]
    after = [min(1.0, b + 0.1 + rng.gauss(0, 0.05)) for b in before]
    c = compare(before, after)
    assert c.p_value is None and c.label == BETTER and c.low > 0
    noisy = [b + rng.gauss(0, 0.3) for b in before]
    assert compare(before, noisy).label == NOISE
    diff, low, high = paired_interval(before, after)
    assert low < diff < high


def test_two_evaluations_of_different_items_cannot_be_compared() -> None:
    with pytest.raises(ValueError, match="not the same items"):
        compare([1, 0, 1], [1, 0])


def test_the_resolution_shrinks_with_the_eval_size() -> None:
    # 100 binary items, half of them flipping: about 20 points; 1,319 (GSM8K): about 5.5.
    assert resolution(100) == pytest.approx(19.8, abs=0.1)
    assert resolution(1319) == pytest.approx(5.45, abs=0.05)
    assert resolution(400) == pytest.approx(resolution(100) / 2)


def test_a_runs_submissions_are_compared_with_its_baseline_item_by_item(tmp_path) -> None:  # noqa: ANN001
    """On a real twc run folder (the real games, the grader's result rows): a submission that
    wins all 12 games the baseline lost is better; one that wins 3 more is within noise."""
    import shutil

    from support.synthetic import make_episode_run

    from agent2rl_tui.review.items import significance
    from agent2rl_tui.review.runview import read_rows

    if shutil.which("java") is None:
        pytest.skip("java is missing (TextWorldExpress runs on it): sudo apt install openjdk-17-jre-headless")
    run = make_episode_run(tmp_path, "20261126T120000-twc-example",
                           [["nonsense"] * 12, ["gold"] * 12, ["gold"] * 3 + ["nonsense"] * 9])
    base, all_won, three = (read_rows(run, n) for n in (0, 1, 2))  # the baseline is evaluation 0
    c = significance(all_won, base)
    assert c is not None and (c.gained, c.lost, c.label) == (12, 0, BETTER) and c.diff == pytest.approx(100.0)
    c = significance(three, base)
    assert c is not None and (c.gained, c.lost, c.label) == (3, 0, NOISE) and c.p_value == pytest.approx(0.25)
    assert significance(three, all_won).label == WORSE  # 9 games lost against the better one
    assert significance(three, []) is None


def test_the_report_says_which_gains_are_more_than_noise(tmp_path) -> None:  # noqa: ANN001
    """report.json and report.md: each scored submission against the baseline and the best
    before it, on the same items, with its interval and label."""
    import json
    import shutil

    from support.synthetic import make_episode_run

    from agent2rl_tui.review.report import write_report

    if shutil.which("java") is None:
        pytest.skip("java is missing (TextWorldExpress runs on it): sudo apt install openjdk-17-jre-headless")
    run = make_episode_run(tmp_path, "20261126T120000-twc-example",
                           [["nonsense"] * 12, ["gold"] * 3 + ["nonsense"] * 9, ["gold"] * 12])
    write_report(run)
    report = json.loads((run / "report" / "report.json").read_text())
    first, second = (s["significance"] for s in report["submissions"])
    assert first["vs_baseline"]["label"] == NOISE and first["vs_previous_best"] is None
    assert second["vs_baseline"]["label"] == BETTER and second["previous_best"] == 1
    assert second["vs_previous_best"]["gained"] == 9 and second["vs_previous_best"]["label"] == BETTER
    md = (run / "report" / "report.md").read_text()
    assert "| 1 | +25.00 [" in md and "**within noise**; McNemar p = 0.2500, 3 gained, 0 lost" in md
    assert "| 2 | +100.00 [+100.00, +100.00] **better**" in md


def test_agent2rl_tui_tasks_states_each_tasks_resolution() -> None:
    from support.runs import cli

    out = cli("tasks").stdout
    lines = out.splitlines()
    coin = lines[next(i for i, line in enumerate(lines) if line.startswith("coin "))+ 1]
    assert "resolution: 19.8 points on its 100 eval items" in coin
    assert "resolution: 28.0 points on its 50 eval items" in out  # twc: 50 games

    def after(name: str) -> str:  # the lines of one task
        i = next(i for i, line in enumerate(lines) if line.startswith(name + " "))
        return "\n".join(lines[i + 1:i + 3])

    # A benchmark states its eval size before `data prepare` (this machine has prepared none of them).
    assert "resolution: 5.5 points on its 1319 eval items" in after("gsm8k")
    assert "resolution: 7.0 points on its 805 eval items" in after("alpacaeval")
    assert "resolution: 17.1 points on its 134 eval items" in after("alfworld")


def test_judged_preferences_are_compared_by_the_paired_bootstrap() -> None:
    from agent2rl_tui.record.results import ItemRow
    from agent2rl_tui.review.items import significance

    def items(prefs: list[float | None]) -> list[ItemRow]:
        return [ItemRow(index=i, prompt="", output="", extracted=None, gold="", correct=p is not None and p > 1.5,
                        extra={"preference": p}) for i, p in enumerate(prefs)]

    rng = random.Random(1)
    base = [1.0 + rng.random() * 0.6 for _ in range(200)]  # the reference mostly preferred
    better = [min(2.0, p + 0.3) for p in base]
    c = significance(items(better), items(base))
    assert c is not None and c.p_value is None and c.label == BETTER and 29.0 < c.diff < 30.1
    # An item the judge failed on (no preference) is left out of the pairs, not counted a loss.
    c2 = significance(items([None, *better[1:]]), items(base))
    assert c2 is not None and c2.n == 199


def test_compare_pairs_runs_graded_on_the_same_items(tmp_path) -> None:  # noqa: ANN001
    from support.runs import cli
    from support.synthetic import make_run

    root = tmp_path / "runs"
    make_run(root, "weak", scores=(20.0,), baseline=10.0, n_items=100)
    make_run(root, "strong", scores=(70.0,), baseline=10.0, n_items=100)
    make_run(root, "other-draw", scores=(50.0,), baseline=10.0, n_items=50)
    out = cli("compare", root=root).stdout
    assert "paired on the same eval items" in out
    line = next(line for line in out.splitlines() if "strong vs weak" in line or "weak vs strong" in line)
    assert ("+50.00 points" in line and "strong vs weak" in line and "better" in line) or \
        ("-50.00 points" in line and "weak vs strong" in line and "worse" in line)
    assert "1 run(s) shared their eval items with no other run" in out
