"""The two cluster streams (tests/conftest.py): a renamed module must not drop out of its stream unseen,
and the collection hook must send each kind of test where the comment there says."""

from __future__ import annotations

from pathlib import Path

import pytest

import conftest

TESTS = Path(conftest.__file__).resolve().parent


def test_every_train_stream_module_exists():
    """TRAIN_STREAM names modules by file name: one renamed or deleted would leave a stale name behind
    and quietly move its tests to the other stream."""
    cluster_modules = {path.name for folder in ("integration", "gpu") for path in (TESTS / folder).glob("test_*.py")}
    assert conftest.TRAIN_STREAM <= cluster_modules, sorted(conftest.TRAIN_STREAM - cluster_modules)


def test_both_streams_hold_tests():
    names = {path.name for path in (TESTS / "integration").glob("test_*.py")}
    streams = {conftest.cluster_stream(name) for name in names}
    assert streams == {"cluster-train", "cluster-serve"}
    assert conftest.cluster_stream("test_not_named_anywhere.py") == "cluster-serve"


class _Item:
    """What the collection hook reads of a test item: its path and the marks it adds."""

    def __init__(self, relative: str, marks: tuple[str, ...] = ()):
        self.fspath = TESTS / relative
        self._marks = set(marks)
        self.added: list[pytest.Mark] = []

    def get_closest_marker(self, name: str):
        return name if name in self._marks else None

    def add_marker(self, marker) -> None:
        self.added.append(marker.mark)


def _groups(item: _Item) -> list[str]:
    return [mark.args[0] for mark in item.added if mark.name == "xdist_group"]


def test_collection_puts_cluster_tests_in_their_stream_and_leaves_the_rest_free():
    train = _Item("integration/" + sorted(conftest.TRAIN_STREAM)[0])
    serve = _Item("integration/test_serve_baseline.py")
    free = _Item("integration/test_readme.py", marks=("no_cluster",))
    unit = _Item("unit/test_house.py")
    conftest.pytest_collection_modifyitems(None, [train, serve, free, unit])
    assert _groups(train) == ["cluster-train"] and _groups(serve) == ["cluster-serve"]
    assert _groups(free) == [] and _groups(unit) == []
    assert [mark.name for mark in unit.added] == ["unit"]
    assert [mark.name for mark in free.added] == ["integration"]
