"""Is a submission acceptable? The request body, the run's budget and the model folder.

Every check raises a ``Rejection`` carrying the HTTP status, a short code and advice the
agent can act on; the routes record it as a ``rejected`` submission. Whatever the body is
(too big, nested ten thousand deep, not UTF-8, a path of a megabyte), the answer is a 4xx and
a row in the record, never a 500. What passes here is then copied by the intake (``intake``),
which checks each file as it takes it.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent2rl_tui.record.runrecord import RunRecord
from agent2rl_tui.tasks.modelfiles import check_model_folder
from agent2rl_tui.util.timeutil import iso, now

MAX_BODY_BYTES = 1 << 20
MAX_PATH_CHARS = 1024
SUBMIT_FIELDS = frozenset({"model_path"})


@dataclass
class Rejection(Exception):
    """A request the grader refuses, with the HTTP status and advice for the agent."""

    status: int
    code: str
    detail: str


@dataclass(frozen=True)
class Accepted:
    """A submission that passed every check: the path as given and its real folder."""

    raw: str
    resolved: Path


def too_large() -> Rejection:
    return Rejection(413, "too_large", f"The request body is over {MAX_BODY_BYTES:,} bytes; send only "
                     '{"model_path": "output/v1"}.')


def parse_body(body: bytes) -> Any:
    """The decoded JSON of a /submit body (``None`` for an empty one)."""
    if len(body) > MAX_BODY_BYTES:
        raise too_large()
    try:
        return json.loads(body or b"null")
    except (ValueError, RecursionError):  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise Rejection(
            400,
            "invalid_json",
            'The body is not valid JSON (or nests too deep). Send {"model_path": "output/v1"} '
            "with Content-Type: application/json.",
        ) from None


def model_path_given(body: Any) -> str | None:
    """The model_path of a body, as far as there is one (recorded with a rejection too, cut to
    ``MAX_PATH_CHARS``)."""
    if isinstance(body, dict) and isinstance(body.get("model_path"), str):
        raw: str = body["model_path"]
        raw = raw if len(raw) <= MAX_PATH_CHARS else raw[:MAX_PATH_CHARS] + f"... ({len(raw):,} characters)"
        return recordable(raw)
    return None


def recordable(text: str) -> str:
    """Text as run.db can store it: lone surrogates (not UTF-8) written as escapes."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def check_budget(run: RunRecord) -> None:
    """Submissions are taken between the start of the run's budget and its deadline."""
    if run.deadline is None:
        raise Rejection(409, "not_started", "The run's budget has not started yet.")
    if now() > run.deadline:
        raise Rejection(
            409,
            "deadline_passed",
            f"The time budget ended at {iso(run.deadline)}; no more submissions are taken.",
        )


def check_fields(body: Any) -> str:
    """The body's model_path, its only field: anything else is refused, not ignored, so that no
    field can change how or where a submission is graded (the GPUs are the run's: ``--gpus``)."""
    if not isinstance(body, dict):
        raise Rejection(400, "invalid_json", 'Send a JSON object: {"model_path": "output/v1"}.')
    unknown = sorted(str(k) for k in body if k not in SUBMIT_FIELDS)
    if unknown:
        shown = ", ".join(repr(recordable(k[:40])) for k in unknown[:5]) + (", ..." if len(unknown) > 5 else "")
        raise Rejection(400, "unknown_field", f"/submit takes only \"model_path\"; not {shown}. The grader "
                        "evaluates every submission the same way, on the run's GPUs.")
    raw = body.get("model_path")
    if not isinstance(raw, str) or not raw.strip():
        raise Rejection(
            400,
            "missing_model_path",
            'The JSON body needs "model_path": the folder of the saved model, '
            'e.g. {"model_path": "output/v1"} (relative to the workspace) or an absolute path.',
        )
    if len(raw) > MAX_PATH_CHARS or "\x00" in raw:
        raise Rejection(400, "invalid_path", f"model_path must be at most {MAX_PATH_CHARS} characters, without "
                        'NUL bytes: e.g. {"model_path": "output/v1"}.')
    try:
        raw.encode("utf-8")
    except UnicodeError:
        raise Rejection(400, "invalid_path", "model_path is not a valid file name (lone surrogates); use plain "
                        "names such as output/v1.") from None
    return raw


def validate(body: Any, run: RunRecord, workspace: Path, *, after_the_run: bool = False) -> Accepted:
    """A decoded /submit body checked against the run (``run``: its row in run.db); ``after_the_run``:
    a person grading an ended run's checkpoint (``run grade``), whose budget is over by definition."""
    if not after_the_run:
        check_budget(run)
    raw = check_fields(body)
    return Accepted(raw, check_model_path(raw, workspace))


MAX_ENTRIES = 10_000
"""A model folder holds a dozen files; one with more entries than this is refused unread."""


def check_model_path(raw: str, workspace: Path) -> Path:
    """The real folder of ``raw``: inside the workspace, and what a full model's folder holds by
    name. The files themselves are checked as the intake copies them."""
    resolved = _resolve(raw, workspace)
    check_entry_count(resolved)
    problem = check_model_folder(resolved)
    if problem:
        raise Rejection(404 if problem.code == "not_found" else 422, problem.code, problem.detail)
    return resolved


def check_entry_count(folder: Path) -> None:
    """Refuse a folder of more than ``MAX_ENTRIES`` entries before anything lists it whole."""
    try:
        with os.scandir(folder) as entries:
            for n, _ in enumerate(entries, 1):
                if n > MAX_ENTRIES:
                    raise Rejection(422, "too_many_files", f"the folder holds over {MAX_ENTRIES:,} entries; submit "
                                    "a folder that holds only the saved model (save_pretrained(DIR)).")
    except (NotADirectoryError, FileNotFoundError):
        return  # said by check_model_folder
    except PermissionError:
        raise Rejection(403, "unreadable", f"{folder} cannot be listed by the grader; make it readable "
                        "(chmod -R a+rX) and submit it again.") from None


def _resolve(raw: str, workspace: Path) -> Path:
    """``raw`` (relative to the workspace unless absolute) with every link followed; inside it."""
    path = Path(raw)
    if not path.is_absolute():
        path = workspace / path
    try:
        resolved = Path(os.path.realpath(path))
    except (OSError, ValueError):
        raise Rejection(400, "invalid_path", f"{raw} cannot be resolved (a link loop, or a name too long); "
                        "submit the folder you saved the model in, e.g. output/v1.") from None
    if not resolved.is_relative_to(workspace):
        raise Rejection(
            403,
            "outside_workspace",
            f"{raw} resolves to a folder outside the workspace {workspace}. Save models under "
            "$OUTPUT_DIR and submit that path; symlinks and '..' that leave the workspace are refused.",
        )
    return resolved
