"""What a driver-API call cost: the dated price table and the one cost rule.

The meter prices each call it records, the moment it records it, so a run's cost is what the
prices were when the run was made. The table ships with the package (``prices.toml``, each
model with the date its prices were read and where); a user's own file
(``~/.config/agent2rl-tui/prices.toml``, ``$XDG_CONFIG_HOME`` honoured, or one named with
``--prices``) replaces its models one by one, for a model we do not list, a negotiated rate,
or prices that changed. A model found in neither has no cost: None, never a guess, and the
report names it.

    table = load_prices()                        # the package's table, the user's file over it
    price = table.find("claude-sonnet-4-5-20250929")   # the entry claude-sonnet-4-5, or None
    table.cost("gpt-5", Usage(input_tokens=1000, cached_tokens=200, output_tokens=50))

The rule (`Price.cost`), per call: uncached prompt tokens at ``input``, cache reads at
``cached_input``, cache writes at ``cache_write``, output (reasoning included) at ``output``;
a call whose whole prompt is over ``long_prompt.over`` tokens pays the long-prompt rates on
every token. Standard processing only (no batch, priority or regional surcharges).
"""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent2rl_tui.llm.usage import Usage

STAND_IN_HEADER = "X-Agent2RL-Stand-In"
"""A reply header by which a server says it stands in for a driver API (the scripted driver, a
test's server): its calls are metered but never priced, whatever model name they carry (a real
API never sends it; the person, not the agent, points the meter at its upstream)."""

PACKAGE_PRICES = Path(__file__).with_name("prices.toml")
# A dated snapshot of a listed model: claude-x-20250929, gpt-5-2025-08-07, gemini-2.5-pro@001, -latest.
_SNAPSHOT = re.compile(r"^(?:[-@](?:\d{8}|\d{4}-\d{2}-\d{2}|\d{3})|-latest)$")


class PriceError(ValueError):
    """A price file cannot be read or has an entry that is not a price."""


@dataclass(frozen=True)
class Rates:
    """USD per million tokens."""

    input: float
    output: float
    cached_input: float
    cache_write: float

    def cost(self, usage: Usage) -> float:
        fresh = max(0, usage.input_tokens - usage.cached_tokens - usage.cache_write_tokens)
        return (fresh * self.input + usage.cached_tokens * self.cached_input
                + usage.cache_write_tokens * self.cache_write + usage.output_tokens * self.output) / 1e6


@dataclass(frozen=True)
class Price:
    model: str
    rates: Rates
    read: str = ""
    source: str = ""
    note: str = ""
    long_over: int | None = None  # a prompt over this many tokens pays ``long_rates``
    long_rates: Rates | None = None
    origin: str = ""  # the file the entry came from

    def cost(self, usage: Usage) -> float:
        if self.long_over is not None and self.long_rates is not None and usage.input_tokens > self.long_over:
            return self.long_rates.cost(usage)
        return self.rates.cost(usage)


@dataclass
class PriceTable:
    prices: dict[str, Price] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)  # the files read, lowest first

    def find(self, model: str | None) -> Price | None:
        """The entry for ``model`` as an API names it: the exact id; else without a provider
        prefix (``openai/``, ``models/``) or a ``[1m]``-style suffix; else the listed model of
        which it is a dated snapshot. Nothing looser: an unlisted model has no price."""
        for name in _candidates(model or ""):
            if name in self.prices:
                return self.prices[name]
            best = max((k for k in self.prices if name.startswith(k) and _SNAPSHOT.match(name[len(k):])),
                       key=len, default=None)
            if best is not None:
                return self.prices[best]
        return None

    def cost(self, model: str | None, usage: Usage | None) -> float | None:
        """What a call of ``model`` with ``usage`` cost; None without usage or without a price."""
        if usage is None:
            return None
        price = self.find(model)
        return None if price is None else price.cost(usage)

    def merged(self, other: PriceTable) -> PriceTable:
        return PriceTable({**self.prices, **other.prices}, self.files + other.files)


def _candidates(model: str) -> list[str]:
    name = model.strip().lower()
    out = [name]
    bare = re.sub(r"\[[^\]]*\]$", "", name)
    if "/" in bare:
        bare = bare.rsplit("/", 1)[1]
    if bare != name:
        out.append(bare)
    return [n for n in out if n]


def _rates(where: str, entry: dict[str, Any], base: Rates | None = None) -> Rates:
    def num(key: str, default: float | None) -> float:
        value = entry.get(key, default)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise PriceError(f"{where}: {key} must be a number of USD per million tokens (got {value!r})")
        return float(value)

    inp = num("input", base.input if base else None)
    return Rates(input=inp, output=num("output", base.output if base else None),
                 cached_input=num("cached_input", base.cached_input if base else inp),
                 cache_write=num("cache_write", base.cache_write if base else inp))


def parse_prices(data: dict[str, Any], origin: str) -> PriceTable:
    models = data.get("models", {})
    if not isinstance(models, dict):
        raise PriceError(f"{origin}: [models] must be a table of models")
    prices: dict[str, Price] = {}
    for name, entry in models.items():
        where = f"{origin}: models.{name!r}"
        if not isinstance(entry, dict):
            raise PriceError(f"{where} must be a table")
        unknown = set(entry) - {"input", "output", "cached_input", "cache_write", "long_prompt", "read", "source", "note"}
        if unknown:
            raise PriceError(f"{where}: unknown keys {sorted(unknown)}")
        rates = _rates(where, entry)
        long_over, long_rates = None, None
        if "long_prompt" in entry:
            lp = entry["long_prompt"]
            if not isinstance(lp, dict) or not isinstance(lp.get("over"), int) or lp["over"] <= 0:
                raise PriceError(f"{where}: long_prompt must be {{over = <tokens>, input = …, output = …}}")
            long_over, long_rates = lp["over"], _rates(where + ".long_prompt", lp, rates)
        prices[str(name).lower()] = Price(str(name), rates, str(entry.get("read", "")), str(entry.get("source", "")),
                                          str(entry.get("note", "")), long_over, long_rates, origin)
    return PriceTable(prices, [origin])


def read_prices(path: Path) -> PriceTable:
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise PriceError(f"cannot read prices from {path}: {exc}") from exc
    return parse_prices(data, str(path))


def user_prices_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "agent2rl-tui" / "prices.toml"


def load_prices(extra: Path | None = None, *, user: bool = True) -> PriceTable:
    """The package's table, then the user's file if there is one, then ``extra`` (``--prices``):
    each later file's models replace the earlier ones'."""
    table = read_prices(PACKAGE_PRICES)
    if user and user_prices_path().is_file():
        table = table.merged(read_prices(user_prices_path()))
    if extra is not None:
        table = table.merged(read_prices(extra))
    return table
