"""Secrets never cross the boundary: every text that comes back from a job (messages, output, errors, progress) is
scrubbed of known secret values before anything else sees it — verdicts, logs, checkpoints, progress, prompts.

Known secrets: the values of environment variables whose names say they hold one (`*KEY*`, `*TOKEN*`,
`*SECRET*`, `*PASSWORD*`, ...), and values registered by the caller (the agent registers its API key and any
password in its endpoint URL). The sandbox already keeps them out of a job's reach; this is the second wall.
"""

from __future__ import annotations

import os
import re
from typing import Any

MASK = "***"
_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|COOKIE|SESSION", re.IGNORECASE)
_MIN_LENGTH = 6  # shorter values would mask ordinary words
_registered: set[str] = set()


def register_secret(value: str | None) -> None:
    """Treat `value` as a secret from now on (in this process)."""
    if value and len(value) >= _MIN_LENGTH:
        _registered.add(value)


def known_secrets() -> list[str]:
    from_env = {v for k, v in os.environ.items() if _SECRET_NAME.search(k) and len(v) >= _MIN_LENGTH}
    return sorted(_registered | from_env, key=len, reverse=True)  # longest first: no partial masking


def redact(text: str, secrets: list[str] | None = None) -> str:
    for secret in known_secrets() if secrets is None else secrets:
        if secret in text:
            text = text.replace(secret, MASK)
    return text


def redact_data(data: Any, secrets: list[str] | None = None) -> Any:
    """`data` (JSON-like: dicts, lists, strings) with every string scrubbed."""
    secrets = known_secrets() if secrets is None else secrets
    if not secrets:
        return data
    if isinstance(data, str):
        return redact(data, secrets)
    if isinstance(data, dict):
        return {redact_data(k, secrets): redact_data(v, secrets) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [redact_data(v, secrets) for v in data]
    return data
