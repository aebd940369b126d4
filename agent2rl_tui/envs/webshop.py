"""WebShop (Yao et al. 2022) as an ``Environment``: shopping on a simulated web store by text.

Two ways to the store, one adapter:

- ``LocalWebShop``: WebShop's own text environment, ``web_agent_site.envs.WebAgentTextEnv``
  (observation mode ``text``, the 1,000-product catalogue), imported from the WebShop
  repository the user installed with its data (``data prepare webshop --from DIR``). Not on
  PyPI; the README says how to install it.
- ``RemoteWebShop``: a running WebShop server, by URL, speaking the environment-server
  protocol of AgentGym's ``agentenv-webshop`` (the usual way to keep WebShop's old
  dependencies in an environment of their own): ``POST /create`` → an id; ``POST /reset``
  ``{env_idx, session_id}`` → ``[observation, null]``; ``POST /step`` ``{env_idx, action}`` →
  ``{state, reward, done, info}``; ``GET /available_actions?env_idx=`` →
  ``{has_search_bar, clickables}``; ``GET /instruction_text?env_idx=``; ``POST /close``.

A game is a WebShop session (its goal), ``session:17``. An action is ``search[query]`` or
``click[text]``; as AutoRL-Bench does, a leading ``Action:`` is dropped and ``choose[`` is
read as ``click[``. The episode ends when the store says done (a purchase), with WebShop's
reward in [0, 1]; it counts as won at reward >= 0.5 (AutoRL-Bench's success), and the reward
itself is kept, so success at 1.0 (WebShop's) is reported too.
"""

from __future__ import annotations

import http.client
import json
import sys
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol

from agent2rl_tui.envs.base import EnvError, Environment, Outcome, Start
from agent2rl_tui.envs.spec import GIVEN, EnvSpec, register
from agent2rl_tui.util.numbers import ascii_int

SUCCESS_REWARD = 0.5
"""AutoRL-Bench's success: reward >= 0.5 (WebShop's own and most papers': reward = 1.0)."""
INSTALL_HINT = ("WebShop is not on PyPI: git clone https://github.com/princeton-nlp/WebShop, run its setup.sh "
                "(the 1,000-product data: setup.sh -d small), then `agent2rl-tui data prepare webshop --from "
                "THAT_DIR`; or run a WebShop server and start runs with --webshop-url URL")


@dataclass(frozen=True, kw_only=True)
class WebShopSpec(EnvSpec):
    """``[env]`` of kind ``webshop``: how many turns the prompt shows; the store is the run's."""

    kind: ClassVar[str] = "webshop"
    window: int = 5
    """The turns shown in the prompt."""
    store: dict[str, Any] | None = field(default=None, metadata=GIVEN)
    """The run's store (``store_from``): ``url`` of a WebShop server."""


class Store(Protocol):
    def reset(self, session: int) -> str: ...
    def instruction(self) -> str: ...
    def available(self) -> dict[str, Any]: ...
    def step(self, action: str) -> tuple[str, float, bool]: ...
    def close(self) -> None: ...


class RemoteWebShop:
    """One environment of a WebShop server (AgentGym's protocol)."""

    def __init__(self, url: str, timeout_s: float = 60.0) -> None:
        self.url, self.timeout_s = url.rstrip("/"), timeout_s
        self.idx = int(self._call("POST", "/create", {}))

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None,
              query: dict[str, Any] | None = None) -> Any:
        url = self.url + path + (f"?{urllib.parse.urlencode(query)}" if query else "")
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(url, data=data, method=method,
                                         headers={"Content-Type": "application/json"} if data else {})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                return json.loads(response.read().decode("utf-8"))
        except (OSError, http.client.HTTPException, ValueError) as exc:  # URLError, timeouts, resets
            raise EnvError(f"WebShop server {url}: {exc}") from exc

    def reset(self, session: int) -> str:
        answer = self._call("POST", "/reset", {"env_idx": self.idx, "session_id": session})
        return str(answer[0] if isinstance(answer, list) else answer)

    def instruction(self) -> str:
        return str(self._call("GET", "/instruction_text", query={"env_idx": self.idx}))

    def available(self) -> dict[str, Any]:
        return dict(self._call("GET", "/available_actions", query={"env_idx": self.idx}))

    def step(self, action: str) -> tuple[str, float, bool]:
        answer = self._call("POST", "/step", {"env_idx": self.idx, "action": action})
        return str(answer["state"]), float(answer["reward"]), bool(answer["done"])

    def close(self) -> None:
        try:
            self._call("POST", "/close", {"env_idx": self.idx})
        except EnvError:
            pass


