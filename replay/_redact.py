"""Secret redaction: one policy for everything that leaves the process.

A `Redactor` replaces, with `[REDACTED]`:

- what the maintained detectors of `detect-secrets` find (AWS, GitHub, GitLab, Slack, Stripe,
  OpenAI, npm, PyPI, Twilio, SendGrid, Discord, Telegram, JWTs, private keys, basic-auth URLs,
  and more);
- plangate's own patterns: API keys of the common providers (`sk-…`, `sk-ant-…`, Google's
  `AIza…`), bearer and basic `Authorization` headers, passwords in URLs, AWS secret access
  keys, and any value in a key-like context (`password=…`, `"api_key": "…"`, `token: …`),
  always for passwords and secrets, and for other keys when the value has high entropy;
- the values of the environment's secret-looking variables (`…KEY`, `…TOKEN`, `…SECRET`,
  `…PASSWORD`), wherever they appear;
- the user's own patterns (`--redact REGEX`).

Recording, goldens from traces or Phoenix, trace tables written to disk, spans exported to
Phoenix or OTLP, reports and crash logs all go through it.
"""

from __future__ import annotations

import functools
import math
import os
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from plangate.harness import ConfigError

REDACTED = "[REDACTED]"

TOKENS = (
    r"sk-(?:proj-|ant-(?:api\d+-)?|live-|test-)?[A-Za-z0-9_-]{16,}",
    r"AIza[0-9A-Za-z_-]{35}\b",
    r"(?:AKIA|ASIA)[0-9A-Z]{16}\b",
    r"gh[pousr]_[A-Za-z0-9]{30,}\b",
    r"github_pat_[A-Za-z0-9_]{30,}\b",
    r"xox[abprs]-[A-Za-z0-9-]{10,}\b",
    r"glpat-[A-Za-z0-9_-]{20,}",
    r"npm_[A-Za-z0-9]{36}\b",
    r"pypi-AgE[A-Za-z0-9_-]{50,}",
    r"SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}\b",
    r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
)
"""Provider keys and tokens by their shape: OpenAI and Anthropic, Google, AWS key ids, GitHub,
Slack, GitLab, npm, PyPI, SendGrid, JWTs."""

PATTERNS: tuple[re.Pattern[str], ...] = (
    re.compile(r"\b(?:" + "|".join(TOKENS) + ")"),  # one pass over the text for all of them
    re.compile(r"(?i)\b(?:bearer|basic)\s+[A-Za-z0-9._~+/=-]{12,}"),
    re.compile(r"(?<=://)[^/\s:@]+:[^/\s@]+(?=@)"),
    re.compile(r"(?i)(?<=aws_secret_access_key)([\"'\s:=]+)[A-Za-z0-9/+=]{40}\b"),
    re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----"),
)
"""What counts as a secret by default, besides what the detectors and key-like contexts find."""

_KEY_LIKE = re.compile(
    r"(?i)(?P<key>(?:passw(?:or)?d|pwd|secret|token|api[_-]?key|access[_-]?key|private[_-]?key|"
    r"credential|auth)[\w.-]{0,40}?)"
    r"(?P<sep>\\*[\"']?\s*[:=]\s*\\*[\"']?)(?P<value>[^\s\"'\\,;&<>]{4,})"
)
"""A value given to a key-like name: `password=…`, `"api_key": "…"`, `TOKEN: …`, also inside
JSON that is itself a JSON string, escaped once or more (`{\\"api_key\\": \\"…\\"}`)."""
_ALWAYS = re.compile(r"(?i)passw(?:or)?d|pwd|secret")
"""Key-like names whose values are secrets whatever they look like."""
ENTROPY = 3.0
"""Bits per character above which a key's value counts as a secret (random keys are ~4.5)."""
_SECRET_VARIABLE = re.compile(r"(?i)(?:key|token|secret|passw(?:or)?d|credential)s?$")
_SUSPECT = re.compile(r"[A-Za-z0-9_+/=.:-]{16,}")
"""A candidate token: only a long unbroken run can be what the detectors find (private keys
and URLs with passwords are plangate's own patterns)."""
_HEX = re.compile(r"[0-9a-fA-F-]+")
_IDS = "^[0-9a-fA-F-]*$"
"""A whole text of hex digits and dashes, for Arrow (RE2): `_HEX` over a column."""
_REMEMBERED = 100_000
"""Distinct texts a redactor remembers the answer for."""


def _compile(pattern: str) -> re.Pattern[str]:
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise ConfigError(
            f"redact pattern {pattern!r} is not a valid regular expression ({exc}); fix --redact"
        ) from exc


@functools.cache
def _detectors() -> tuple[Any, ...]:
    """detect-secrets' detectors, but its entropy, keyword and public-IP ones.

    The key-like context rule does what entropy and keywords would, without flagging every long
    word; a public IP address is not a secret.
    """
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class

    skipped = {
        "Base64HighEntropyString",
        "HexHighEntropyString",
        "KeywordDetector",
        "IPPublicDetector",
    }
    plugins: list[Any] = sorted(get_mapping_from_secret_type_to_class().values(), key=str)
    return tuple(plugin() for plugin in plugins if plugin.__name__ not in skipped)


def entropy(text: str) -> float:
    """Shannon entropy in bits per character."""
    counts = Counter(text)
    return -sum(n / len(text) * math.log2(n / len(text)) for n in counts.values())


