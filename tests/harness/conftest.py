"""Harness tests.

The ``pytester`` plugin is requested in ``test_plugin.py`` rather than here: pytest refuses
``pytest_plugins`` in a conftest below the root one when the whole suite is collected.
"""
