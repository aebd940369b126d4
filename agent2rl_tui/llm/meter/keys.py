"""The driver keys the meter holds for a run, and the per-run tokens the agent gets instead.

Kept apart from the handler because this is the one place a real key is handled: the agent's
environment holds a random token per key variable (``ANTHROPIC_API_KEY=a2r-…``), valid only at
this meter; the meter swaps each token for its real key on the way out, in the same header or
query parameter the agent used, and refuses a request that carries anything else (401 in the
API's shape, never forwarded). The agent never sees a key the API accepts, so calling the API
around the meter gets it nothing.

A run whose agent signs in with its own login (no key variable: Claude Code's login file) gives
the meter nothing to hold: its calls pass with the agent's own credential, and the record says
so (``note``).

The supervisor hands the keys over on the meter's stdin, one JSON line (`KeyRing.to_line`), so
that they are on no command line.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass, field
from typing import Any

TOKEN_PREFIX = "a2r-run-"
SECRET_HEADERS = ("authorization", "x-api-key", "x-goog-api-key", "api-key", "openai-api-key")
SECRET_QUERY = ("key", "api_key", "api-key")
MAX_LINE = 64 << 10
"""The longest key line the meter reads from its stdin."""


class NotThisRun(ValueError):
    """A request that carries no token of this run, or a credential the meter does not know."""


def new_token() -> str:
    """A fresh per-run token: random, recognisable as ours, worth nothing at any API."""
    return TOKEN_PREFIX + secrets.token_urlsafe(24)


@dataclass(frozen=True)
class HeldKey:
    """One key variable of the agent: its name, the token the agent has, the key the meter adds."""

    name: str
    token: str
    key: str


@dataclass(frozen=True)
class KeyRing:
    """The keys a meter holds (none: the agent's credentials pass as they are, ``note`` says why)."""

    held: tuple[HeldKey, ...] = ()
    note: str | None = None
    _by_token: dict[str, str] = field(default_factory=dict, init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        self._by_token.update({k.token: k.key for k in self.held})

    @property
    def holds(self) -> bool:
        return bool(self.held)

    @property
    def secrets(self) -> tuple[str, ...]:
        """Every value never to be written: the real keys and the tokens."""
        return tuple(v for k in self.held for v in (k.key, k.token))

    def record(self) -> dict[str, Any]:
        """What the ``meter`` event says about the keys (names only)."""
        return {"held": [k.name for k in self.held], "note": self.note}

    def swap(self, headers: list[tuple[str, str]], query: list[tuple[str, str]]
             ) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
        """The request's headers and query with each token replaced by its key. Raises `NotThisRun`
        when the ring holds keys and the request carries no token, or any other credential."""
        if not self.holds:
            return headers, query
        seen = 0
        out_headers = []
        for name, value in headers:
            if name.lower() in SECRET_HEADERS:
                value = self._swapped(name, value)
                seen += 1
            out_headers.append((name, value))
        out_query = []
        for name, value in query:
            if name.lower() in SECRET_QUERY:
                value = self._swapped(f"?{name}", value)
                seen += 1
            out_query.append((name, value))
        if not seen:
            raise NotThisRun("the request carries no key: use the key variable this run's agent was given")
        return out_headers, out_query

    def _swapped(self, where: str, value: str) -> str:
        text = value.strip()
        scheme, _, rest = text.partition(" ")
        if rest and scheme.lower() == "bearer":
            return f"{scheme} {self._key_of(where, rest.strip())}"
        return self._key_of(where, text)

    def _key_of(self, where: str, presented: str) -> str:
        key = self._by_token.get(presented)
        if key is None:
            raise NotThisRun(f"the credential in {where} is not this run's: a run's agent calls its driver "
                             "with the key variable it was given, through this meter only")
        return key

    def to_line(self) -> str:
        """The ring as the one stdin line the meter process reads (`from_line`)."""
        return json.dumps({"held": [vars(k) for k in self.held], "note": self.note}) + "\n"

    @classmethod
    def from_line(cls, line: str) -> KeyRing:
        obj = json.loads(line)
        if not isinstance(obj, dict) or not isinstance(obj.get("held"), list):
            raise ValueError("the key line must be a JSON object with a list 'held'")
        held = []
        for item in obj["held"]:
            if not isinstance(item, dict) or not all(isinstance(item.get(k), str) and item.get(k)
                                                     for k in ("name", "token", "key")):
                raise ValueError("each held key needs a name, a token and a key (strings)")
            held.append(HeldKey(item["name"], item["token"], item["key"]))
        note = obj.get("note")
        return cls(tuple(held), note if isinstance(note, str) else None)
