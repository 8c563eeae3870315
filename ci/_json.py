"""JSON that every reader parses: a figure that is not a number (NaN, infinity) is null.

Python's `json` writes NaN and Infinity, which JSON has not: `JSON.parse`, `jq` and most
readers refuse the whole file. A figure with no evidence (a pass rate of no judged case) is
missing, and null says so.
"""

from __future__ import annotations

import json
import math
from typing import Any


def finite(data: Any) -> Any:
    """`data` with every float that is not finite as None, through dicts, lists and tuples."""
    if isinstance(data, float):
        return data if math.isfinite(data) else None
    if isinstance(data, dict):
        return {key: finite(value) for key, value in data.items()}
    if isinstance(data, list | tuple):
        return [finite(value) for value in data]
    return data


def json_text(data: Any, indent: int | None = 2) -> str:
    """`data` as JSON text, figures that are not numbers as null."""
    return json.dumps(finite(data), indent=indent, allow_nan=False)
