"""Tools and agents: how a tool is declared (``tooldef``: its effect contract, schema and
client), what an agent is (``agent``), carrying out one journaled call by its contract
(``acting``: intent, call, confirm, and settling a call in doubt), and the seed's
provisioning agent.

May import: the base modules, ``agent_runtime.store`` and ``agent_runtime.observe``.
"""
