"""The check's result as one typed record, and report/contamination.json, its file.

The supervisor writes it (``write_contamination``) and everything else reads it through
``ContaminationResult``: the report (report.json, report.md, report.html) and the run index
(the run's ``contamination`` event holds a summary with the same keys). ``to_dict`` gives
the JSON the file has always held, key for key and in the same order; ``from_dict`` reads
one back as untrusted data: a missing key takes its default (a file written before the key
existed), a value of the wrong type raises ValueError naming the key, and readers turn that
into "no result" instead of a crash.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from agent2rl_tui.record.contamination.params import MIN_SHARED, N_TOKENS

REPORT_FILE = "contamination.json"
T = TypeVar("T")
D = TypeVar("D")


@dataclass
class Hit:
    """One path that held eval items: in which revisions, whether still there at the end, which items."""

    path: str
    revisions: list[int] = field(default_factory=list)
    in_final_workspace: bool = False
    items: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "revisions": list(self.revisions), "in_final_workspace": self.in_final_workspace,
                "items": list(self.items)}

    @classmethod
    def from_dict(cls, data: object) -> Hit:
        d = _object(data, "hits[]")
        return cls(path=_str(d, "path", ""), revisions=_ints(d, "revisions"),
                   in_final_workspace=_bool(d, "in_final_workspace", False), items=_ids(d, "items"))


@dataclass
class ContaminationResult:
    """What one contamination check found; deterministic but for the timings.

    The fields are in the order of the JSON. ``files_scanned`` and ``bytes_scanned`` count
    distinct contents read; ``skipped`` counts by reason; ``errors`` lists the first few
    (``path``, ``error``); ``items`` are all the item ids found. ``task`` and
    ``index_seconds`` are set by ``check_run`` (a scan with a ready index has neither, and
    its JSON leaves them out).
    """

    n: int = N_TOKENS
    min_shared: int = MIN_SHARED
    eval_items: int = 0
    checkable_items: int = 0
    revisions_scanned: int = 0
    files_scanned: int = 0
    bytes_scanned: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    errors: list[dict[str, str]] = field(default_factory=list)
    hits: list[Hit] = field(default_factory=list)
    items: list[str] = field(default_factory=list)
    contaminated: bool = False
    seconds: float = 0.0
    task: str | None = None
    index_seconds: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON of report/contamination.json and of report.json's ``contamination``."""
        out: dict[str, Any] = {
            "n": self.n, "min_shared": self.min_shared, "eval_items": self.eval_items,
            "checkable_items": self.checkable_items, "revisions_scanned": self.revisions_scanned,
            "files_scanned": self.files_scanned, "bytes_scanned": self.bytes_scanned,
            "skipped": dict(self.skipped), "errors": [dict(e) for e in self.errors],
            "hits": [h.to_dict() for h in self.hits], "items": list(self.items),
            "contaminated": self.contaminated, "seconds": self.seconds,
        }
        if self.task is not None:
            out["task"] = self.task
        if self.index_seconds is not None:
            out["index_seconds"] = self.index_seconds
        return out

    @classmethod
    def from_dict(cls, data: object) -> ContaminationResult:
        """A result read back from JSON; missing keys take their defaults, wrong types raise ValueError.

        ``contaminated``, when missing, is whether any item was found.
        """
        d = _object(data, "the result")
        items = _ids(d, "items")
        hits = d.get("hits")
        if hits is None:
            hits = []
        elif not isinstance(hits, list):
            raise _wrong(d, "hits", "a list")
        return cls(
            n=_int(d, "n", N_TOKENS), min_shared=_int(d, "min_shared", MIN_SHARED),
            eval_items=_int(d, "eval_items", 0), checkable_items=_int(d, "checkable_items", 0),
            revisions_scanned=_int(d, "revisions_scanned", 0), files_scanned=_int(d, "files_scanned", 0),
            bytes_scanned=_int(d, "bytes_scanned", 0), skipped=_counts(d, "skipped"), errors=_errors(d, "errors"),
            hits=[Hit.from_dict(h) for h in hits], items=items,
            contaminated=_bool(d, "contaminated", bool(items)), seconds=_number(d, "seconds", 0.0),
            task=_str(d, "task", None), index_seconds=_number(d, "index_seconds", None),
        )

    def event_data(self) -> dict[str, Any]:
        """The run's ``contamination`` event: the flag, and the first items and files found."""
        return {"contaminated": bool(self.items), "items": self.items[:50], "n_items": len(self.items),
                "files": [h.path for h in self.hits[:50]]}


