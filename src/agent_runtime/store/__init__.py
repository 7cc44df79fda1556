"""The journal: every table the runtime writes, and the only code that writes them.

Owns the connection (``db``: one autocommit connection, prepared statements unless a pooler
sits in between, ``pooling``), the named SQL of ``agent_runtime/sql`` (``queries``), the
records read back (``records``), the fenced writes of a step (``journal``), the database
clock every lease is measured by (``clock``), what a value must be to be journaled
(``journalable``) and what may name a run (``runid``).

May import: the base modules of ``agent_runtime`` (``errors``, ``logfmt``, ``config``, ...).
Nothing here knows of tools, models, workers or supervisors.
"""
