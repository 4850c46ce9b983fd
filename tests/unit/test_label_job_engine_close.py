"""run_label releases its teacher engine even when a chunk fails: the vLLM teacher's engine actors hold
CPUs or GPUs, and a job that raised with them still running left the cluster short for whatever ran next."""

from __future__ import annotations

import pytest

import squeez_ray.label.job as label_job
from squeez_ray.label.pipeline import TeacherConfig
from squeez_ray.schema import write_observations


class RecordingEngine:
    def __init__(self) -> None:
        self.closed = 0

    def close(self) -> None:
        self.closed += 1


def observation(k: int) -> dict:
    return {"instance_id": f"case-{k}", "repo": "org/case", "tool_type": "grep", "command": f"grep -rn x{k} .",
            "tool_output": "a.py:1:x\nb.py:2:y\n"}


@pytest.mark.parametrize("fails", [True, False])
def test_the_engine_is_closed_once_whether_or_not_a_chunk_raises(fails, tmp_path, monkeypatch):
    import ray.data

    engine = RecordingEngine()
    write_observations([observation(k) for k in range(3)], tmp_path / "obs.parquet")

    class NoRows:
        @staticmethod
        def iter_rows():
            return iter(())

    class Outcome:  # what label_dataset returns for a chunk that labelled nothing
        dataset = NoRows
        dropped: dict = {}
        drop_examples: dict = {}
        retry_later: list = []
        teacher_requests = retried = recovered_by_retry = 0

    def label(dataset, teacher, engine_arg):
        assert engine_arg is engine
        if fails:
            raise RuntimeError("the teacher's engine died mid-chunk")
        return Outcome

    monkeypatch.setattr(label_job, "init_ray", lambda address=None: None)
    monkeypatch.setattr(label_job, "_engine", lambda config: (engine, None))
    monkeypatch.setattr(label_job, "label_dataset", label)
    monkeypatch.setattr(ray.data, "from_items", lambda rows: rows)
    config = label_job.LabelConfig(observations=str(tmp_path / "obs.parquet"), output_dir=str(tmp_path / "out"),
                                   chunk_size=2, teacher=TeacherConfig(engine="rules"))
    if fails:
        with pytest.raises(RuntimeError, match="died mid-chunk"):
            label_job.run_label(config)
    else:
        label_job.run_label(config)
    assert engine.closed == 1
