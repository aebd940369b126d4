"""A campaign's file (campaign.toml): the matrix, its options, and the backend that runs it.

Kept apart from the queue and the backends so that each of them reads the same spec, and so
that reading one never starts anything: parsing is all this module does (and turning one cell
and seed into the ``RunRequest`` of its run). The file's format is ``docs/campaigns.md``'s.
"""

from __future__ import annotations

import itertools
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent2rl_tui.record.campaign_db import CAMPAIGN_FILE, QueuedRun
from agent2rl_tui.record.modes import FREE, MODES
from agent2rl_tui.record.root import RunError
from agent2rl_tui.run.options import CAMPAIGN_OPTIONS, request_fields_from_campaign
from agent2rl_tui.run.request import RunRequest
from agent2rl_tui.util.timeutil import parse_duration

RUN_OPTIONS = tuple(CAMPAIGN_OPTIONS)
"""The ``[options]`` keys a campaign file may give: ``run.options`` declares them."""
BACKENDS = ("local", "slurm")
"""The values of the file's ``backend`` key: our scheduler on this machine, or one submitit job per run."""
REQUIRED = ("name", "tasks", "base_models", "agents")
TOP_KEYS = (*REQUIRED, "modes", "seeds", "budget", "max_parallel", "gpus_per_run", "backend", "options", "slurm")
"""Every key a campaign file may have at its top ([slurm]'s own keys are submitit's, checked by it)."""
AGENT_KEYS = ("agent", "drivers", "command")


@dataclass(frozen=True)
class Cell:
    """One cell of the matrix: task x agent (x driver) x base model (x mode); its runs differ by seed."""

    task: str
    agent: str
    driver: str | None
    base_model: str
    command: str | None = None
    mode: str | None = None
    """The training mode (``record.modes``); None: free, and the key says nothing of it."""

    @property
    def key(self) -> str:
        mode = f" · {self.mode}" if self.mode else ""
        return f"{self.task} · {self.agent} · {self.driver or '-'} · {Path(self.base_model).name}{mode}"

    @classmethod
    def of(cls, run: QueuedRun) -> Cell:
        """The cell of a queued run (a row of campaign.db)."""
        return cls(run.task, run.agent, run.driver, run.base_model, run.command, run.mode)

    def queued(self, seed: int) -> QueuedRun:
        """The run of this cell with ``seed``, as campaign.db queues it."""
        return QueuedRun(self.key, self.task, self.agent, self.driver, self.base_model, self.command, seed,
                         mode=self.mode)


