"""Planning is seeded and reproducible, aims at the patch and the issue, mixes in decoys, and never
plans a path that is not a tracked file; instance files with bad rows fail naming file, row and field."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from squeez_ray.collect.instances import (
    issue_identifiers,
    issue_paths,
    issue_urls,
    parse_patch,
)
from squeez_ray.collect.plan import module_name, plan_calls
from squeez_ray.collect.tools import TOOL_TYPES
from squeez_ray.schema import DataError
from squeez_ray.schema.instances import read_instances

PATCH = """diff --git a/pkg/ops.py b/pkg/ops.py
index 1..2 100644
--- a/pkg/ops.py
+++ b/pkg/ops.py
@@ -5,7 +5,9 @@ def add(a, b):
 
 
 def divide(a, b):
-    return a / b
+    if b == 0:
+        raise ValueError("zero")
+    return a / b
 
 
 def mean(values):
diff --git a/pkg/new.py b/pkg/new.py
new file mode 100644
--- /dev/null
+++ b/pkg/new.py
@@ -0,0 +1,2 @@
+class Helper:
+    pass
diff --git a/../../etc/passwd b/../../etc/passwd
--- a/../../etc/passwd
+++ b/../../etc/passwd
@@ -1 +1 @@
-root
+evil
"""
FILES = ["README.md", "pkg/__init__.py", "pkg/ops.py", "pkg/parse.py", "src/lib/util.py", "setup.py",
         "tests/test_ops.py", "tests/test_parse.py"]
ISSUE = ("`divide` crashes. In pkg/ops.py, calling `pkg.ops.divide(1, 0)` raises ZeroDivisionError; see "
         "https://bugs.example.invalid/1 and ../../../etc/passwd and /etc/shadow. `$(rm -rf /)` ; rm x; ops.py")


def instance(**changes):
    row = {"instance_id": "o__r-1", "repo": "o/r", "base_commit": "a" * 40, "problem_statement": ISSUE,
           "patch": PATCH, "test_patch": "", "FAIL_TO_PASS": ["tests/test_ops.py::test_zero", "../x.py::t"]}
    row.update(changes)
    return row


def test_parse_patch_finds_files_hunks_and_enclosing_functions():
    files = parse_patch(PATCH)
    assert [f.path for f in files] == ["pkg/ops.py", "pkg/new.py", "../../etc/passwd"]
    ops = files[0]
    assert ops.hunks == [(5, 7)] and ops.functions == ["divide"]  # not 'add' from the hunk header
    assert files[1].is_new and files[1].functions == ["Helper"]


def test_issue_text_extraction():
    idents = issue_identifiers(ISSUE)
    assert idents[:2] == ["divide", "pkg.ops.divide"] and "ZeroDivisionError" in idents
    assert not any("example" in i or i.endswith("py") for i in idents)
    assert "pkg/ops.py" in issue_paths(ISSUE) and "ops.py" in issue_paths(ISSUE)
    assert issue_urls(ISSUE) == ["https://bugs.example.invalid/1"]


def test_module_names():
    assert module_name("pkg/ops.py") == "pkg.ops"
    assert module_name("src/lib/util.py") == "lib.util"
    assert module_name("pkg/__init__.py") == "pkg"
    assert module_name("docs/conf-old.py") is None and module_name("README.md") is None


def test_same_seed_same_plan_other_seed_other_plan():
    a = plan_calls(instance(), FILES, seed=7, history_depth=5)
    assert a == plan_calls(instance(), list(reversed(FILES)), seed=7, history_depth=5)
    others = {json.dumps([(c.tool_type, c.args) for c in plan_calls(instance(), FILES, seed=s, history_depth=5)])
              for s in range(10)}
    assert len(others) > 5


def test_plans_have_3_to_7_calls_of_known_types_and_aim_at_patch_issue_and_decoys():
    aims, types, sizes = Counter(), Counter(), Counter()
    for seed in range(200):
        plan = plan_calls(instance(), FILES, seed=seed, history_depth=5)
        sizes[len(plan)] += 1
        for call in plan:
            aims[call.aim] += 1
            types[call.tool_type] += 1
    assert set(sizes) == {3, 4, 5, 6, 7}
    assert set(types) == set(TOOL_TYPES)  # every type is reachable with default weights
    assert aims["patch"] > aims["decoy"] > 0 and aims["issue"] > 0
    assert types["read_file"] > types["curl"]  # weights shape the mix


def test_max_calls_14_covers_every_tool_type_once():
    plan = plan_calls(instance(), FILES, seed=0, history_depth=5, min_calls=14, max_calls=14)
    assert sorted(c.tool_type for c in plan) == sorted(TOOL_TYPES)


def test_hostile_paths_from_patch_and_issue_are_never_planned():
    for seed in range(100):
        for call in plan_calls(instance(), FILES, seed=seed, history_depth=5, min_calls=7, max_calls=7):
            text = json.dumps(call.args)
            assert "etc/passwd" not in text and "/etc/shadow" not in text and "../" not in text, call
            for key in ("path",):
                if key in call.args:
                    assert call.args[key] in FILES or call.args[key] in {"pkg", "tests", "src/lib", "."}, call
            for node in call.args.get("tests", []):
                assert node.partition("::")[0] in FILES


def test_tool_types_can_be_restricted():
    plan = plan_calls(instance(), FILES, seed=1, history_depth=5, tool_types=["grep", "read_file"], min_calls=5,
                      max_calls=5)
    assert {c.tool_type for c in plan} <= {"grep", "read_file"} and len(plan) == 5


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.mark.parametrize("change,field,message", [
    ({"repo": "not-a-repo"}, "repo", "is not 'owner/name'"),
    ({"repo": "../evil/x"}, "repo", "is not 'owner/name'"),
    ({"base_commit": "HEAD; rm -rf /"}, "base_commit", "is not a hex commit id"),
    ({"instance_id": None}, "instance_id", "required"),
    ({"FAIL_TO_PASS": "[not json"}, "FAIL_TO_PASS", "not a JSON list"),
    ({"patch": 3}, "patch", "expected text"),
])
def test_bad_instance_rows_name_file_row_and_field(tmp_path, change, field, message):
    good = instance(FAIL_TO_PASS=json.dumps(["t.py::a"]))
    path = write_jsonl(tmp_path / "instances.jsonl", [good, {**good, "instance_id": "o__r-2", **change}])
    with pytest.raises(DataError) as info:
        read_instances(path)
    text = str(info.value)
    assert str(path) in text and "row 1" in text and f"field '{field}'" in text and message in text


def test_duplicate_ids_and_parquet_input(tmp_path):
    good = instance(FAIL_TO_PASS=json.dumps(["t.py::a"]))
    with pytest.raises(DataError, match="duplicate instance_id"):
        read_instances(write_jsonl(tmp_path / "dup.jsonl", [good, good]))
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist([good]), tmp_path / "i.parquet")
    rows = read_instances(tmp_path / "i.parquet")
    assert rows[0]["FAIL_TO_PASS"] == ["t.py::a"] and rows[0]["patch"] == PATCH
