"""Keep secrets out of everything vedana prints, logs or traces.

The set of secrets is every configured secret setting plus any environment variable whose
name says it holds one (`*_API_KEY`, `*_ACCESS_KEY`, `*_TOKEN`, `*SECRET*`, `*_PASSWORD`, `*_PWD`,
`*_PASS`), so keys that litellm reads on its own (OPENAI_API_KEY, ...) are covered too.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
from collections.abc import Iterable

# Names that end like a credential, or mention SECRET anywhere (AWS_SECRET_ACCESS_KEY, which
# litellm reads for Bedrock). Not every *_KEY: SORT_KEY=name would then mask "name" everywhere.
_SECRET_NAME = re.compile(r"(API_?KEY|ACCESS_?KEY|TOKEN|PASSWORD|PASSWD|_PWD|_PASS)$|SECRET", re.IGNORECASE)
_MIN_SECRET_LEN = 4  # shorter values would redact ordinary words
MASK = "***"


def secrets_from_environment(environ: dict[str, str] | None = None) -> list[str]:
    env = os.environ if environ is None else environ
    return [v for k, v in env.items() if _SECRET_NAME.search(k) and len(v) >= _MIN_SECRET_LEN]


def known_secrets() -> list[str]:
    from vedana.config import get_settings

    values = set(secrets_from_environment())
    with contextlib.suppress(Exception):  # settings that fail to load must not stop redaction
        values.update(get_settings().secrets())
    return sorted((v for v in values if len(v) >= _MIN_SECRET_LEN), key=len, reverse=True)


def redact(text: str, secrets: Iterable[str] | None = None) -> str:
    given = known_secrets() if secrets is None else sorted(secrets, key=len, reverse=True)
    for secret in given:
        # Longest first, so a secret containing another is masked whole; very short values
        # (a 1-character password) would garble every message and are left alone.
        if len(secret) >= _MIN_SECRET_LEN and secret in text:
            text = text.replace(secret, MASK)
    return text


class RedactingFilter(logging.Filter):
    """A logging filter that masks secrets in the final message."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = redact(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        return True