@dataclass(frozen=True)
class CampaignSpec:
    name: str
    cells: list[Cell]
    seeds: list[int]
    budget_s: float
    max_parallel: int
    gpus_per_run: int
    options: dict[str, Any] = field(default_factory=dict)
    backend: str = "local"
    """``local`` (our scheduler on this machine) or ``slurm`` (one submitit job per run)."""

    @classmethod
    def from_toml(cls, text: str, *, gpus: int = 0) -> CampaignSpec:
        """The spec of a campaign file; ``gpus``: this machine's, for ``max_parallel``'s default."""
        raw = parse_toml(text)
        _check_keys(raw)
        cells = _cells(raw)
        gpus_per_run = int(raw.get("gpus_per_run", 1))
        backend = _backend(raw)
        default_parallel = max(1, gpus // gpus_per_run) if gpus and gpus_per_run else 1
        return cls(name=str(raw["name"]), cells=cells, seeds=[int(s) for s in raw.get("seeds", [0])],
                   budget_s=parse_duration(str(raw.get("budget", "1h"))),
                   max_parallel=int(raw.get("max_parallel", default_parallel)), gpus_per_run=gpus_per_run,
                   options=dict(raw.get("options", {})), backend=backend)

    def request(self, cell: Cell, seed: int, root: Path) -> RunRequest:
        """The run of ``cell`` with ``seed``: the matrix's fields, then the ``[options]`` (``run.options``)."""
        options = {**self.options, **({"mode": cell.mode} if cell.mode else {})}
        return RunRequest.of(task=cell.task, agent=cell.agent, model=Path(cell.base_model), budget_s=self.budget_s,
                             driver=cell.driver, seed=seed, command=cell.command, root=root,
                             **request_fields_from_campaign(options))

    def queued(self) -> list[QueuedRun]:
        """Every run of the matrix, cell by cell, each cell's seeds in order."""
        return [cell.queued(seed) for cell, seed in itertools.product(self.cells, self.seeds)]


def parse_toml(text: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise RunError(f"campaign file: {exc}") from None


def read_raw(folder: Path) -> dict[str, Any]:
    """A campaign folder's file as TOML, unchecked (its ``[slurm]`` table is the Slurm backend's)."""
    return tomllib.loads((folder / CAMPAIGN_FILE).read_text(encoding="utf-8"))


def _check_keys(raw: dict[str, Any]) -> None:
    missing = [k for k in REQUIRED if not raw.get(k)]
    if missing:
        raise RunError(f"campaign file: give {', '.join(missing)} (see `agent2rl-tui campaign --help`)")
    unknown = sorted(set(raw) - set(TOP_KEYS))
    if unknown:  # a typo (max_paralel) must not start a campaign without a word
        raise RunError(f"campaign file: unknown key(s) {', '.join(unknown)}{_close(unknown, TOP_KEYS)}; "
                       f"known: {', '.join(TOP_KEYS)}")
    unknown = sorted(set(raw.get("options", {})) - set(RUN_OPTIONS))
    if unknown:
        raise RunError(f"campaign file: unknown [options] {unknown}{_close(unknown, RUN_OPTIONS)}; "
                       f"known: {', '.join(RUN_OPTIONS)}")
    for entry in raw.get("agents") or []:
        unknown = sorted(set(entry) - set(AGENT_KEYS)) if isinstance(entry, dict) else []
        if unknown:
            raise RunError(f"campaign file: unknown key(s) {', '.join(unknown)} in [[agents]]"
                           f"{_close(unknown, AGENT_KEYS)}; known: {', '.join(AGENT_KEYS)}")


def _close(unknown: list[str], known: tuple[str, ...]) -> str:
    """`` (did you mean max_parallel?)`` for the first unknown key that is close to a known one."""
    import difflib

    for key in unknown:
        match = difflib.get_close_matches(key, known, n=1)
        if match:
            return f" (did you mean {match[0]}?)"
    return ""


def _cells(raw: dict[str, Any]) -> list[Cell]:
    """task x (agent, driver) x base model, in the file's order; one (agent, driver) per driver listed."""
    agents = []
    for entry in raw["agents"]:
        if "agent" not in entry:
            raise RunError("campaign file: each [[agents]] needs agent = \"NAME\"")
        for driver in entry.get("drivers") or [None]:
            agents.append((entry["agent"], driver, entry.get("command")))
    modes = _modes(raw)
    return [Cell(task, agent, driver, str(Path(model).expanduser()), command, mode)
            for task, (agent, driver, command), model, mode
            in itertools.product(raw["tasks"], agents, raw["base_models"], modes)]


def refuse_shared_keys(spec: CampaignSpec) -> None:
    """Two cells of one key would be one cell in every result: their runs' statistics merged. The key
    names no command, so two ``command`` agents (or a task, a model listed twice) would do it. Asked of
    a new campaign only: a folder made before this check still reads, and its queue still runs."""
    seen: dict[str, Cell] = {}
    for cell in spec.cells:
        other = seen.setdefault(cell.key, cell)
        if other is not cell:
            what, fix = ((f"commands {other.command!r} and {cell.command!r}", "name each command as an agent of "
                          "its own in agents.toml ([agents.NAME] extends = \"command\", command = [...]; "
                          "docs/campaigns.md)") if other.command != cell.command else ("the same entry twice",
                                                                                      "list it once"))
            raise RunError(f"campaign file: two cells would both be {cell.key!r} ({what}), and their runs "
                           f"counted as one cell's; {fix}")


def _modes(raw: dict[str, Any]) -> list[str | None]:
    """The ``modes`` axis (free is None: its cells keep the key they always had); [None] without one."""
    modes = raw.get("modes")
    if modes is None:
        return [None]
    if "mode" in raw.get("options", {}):
        raise RunError("campaign file: give the training mode as the modes axis or as [options] mode, not both")
    if not isinstance(modes, list) or not modes or any(m not in MODES for m in modes):
        raise RunError(f"campaign file: modes = {modes!r}: a list of {', '.join(MODES)}")
    return [None if m == FREE else str(m) for m in modes]


def _backend(raw: dict[str, Any]) -> str:
    backend = str(raw.get("backend", "local"))
    if backend not in BACKENDS:
        raise RunError(f"campaign file: backend {backend!r}: use \"local\" or \"slurm\"")
    return backend


def gpu_count() -> int:
    """GPUs on this machine (the local backend's to hand out; ``max_parallel``'s default)."""
    from agent2rl_tui.util.gpus import visible_gpu_count

    return visible_gpu_count()
