"""The CI side of plangate: the command line, and (later) the gate, reports and Phoenix wiring."""

from ci._cli import main

__all__ = ["main"]
