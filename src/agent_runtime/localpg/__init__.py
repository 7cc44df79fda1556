"""A PostgreSQL of one's own: finding its binaries, ``initdb``, starting it as an
unprivileged account, its configuration and password, and where ``DATABASE_URL`` comes from
when none is given (``dbsource``).

May import: the base modules of ``agent_runtime``. Knows nothing of the journal's tables.
"""
