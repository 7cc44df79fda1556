"""The Hypothesis crash-schedule suite (docs/properties.md).

- ``events``: a schedule is data, a list of JSON events; ``Schedule`` files.
- ``pilots``: a worker driven gate by gate, as a thread or a real process.
- ``runner`` / ``runners``: apply events, judge every worker's end, keep the model-call
  ledger, check the invariants; the in-process and the process runner.
- ``invariants``: snapshot, shadow and the checks of DESIGN.md section 7.
- ``machine``: the ``RuleBasedStateMachine`` that generates and shrinks schedules.
- ``variants``: deliberately broken runtimes the suite must catch.
- ``profiles``: ``dev``, ``ci``, ``nightly``; ``strategies``: schedules as plain data.
- ``replay`` and ``nightly``: the command-line tools.
"""
