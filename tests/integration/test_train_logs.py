"""Training curves from the files a real trainer writes (issue 43, 1): transformers' Trainer on the
tiny model, with ``report_to="tensorboard"`` and a checkpoint every 3 steps, in a run's workspace.
The curves come back on the run's clock from its TensorBoard event files (the tensorboard package's
reader) and, where those are gone, from its ``trainer_state.json`` files; the agent's hostile
files (links out, FIFOs, garbage, files too large) are skipped and counted, never followed."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.runs import make_prepared_run

from agent2rl_tui.record.store import RunStore
from agent2rl_tui.review import train_logs
from agent2rl_tui.review.curves import curve_charts, read_curves
from agent2rl_tui.review.train_logs import MAX_STATE_BYTES

TRAINER = """
import sys, torch
from torch.utils.data import Dataset
from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

class Rows(Dataset):
    def __len__(self): return 24
    def __getitem__(self, i):
        ids = torch.tensor([1 + (i + j) % 50 for j in range(12)])
        return {"input_ids": ids, "labels": ids}

model = AutoModelForCausalLM.from_pretrained(sys.argv[1])
args = TrainingArguments(output_dir=sys.argv[2], max_steps=6, logging_steps=1, save_steps=3, per_device_train_batch_size=4,
                         learning_rate=1e-3, report_to=["tensorboard"],
                         disable_tqdm=True, use_cpu=True, save_only_model=True)
Trainer(model=model, args=args, train_dataset=Rows()).train()
"""


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory: pytest.TempPathFactory, tiny_model: Path) -> Path:
    """A run folder whose workspace holds a real Trainer's checkpoints and TensorBoard events."""
    run_dir = make_prepared_run(tmp_path_factory.mktemp("root"), tiny_model)
    output = run_dir / "workspace" / "output" / "sft"
    out = subprocess.run([sys.executable, "-c", TRAINER, str(tiny_model), str(output)], capture_output=True, text=True,
                         timeout=540, env={**os.environ, "HF_HUB_OFFLINE": "1", "CUDA_VISIBLE_DEVICES": ""})
    assert out.returncode == 0, out.stderr[-3000:]
    return run_dir


def _copy(run_dir: Path, tmp_path: Path, events: bool = True) -> Path:
    """A copy of the run folder to change (without the trainer's TensorBoard event files: ``events=False``)."""
    copy = tmp_path / run_dir.name
    shutil.copytree(run_dir, copy, symlinks=True)
    if not events:
        found = list((copy / "workspace").rglob("events.out.tfevents.*"))
        assert found
        for path in found:
            path.unlink()
    return copy


def test_the_curves_come_from_the_trainers_tensorboard_events_on_the_runs_clock(trained_run: Path) -> None:
    with RunStore.of_run(trained_run) as store:
        run = store.run()
    elapsed_min = (time.time() - run.budget_start) / 60
    curves = read_curves(trained_run)
    assert {"loss", "learning_rate", "grad_norm"} <= set(curves.series)
    assert curves.origin["loss"] == "TensorBoard events"
    loss = curves.series["loss"]
    assert len(loss) == 6  # one point a logging step
    assert all(0 <= at <= elapsed_min for at, _ in loss) and [at for at, _ in loss] == sorted(at for at, _ in loss)
    assert curves.notes() == []
    (chart,) = [c for c in curve_charts(curves, [(1, loss[-1][0])]) if "loss as the agent" in c]
    assert "(from TensorBoard events)" in chart and "submission #1" in chart


def test_without_event_files_the_checkpoints_trainer_state_gives_the_same_losses(trained_run: Path, tmp_path: Path) -> None:
    with_events = read_curves(trained_run).series["loss"]
    run_dir = _copy(trained_run, tmp_path, events=False)
    curves = read_curves(run_dir)
    assert curves.origin["loss"] == "trainer_state.json"
    loss = curves.series["loss"]
    assert [round(v, 4) for _, v in loss] == [round(v, 4) for _, v in with_events]
    # Steps 3 and 6 are the two checkpoints' anchors; the others lie on the line through them.
    times = [at for at, _ in loss]
    assert times == sorted(times) and times[0] < times[-1]


