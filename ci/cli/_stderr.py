"""Every line a command writes to stderr, with secrets redacted.

Error messages quote what they refuse: an attribute's value, an id, a line of a file. Those can
hold an API key, so each line passes the same redactor as the datasets, spans and reports.
"""

from __future__ import annotations

import sys


def say(kind: str, text: object) -> None:
    """Print `plangate: <kind>: <text>` on stderr, redacted."""
    # Imported here: the redactor's patterns are compiled only when something is said.
    from plangate.replay import default_redactor

    print(f"plangate: {kind}: {default_redactor().text(str(text))}", file=sys.stderr)
