"""crashresume.adapters.dbos on real DBOS, a SQLite system database per run id."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from crashresume import Context, conform, current_context

from .subjects import at, expect

dbos = pytest.importorskip("dbos", reason="the DBOS adapter needs the dbos extra")

from dbos import DBOS  # noqa: E402

from crashresume.adapters.dbos import (  # noqa: E402
    WorkflowSubject,
    effect_step,
    step_effect,
    workflow_factory,
)

ORDERS = ["o-1"]
MODES = ["inprocess", "process"]


@effect_step("charge")
def charge(order: str) -> str:
    return f"charged {order}"


@effect_step("ship")
def ship(order: str) -> str:
    return f"shipped {order}"


@DBOS.workflow()
def checkout(order: str) -> list[str]:
    return [charge(order), ship(order)]


@DBOS.step()
def charge_without_key(order: str) -> Any:
    ctx = current_context()
    assert ctx is not None
    # No key: a re-executed step charges again.
    return ctx.effect("charge", order, perform=lambda: f"charged {order}")


@DBOS.workflow()
def checkout_unkeyed(order: str) -> list[Any]:
    return [charge_without_key(order), ship(order)]


@DBOS.step()
def charge_with_attempt(order: str, attempt: int) -> Any:
    return step_effect("charge", {"order": order, "attempt": attempt})


@DBOS.workflow()
def checkout_counting(order: str) -> Any:
    return charge_with_attempt(order, 1 + (DBOS.workflow_id in RETRIED))


RETRIED: set[str] = set()


@pytest.mark.parametrize("mode", MODES)
def test_a_dbos_workflow_of_keyed_steps_passes_with_a_crash_in_the_recovery_too(
    mode: str, tmp_path: Path
) -> None:
    workers = 4 if mode == "process" else 1
    report = conform(
        workflow_factory(checkout, directory=tmp_path),
        inputs=ORDERS,
        mode=mode,
        crashes=2,
        workers=workers,
    )

    assert report.passed, str(report)
    assert report.baseline_effects == 2
    assert "run-1-then-before-1" in report.scenarios  # a crash while DBOS recovered run-1
    assert (tmp_path / "run-1.sqlite").exists()  # one system database per run id


@pytest.mark.parametrize("mode", MODES)
def test_a_step_without_a_key_is_a_duplicate_effect_and_nothing_else(
    mode: str, tmp_path: Path
) -> None:
    report = conform(workflow_factory(checkout_unkeyed, directory=tmp_path), ORDERS, mode=mode)

    # Dying after the charge, before DBOS checkpointed its step: recovery charges again.
    assert at(report.findings) == {("run-1", "duplicate_effect")}


def test_progress_that_does_not_survive_the_restart_is_state_lost(tmp_path: Path) -> None:
    def forgetful(ctx: Context) -> WorkflowSubject:
        database = tmp_path / f"{ctx.run_id}.sqlite"
        for leftover in tmp_path.glob(f"{ctx.run_id}.sqlite*"):
            leftover.unlink()  # a system database that does not outlive the process
        assert not database.exists()
        return WorkflowSubject(ctx, checkout, directory=tmp_path)

    report = conform(forgetful, inputs=["o-1", "o-2"], mode="process")

    assert {kind for _, kind in at(report.findings)} == {"state_lost"}
    assert at(report.findings) == expect(
        "state_lost", {"run-before-3", "run-3", "run-before-4", "run-4"}
    )


class NotifiesAfter(WorkflowSubject):
    """Bug: the e-mail goes out after the workflow's last checkpoint, only on the first run."""

    def step(self, item: Any) -> Any:
        status = DBOS.get_workflow_status(self.workflow_id(item))
        already = status is not None and status.status == "SUCCESS"
        result = super().step(item)
        if not already:
            self.ctx.effect("email", item)
        return result


def test_an_effect_after_the_last_checkpoint_is_effect_lost(tmp_path: Path) -> None:
    report = conform(
        lambda ctx: NotifiesAfter(ctx, checkout, directory=tmp_path), ORDERS, mode="process"
    )

    # Whenever the workflow finished without this step seeing it finish (DBOS recovered it,
    # or the start died before the e-mail), the e-mail is never sent.
    lost = {"run-before-1", "run-1", "run-before-2", "run-2", "run-before-3"}
    assert at(report.findings) == expect("effect_lost", lost)
    assert report.findings[0].message == "email('o-1') never happened, once in the baseline"


def test_the_effect_key_is_the_workflow_id_and_the_step_id(tmp_path: Path) -> None:
    class Retrying(WorkflowSubject):
        def __init__(self, ctx: Context, *args: Any, **kwargs: Any) -> None:
            if (tmp_path / f"{ctx.run_id}.sqlite").exists():
                RETRIED.add("o-1")  # the recovery sends other args under the same key
            super().__init__(ctx, *args, **kwargs)

    RETRIED.clear()
    report = conform(
        lambda ctx: Retrying(ctx, checkout_counting, directory=tmp_path), ORDERS, only="run-1"
    )
    RETRIED.clear()

    assert at(report.findings) == {("run-1", "key_conflict")}
    assert report.findings[0].message.startswith(
        "key 'o-1:1' was first sent with charge({'attempt': 1, 'order': 'o-1'}), then with "
        "charge({'attempt': 2, 'order': 'o-1'})"
    )


def test_outside_conform_an_effect_step_just_runs(tmp_path: Path) -> None:
    DBOS(config={"name": "plain", "system_database_url": f"sqlite:///{tmp_path}/plain.sqlite"})
    DBOS.launch()
    try:
        assert checkout("o-9") == ["charged o-9", "shipped o-9"]
    finally:
        DBOS.destroy()
