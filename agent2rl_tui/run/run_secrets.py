"""Which values are a run's secrets: what the supervisor gives its `record.redact.Redactor`.

Kept apart from the redactor (which only replaces) because knowing what is secret is the
run's business: the values of the secret-named variables the supervisor and the agent get
(driver, judge and search keys: ``*_API_KEY``, ``*_TOKEN``, ``*_SECRET``, ``*_PASSWORD`` ...),
and the tokens in the agent CLI's login files (JSON values under key-like names, ``NAME=value``
lines of an ``.env``), read from the user's home before they are copied into the run's. The
services' own secrets (the grader's and train-environment service's URL secrets, the meter's
per-run tokens) are added by the supervisor as each is made.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

SECRET_NAME = re.compile(r"(^|_)(API_KEY|KEY|TOKEN|AUTH_TOKEN|ACCESS_TOKEN|SECRET|SECRET_KEY|ACCESS_KEY|"
                         r"PASSWORD|PASSWD|CREDENTIALS?_JSON)$", re.I)
"""A variable whose value is a secret (``OPENAI_API_KEY``, ``HF_TOKEN``, ``AGENT2RL_GRADER_SECRET``)."""
SECRET_FIELD = re.compile(r"token|key|secret|password|credential|session|cookie|auth", re.I)
"""A login file's field whose string value is a secret (``accessToken``, ``refresh_token``, ``apiKey``)."""
LOGIN_FILE_CAP = 1 << 20
MIN_VALUE = 8


def secret_values(env: Mapping[str, str]) -> list[str]:
    """The values of ``env``'s secret-named variables."""
    return [v.strip() for k, v in env.items() if SECRET_NAME.search(k) and looks_secret(v.strip())]


def looks_secret(value: str) -> bool:
    """A value that can be a secret: long enough, one word, not a path (a secret-named variable
    that holds ``/etc/creds.json`` or ``localhost`` must not mask every mention of it)."""
    return (len(value) >= MIN_VALUE and not value.startswith(("/", "~", ".")) and not any(c.isspace() for c in value)
            and any(c.isdigit() for c in value) + any(c.isupper() for c in value) + any(c.islower() for c in value) >= 2)


def login_secrets(paths: Iterable[Path]) -> list[str]:
    """The secrets in the user's login files at ``paths`` (the files copied into a run's home), at
    most ``LOGIN_FILE_CAP`` bytes of each; a missing or unreadable one has none."""
    found: list[str] = []
    for path in paths:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
            with os.fdopen(fd, "rb") as fh:
                data = fh.read(LOGIN_FILE_CAP)
        except OSError:
            continue
        found += _secrets_in(data.decode("utf-8", "replace"))
    return found


def _secrets_in(text: str) -> list[str]:
    try:
        obj = json.loads(text)
    except ValueError:
        obj = None
    if obj is not None:
        return [v for v in _json_secrets(obj, "") if looks_secret(v)]
    out = []
    for line in text.splitlines():  # .env: NAME=value
        name, sep, value = line.strip().removeprefix("export ").partition("=")
        value = value.strip().strip("'\"")
        if sep and SECRET_NAME.search(name.strip()) and looks_secret(value):
            out.append(value)
    return out


def _json_secrets(obj: Any, field: str) -> Iterator[str]:
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _json_secrets(v, str(k))
    elif isinstance(obj, list):
        for v in obj:
            yield from _json_secrets(v, field)
    elif isinstance(obj, str) and SECRET_FIELD.search(field):
        yield obj.strip()
