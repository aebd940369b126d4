"""Interactive environments for Level-3 tasks: one protocol (``base``) and its adapters.

Below the grader (which plays episodes through them) and above nothing of ours but the
leaves: an environment knows games and actions, not runs, records or models. Each kind's
module declares its ``[env]`` spec and registers it with its maker (``spec.register``);
importing this package also has the task loader check every task's ``[env]`` against them.
"""

from __future__ import annotations

from agent2rl_tui.envs.base import EnvError, Environment
from agent2rl_tui.envs.spec import PROFILE_TRANSCRIPTS, TRANSCRIPTS, EnvKind, EnvSpec, kinds, register
from agent2rl_tui.tasks.registry import Task, TaskError, register_section_check


def check_task(task: Task) -> None:
    """A task's ``[env]`` as its kind's spec reads it; a ``TaskError`` naming the file and key if not."""
    try:
        EnvSpec.from_table(task.env_table, where=task.folder / "task.toml")
    except EnvError as exc:
        raise TaskError(str(exc)) from None


register_section_check("env", check_task)

__all__ = ["PROFILE_TRANSCRIPTS", "TRANSCRIPTS", "EnvError", "EnvKind", "EnvSpec", "Environment", "check_task",
           "kinds", "register"]
