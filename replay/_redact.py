"""Secret redaction: API keys, bearer tokens, passwords in URLs and the user's own patterns.

Recording redacts every text it writes (requests, answers, tool arguments and results, span
attributes) before anything reaches a file.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from plangate.harness import ConfigError

REDACTED = "[REDACTED]"

PATTERNS: tuple[re.Pattern[str], ...] = (
    re.compile(r"\bsk-(?:proj-|ant-)?[A-Za-z0-9_-]{16,}"),
    re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/=-]{12,}"),
    re.compile(r"(?<=://)[^/\s:@]+:[^/\s@]+(?=@)"),
    re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{30,}\b"),
    re.compile(r"\bxox[abpr]-[A-Za-z0-9-]{10,}\b"),
    re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----"),
    re.compile(r"(?i)(?<=password=)[^\s&\"',;]{4,}"),
    re.compile(r"(?i)(?<=token=)[^\s&\"',;]{6,}"),
    re.compile(r"(?i)(?<=\"api_key\": \")[^\"]{6,}"),
)
"""What counts as a secret by default."""


def _compile(pattern: str) -> re.Pattern[str]:
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise ConfigError(
            f"redact pattern {pattern!r} is not a valid regular expression ({exc}); fix --redact"
        ) from exc


class Redactor:
    """Replaces secrets in text, and in every string of nested data."""

    def __init__(self, extra: Iterable[str] = ()) -> None:
        self.patterns: Sequence[re.Pattern[str]] = (*PATTERNS, *(_compile(p) for p in extra))
        self.count = 0
        """How many secrets were replaced so far."""

    def text(self, value: str) -> str:
        """`value` with every secret replaced by `[REDACTED]`."""
        for pattern in self.patterns:
            value, replaced = pattern.subn(REDACTED, value)
            self.count += replaced
        return value

    def data(self, value: Any) -> Any:
        """Nested lists and dicts with every string redacted."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, list | tuple):
            return [self.data(v) for v in value]
        if isinstance(value, dict):
            return {k: self.data(v) for k, v in value.items()}
        return value
