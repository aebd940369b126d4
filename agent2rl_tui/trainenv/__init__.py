"""The train-environment service: the agent's side of an interactive task, over HTTP.

On a Level-3 task the agent must collect its own trajectories, and for some tasks the game is
out of its reach: WebShop's store and DeepSearchQA's search backend (and its key) live with the
grader, outside the sandbox. So every run of an interactive task starts this service beside
the grader: its own process on 127.0.0.1, the run's secret in its URL (``$TRAIN_ENV_URL``),
served to the run's user only, every call recorded in run.db (``env_calls``). It plays the
task's **train** split only, exactly as the grader plays its eval games: the same environment,
the same transcript, the same action rule and step limit (``grader.episode_runner``), so what the
agent trains on is what it is graded on. One protocol for every interactive task:

    GET    /games                          the train games, the limits, the reward modes
    POST   /envs                           -> {"env_id": N}
    POST   /envs/N/reset  {"game": G[, "reward": MODE]}   -> the first prompt
    POST   /envs/N/step   {"completion": TEXT} | {"action": TEXT}   -> the turn and the next prompt
    DELETE /envs/N

A step takes the model's whole completion (the grader's rule reads the action from it) or an
action as it is. DeepSearchQA's searches go to the run's search backend from here (counted,
rate-limited, recorded; the key never enters the sandbox), and its answers get a reward the
agent chooses at reset: ``exact`` or ``f1`` against the gold answer, or ``judge`` (the run's
judge, every call recorded and capped). The workspace's ``data/play.py`` is a client of it.
"""

SECRET_ENV = "AGENT2RL_TRAINENV_SECRET"
"""The variable the service's secret path prefix travels in (never its command line)."""
DEFAULT_MAX_ENVS = 64
"""The most environments one run's agent may hold at once (``core.Limits``)."""


def default_max_envs(pool_size: int) -> int:
    """Environments at once for a task whose grader plays ``pool_size`` games at once: as many (at
    least 16, at most 64). An ALFWorld environment is a process of its own (hundreds of MB)."""
    return min(DEFAULT_MAX_ENVS, max(16, pool_size))
