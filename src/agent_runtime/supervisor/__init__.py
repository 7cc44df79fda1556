"""Supervision: ``python -m agent_runtime.supervisor`` (``main``), its sweep that claims,
gives up and hands out runs (``supervision``), the pool of long-lived workers
(``workerpool``), taking back a dead or hung worker's run (``takeback``) and naming runs no
supervisor serves (``unserved``).

May import: everything below it (``loop``, ``llm``, ``tools``, ``observe``, ``store``,
``localpg``, the base modules); nothing imports it but the package's public surface.
"""
