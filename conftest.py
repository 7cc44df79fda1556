"""Root conftest: thin on purpose. Fixtures live in the named modules below."""

pytest_plugins = [
    "tests.fix_home",  # first: the session's own CRASHRESUME_HOME
    "tests.fix_db",
    "tests.fix_pgcluster",  # throwaway clusters of the cluster's own tests
    "tests.fix_mocks",
    "tests.fix_runtime",
    "tests.fix_supervisor",
    "tests.fix_proxy",
    "tests.fix_ui",  # the dashboard under uvicorn, and headless chromium
]
