"""Training modes (issue 42, 1): stated to the agent, an axis of campaigns, adherence measured from what ran."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from agent2rl_tui.record import campaign_db
from agent2rl_tui.record.modes import RL_ONLY, SFT_ONLY, mode_section
from agent2rl_tui.record.root import RunError
from agent2rl_tui.record.runconfig import RunConfig
from agent2rl_tui.review.adherence import CANNOT_TELL, KEPT, OUTSIDE, ModeCheck, check_mode
from agent2rl_tui.review.iterations import Iteration
from agent2rl_tui.run.campaign.spec import CampaignSpec


def iteration(n: int, train_type: str, observed: bool | None, submission: int | None = None) -> Iteration:
    return Iteration(n, None, 10.0, "success", 0, None, None, train_type, None, submission_id=submission,
                     observed=observed)


def test_a_mode_is_kept_broken_or_unknown_by_the_training_seen_running() -> None:
    sft_then_grpo = [iteration(1, "SFT", True, 1), iteration(2, "GRPO", True, 2)]
    broken = check_mode(RL_ONLY, sft_then_grpo)
    assert broken is not None and broken.verdict == OUTSIDE and broken.kept is False
    assert broken.outside == ["iteration 1 (submission 1): SFT, seen running"] and broken.seen == ["SFT", "GRPO"]
    assert check_mode(SFT_ONLY, [iteration(1, "SFT", True, 1)]).verdict == KEPT
    # DPO is preference optimisation: outside both; RLOO is RL.
    assert check_mode(SFT_ONLY, [iteration(1, "DPO", True, 1)]).verdict == OUTSIDE
    assert check_mode(RL_ONLY, [iteration(1, "RLOO", True, 1)]).verdict == KEPT
    # Written and never run trains nothing: a GRPO script no process ran does not break sft-only,
    # and an SFT run that was never seen running does not make an rl-only run "kept".
    written = [iteration(1, "SFT", True, 1), iteration(2, "GRPO", False, 2)]
    assert check_mode(SFT_ONLY, written).verdict == KEPT
    assert check_mode(RL_ONLY, [iteration(1, "GRPO", False, 1), iteration(2, "copy_model", True, 2)]).verdict \
        == CANNOT_TELL
    assert check_mode(None, sft_then_grpo) is None and check_mode("free", sft_then_grpo) is None
    assert ModeCheck.from_json(broken.as_json()) == broken


def test_the_mode_is_recorded_only_where_set_and_stated_in_our_words() -> None:
    assert "mode" not in RunConfig().to_json()  # a free run's config keeps its bytes
    assert RunConfig(mode=RL_ONLY).to_json()["mode"] == RL_ONLY
    assert RunConfig.from_json({"mode": "rl-only"}).mode == RL_ONLY
    assert RunConfig.from_json({"mode": "anything"}).mode is None  # damaged: free
    assert mode_section(None) == "" and mode_section("free") == ""
    rl = mode_section(RL_ONLY)
    assert "RL-only mode" in rl and "no SFT, not even as a warm-up" in rl and "recorded" in rl
    assert "SFT-only mode" in mode_section(SFT_ONLY)


CAMPAIGN = """
name = "modes"
tasks = ["arith"]
base_models = ["/models/a", "/models/b"]
modes = ["free", "sft-only"]
seeds = [0, 1]
[[agents]]
agent = "example"
"""


def test_modes_are_an_axis_of_a_campaign(tmp_path: Path) -> None:
    spec = CampaignSpec.from_toml(CAMPAIGN)
    assert [c.key for c in spec.cells] == ["arith · example · - · a", "arith · example · - · a · sft-only",
                                           "arith · example · - · b", "arith · example · - · b · sft-only"]
    queued = spec.queued()
    assert len(queued) == 8 and [q.mode for q in queued[:4]] == [None, None, SFT_ONLY, SFT_ONLY]
    assert spec.request(spec.cells[1], 0, tmp_path).config.mode == SFT_ONLY
    assert spec.request(spec.cells[0], 0, tmp_path).config.mode is None
    # campaign.db keeps each row's mode; one made before modes reads as free.
    campaign_db.create(tmp_path, "modes", 0.0, queued)
    with sqlite3.connect(tmp_path / campaign_db.CAMPAIGN_DB) as db:
        assert [r.mode for r in campaign_db.read_rows(db)][:4] == [None, None, SFT_ONLY, SFT_ONLY]
    old = tmp_path / "old"
    old.mkdir()
    with sqlite3.connect(old / campaign_db.CAMPAIGN_DB) as db:
        db.execute(campaign_db.SCHEMA[1].replace(", mode TEXT)", ")"))
        db.execute("INSERT INTO runs (cell, task, agent, base_model, seed) VALUES ('c', 'arith', 'example', 'm', 0)")
        (row,) = campaign_db.read_rows(db)
    assert row.mode is None and row.task == "arith"
    for bad, said in ((CAMPAIGN.replace('"sft-only"]', '"sft_only"]'), "a list of free, sft-only, rl-only"),
                      (CAMPAIGN + '[options]\nmode = "rl-only"\n', "not both")):
        with pytest.raises(RunError, match=said):
            CampaignSpec.from_toml(bad)
