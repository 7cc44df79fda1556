"""The dashboard: ``python -m agent_runtime ui``, the operator's view and actions in a browser.

It owns the web side only and reads nothing the CLI does not: every page reads through the
functions ``runs`` and ``show`` call (:mod:`agent_runtime.operator`), every action calls the
function ``resolve``, ``retry`` or ``cancel`` calls. It may import the operator, the store,
the CLI's settings and the base modules; nothing below imports it.

- :mod:`.app` builds the ASGI app (:func:`build_app`: one function, where another app
  mounts in one line) and serves it;
- :mod:`.pages` the pages that read (needs attention, the runs list, one run);
- :mod:`.actions` the forms that act, each confirmed first;
- :mod:`.guard` the token, the session cookie, the CSRF field and the origin checks;
- :mod:`.render` the Jinja2 templates (``templates/``, package data), escaping every value;
- :mod:`.command` the ``ui`` subcommand (port, bind address, token).

Nothing is imported here: ``python -m agent_runtime`` registers ``ui`` through
:mod:`.command`, which loads FastAPI and uvicorn only when the dashboard is served.
"""

from __future__ import annotations
