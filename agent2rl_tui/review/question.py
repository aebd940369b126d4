"""The question of an eval item, out of the whole prompt the model saw.

A reference profile's prompt is several turns: GSM8K's is four worked examples, then the item's
question. A list of items showing each prompt's start shows the first example on every row; a
reader wants the item's own question, the last user turn. The prompt is stored as the model saw
it (rendered by its chat template, or plain text), so the last user turn is found by the
markers of the common chat templates, and in a plain few-shot prompt as the last block after a
blank line. The whole prompt stays one key away.
"""

from __future__ import annotations

USER_MARKERS = ("<|im_start|>user\n", "<|start_header_id|>user<|end_header_id|>\n\n", "<start_of_turn>user\n",
                "<|user|>\n", "[INST]", "<｜User｜>", "### Instruction:\n", "USER:")
"""Where a user turn starts in the chat templates of Qwen/ChatML, Llama 3, Gemma, Zephyr/Phi,
Llama 2/Mistral, DeepSeek, Alpaca and Vicuna."""
END_MARKERS = ("<|im_end|>", "<|eot_id|>", "<end_of_turn>", "</s>", "[/INST]", "<｜Assistant｜>",
               "<|assistant|>", "### Response:", "ASSISTANT:", "<|end|>")


def last_user_turn(prompt: str) -> str:
    """The item's own question: the prompt's last user turn (the whole prompt when none is found)."""
    start, marker = max(((prompt.rfind(m), m) for m in USER_MARKERS), key=lambda found: found[0])
    if start >= 0:
        turn = prompt[start + len(marker):]
        ends = [i for i in (turn.find(m) for m in END_MARKERS) if i >= 0]
        return (turn[:min(ends)] if ends else turn).strip()
    blocks = [b for b in prompt.split("\n\n") if b.strip()]
    return blocks[-1].strip() if len(blocks) > 1 else prompt.strip()
