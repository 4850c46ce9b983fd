"""A call's time budget: past it, a scoring pruner answers from what it has instead of running on.

An agent's tool call waits for squeez; a call that runs into the CLI's (or the hook's) timeout passes the
whole output through, unpruned, which costs the agent more than a rougher answer would. So the caller
sets a budget (``time_budget(seconds)``, the CLI's ``budget_s``) and the encoder's scoring loop asks
``out_of_time()`` between window batches: once the deadline has passed it stops, the lines it did not
score are left out (as the shortlist leaves lines out), and the result says so (``OVER_BUDGET`` in its
reason, which the CLI's footer repeats). Like ``cancel.py``, the budget travels in a context variable,
so no pruner signature carries it.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Iterator

# In a result's reason (and the CLI's footer): the answer was cut short by its time budget.
OVER_BUDGET = "over its time budget"


@dataclass
class Budget:
    seconds: float
    deadline: float  # time.monotonic()
    cut: bool = False  # set once a scoring loop stopped early for it

    def left(self) -> float:
        return max(0.0, self.deadline - time.monotonic())


_BUDGET: ContextVar[Budget | None] = ContextVar("squeez_time_budget", default=None)


@contextmanager
def time_budget(seconds: float | None) -> Iterator[Budget | None]:
    """Within the block, scoring stops once ``seconds`` have passed (None: no budget)."""
    if seconds is None:
        yield None
        return
    budget = Budget(float(seconds), time.monotonic() + float(seconds))
    token = _BUDGET.set(budget)
    try:
        yield budget
    finally:
        _BUDGET.reset(token)


def current() -> Budget | None:
    return _BUDGET.get()


def out_of_time() -> bool:
    """True once the current budget's deadline has passed (and the budget is marked cut); False without one."""
    budget = _BUDGET.get()
    if budget is None or time.monotonic() < budget.deadline:
        return False
    budget.cut = True
    return True


def over_budget_note(seconds: float, unscored: int, total: int) -> str:
    return f"{OVER_BUDGET} ({seconds:g} s): {unscored} of {total} lines not scored, left out"
