"""Win rate and length-controlled win rate, by the ``alpaca-eval`` package's own functions.

Preferences are in alpaca_eval's orientation: output_1 is the reference (generator_1),
output_2 the model, 1 = the reference is better, 2 = the model is. The win rate is
``get_winrate``'s; the length-controlled win rate is ``get_length_controlled_winrate``'s
GLM, which also fits on AlpacaEval's ``df_gamed.csv`` (two length-gamed baselines) from the
``tatsu-lab/alpaca_eval`` hub dataset. ``data prepare alpacaeval`` puts that file into a
hub-cache folder beside the task's data; the package is pointed there (its
``constants.DEFAULT_CACHE_DIR``) and runs offline. Without the file the win rate stands
alone and the score says LC is unavailable.

alpaca-eval 0.6.6's traps, avoided here: we pass the annotations ourselves (its default
loader of reference outputs fails with ``datasets`` >= 4), ``save_weights_dir=None`` (its
default writes into site-packages), and scikit-learn is held below 1.10 (which drops an
argument its GLM passes).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from agent2rl_tui.tasks.alpacaeval import HUB_FOLDER, LC_FILE


class WinRateUnavailable(RuntimeError):
    """alpaca-eval is not installed; the message says how to install it."""


def _alpaca_eval() -> Any:
    try:
        import alpaca_eval.metrics.glm_winrate as glm
    except ImportError as exc:
        raise WinRateUnavailable(f"the alpaca-eval package is needed to score judge-graded tasks ({exc}); "
                                 "install it: pip install -e '.[dev]' (or 'alpaca-eval==0.6.6' 'scikit-learn<1.10')"
                                 ) from None
    return glm


def lc_file(hub_cache: Path) -> Path | None:
    """The prepared ``df_gamed.csv`` in a hub-cache folder, if any."""
    found = sorted((hub_cache / HUB_FOLDER / "snapshots").glob(f"*/{LC_FILE}"))
    return found[0] if found else None


def annotation_rows(preferences: list[float], model_outputs: list[str], reference_outputs: list[str],
                indices: list[int], model_name: str, annotator: str) -> list[dict[str, Any]]:
    """alpaca_eval's annotation rows for the judged items (failed ones left out by the caller)."""
    return [{"index": i, "preference": p, "output_1": ref, "output_2": out, "generator_1": "gpt4_1106_preview",
             "generator_2": model_name, "annotator": annotator}
            for i, p, out, ref in zip(indices, preferences, model_outputs, reference_outputs)]


def win_rates(rows: list[dict[str, Any]], hub_cache: Path | None) -> dict[str, Any]:
    """``win_rate`` and ``standard_error`` (percent), the counts, and ``length_controlled_winrate``
    (None with ``lc_unavailable`` saying why, where it cannot be computed)."""
    glm = _alpaca_eval()
    if not rows:
        return {"win_rate": None, "length_controlled_winrate": None, "lc_unavailable": "no item was judged"}
    import pandas as pd

    frame = pd.DataFrame(rows)
    out: dict[str, Any] = {k: _plain(v) for k, v in glm.get_winrate(frame).items()}
    out["length_controlled_winrate"] = None
    if hub_cache is None or lc_file(hub_cache) is None:
        out["lc_unavailable"] = (f"{LC_FILE} (tatsu-lab/alpaca_eval on the hub) was not prepared: run "
                                 "`agent2rl-tui data prepare alpacaeval` where the hub is reachable, or give it with --from")
        return out
    from alpaca_eval import constants

    constants.DEFAULT_CACHE_DIR = str(hub_cache)  # where its hf_hub_download looks (offline in the worker)
    try:
        lc = glm.get_length_controlled_winrate(frame, save_weights_dir=None, is_add_glm_preference_inplace=False)
    except Exception as exc:  # noqa: BLE001 - the GLM can fail on odd data; the win rate still stands
        out["lc_unavailable"] = f"alpaca-eval's length-controlled GLM failed: {type(exc).__name__}: {exc}"
        return out
    out["length_controlled_winrate"] = _plain(lc["length_controlled_winrate"])
    out["lc_standard_error"] = _plain(lc.get("lc_standard_error"))
    return out


def _plain(value: Any) -> Any:
    """numpy scalars to JSON numbers (NaN to None)."""
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value
