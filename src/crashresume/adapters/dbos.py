"""DBOS under ``conform``: steps that are effects, and a subject that launches and recovers.

    from dbos import DBOS
    from crashresume.adapters.dbos import effect_step, workflow_factory

    @effect_step("charge")            # a DBOS step whose body is one side effect
    def charge(order: str) -> str:
        return payments.charge(order)

    @DBOS.workflow()
    def checkout(order: str) -> str:
        return charge(order)

    report = conform(workflow_factory(checkout, directory=tmp_path), inputs=["o-1", "o-2"])

The effect's key is ``<workflow id>:<step id>``: the step a recovered workflow re-executes
(it ran, DBOS had not checkpointed it) is sent again under the same key and the harness
answers like an idempotent remote, as a remote keyed by DBOS's ids would.

``WorkflowSubject`` launches DBOS on a system database of its own per scenario, waits until
DBOS has recovered the workflows the dead start left pending, runs ``workflow(input)`` under
the workflow id ``str(input)`` for each input (a finished workflow returns its recorded
result without running again), reports the outputs of the finished workflows as
``state()``, and shuts DBOS down when the start ends (DBOS keeps one instance per process,
so a start must drop it before the next launches).

The system database is a SQLite file ``<directory>/<run_id>.sqlite`` (``directory=``), or a
PostgreSQL database per scenario on a server (``database_url=``, any database of the server
the user may ``CREATE DATABASE`` from), created by the harness and dropped when the
scenario's last start completes; leave the ``with`` block to drop the rest:

    with workflow_factory(checkout, database_url="postgresql://me@localhost/postgres") as make:
        report = conform(make, inputs=["o-1", "o-2"], mode="process", workers=4)

Either is made from a template DBOS migrated once (``_dbos_databases``), so a start costs
about what DBOS's own launch on a current database does.

DBOS is imported only when one of these is used: ``pip install 'crashresume[dbos]'``.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from crashresume._context import Context, current_context
from crashresume._errors import SimulatedCrash, UsageError
from crashresume.adapters._dbos_databases import PostgresDatabases, SqliteDatabases

SystemDatabases = SqliteDatabases | PostgresDatabases

F = TypeVar("F", bound=Callable[..., Any])

POLL = 0.02  # seconds between two looks at a workflow DBOS is recovering
ACTIVE = frozenset({"PENDING", "ENQUEUED", "DELAYED"})  # statuses of unfinished workflows
DEFAULT_CONFIG: dict[str, Any] = {
    "log_level": "WARNING",
    # How often DBOS's listener wakes: also how long its shutdown waits, so keep it short.
    "notification_listener_polling_interval_sec": 0.01,
}


def _dbos() -> Any:
    try:
        import dbos
    except ImportError as exc:
        raise UsageError(
            "crashresume.adapters.dbos needs DBOS: pip install 'crashresume[dbos]'"
        ) from exc
    return dbos


def step_key() -> str:
    """``<workflow id>:<step id>`` of the DBOS step running now."""
    dbos = _dbos()
    workflow, step = dbos.DBOS.workflow_id, dbos.DBOS.step_id
    if workflow is None or step is None:
        raise UsageError(
            "step_effect() runs inside a DBOS step; decorate the function with "
            "@effect_step(...) or @DBOS.step()"
        )
    return f"{workflow}:{step}"


def step_effect(name: str, arg: Any, *, perform: Callable[[], Any] | None = None) -> Any:
    """One side effect inside a DBOS step, keyed by workflow id and step id.

    Under ``conform`` it is ``ctx.effect(name, arg, key=step_key(), perform=perform)``;
    outside it just calls ``perform()`` (and returns None without one).
    """
    ctx = current_context()
    if ctx is None:
        return None if perform is None else perform()
    return ctx.effect(name, arg, step_key(), perform=perform)


def _arg(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """The effect's argument: the one positional argument, else all of them."""
    if len(args) == 1 and not kwargs:
        return args[0]
    return (*args, *sorted(kwargs.items()))


def effect_step(name: str | None = None, **step_options: Any) -> Callable[[F], F]:
    """Decorate a function as a DBOS step (``DBOS.step(**step_options)``) whose call is one
    effect named ``name`` (default: the function's name), its arguments the effect's arg."""

    def decorate(function: F) -> F:
        label = name or function.__name__

        @functools.wraps(function)
        def body(*args: Any, **kwargs: Any) -> Any:
            return step_effect(label, _arg(args, kwargs), perform=lambda: function(*args, **kwargs))

        step: F = _dbos().DBOS.step(**step_options)(body)
        return step

    return decorate


