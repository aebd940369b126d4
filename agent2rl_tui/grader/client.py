"""A small client for the grader API: health polling with a total timeout, submit, time.

The supervisor uses it to wait for the grader (and the baseline) before the budget starts;
tests and the example agent use it to submit. Only the standard library and httpx.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import httpx


class GraderUnavailable(RuntimeError):
    """The grader did not become healthy in time, or its process died."""


class GraderClient:
    def __init__(self, url: str, timeout: float | None = None) -> None:
        self.url = url.rstrip("/")
        self.http = httpx.Client(timeout=timeout, trust_env=False)

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> GraderClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def health(self) -> dict[str, Any]:
        return self.http.get(f"{self.url}/health", timeout=5.0).raise_for_status().json()

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
            except httpx.HTTPError as exc:
                last_error = str(exc) or type(exc).__name__
            time.sleep(interval)
        raise GraderUnavailable(f"the grader was not ready after {total_timeout:.0f} s ({last_error})")

    def submit(self, model_path: str, *, wait: bool = True, gpu: str | None = None) -> httpx.Response:
        body: dict[str, Any] = {"model_path": model_path}
        if gpu is not None:
            body["gpu"] = gpu
        return self.http.post(f"{self.url}/submit", params={"wait": int(wait)}, json=body)

    def time(self) -> dict[str, Any]:
        return self.http.get(f"{self.url}/time").raise_for_status().json()

    def submissions(self) -> list[dict[str, Any]]:
        return self.http.get(f"{self.url}/submissions").raise_for_status().json()["submissions"]
