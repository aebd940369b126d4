"""Why an evaluation failed, as a code the agent may see and a message only the record keeps.

An error raised while a submission is evaluated can carry grading content: a chat template
that raises with the message it was given puts an eval prompt into the exception text, an
engine error may quote an output. So the grader's answers to the agent (``/submit``,
``/submissions``, ``/health``) hold only a stable code from ``ADVICE`` and the advice written
here, in our words; the full text goes to the record (run.db's ``error``, grader.log,
``evals/<n>/``) for the person reviewing the run. One table, used by the worker (which
classifies), the queue (which records) and the routes (which answer).
"""

from __future__ import annotations

ADVICE: dict[str, str] = {
    "model_load_failed": "The engine could not load the model. Save it with save_pretrained(DIR) "
                         "(config.json, the weights and the tokenizer in DIR) and check that it loads with "
                         "AutoModelForCausalLM.from_pretrained(DIR) and AutoTokenizer.from_pretrained(DIR).",
    "missing_weights": "The checkpoint lacks weights its config declares, so they would be initialised at "
                       "random: save the full model with save_pretrained(DIR) (merge LoRA adapters first).",
    "chat_template_error": "The model's chat template failed to render an eval prompt. Keep the base model's "
                           "template (tokenizer.save_pretrained copies it) or check that "
                           "tokenizer.apply_chat_template renders a list of {role, content} messages.",
    "chat_template_timeout": "The model's chat template took too long to render a prompt and was stopped. "
                             "Keep the base model's template (tokenizer.save_pretrained copies it).",
    "prompt_too_long": "An eval prompt does not fit the model's context (max_position_embeddings). Keep the "
                       "base model's context length and tokenizer.",
    "generation_failed": "The engine failed while generating with this model. Check that it generates with "
                         "model.generate() on a train prompt.",
    "out_of_memory": "The evaluation used more memory than the grader allows and was stopped. Keep the model's "
                     "size and its tokenizer's vocabulary close to the base model's.",
    "eval_timeout": "The evaluation ran past the task's time limit and was stopped. Check that the model "
                    "generates an end-of-turn token (its eos_token_id) and does not only repeat itself.",
    "worker_died": "The grader's eval worker ended without a result (it may have run out of memory). Check "
                   "that the model loads and generates locally.",
    "episode_failed": "The environment episodes could not be played with this model. Check that it produces "
                      "one action per turn as the task's description says.",
    "scoring_failed": "The grader could not score this model's outputs (its judge or test runner failed). "
                      "This is not the model's fault: submit again, and tell the person running the benchmark "
                      "if it happens again.",
    "evaluation_failed": "The evaluation failed. Check that the model loads and generates with transformers "
                         "on a train prompt.",
    "intake_lost": "The grader's copy of this submission was lost before it was evaluated; submit the model "
                   "again.",
    "run_ended": "The run ended before this submission was evaluated.",
    "grader_error": "The grader failed on this submission. This is not the model's fault: submit again.",
}


class EvalFailure(Exception):
    """An evaluation that failed: ``code`` (a key of ``ADVICE``) for the agent, ``message`` for the record."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code if code in ADVICE else "evaluation_failed"
        self.message = message


def advice(code: str | None) -> str:
    """What the agent is told for a failure code (never the error's own text)."""
    return ADVICE.get(code or "", ADVICE["evaluation_failed"])
