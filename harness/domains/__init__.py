"""Demo domains: deterministic worlds of tools and data, and the tasks a simulated model knows.

`Domain` and the registry live in `_domain`; each built-in domain is a sub-package (its data, its
workspace of tools, its task catalog) that registers itself when this package is imported, so
`get_domain("support")` works wherever the harness is imported. Imports only harness basics
(tools, messages, the loop detector's call key).
"""

from plangate.harness.domains import observability, support
from plangate.harness.domains._domain import (
    CallSpec,
    Domain,
    TaskSpec,
    domain_names,
    get_domain,
    register_domain,
)

__all__ = [
    "CallSpec",
    "Domain",
    "TaskSpec",
    "domain_names",
    "get_domain",
    "observability",
    "register_domain",
    "support",
]
