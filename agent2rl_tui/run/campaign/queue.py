"""A campaign folder and its queue: making one (pre-flight, then every run queued), and its rows.

The queue is campaign.db (``record.campaign_db``: its schema, its typed rows, its statements);
this module is what the run layer holds of it: a folder opened for reading and writing, its
spec, its rows as ``CampaignRow``, a row's state as the results read it, and a requeue. It knows
no backend: the local scheduler and the Slurm backend both work through it
(``run.campaign.control`` puts a backend beside it).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Self

from agent2rl_tui.record import campaign_db
from agent2rl_tui.record.campaign_db import CAMPAIGN_DB, CAMPAIGN_FILE, CampaignMeta, CampaignRow, JobInfo
from agent2rl_tui.record.root import RunError, default_root
from agent2rl_tui.review.campaign_view import read_summary, run_state
from agent2rl_tui.run.campaign.spec import CampaignSpec, gpu_count, read_raw, refuse_shared_keys
from agent2rl_tui.run.preflight import preflight_run
from agent2rl_tui.util.timeutil import compact_utc, now


class CampaignQueue:
    """A campaign folder: its file, its queue (campaign.db) and its run folders."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        if not (folder / CAMPAIGN_DB).is_file():
            raise RunError(f"{folder} is not a campaign folder (no {CAMPAIGN_DB})")
        self.db = campaign_db.connect(folder)

    @property
    def spec(self) -> CampaignSpec:
        return CampaignSpec.from_toml((self.folder / CAMPAIGN_FILE).read_text(encoding="utf-8"), gpus=gpu_count())

    def spec_raw(self) -> dict[str, Any]:
        return read_raw(self.folder)

    def rows(self) -> list[CampaignRow]:
        return campaign_db.read_rows(self.db)

    def row(self, row_id: int) -> CampaignRow:
        found = campaign_db.read_row(self.db, row_id)
        if found is None:
            raise RunError(f"campaign {self.folder.name} has no run {row_id}")
        return found

    def meta(self) -> CampaignMeta:
        return campaign_db.read_meta(self.db)

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def state_of(self, row: CampaignRow, job: JobInfo | None = None) -> str:
        """The row's state as the results read it (``review.campaign_view.run_state``): that of a
        row whose run has not started depends on its ``job`` (ended: failed before its run)."""
        return run_state(row, read_summary(row), job)

    def current(self, ref: str) -> CampaignRow:
        """The current (not superseded) row ``ref`` names: its id, or its run folder's name."""
        for row in self.rows():
            if not row.superseded and (str(row.id) == ref or (row.run_dir and Path(row.run_dir).name == ref)):
                return row
        raise RunError(f"campaign {self.folder.name} has no current run {ref!r}")

    def requeue_row(self, row: CampaignRow) -> int:
        """Queue ``row``'s cell and seed again, ``row`` superseded (the CSV keeps both); the new row's id."""
        return campaign_db.requeue(self.db, row, now())

    def mark_started(self, row_id: int, run_dir: Path, gpus: str | None) -> None:
        campaign_db.mark_started(self.db, row_id, run_dir, gpus, now())

    def set_error(self, row_id: int, error: str) -> None:
        campaign_db.set_error(self.db, row_id, error)

    def set_job(self, row_id: int, job_id: str) -> None:
        campaign_db.set_job(self.db, row_id, job_id)


def create_campaign(spec_text: str, root: Path | None = None, env: dict[str, str] | None = None) -> Path:
    """Pre-flight every cell, then make the campaign folder with its queue (every run queued)."""
    spec = CampaignSpec.from_toml(spec_text, gpus=gpu_count())
    refuse_shared_keys(spec)
    preflight_cells(spec, dict(os.environ if env is None else env))
    folder = (root or default_root()).resolve() / "campaigns" / f"{compact_utc(now())}-{spec.name}"
    folder.mkdir(parents=True)
    (folder / CAMPAIGN_FILE).write_text(spec_text, encoding="utf-8")
    campaign_db.create(folder, spec.name, now(), spec.queued())
    return folder


def preflight_cells(spec: CampaignSpec, env: dict[str, str]) -> None:
    """Each cell's run checked as ``run start`` checks one (its first seed's); the first refusal, named by cell."""
    for cell in spec.cells:
        try:
            preflight_run(spec.request(cell, spec.seeds[0], Path("/nonexistent")), env)
        except RunError as exc:
            raise RunError(f"cell {cell.key}: {exc}") from None
