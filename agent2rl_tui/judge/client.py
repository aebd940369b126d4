"""A chat-completions client for OpenAI-compatible judges, with retries and backoff.

Standard library only (``urllib``): the grader's worker calls it from a thread pool, one
request per judgement. Connection errors (refused, reset, closed without an answer), timeouts,
HTTP 429 and 5xx are retried with
exponential backoff; other HTTP errors (a wrong model name, a bad key) are not, since
asking again gets the same answer.
"""

from __future__ import annotations

import http.client
import json
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agent2rl_tui.judge import JudgeError, JudgeSettings

RETRYABLE_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}


@dataclass
class Reply:
    """The judge's answer to one request: the parsed JSON body and how many attempts it took."""

    body: dict[str, Any]
    attempts: int


class Unretryable(JudgeError):
    """An HTTP error that asking again will not fix (4xx other than 408/409/425/429)."""


class JudgeClient:
    def __init__(self, settings: JudgeSettings, env: Mapping[str, str] | None = None) -> None:
        self.settings = settings
        self.url = settings.base_url.rstrip("/") + "/chat/completions"
        key = settings.api_key(env)
        self.headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {key}"} if key else {})}

    def _post_once(self, payload: dict[str, Any]) -> dict[str, Any]:
        request = urllib.request.Request(self.url, data=json.dumps(payload).encode(), headers=self.headers,
                                         method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self.settings.timeout_s) as response:
                return json.loads(response.read().decode("utf-8"))
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode("utf-8", "replace")[:300]
            if exc.code in RETRYABLE_STATUS:
                raise JudgeError(f"HTTP {exc.code}: {detail}") from None
            raise Unretryable(f"HTTP {exc.code} from {self.url}: {detail}") from None
        except TimeoutError:
            raise JudgeError(f"no answer within {self.settings.timeout_s:g} s") from None
        except urllib.error.URLError as exc:
            raise JudgeError(f"cannot reach {self.url}: {exc.reason}") from None
        except (ConnectionError, http.client.HTTPException) as exc:  # reset or closed while answering
            raise JudgeError(f"the connection to {self.url} broke: {exc or type(exc).__name__}") from None
        except ValueError as exc:
            raise JudgeError(f"the judge's answer is not JSON: {exc}") from None

    def chat(self, payload: dict[str, Any]) -> Reply:
        """POST one request (``model`` is filled in), retrying what may pass on a second try."""
        payload = {"model": self.settings.model, **payload}
        attempts = 0
        while True:
            attempts += 1
            try:
                return Reply(self._post_once(payload), attempts)
            except Unretryable:
                raise
            except JudgeError as exc:
                if attempts > self.settings.retries:
                    raise JudgeError(f"{exc} (gave up after {attempts} attempts)") from None
                time.sleep(self.settings.backoff_s * self.settings.backoff_growth ** (attempts - 1))

    def check(self) -> None:
        """One tiny request, not retried, so a run with a wrong URL, model or key fails at once,
        before its budget starts."""
        self._post_once({"model": self.settings.model, "messages": [{"role": "user", "content": "Say OK."}],
                         "max_tokens": 1, "temperature": 0})
