"""Statistics over repeated runs of one stack: the answer with error bars that a campaign exists for.

For the scores of the runs of one cell (task x agent x driver x base model, several seeds):

- ``mean`` and the sample ``sd``;
- ``bootstrap_ci``: a percentile bootstrap 95% interval of the mean (resampling runs with
  replacement, 2,000 resamples, a fixed seed so a report is reproducible), for three runs or
  more: two runs resample to three means, an "interval" that means nothing;
- ``expected_best_of``: the expected best score of k runs drawn without replacement from the
  n observed (pass@k's unbiased estimator, applied to scores): with the scores sorted
  ascending, ``sum_{i=k..n} C(i-1, k-1) / C(n, k) * x_i``. For k = 1 it is the mean, for
  k = n the best.
"""

from __future__ import annotations

import math
import random
import statistics
from dataclasses import dataclass


@dataclass(frozen=True)
class Summary:
    n: int
    mean: float | None
    sd: float | None
    ci_low: float | None
    ci_high: float | None

    def to_dict(self) -> dict[str, float | int | None]:
        return {"n": self.n, "mean": self.mean, "sd": self.sd, "ci95_low": self.ci_low, "ci95_high": self.ci_high}


MIN_RUNS_FOR_INTERVAL = 3
TOO_FEW_FOR_INTERVAL = "too few runs for an interval"


def bootstrap_ci(values: list[float], *, level: float = 0.95, resamples: int = 2000,
                 seed: int = 0) -> tuple[float, float] | None:
    """A percentile bootstrap interval of the mean; None for fewer than ``MIN_RUNS_FOR_INTERVAL`` values."""
    if len(values) < MIN_RUNS_FOR_INTERVAL:
        return None
    rng = random.Random(seed)
    n = len(values)
    means = sorted(statistics.fmean(rng.choices(values, k=n)) for _ in range(resamples))
    tail = (1 - level) / 2
    low = means[max(0, math.floor(tail * resamples))]
    high = means[min(resamples - 1, math.ceil((1 - tail) * resamples) - 1)]
    return low, high


def summarize_values(values: list[float], seed: int = 0) -> Summary:
    if not values:
        return Summary(0, None, None, None, None)
    ci = bootstrap_ci(values, seed=seed)
    return Summary(len(values), statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else None,
                   ci[0] if ci else None, ci[1] if ci else None)


def expected_best_of(values: list[float], k: int) -> float | None:
    """The expected best of ``k`` runs drawn without replacement from ``values``; None if k > n."""
    n = len(values)
    if k < 1 or k > n:
        return None
    ordered = sorted(values)
    total = math.comb(n, k)
    return sum(math.comb(i - 1, k - 1) / total * ordered[i - 1] for i in range(k, n + 1))
