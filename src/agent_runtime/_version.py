"""The installed distribution's version, for ``--version``."""

from __future__ import annotations

from importlib import metadata

DISTRIBUTION = "crashresume"  # agent_runtime ships inside the crashresume distribution


def version() -> str:
    """``0.1.0``; ``unknown`` when the package runs from a tree that was never installed."""
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return "unknown"
