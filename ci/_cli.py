"""The `plangate` command."""

from __future__ import annotations


def main(argv: list[str] | None = None) -> int:
    """Run the `plangate` command line."""
    return 0
