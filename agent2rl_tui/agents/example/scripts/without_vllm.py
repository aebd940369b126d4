"""Tell TRL that vLLM is not installed, before TRL is imported: the example agent generates with
transformers (TRL's default, ``use_vllm=False``) and never starts vLLM, yet TRL imports vLLM
wherever it is installed, about 4 s of CPU in every training process (measured with vLLM's CPU
build: ``from trl import SFTTrainer, GRPOTrainer`` 10.8 s, 6.4 s without) and a version warning
in the agent's log. A script that wants vLLM's generation does not import this module.

Import it first: ``import without_vllm  # noqa: F401``.
"""

from __future__ import annotations

import importlib


def _not_installed(*_args: object, **_kwargs: object) -> bool:
    return False


# By import_module: TRL's package is lazy and has no ``import_utils`` attribute to reach it by.
setattr(importlib.import_module("trl.import_utils"), "is_vllm_available", _not_installed)