def write_contamination(run_dir: Path, result: ContaminationResult) -> Path:
    """``report/contamination.json``, written whole or not at all."""
    out = Path(run_dir) / "report"
    out.mkdir(parents=True, exist_ok=True)
    tmp = out / f".{REPORT_FILE}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(result.to_dict(), indent=2), encoding="utf-8")
    os.replace(tmp, out / REPORT_FILE)
    return out / REPORT_FILE


def read_contamination(run_dir: Path) -> ContaminationResult | None:
    """The last check's result, or None when no check ran (or its file is unreadable or malformed)."""
    try:
        return ContaminationResult.from_dict(
            json.loads((Path(run_dir) / "report" / REPORT_FILE).read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return None


# -- reading untrusted JSON: the key's default when missing, ValueError naming it when mistyped -----

def _wrong(d: dict[str, Any], key: str, expected: str) -> ValueError:
    return ValueError(f"contamination result: {key} must be {expected}, not {type(d[key]).__name__}")


def _object(data: object, what: str) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise ValueError(f"contamination result: {what} must be a JSON object, not {type(data).__name__}")
    return data


def _read(d: dict[str, Any], key: str, default: D, types: tuple[type[T], ...], expected: str) -> T | D:
    """``d[key]`` when it is one of ``types`` (a bool is never a number), the default when missing."""
    value = d.get(key)
    if value is None:
        return default
    if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
        raise _wrong(d, key, expected)
    return value


def _int(d: dict[str, Any], key: str, default: int) -> int:
    return _read(d, key, default, (int,), "an integer")


def _number(d: dict[str, Any], key: str, default: Any) -> Any:
    return _read(d, key, default, (int, float), "a number")


def _bool(d: dict[str, Any], key: str, default: bool) -> bool:
    return _read(d, key, default, (bool,), "true or false")


def _str(d: dict[str, Any], key: str, default: Any) -> Any:
    return _read(d, key, default, (str,), "a string")


def _list(d: dict[str, Any], key: str) -> list[Any]:
    value = d.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise _wrong(d, key, "a list")
    return value


def _ints(d: dict[str, Any], key: str) -> list[int]:
    values = _list(d, key)
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        raise ValueError(f"contamination result: {key} must be a list of integers")
    return list(values)


def _ids(d: dict[str, Any], key: str) -> list[str]:
    """Item ids: strings (an integer, as a hand-written file may hold, is read as its text)."""
    values = _list(d, key)
    if not all(isinstance(v, str) or (isinstance(v, int) and not isinstance(v, bool)) for v in values):
        raise ValueError(f"contamination result: {key} must be a list of item ids")
    return [v if isinstance(v, str) else str(v) for v in values]


def _counts(d: dict[str, Any], key: str) -> dict[str, int]:
    value = d.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value.values()):
        raise ValueError(f"contamination result: {key} must be an object of counts")
    return {str(k): v for k, v in value.items()}


def _errors(d: dict[str, Any], key: str) -> list[dict[str, str]]:
    values = _list(d, key)
    if not all(isinstance(e, dict) and all(isinstance(v, str) for v in e.values()) for e in values):
        raise ValueError(f"contamination result: {key} must be a list of objects of strings")
    return [dict(e) for e in values]
