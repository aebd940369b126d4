"""The example agent's own client of the grading API, standard library only.

Any agent gets ``$GRADING_SERVER_URL`` (a loopback address whose path is the run's secret
prefix) and the API described in the workspace's instructions.md; this is that API and no
more, so the example agent needs nothing of the benchmark's code:

- ``POST /submit`` ``{"model_path": ...}`` answers once the model is scored (``?wait=0``
  answers ``202`` at once); a refusal is a 4xx with ``{"error", "detail",
  "submission_id"}``, and it is returned as is, as the scored answer is.
- ``GET /time``: ``start_time``, ``timeout_s``, ``end_time``, ``now``, ``remaining``.
- ``GET /health``: the grader's status and the baseline.
- ``GET /submissions`` and ``/submissions/<id>``.
Other errors use the same ``{"error", "detail"}`` body; they raise ``GraderAPIError``.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any


class GraderAPIError(RuntimeError):
    """The grader could not be reached, or answered with an error or something not JSON."""

    def __init__(self, message: str, status: int | None = None, body: Any = None) -> None:
        super().__init__(message)
        self.status = status
        self.body = body


class GraderAPI:
    """``$GRADING_SERVER_URL`` and its routes; every call returns the decoded JSON answer."""

    def __init__(self, url: str, timeout: float = 3600.0) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout
        # The grader is on loopback: never route through a proxy from the environment.
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def _call(self, method: str, path: str, body: Any = None, timeout: float | None = None) -> tuple[int, Any]:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(f"{self.url}{path}", data=data, method=method,
                                     headers={"Content-Type": "application/json", "Accept": "application/json"})
        try:
            with self._opener.open(req, timeout=timeout or self.timeout) as resp:
                status, raw = resp.status, resp.read()
        except urllib.error.HTTPError as exc:
            status, raw = exc.code, exc.read()
        except (urllib.error.URLError, OSError) as exc:
            raise GraderAPIError(f"{method} {path}: the grader did not answer ({exc})") from exc
        try:
            return status, json.loads(raw)
        except ValueError as exc:
            text = raw.decode(errors="replace")[:200]
            raise GraderAPIError(f"{method} {path} answered {status} with something not JSON: {text!r}",
                                 status) from exc

    def _get(self, path: str, timeout: float | None = None) -> Any:
        status, body = self._call("GET", path, timeout=timeout)
        if status != 200:
            detail = f"{body.get('error')}: {body.get('detail')}" if isinstance(body, dict) else str(body)
            raise GraderAPIError(f"GET {path} answered {status} ({detail})", status, body)
        return body

    def submit(self, model_path: str, *, wait: bool = True) -> dict[str, Any]:
        """Submit a saved model; with ``wait``, block until it is scored (or failed).

        The answer is returned whether the submission was scored, failed or refused (a 4xx
        with ``error`` and ``detail``): the caller reads ``status`` or ``error``.
        """
        status, body = self._call("POST", f"/submit?wait={int(wait)}", {"model_path": model_path})
        if not isinstance(body, dict) or (status >= 500 and "error" not in body):
            raise GraderAPIError(f"POST /submit answered {status}: {body!r}", status, body)
        return body

    def time(self) -> dict[str, Any]:
        return self._get("/time", timeout=30)

    def health(self) -> dict[str, Any]:
        return self._get("/health", timeout=30)

    def submissions(self) -> list[dict[str, Any]]:
        return self._get("/submissions", timeout=30)["submissions"]

    def submission(self, sub_id: int) -> dict[str, Any]:
        return self._get(f"/submissions/{sub_id}", timeout=30)