def test_a_single_checkpoint_with_no_clock_is_counted_not_placed(trained_run: Path, tmp_path: Path) -> None:
    run_dir = _copy(trained_run, tmp_path, events=False)
    sft = run_dir / "workspace" / "output" / "sft"
    shutil.rmtree(sft / "checkpoint-3")
    curves = read_curves(run_dir)  # no training process was seen by a supervisor: nothing says when step 0 was
    assert "loss" not in curves.series and curves.files.unplaced == 1
    assert any("no clock" in note for note in curves.notes())


def test_the_agents_hostile_log_files_are_skipped_and_counted_never_followed(trained_run: Path, tmp_path: Path) -> None:
    run_dir = _copy(trained_run, tmp_path, events=False)
    sft = run_dir / "workspace" / "output" / "sft"
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    # A link out to a trainer_state.json with made-up losses: never read.
    (outside / "checkpoint-9").mkdir()
    fake = {"global_step": 9, "log_history": [{"step": s, "loss": 99.0} for s in range(1, 10)]}
    (outside / "checkpoint-9" / "trainer_state.json").write_text(json.dumps(fake))
    (sft / "checkpoint-9").mkdir()
    (sft / "checkpoint-9" / "trainer_state.json").symlink_to(outside / "checkpoint-9" / "trainer_state.json")
    (run_dir / "workspace" / "output" / "linked").symlink_to(outside, target_is_directory=True)
    # A FIFO named as an event file (never opened: reading it would block), garbage, and a file too large.
    logs = run_dir / "workspace" / "output" / "tb"
    logs.mkdir()
    os.mkfifo(logs / "events.out.tfevents.1.fifo")
    (logs / "events.out.tfevents.2.garbage").write_bytes(b"\x00\xff not a record" * 100)
    big = run_dir / "workspace" / "output" / "big" / "checkpoint-1"
    big.mkdir(parents=True)
    (big / "trainer_state.json").write_text('{"log_history": [' + " " * (MAX_STATE_BYTES + 1) + "]}")
    (run_dir / "workspace" / "output" / "bad").mkdir()
    (run_dir / "workspace" / "output" / "bad" / "trainer_state.json").write_text("{not json")

    curves = read_curves(run_dir)
    assert 99.0 not in [v for _, v in curves.series["loss"]]
    assert curves.origin["loss"] == "trainer_state.json" and len(curves.series["loss"]) == 6
    # The garbage event file has no scalars (the reader skips what it cannot parse): counted or empty, never a point.
    assert curves.files.skipped >= 2  # the file too large and the malformed JSON
    assert any("could not be read" in note for note in curves.notes())


def test_a_copied_output_folder_is_one_curve_and_absurd_steps_are_dropped(trained_run: Path, tmp_path: Path) -> None:
    run_dir = _copy(trained_run, tmp_path, events=False)
    output = run_dir / "workspace" / "output"
    with_one = read_curves(run_dir).series["loss"]
    time.sleep(1.1)  # the copy's files are newer, as `cp -r` makes them
    shutil.copytree(output / "sft", output / "final")
    assert read_curves(run_dir).series["loss"] == with_one  # not the curve twice, shifted in time
    absurd = output / "absurd" / "checkpoint-5"
    absurd.mkdir(parents=True)
    history = [{"step": 10**400, "loss": 1.0}, {"step": True, "loss": 2.0}, {"step": -3, "loss": 3.0},
               {"step": 2, "loss": 1e308}, {"step": 4, "loss": 4.0}]
    (absurd / "trainer_state.json").write_text(json.dumps({"global_step": 10**400, "log_history": history}))
    curves = read_curves(run_dir)  # never raises: the report and the Training pane read it
    values = [v for _, v in curves.series["loss"]]
    assert not {1.0, 2.0, 3.0, 1e308} & set(values)
    assert all(math.isfinite(at) for at, _ in curves.series["loss"])


def test_a_folder_swapped_for_a_link_after_the_listing_is_not_followed(trained_run: Path, tmp_path: Path) -> None:
    run_dir = _copy(trained_run, tmp_path, events=False)
    workspace = run_dir / "workspace"
    states, _ = train_logs._walk(workspace)
    assert len(states) == 2
    outside = tmp_path / "elsewhere"
    shutil.copytree(workspace / "output" / "sft", outside)
    shutil.rmtree(workspace / "output" / "sft")
    (workspace / "output" / "sft").symlink_to(outside, target_is_directory=True)
    for state in states:
        with pytest.raises(ValueError, match="a link"):
            train_logs._read(workspace, state, train_logs.MAX_STATE_BYTES)
