"""What the run record needs to know of how a task is evaluated: the inference settings of a
prompt profile, the default time limit of an evaluation, the config key of a run's eval seed.

A module of its own so that the record (``record.evaljob``, ``record.runconfig``), which every
reader of a run folder imports, does not import the task registry and its data generators.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

EVAL_SEED_KEY = "eval_seed"
"""The key of a run's config (run.db's ``config_json``) that holds the seed of its eval draw.

Drawn when the run is created (``draw_eval_seed``), kept in the record only: the workspace, the
agent's environment and the task folder never hold it, so the agent cannot regenerate the items
the grader scores, and a reviewer re-derives them from the record (``Task.eval_items``)."""

DEFAULT_EVAL_TIMEOUT_S = 1800.0
"""Seconds one evaluation may take where neither the task's ``[grader]`` nor the run says: the one default."""


@dataclass(frozen=True)
class InferenceSettings:
    """How the grader turns an eval item into a prompt, generates the answer and reads it: one
    prompt profile of a task (``[inference]`` with a ``[prompt_profiles.NAME]`` over it)."""

    prompt_profile: str = "default"
    """The profile's name, recorded with every score: scores under two profiles are two measurements."""
    about: str = ""
    """What the agent's description.md says about this profile (markdown)."""
    prompt_template: str = "{question}"
    """Filled with the item's fields: the user turn (chat) or the whole prompt (completion)."""
    system_prompt: str = ""
    chat: bool = True
    """Render prompts with the model's chat template; False: plain completion prompts."""
    fewshot: int = 0
    """Worked examples from the train split put before each question."""
    shots_file: str = ""
    """A JSON list of fixed worked examples (rows with the item's fields) in the task folder,
    in place of ``fewshot`` rows from the train split (e.g. the reference's 4-shot prompt)."""
    answer_template: str = "{answer}"
    """How a few-shot example's answer is written."""
    extraction: str = ""
    """The answer rule of ``tasks.grading_rules`` (``hashes``, ``opencompass-gsm8k``, ``continuation``,
    ``opencompass-humaneval-v2``); empty: the evaluator's own."""
    strip_reasoning: bool = False
    """Drop ``<think>...</think>`` before reading the answer (OpenCompass's reference runs do)."""
    require_chat_template: bool = False
    """A model without a chat template is an error (the reference renders every prompt with one)."""
    max_new_tokens: int = 256
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0
    """0: no top-k cut."""
    enable_thinking: bool | None = None
    """Given to the chat template as ``enable_thinking`` where set (Qwen3's switch); None: not given."""
    batch_size: int = 32
    stop: tuple[str, ...] = ()
    model_table: bool = False
    """The base model's row of the reference's model table (``tasks.decoding``) sets the decoding
    under this profile, as AutoRL-Bench's OpenCompass runs do; the row is recorded with the score."""
    decoding_row: str = ""
    """The model-table row that set the decoding (empty: the profile's own)."""
    transcript: str = ""
    """An interactive task's transcript layout under this profile, over its ``[env] transcript``
    (e.g. the reference's own loop, quirks included); empty: the task's."""
    answer_judge: str = ""
    """How a searching task's answers are judged: empty, ours (temperature 0, a strict verdict,
    a failed call counts as not correct); ``reference``, as AutoRL-Bench calls its judge."""
    sandbox_timeout_s: float | None = None
    """Seconds a HumanEval program may run under this profile; None: the task's ``[grader]``."""
    bos_after_template: bool = False
    """The rendered chat prompt is tokenized with the tokenizer's special tokens once more, as
    vLLM's ``generate`` does to template text (AutoRL-Bench's AlpacaEval): a tokenizer that adds
    BOS (Llama, Mistral) gives two; off, the template's own are the only ones."""
    plain_without_template: bool = False
    """A model without a chat template gets the user turn alone (AutoRL-Bench's AlpacaEval);
    off, every turn's text, one per line, newline-ended."""
    engine: dict[str, Any] = field(default_factory=dict)
    """Engine settings under this profile over the task's ``[engine]`` (the reference's Level-2 and
    Level-3 evaluators leave vLLM's dtype ``auto``, an FP32 checkpoint then running in FP16, and
    some its context at the model's own); a run's ``--engine-option`` still wins."""
    judge_failure: str = "drop"
    """A pairwise judge's failed item: ``drop`` (ours: scored on the rest, the count recorded) or
    ``fail`` (alpaca_eval 0.6.6: a call that fails past its retries ends the evaluation)."""

    def to_dict(self) -> dict[str, Any]:
        d = self.__dict__.copy()
        d["stop"] = list(self.stop)
        d["engine"] = dict(self.engine)
        d.pop("about")
        return d
