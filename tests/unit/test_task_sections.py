"""A task's sections are typed and checked when the task is loaded: ``[env]`` by its kind's own
spec (declared and registered in the kind's module under ``envs/``), ``[judge]`` as a
``JudgeSection``, ``[grader]`` as a ``GraderSection``. A bad key is refused with the task file,
the key and what to do named; every shipped task loads."""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pytest

import agent2rl_tui.envs  # noqa: F401 - registers the [env] check with the task loader
from agent2rl_tui.envs import EnvError, Environment, EnvSpec, kinds, register
from agent2rl_tui.envs import spec as env_spec
from agent2rl_tui.envs.alfworld import ALFWorldSpec
from agent2rl_tui.envs.search import SearchQASpec
from agent2rl_tui.envs.twx import TextWorldExpressSpec
from agent2rl_tui.envs.webshop import WebShopSpec
from agent2rl_tui.judge import JudgeSettings
from agent2rl_tui.tasks.registry import BUILTIN_TASKS_DIR, JudgeSection, Task, TaskError, load_task

SHIPPED = sorted(p.parent.name for p in BUILTIN_TASKS_DIR.glob("*/task.toml"))
WITH_ENV = [name for name in SHIPPED if "env" in load_task(name).raw]
JUDGED = [name for name in SHIPPED if load_task(name).judged]
SPECS = {"textworld-express": TextWorldExpressSpec, "alfworld": ALFWorldSpec, "search-qa": SearchQASpec,
         "webshop": WebShopSpec}


def copied(name: str, tmp_path: Path, section: str, line: str) -> Path:
    """The shipped task ``name`` copied under tmp_path, with ``line`` put at the top of its ``[section]``
    (the section added at the end where the task has none)."""
    folder = tmp_path / name
    shutil.copytree(BUILTIN_TASKS_DIR / name, folder)
    toml = folder / "task.toml"
    text = toml.read_text(encoding="utf-8")
    header = re.search(rf"^\[{section}\][^\n]*\n", text, re.M)
    text = (text[:header.end()] + line + "\n" + text[header.end():]) if header else f"{text}\n[{section}]\n{line}\n"
    toml.write_text(text, encoding="utf-8")
    return folder


def with_value(folder: Path, key: str, value: str) -> Path:
    """The task in ``folder`` with the first ``key = ...`` line's value written as ``value``."""
    toml = folder / "task.toml"
    text, n = re.subn(rf"^{key} = [^#\n]*", f"{key} = {value} ", toml.read_text(encoding="utf-8"), count=1, flags=re.M)
    assert n == 1, key
    toml.write_text(text, encoding="utf-8")
    return folder


def refusal(folder: Path) -> str:
    with pytest.raises(TaskError) as caught:
        load_task(folder)
    message = str(caught.value)
    assert str(folder / "task.toml") in message, message
    return message


@pytest.mark.parametrize("name", SHIPPED)
def test_every_shipped_task_loads_with_its_sections_typed(name: str) -> None:
    task = load_task(name)
    assert task.judged == (task.judge is not None) == ("judge" in task.raw)
    if "env" in task.raw:
        spec = EnvSpec.from_table(task.env_table)
        assert type(spec) is SPECS[task.env_kind or ""] and spec.kind == task.env_kind


def test_the_shipped_env_sections_read_as_before() -> None:
    twc = EnvSpec.from_table(load_task("twc").env_table)
    assert isinstance(twc, TextWorldExpressSpec)
    assert (twc.game, twc.max_steps, twc.pool_size, twc.transcript, twc.workers) == ("twc", 10, 64, "plain", 1)
    alf = EnvSpec.from_table(load_task("alfworld").env_table, data_dir=Path("/data"))
    assert (alf.think_prefix, alf.examples, alf.processes, alf.workers, alf.data_dir) == \
        ("think:", "react_prompts.json", True, 16, Path("/data"))
    qa = EnvSpec.from_table(load_task("deepsearchqa").env_table, search={"corpus": "c.jsonl"}, store={"url": "x"})
    assert isinstance(qa, SearchQASpec) and (qa.top_k, qa.search, qa.max_steps) == (3, {"corpus": "c.jsonl"}, 6)
    shop = EnvSpec.from_table(load_task("webshop").env_table, store={"url": "http://s"})
    assert isinstance(shop, WebShopSpec) and (shop.window, shop.store, shop.transcript) == (5, {"url": "http://s"},
                                                                                           "webshop")


@pytest.mark.parametrize("name", WITH_ENV)
def test_an_unknown_env_key_is_refused_at_load(name: str, tmp_path: Path) -> None:
    message = refusal(copied(name, tmp_path, "env", "max_stepz = 3"))
    assert "[env] key 'max_stepz' is not a key of a" in message and "remove it or fix its spelling" in message
    assert "max_steps" in message  # the keys it takes


