"""Training modes: the constraint a run puts on how the agent may train, and how it is told.

The paper runs one agent in several modes (SFT only, RL only, free) and compares them task by
task. A mode is a sentence in the agent's instructions and a key in the run's config; whether
the agent kept to it is measured afterwards from the training that was seen running
(``review.adherence``), never taken from the agent's word.
"""

from __future__ import annotations

FREE, SFT_ONLY, RL_ONLY = "free", "sft-only", "rl-only"
MODES = (FREE, SFT_ONLY, RL_ONLY)

RULES = {
    SFT_ONLY: (
        "This run is in **SFT-only mode**. Improve the model by supervised fine-tuning only: a "
        "next-token loss on text you choose or make (the train split, worked solutions, expert "
        "trajectories, answers you filter yourself). Do not train from rewards: no GRPO, PPO, "
        "REINFORCE, DPO or other reinforcement or preference optimisation, not even for a few steps."),
    RL_ONLY: (
        "This run is in **RL-only mode**. Improve the model by reinforcement learning from rewards: "
        "the model's own samples scored by a reward you compute (GRPO, PPO, REINFORCE; on an "
        "interactive task, episodes played online). Do not fine-tune on demonstrations or reference "
        "answers (no SFT, not even as a warm-up), and no preference optimisation (DPO)."),
}
"""What the agent is told, in a mode that constrains it (``free`` says nothing more)."""

CHECKED = ("Which training ran for each of your submissions is recorded from the processes that ran it, "
           "and a run that trains outside its mode is reported as such.")


def mode_section(mode: str | None) -> str:
    """The instructions' section for ``mode`` ("" for free, or none)."""
    rule = RULES.get(mode or FREE)
    return f"\n## Your training mode\n{rule}\n{CHECKED}\n" if rule else ""
