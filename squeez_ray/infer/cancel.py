"""Stopping a pruner call whose caller has gone (a Serve request that timed out or was cancelled).

Python cannot stop a thread, and Serve's pruner replicas score in a worker thread, so a 6 MB request
that times out at the API would keep its replica busy for a minute more. Instead the scoring loop
asks between forward passes: ``raise_if_cancelled()`` raises :class:`Cancelled` once the check set
by ``cancel_when(check)`` says so. The check travels in a context variable, which
``asyncio.to_thread`` copies into its thread, so no pruner signature carries it.
"""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from typing import Callable, Iterator

_CHECK: ContextVar[Callable[[], bool] | None] = ContextVar("squeez_cancel_check", default=None)


class Cancelled(Exception):
    """Every caller of this pruner call has gone; its results would be dropped."""


@contextmanager
def cancel_when(check: Callable[[], bool]) -> Iterator[None]:
    """Within the block (and threads started from it with copied context), stop once ``check()`` is true."""
    token = _CHECK.set(check)
    try:
        yield
    finally:
        _CHECK.reset(token)


def raise_if_cancelled() -> None:
    check = _CHECK.get()
    if check is not None and check():
        raise Cancelled("the caller cancelled this pruner call")