class LocalWebShop:
    """WebShop's ``WebAgentTextEnv`` in this process, from the user's WebShop checkout."""

    def __init__(self, repo: Path, num_products: int = 1000) -> None:
        if str(repo) not in sys.path:
            sys.path.insert(0, str(repo))
        try:
            from web_agent_site.envs.web_agent_text_env import WebAgentTextEnv
        except ImportError as exc:
            raise EnvError(f"cannot import web_agent_site from {repo} ({exc}); {INSTALL_HINT}") from exc
        self.env = WebAgentTextEnv(observation_mode="text", num_products=num_products)

    def reset(self, session: int) -> str:
        observation, _ = self.env.reset(session=session)
        return str(observation)

    def instruction(self) -> str:
        return str(self.env.get_instruction_text())

    def available(self) -> dict[str, Any]:
        return dict(self.env.get_available_actions())

    def step(self, action: str) -> tuple[str, float, bool]:
        observation, reward, done, _ = self.env.step(action)
        return str(observation), float(reward or 0.0), bool(done)

    def close(self) -> None:
        self.env.close()


def actions_of(available: dict[str, Any]) -> list[str]:
    """The actions a page offers, as the reference lists them to the model."""
    return (["search[<your query>]"] if available.get("has_search_bar") else []) + \
        [f"click[{c}]" for c in available.get("clickables", [])]


def clean_action(action: str) -> str:
    """AutoRL-Bench's clean-up of the model's action: no ``Action:`` prefix, ``choose[`` is ``click[``."""
    action = action.strip()
    if action.startswith("Action:"):
        action = action[len("Action:"):].strip()
    if action.startswith("choose["):
        action = "click[" + action[len("choose["):]
    return action


def parse_session(game: str) -> int:
    name, _, number = game.partition(":")
    session = ascii_int(number)
    if name != "session" or session is None:
        raise EnvError(f"game {game!r} is not 'session:<n>'")
    return session


class WebShop:
    name = "webshop"

    def __init__(self, store: Store) -> None:
        self.store = store

    def reset(self, game: str) -> Start:
        observation = self.store.reset(parse_session(game))
        given = self.store.instruction()
        goal = given[len("Instruction:"):].strip() if given.startswith("Instruction:") else given
        return Start(observation=observation, goal=goal, admissible=actions_of(self.store.available()),
                     info={"instruction_text": given})

    def step(self, action: str) -> Outcome:
        observation, reward, done = self.store.step(clean_action(action))
        return Outcome(observation=observation, reward=reward, done=done, won=done and reward >= SUCCESS_REWARD,
                       score=reward if done else 0.0, admissible=None if done else actions_of(self.store.available()))

    def gold_actions(self) -> list[str] | None:
        return None

    def close(self) -> None:
        self.store.close()


def store_from(options: dict[str, Any], data_dir: Path | None) -> Store:
    """The run's ``--webshop-url``, else the WebShop checkout ``data prepare webshop --from`` recorded."""
    if options.get("url"):
        return RemoteWebShop(str(options["url"]))
    meta = data_dir / "source.json" if data_dir else None
    repo = json.loads(meta.read_text(encoding="utf-8")).get("webshop_dir") if meta and meta.is_file() else None
    if not repo:
        raise EnvError(f"no WebShop to shop in: start the run with --webshop-url URL, or {INSTALL_HINT}")
    return LocalWebShop(Path(repo), int(options.get("num_products", 1000)))


def maker(spec: WebShopSpec) -> Callable[[], Environment]:
    """Shoppers in the run's store (``spec.store``), else in the WebShop the task's data names."""
    options, data_dir = dict(spec.store or {}), spec.data_dir

    def make() -> Environment:
        return WebShop(store_from(options, data_dir))

    return make


KIND = register(WebShopSpec, maker)