@pytest.mark.parametrize("name", WITH_ENV)
def test_a_mistyped_env_key_is_refused_at_load(name: str, tmp_path: Path) -> None:
    message = refusal(with_value(copied(name, tmp_path, "env", ""), "pool_size", '"many"'))
    assert "[env] pool_size = 'many' is not an int: write it as one" in message


def test_a_key_of_another_kind_is_refused(tmp_path: Path) -> None:
    message = refusal(copied("twc", tmp_path, "env", "window = 5"))  # WebShop's, not TextWorldExpress's
    assert "'window' is not a key of a textworld-express environment" in message


def test_an_unknown_kind_and_a_missing_game_are_refused_at_load(tmp_path: Path) -> None:
    folder = tmp_path / "twc"
    shutil.copytree(BUILTIN_TASKS_DIR / "twc", folder)
    toml = folder / "task.toml"
    original = toml.read_text(encoding="utf-8")
    toml.write_text(original.replace('kind = "textworld-express"', 'kind = "textworld"'), encoding="utf-8")
    assert "kind 'textworld' is not known; known: alfworld, search-qa, textworld-express, webshop" in refusal(folder)
    toml.write_text(original.replace('game = "twc"\n', ""), encoding="utf-8")
    assert "[env] needs game = ... (the TextWorldExpress game" in refusal(folder)


@pytest.mark.parametrize("name", JUDGED)
def test_an_unknown_judge_key_is_refused_at_load(name: str, tmp_path: Path) -> None:
    message = refusal(copied(name, tmp_path, "judge", "retires = 3"))
    assert "[judge]: 'retires' is not a [judge] key: remove it or fix its spelling" in message and "retries" in message


@pytest.mark.parametrize("name", JUDGED)
def test_a_mistyped_judge_key_is_refused_at_load(name: str, tmp_path: Path) -> None:
    message = refusal(with_value(copied(name, tmp_path, "judge", ""), "concurrency", '"8"'))
    assert "[judge]: concurrency = '8' is not an int: write it as one" in message


def test_an_unknown_grader_key_is_refused_at_load(tmp_path: Path) -> None:
    assert "[grader]: unknown keys ['eval_timeout']" in refusal(copied("webshop", tmp_path, "grader",
                                                                      "eval_timeout = 60"))
    assert "[grader]: unknown keys ['eval_timeout']" in refusal(copied("arith", tmp_path / "a", "grader",
                                                                      "eval_timeout = 60"))


def test_the_judge_section_gives_the_same_settings_as_its_table() -> None:
    run = {"base_url": "http://127.0.0.1:9/v1", "model": "m"}
    for name in JUDGED:
        task = load_task(name)
        for modes in (True, False):
            assert JudgeSettings.for_task(task.judge, run, modes=modes) == \
                JudgeSettings.for_task(task.raw["judge"], run, modes=modes)
    alpaca = load_task("alpacaeval").judge
    assert alpaca is not None and alpaca.template("ranking") == "judge_ranking.txt"
    assert alpaca.run_defaults() == {"mode": "ranking", "timeout_s": 120, "retries": 3, "backoff_s": 2.0,
                                     "concurrency": 8}
    assert JudgeSettings.for_task(JudgeSection(), run) == JudgeSettings(**run)  # the judge's own defaults
    assert JudgeSettings.for_task(alpaca, {**run, "retries": 0}).retries == 0  # the run's over the task's


@dataclass(frozen=True, kw_only=True)
class CountingSpec(EnvSpec):
    """A kind declared outside the package, as a new environment's module would declare it."""

    kind: ClassVar[str] = "counting"
    upto: int = 3


class Counting:
    name = "counting"


def counting_maker(spec: CountingSpec) -> Callable[[], Environment]:
    return lambda: Counting()  # type: ignore[return-value]


def test_a_kind_registers_its_spec_and_maker_in_its_own_module(monkeypatch: pytest.MonkeyPatch) -> None:
    kinds()  # the package's own first
    monkeypatch.setitem(env_spec._REGISTERED, "counting", env_spec.EnvKind("counting", CountingSpec, counting_maker))
    spec = EnvSpec.from_table({"kind": "counting", "upto": 5, "max_steps": 4})
    assert isinstance(spec, CountingSpec) and (spec.upto, spec.max_steps) == (5, 4)
    assert isinstance(spec.factory()(), Counting)
    with pytest.raises(EnvError, match="'top_k' is not a key of a counting environment"):
        EnvSpec.from_table({"kind": "counting", "top_k": 3})
    assert register.__module__ == "agent2rl_tui.envs.spec"


def test_a_check_registered_for_a_section_runs_on_every_load(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from agent2rl_tui.tasks import registry

    seen: list[str] = []

    def check(task: Task) -> None:
        seen.append(task.name)

    monkeypatch.setitem(registry.SECTION_CHECKS, "data", check)
    load_task("arith")
    assert seen == ["arith"]
    folder = copied("arith", tmp_path, "judge", "retries = 2")
    assert load_task(folder).judge == JudgeSection(retries=2)
