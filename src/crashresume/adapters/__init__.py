"""Ready adapters that route another library's side effects through ``ctx.effect``.

Each imports its library only when used, so ``import crashresume`` never pulls one in:

- ``crashresume.adapters.http``: httpx (and httpx2) transports; extra ``crashresume[httpx]``.
- ``crashresume.adapters.dbos``: DBOS steps and a per-run_id launcher; ``crashresume[dbos]``.
- ``crashresume.adapters.langgraph``: LangGraph nodes and checkpointer state;
  ``crashresume[langgraph]``.
"""

from __future__ import annotations
