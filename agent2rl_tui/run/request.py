"""What a run is asked to be: its identity, and its settings as a ``RunConfig``.

``RunRequest``'s own fields are what the run's creation turns into something else before it
is recorded: the task and agent (resolved to a folder and a profile), the model folder
(copied), the budget, ``--command`` (recorded as ``agent_command``), ``--env`` (its values
reach the agent, only its names the record), ``--eval-timeout`` (None: the task's own).
Everything recorded as given is a field of ``config`` (``record.runconfig.RunConfig``). Each
field a person gives carries its flags, campaign key and check in its metadata
(``record.setting``), from which ``run.options`` builds the CLI, the New Run form and the
campaign keys.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent2rl_tui.record.runconfig import RunConfig
from agent2rl_tui.record.setting import Flag, FormField, parse_pairs, setting
from agent2rl_tui.util.timeutil import parse_duration


def _grace(text: str) -> float:
    return 0.0 if text.strip() in ("0", "0s") else parse_duration(text)


@dataclass
class RunRequest:
    """A run to make. ``preflight.preflight_run`` checks it and returns it as checked (a new
    one: the request given is never changed)."""

    task: str = setting(rank=0, group="task", flags=(Flag(
        "--task", "task", "Task name (see `agent2rl-tui tasks`) or folder.", required=True),),
        check="tasks.registry.load_task, Task.check_data")
    agent: str = setting(rank=10, group="agent", flags=(Flag(
        "--agent", "agent", "Agent profile (see `agent2rl-tui agents`).", required=True),),
        check="run.profiles.get_profile, run.profiles.preflight")
    model: Path = setting(rank=20, group="task", flags=(Flag(
        "--model", "model", "Base model folder.", kind="path", required=True,
        form=FormField("base model folder", "/path/to/model (config.json, weights, tokenizer)")),),
        check="tasks.modelfiles.check_model_folder, check_model_loads")
    budget_s: float = setting(rank=30, group="budget", flags=(Flag(
        "--budget", "budget", "Wall-clock budget: 90s, 5m, 12h.", default="5m", show_default=True),),
        from_flags=lambda v: parse_duration(v["budget"]), check="preflight.preflight_run")
    grace_s: float = setting(30.0, rank=40, group="budget", flags=(Flag(
        "--grace", "grace", "Time between SIGTERM and SIGKILL at the deadline.", default="30s", show_default=True),),
        campaign="grace", from_flags=lambda v: _grace(v.get("grace") or "30s"),
        from_campaign=lambda v: parse_duration(str(v)) if v else 30.0, check="preflight.preflight_run")
    driver: str | None = setting(None, rank=50, group="driver", flags=(Flag(
        "--driver", "driver", "The driver LLM of the agent, for the record.",
        form=FormField("driver LLM (passed to the CLI as its model, and recorded)", "e.g. claude-sonnet-4-5")),))
    seed: int = setting(0, rank=120, group="task", flags=(Flag("--seed", "seed", kind="int", default=0,
                                                               show_default=True),))
    command: str | None = setting(None, rank=130, group="agent", flags=(Flag(
        "--command", "command", "Shell command line for the 'command' agent.",
        form=FormField("command (only for the 'command' agent)", "python code/train.py")),),
        check="run.profiles.preflight")
    """The 'command' agent's command line (recorded as ``agent_command``)."""
    agent_env: dict[str, str] = setting(default_factory=dict, rank=140, group="agent", flags=(Flag(
        "--env", "env", "KEY=VALUE for the agent's environment (repeatable).", multiple=True),),
        campaign="env", from_flags=lambda v: parse_pairs(v.get("env") or (), "--env"),
        from_campaign=lambda v: dict(v or {}))
    """Extra variables for the agent; their values reach it but never the record."""
    eval_timeout_s: float | None = setting(None, rank=150, group="eval", flags=(Flag(
        "--eval-timeout", "eval_timeout", "Per-evaluation timeout (default: the task's)."),),
        campaign="eval_timeout_s",
        from_flags=lambda v: parse_duration(v["eval_timeout"]) if v.get("eval_timeout") else None)
    """The longest one evaluation may take; None: the task's ``[grader]`` value (recorded resolved)."""
    allow_missing_key: bool = setting(False, rank=180, group="agent", flags=(Flag(
        "--allow-missing-key", "allow_missing_key", "Start even if the agent's API key variable is unset.",
        kind="flag", form=FormField("API key variable")),), campaign="allow_missing_key",
        from_flags=lambda v: bool(v.get("allow_missing_key")), check="run.profiles.preflight")
    root: Path | None = None
    """Where the run folder goes (the workspaces root); None: ``record.root.default_root()``."""
    config: RunConfig = field(default_factory=RunConfig)
    """The settings recorded as given (the run's creation fills in what it decides itself)."""

    @classmethod
    def of(cls, **fields: Any) -> RunRequest:
        """A request from fields of both kinds, the request's own and its config's, by name."""
        own = {f.name for f in dataclasses.fields(cls)} - {"config"}
        config = fields.pop("config", None) or RunConfig()
        settings = {k: fields.pop(k) for k in list(fields) if k not in own}
        return cls(**fields, config=config.replace(**settings) if settings else config)

    def with_config(self, **changes: Any) -> RunRequest:
        """This request with some of its config's settings changed."""
        return dataclasses.replace(self, config=self.config.replace(**changes))
