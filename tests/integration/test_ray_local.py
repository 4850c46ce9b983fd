"""The test suite's own local Ray: its workers run at the priority tests/conftest.py asks for."""

from __future__ import annotations

import os


def test_ray_workers_run_at_the_drivers_priority(ray_local):
    # Ray's default worker niceness is 15; on a 2-core CI that starved every Ray worker behind the other
    # xdist workers' tests (tests/conftest.py, RAY_worker_niceness).
    @ray_local.remote(num_cpus=0)
    def niceness() -> int:
        return os.nice(0)

    assert ray_local.get(niceness.remote()) == os.nice(0) == int(os.environ["RAY_worker_niceness"])
