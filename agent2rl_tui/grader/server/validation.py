"""Is a submission acceptable? The request body, the run's budget and the model folder.

Every check raises a ``Rejection`` carrying the HTTP status, a short code and advice the
agent can act on; the routes record it as a ``rejected`` submission. The model-folder
check runs again when an evaluation starts, so a folder swapped in between is caught.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent2rl_tui.tasks.modelfiles import check_model_folder, files_leaving
from agent2rl_tui.util.timeutil import iso, now

MAX_BODY_BYTES = 1 << 20


@dataclass
class Rejection(Exception):
    """A request the grader refuses, with the HTTP status and advice for the agent."""

    status: int
    code: str
    detail: str


@dataclass(frozen=True)
class Accepted:
    """A submission that passed every check: the path as given, its real folder, its GPUs."""

    raw: str
    resolved: Path
    gpu: str | None


def parse_body(body: bytes) -> Any:
    """The decoded JSON of a /submit body (``None`` for an empty one)."""
    if len(body) > MAX_BODY_BYTES:
        raise Rejection(413, "too_large", "The request body is over 1 MB; send only model_path.")
    try:
        return json.loads(body or b"null")
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise Rejection(
            400,
            "invalid_json",
            f'The body is not valid JSON ({exc}). Send {{"model_path": "output/v1"}} '
            "with Content-Type: application/json.",
        ) from None


def model_path_given(body: Any) -> str | None:
    """The model_path of a body, as far as there is one (recorded with a rejection too)."""
    if isinstance(body, dict) and isinstance(body.get("model_path"), str):
        return body["model_path"]
    return None


def check_budget(run: dict[str, Any]) -> None:
    """Submissions are taken between the start of the run's budget and its deadline."""
    if run["deadline"] is None:
        raise Rejection(409, "not_started", "The run's budget has not started yet.")
    if now() > run["deadline"]:
        raise Rejection(
            409,
            "deadline_passed",
            f"The time budget ended at {iso(run['deadline'])}; no more submissions are taken.",
        )


def check_fields(body: Any) -> tuple[str, str | None]:
    """The body's model_path and its gpu field (as a string)."""
    if not isinstance(body, dict):
        raise Rejection(400, "invalid_json", 'Send a JSON object: {"model_path": "output/v1"}.')
    raw = body.get("model_path")
    if not isinstance(raw, str) or not raw.strip():
        raise Rejection(
            400,
            "missing_model_path",
            'The JSON body needs "model_path": the folder of the saved model, '
            'e.g. {"model_path": "output/v1"} (relative to the workspace) or an absolute path.',
        )
    gpu = body.get("gpu")
    if gpu is not None and not isinstance(gpu, (str, int)):
        raise Rejection(400, "invalid_gpu", '"gpu" must be a string such as "0" or "0,1".')
    return raw, None if gpu is None else str(gpu)


def validate(body: Any, run: dict[str, Any], workspace: Path) -> Accepted:
    """A decoded /submit body checked against the run (``run``: its row in run.db)."""
    check_budget(run)
    raw, gpu = check_fields(body)
    return Accepted(raw, check_model_path(raw, workspace), gpu)


def check_model_path(raw: str, workspace: Path, expected: Path | None = None) -> Path:
    """The real folder of ``raw``: inside the workspace, every file in it too, a full model.

    Run when a submission arrives and again when its evaluation starts (``expected``:
    the folder it resolved to then), so a folder swapped for a symlink in between is
    caught.
    """
    if "\x00" in raw:
        raise Rejection(400, "invalid_path", "model_path contains a NUL byte.")
    resolved = _resolve(raw, workspace)
    if expected is not None and resolved != expected:
        raise Rejection(409, "path_changed",
                        f"{raw} resolved to {expected} when submitted and to {resolved} now; "
                        "keep a submitted folder in place until it is scored.")
    problem = check_model_folder(resolved)
    if problem:
        raise Rejection(404 if problem.code == "not_found" else 422, problem.code, problem.detail)
    _check_no_links_out(raw, resolved, workspace)
    return resolved


def _resolve(raw: str, workspace: Path) -> Path:
    """``raw`` (relative to the workspace unless absolute) with every link followed; inside it."""
    path = Path(raw)
    if not path.is_absolute():
        path = workspace / path
    resolved = Path(os.path.realpath(path))
    if not resolved.is_relative_to(workspace):
        raise Rejection(
            403,
            "outside_workspace",
            f"{raw} resolves to {resolved}, which is outside the workspace "
            f"{workspace}. Save models under $OUTPUT_DIR and submit that path; "
            "symlinks and '..' that leave the workspace are refused.",
        )
    return resolved


def _check_no_links_out(raw: str, resolved: Path, workspace: Path) -> None:
    leaving = files_leaving(resolved, workspace)
    if leaving:
        raise Rejection(
            403,
            "outside_workspace",
            f"{leaving[0]} in {raw} is a link to a file outside the workspace"
            f"{f' (and {len(leaving) - 1} more)' if len(leaving) > 1 else ''}. "
            "Copy the files into the model folder instead of linking them.",
        )
