"""The model side: model clients for the mock's protocol and Chat Completions (``models``),
the conversation rebuilt from journaled answers (``conversation``), checking an answer
before it is journaled (``checking``), and deciding a step (``deciding``: ask, journal the
answer and its decisions, replay instead of asking again).

May import: the base modules, ``agent_runtime.store``, ``agent_runtime.observe`` and
``agent_runtime.tools``.
"""
