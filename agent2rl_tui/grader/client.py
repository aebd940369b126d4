"""A small client for the grader API: health polling with a total timeout, submit, time.

The supervisor uses it to wait for the grader (and the baseline) before the budget starts;
tests and scripted agents use it to submit. Standard library only: httpx pulls in rich
through its CLI, and nothing below the front ends may import rich.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


class GraderUnavailable(RuntimeError):
    """The grader did not become healthy in time, or its process died."""


@dataclass(frozen=True)
class Response:
    status_code: int
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def text(self) -> str:
        return self.body.decode(errors="replace")


class GraderClient:
    def __init__(self, url: str, timeout: float | None = None) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout
        # Loopback only: never route through a proxy from the environment.
        self.opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def close(self) -> None:
        pass

    def __enter__(self) -> GraderClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def request(self, method: str, path: str, body: Any = None, timeout: float | None = None) -> Response:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(f"{self.url}{path}", data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with self.opener.open(req, timeout=timeout or self.timeout) as resp:
                return Response(resp.status, resp.read())
        except urllib.error.HTTPError as exc:
            return Response(exc.code, exc.read())

    def _ok_json(self, path: str, timeout: float | None = None) -> Any:
        resp = self.request("GET", path, timeout=timeout)
        if resp.status_code != 200:
            raise GraderUnavailable(f"GET {path} answered {resp.status_code}: {resp.text[:200]}")
        return resp.json()

    def health(self) -> dict[str, Any]:
        return self._ok_json("/health", timeout=5.0)

    def wait_ready(
        self,
        total_timeout: float,
        alive: Callable[[], bool] = lambda: True,
        interval: float = 0.25,
    ) -> dict[str, Any]:
        """Poll /health until the grader says ok (its baseline is done) or time runs out."""
        deadline = time.monotonic() + total_timeout
        last_error = "no answer yet"
        while time.monotonic() < deadline:
            if not alive():
                raise GraderUnavailable(f"the grader process exited ({last_error})")
            try:
                info = self.health()
                if info.get("status") == "ok":
                    return info
                last_error = f"status {info.get('status')}"
            except (OSError, GraderUnavailable, ValueError) as exc:
                last_error = str(exc) or type(exc).__name__
            time.sleep(interval)
        raise GraderUnavailable(f"the grader was not ready after {total_timeout:.0f} s ({last_error})")

    def submit(self, model_path: str, *, wait: bool = True) -> Response:
        body: dict[str, Any] = {"model_path": model_path}
        return self.request("POST", f"/submit?wait={int(wait)}", body)

    def time(self) -> dict[str, Any]:
        return self._ok_json("/time")

    def submissions(self) -> list[dict[str, Any]]:
        return self._ok_json("/submissions")["submissions"]

    def submission(self, sub_id: int) -> dict[str, Any]:
        return self._ok_json(f"/submissions/{sub_id}")
