"""The built-in demo domains; importing this package registers them."""

from plangate.harness.domains import observability, support

__all__ = ["observability", "support"]
