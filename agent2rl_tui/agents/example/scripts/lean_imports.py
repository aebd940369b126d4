"""Tell TRL that vLLM is not installed, and transformers that scikit-learn and scipy are not, before
either is imported: optional imports the example agent's training never uses, about 5 s of CPU in
every training process.

- The example agent generates with transformers (TRL's default, ``use_vllm=False``) and never
  starts vLLM, yet TRL imports vLLM wherever it is installed: about 4 s of CPU and a version
  warning in the agent's log (measured with vLLM's CPU build: ``from trl import SFTTrainer,
  GRPOTrainer`` 10.8 s, 6.4 s without). A script that wants vLLM's generation does not import
  this module.
- transformers' generation code imports scikit-learn's metrics (and scipy's statistics) wherever
  scikit-learn is installed, for assisted decoding's confidence threshold, and its object-detection
  losses import scipy's optimizers: about 1.2 s more.

Import it first: ``import lean_imports  # noqa: F401``.
"""

from __future__ import annotations

import importlib


def _not_installed(*_args: object, **_kwargs: object) -> bool:
    return False


# By import_module: TRL's package is lazy and has no ``import_utils`` attribute to reach it by.
setattr(importlib.import_module("trl.import_utils"), "is_vllm_available", _not_installed)
# transformers.utils is what its modules ask (``from ..utils import is_sklearn_available``).
for _check in ("is_sklearn_available", "is_scipy_available"):
    setattr(importlib.import_module("transformers.utils"), _check, _not_installed)