def environment_secrets(environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The values of secret-looking environment variables (`OPENAI_API_KEY`, `GH_TOKEN`, …)."""
    source = os.environ if environ is None else environ
    return tuple(
        sorted(
            {v for k, v in source.items() if _SECRET_VARIABLE.search(k) and len(v) >= 8},
            key=len,
            reverse=True,
        )
    )


class Redactor:
    """Replaces secrets in text, in every string of nested data, and in string columns."""

    def __init__(
        self, extra: Iterable[str] = (), *, environ: Mapping[str, str] | None = None
    ) -> None:
        self.extra = tuple(_compile(p) for p in extra)
        self.patterns: Sequence[re.Pattern[str]] = (*PATTERNS, *self.extra)
        self.literals = environment_secrets(environ)
        self._done: dict[str, str] = {}
        """Texts already redacted (traces repeat them: the same prompt in every model call)."""

    def text(self, value: str) -> str:
        """`value` with every secret replaced by `[REDACTED]`."""
        done = self._done.get(value)
        if done is None:
            done = self._redact(value)
            if len(self._done) < _REMEMBERED:
                self._done[value] = done
        return done

    def _redact(self, value: str) -> str:
        for literal in self.literals:
            value = value.replace(literal, REDACTED)
        for pattern in self.patterns:
            value = pattern.sub(_keep_prefix, value)
        if ":" in value or "=" in value:  # a key-like context has one; most texts do not
            value = _KEY_LIKE.sub(_key_value, value)
        if _SUSPECT.search(value):
            value = _detected(value)
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

    def table(self, table: pa.Table) -> pa.Table:
        """A table with every string column redacted, each distinct text of a column once.

        Tables repeat their texts (a span kind, a model, a prompt, a score's explanation), so
        the cost follows the distinct texts, not the rows; a column with nothing to redact is
        kept as it is.
        """
        columns = [
            self._column(c) if pa.types.is_string(c.type) or pa.types.is_large_string(c.type)
            else c
            for c in table.columns
        ]  # fmt: skip
        return pa.Table.from_arrays(columns, schema=table.schema)

    def _column(self, column: pa.ChunkedArray) -> pa.ChunkedArray | pa.Array:
        encoded = column.combine_chunks().dictionary_encode()
        distinct = encoded.dictionary
        read = self._suspects(distinct)
        texts = distinct.take(read).to_pylist()
        changed = [
            (at, clean) for at, text in enumerate(texts) if (clean := self.text(text)) != text
        ]
        if not changed:
            return column
        whole = distinct.to_pylist()
        for at, clean in changed:
            whole[read[at]] = clean
        return pa.array(whole, column.type).take(encoded.indices)

    def _suspects(self, distinct: pa.Array) -> npt.NDArray[np.int64]:
        """The texts that may hold a secret, by position: all but ids, told column-wise.

        A text of hex digits and dashes only (trace, span and call ids, UUIDs) holds none of
        the built-in policy's secrets: each pattern needs a character outside that set, and the
        detectors do not read hex tokens. It may hold an environment secret, which is looked
        for; the user's own patterns may match anything, so with them every text is read.
        """
        if self.extra:
            return np.arange(len(distinct), dtype=np.int64)
        plain = pc.match_substring_regex(distinct, _IDS)
        for literal in self.literals:
            plain = pc.and_(plain, pc.invert(pc.match_substring(distinct, literal)))
        return np.flatnonzero(~np.asarray(plain.fill_null(False), dtype=bool)).astype(np.int64)


def _detected(value: str) -> str:
    """`value` with what the detectors find redacted; they read only its candidate tokens.

    Every secret they look for is one unbroken token (a key, a JWT, `AccountKey=…`), so the
    detectors run once over the text's new candidate tokens joined, not over a long text, and
    a token seen before (in any text) is not read again.
    """
    tokens = {m[0] for m in _SUSPECT.finditer(value)} - _CLEAN
    tokens = {t for t in tokens if not _HEX.fullmatch(t)}
    if not tokens:
        return value
    joined = " ".join(sorted(tokens))
    found: set[str] = set()
    for detector in _detectors():
        for secret in detector.analyze_line(filename="text", line=joined, line_number=1):
            if secret.secret_value and len(secret.secret_value) >= 8:
                found.add(secret.secret_value)
    if len(_CLEAN) < _REMEMBERED:
        _CLEAN.update(t for t in tokens if not any(f in t for f in found))
    for secret in sorted(found, key=len, reverse=True):
        value = value.replace(secret, REDACTED)
    return value


_CLEAN: set[str] = set()
"""Candidate tokens the detectors found nothing in (shared by every redactor: they do not
depend on a redactor's own patterns)."""


def _key_value(match: re.Match[str]) -> str:
    secret = match["value"]
    if secret.startswith(REDACTED) or not (
        _ALWAYS.search(match["key"]) or entropy(secret) >= ENTROPY
    ):
        return match[0]
    return f"{match['key']}{match['sep']}{REDACTED}"


def _keep_prefix(match: re.Match[str]) -> str:
    """`[REDACTED]`, after the pattern's first group when it has one (a key's separator)."""
    if match.re.groups and match.group(1) is not None:
        return match.group(1) + REDACTED
    return REDACTED


@functools.cache
def default_redactor() -> Redactor:
    """The built-in policy (patterns, detectors, the environment's secrets), made once."""
    return Redactor()


def redactor_for(extra: Iterable[str] = ()) -> Redactor:
    """The built-in policy plus the user's patterns: the shared redactor when there are none.

    Sharing it lets a second pass over what it already redacted (a recorded dataset, when it is
    written) find every clean text remembered instead of scanning it again.
    """
    patterns = tuple(extra)
    return Redactor(patterns) if patterns else default_redactor()
