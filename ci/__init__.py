"""The CI side of plangate: the command line, and (later) the gate, reports and Phoenix wiring."""

from ci._cli import main
from ci._telemetry import Telemetry, telemetry

__all__ = ["Telemetry", "main", "telemetry"]
