"""The one prompt every coding agent gets, built from the prepared workspace.

It is assembled from the task's description.md and the workspace's instructions.md (the
loop, the environment variables, the grading API, the rules), a listing of the workspace,
a few rows of the training data and the budget. The template is a module constant so the
TUI can show it; the rendered prompt is kept in the record as prompt.md.
"""

from __future__ import annotations

import os
from pathlib import Path

from agent2rl_tui.record.modes import mode_section
from agent2rl_tui.util.timeutil import human_duration

PROMPT_TEMPLATE = """\
You are an ML engineer working alone in this workspace ({workspace}). It holds a base model,
training data and this brief. You have {budget} of wall-clock time, starting now. Your goal:
post-train the model so that it scores as high as possible on the task below, by writing and
running your own training code (SFT, GRPO, PPO, online rollouts: your choice), saving full
models under output/ and submitting them to the grading server as you go. Your result is
the best score among your submissions, so submit early and improve.

# The task
{description}

# How this run works (also in instructions.md)
{instructions}

# The workspace now
{listing}

# The first {n_rows} rows of data/{data_file}
{sample}

Work autonomously until the budget ends; do not wait for a reply. Check the time left with
`GET $GRADING_SERVER_URL/time`.
"""

SAMPLE_ROWS = 3
LISTING_LIMIT = 40


def workspace_listing(workspace: Path) -> str:
    """A short tree of the workspace: folders and files, model folders summarised."""
    lines: list[str] = []
    for dirpath, dirnames, filenames in os.walk(workspace):
        dirnames.sort()
        rel = os.path.relpath(dirpath, workspace)
        depth = 0 if rel == "." else rel.count(os.sep) + 1
        if depth >= 2 and Path(dirpath).parent.name == "models":
            lines.append("  " * depth + f"{Path(dirpath).name}/ ({len(filenames)} files)")
            dirnames[:] = []
            continue
        if rel != ".":
            lines.append("  " * (depth - 1) + f"{Path(dirpath).name}/")
        for name in sorted(filenames):
            lines.append("  " * depth + name)
        if len(lines) > LISTING_LIMIT:
            lines.append("  ...")
            break
    return "\n".join(lines)


def data_sample(workspace: Path) -> tuple[str, str, int]:
    """(file name, first rows, row count) of the first data file."""
    files = sorted(p for p in (workspace / "data").glob("*") if p.is_file())
    if not files:
        return "(none)", "(no data files)", 0
    rows: list[str] = []
    with files[0].open(encoding="utf-8", errors="replace") as fh:
        for line in fh:
            rows.append(line.rstrip("\n")[:1000])
            if len(rows) >= SAMPLE_ROWS:
                break
    return files[0].name, "\n".join(rows), len(rows)


def build_prompt(workspace: Path, budget_s: float, mode: str | None = None) -> str:
    """The prompt; in a training ``mode`` that constrains the agent (``record.modes``) the brief's
    "your choice" points at the mode its instructions state."""
    data_file, sample, n = data_sample(workspace)
    template = PROMPT_TEMPLATE if not mode_section(mode) else PROMPT_TEMPLATE.replace(
        "(SFT, GRPO, PPO, online rollouts: your choice)", "(within the training mode your instructions state)")
    return template.format(
        workspace=workspace,
        budget=human_duration(budget_s),
        description=(workspace / "description.md").read_text(encoding="utf-8").strip(),
        instructions=(workspace / "instructions.md").read_text(encoding="utf-8").strip(),
        listing=workspace_listing(workspace),
        data_file=data_file,
        sample=sample,
        n_rows=n,
    )
