"""Mutation testing: how many small slips in the runtime does the suite catch?

``python -m properties.mutation`` makes mutants of the protocol modules with cosmic-ray's
operators (:mod:`.pymutants`) and of the runtime's SQL with a small mutator of its own
(:mod:`.sqlmutants`), writes each into a copy of the package (:mod:`.overlay`), runs the
killing command (:mod:`.check`: the small scope, then the ``ci`` exploration) against it,
and writes a report of killed and surviving mutants (:mod:`.report`). What the protocol's
schedules never run is a second tier (:mod:`.tiers`), killed by its own ``tests/`` files
(:mod:`.testtier`).
"""