class WorkflowSubject:
    """A conform subject that runs one DBOS workflow per input (see the module docstring)."""

    def __init__(
        self,
        ctx: Context,
        workflow: Callable[..., Any],
        *,
        directory: str | Path | None = None,
        databases: SystemDatabases | None = None,
        name: str = "crashresume",
        workflow_id: Callable[[Any], str] = str,
        arguments: Callable[[Any], tuple[Any, ...]] = lambda item: (item,),
        config: dict[str, Any] | None = None,
    ) -> None:
        dbos = _dbos()
        self.ctx = ctx
        self.workflow = workflow
        self.workflow_id = workflow_id
        self.arguments = arguments
        if (directory is None) == (databases is None):
            raise UsageError(
                "WorkflowSubject needs directory= (a SQLite system database per run id) or "
                "databases= (PostgresDatabases(url)), and not both"
            )
        if directory is not None:
            databases = SqliteDatabases(directory)
        assert databases is not None
        self.databases: SystemDatabases = databases
        settings = {**DEFAULT_CONFIG, "name": name, **(config or {})}

        def migrate(url: str) -> None:
            dbos.DBOS(config={**settings, "system_database_url": url})
            try:
                dbos.DBOS.launch()
            finally:
                dbos.DBOS.destroy()

        url = self.databases.url(ctx.run_id, migrate)
        dbos.DBOS(config={**settings, "system_database_url": url})
        try:
            dbos.DBOS.launch()
            self.recover()
        except BaseException:  # died or failed in recovery: no close() will follow
            dbos.DBOS.destroy()
            raise

    def recover(self) -> None:
        """Wait until DBOS has run every workflow a dead start left unfinished.

        DBOS re-enqueues them at launch and runs them on its own threads; the wait ends at
        once when the start dies there (``ctx.crashed``).
        """
        dbos = _dbos()
        with self.ctx.crash_aware():
            pending = dbos.DBOS.list_workflows(
                status=sorted(ACTIVE), load_input=False, load_output=False
            )
            for status in pending:
                while not self.ctx.crashed:
                    current = dbos.DBOS.get_workflow_status(status.workflow_id)
                    if current is None or current.status not in ACTIVE:
                        break
                    time.sleep(POLL)
        if self.ctx.crashed:
            raise SimulatedCrash(f"crashresume: {self.ctx.run_id} died in recovery")

    def step(self, item: Any) -> Any:
        dbos = _dbos()
        workflow_id = self.workflow_id(item)
        status = dbos.DBOS.get_workflow_status(workflow_id)
        if status is not None and status.status not in ACTIVE:  # finished: its recorded outcome
            return dbos.DBOS.retrieve_workflow(workflow_id).get_result()
        with dbos.SetWorkflowID(workflow_id):
            return self.workflow(*self.arguments(item))

    def state(self) -> dict[str, Any]:
        """The output of every finished workflow, by workflow id."""
        done = _dbos().DBOS.list_workflows(status="SUCCESS", load_input=False)
        return {status.workflow_id: status.output for status in done}

    def close(self) -> None:
        _dbos().DBOS.destroy()

    def __enter__(self) -> WorkflowSubject:
        return self

    def __exit__(self, kind: type[BaseException] | None, *rest: Any) -> None:
        """The start ended: shut DBOS down; one that completed was its scenario's last."""
        self.close()
        if kind is None:
            self.databases.finished(self.ctx.run_id)


class WorkflowFactory:
    """``make_agent`` for ``conform``: a ``WorkflowSubject`` per start; as a context manager,
    drops the PostgreSQL databases it made when the block ends."""

    def __init__(
        self,
        workflow: Callable[..., Any],
        *,
        directory: str | Path | None = None,
        database_url: str | None = None,
        **options: Any,
    ) -> None:
        if (directory is None) == (database_url is None):
            raise UsageError(
                "workflow_factory needs directory= (SQLite system databases) or "
                "database_url= (a PostgreSQL server), and not both"
            )
        self.workflow = workflow
        self.options = options
        self.databases: SystemDatabases = (
            SqliteDatabases(directory)
            if directory is not None
            else PostgresDatabases(str(database_url))
        )

    def __call__(self, ctx: Context) -> WorkflowSubject:
        return WorkflowSubject(ctx, self.workflow, databases=self.databases, **self.options)

    def __enter__(self) -> WorkflowFactory:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Drop every PostgreSQL database made so far (SQLite files stay)."""
        self.databases.close()


def workflow_factory(
    workflow: Callable[..., Any],
    *,
    directory: str | Path | None = None,
    database_url: str | None = None,
    **options: Any,
) -> WorkflowFactory:
    """``make_agent`` for ``conform`` (see ``WorkflowFactory``; options pass through)."""
    return WorkflowFactory(workflow, directory=directory, database_url=database_url, **options)
