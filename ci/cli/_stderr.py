"""Every line a command writes to stderr, with secrets redacted.

Error messages quote what they refuse: an attribute's value, an id, a line of a file, a URL
given on the command line. Those can hold an API key or a password, so each line passes the
same redactor as the datasets, spans and reports: the built-in policy, and the command's own
`--redact` patterns once the command line is read (`use`).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from plangate.replay import Redactor

_redactor: Redactor | None = None
"""The command's redactor (`use`); the built-in one until then."""


def use(patterns: Iterable[str]) -> None:
    """Redact what is said from now on with the built-in policy and `patterns` too.

    The patterns are a command's own: the next command in the same process sets its own.

    Raises:
        ConfigError: A pattern is not a regular expression (then nothing changes).
    """
    global _redactor
    patterns = tuple(patterns)
    if not patterns:  # the built-in one, made when first needed: a command starts fast
        _redactor = None
        return
    from plangate.replay import redactor_for

    _redactor = redactor_for(patterns)


def redacted(text: object) -> str:
    """`text` as a line may show it."""
    # Imported here: the redactor's patterns are compiled only when something is said.
    from plangate.replay import default_redactor

    return (_redactor or default_redactor()).text(str(text))


def say(kind: str, text: object) -> None:
    """Print `plangate: <kind>: <text>` on stderr, redacted."""
    print(f"plangate: {kind}: {redacted(text)}", file=sys.stderr)


def tell(line: object) -> None:
    """Print a line on stderr as it is given, redacted (`phoenix: …` progress lines)."""
    print(redacted(line), file=sys.stderr)
