"""The durable step loop and the lease it runs under: the worker (``worker``: decide,
journal, intend, call, confirm, and the restart that resolves and replays), how held work
ends (``stopping``), claiming a run (``claiming``) and keeping it (``lease``: owner tokens,
proofs of death, the heartbeat).

May import: the base modules, ``store``, ``observe``, ``tools`` and ``llm``.
"""
