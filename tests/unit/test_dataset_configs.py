"""Every shipped labelling / dataset config loads, opens with the command that runs it, and bad
values are reported together, naming the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from squeez_ray.config import ConfigError, load_config
from squeez_ray.dataset.build import BuildConfig
from squeez_ray.dataset.sample import SampleConfig
from squeez_ray.dataset.synthesize import SynthError, SynthesizeConfig, load_families, plan_rows
from squeez_ray.label.job import LabelConfig

CONFIGS = Path(__file__).resolve().parents[2] / "jobs" / "configs"
REQUIRED = {"label.yaml": (LabelConfig, ["observations=o", "output_dir=x"]),
            "build_dataset.yaml": (BuildConfig, ["inputs=[a]"]),
            "synthesize.yaml": (SynthesizeConfig, ["output_dir=x"])}


@pytest.mark.parametrize("name", sorted(REQUIRED))
def test_shipped_configs_load(name):
    cls, overrides = REQUIRED[name]
    text = (CONFIGS / name).read_text()
    assert text.startswith("# python jobs/"), "a config opens with the command that runs it"
    load_config(cls, CONFIGS / name, overrides)


def test_families_file_has_the_paper_scale_and_unique_names():
    families = load_families(CONFIGS / "synth_families.yaml")
    assert len(families) >= 23 and len({f.name for f in families}) == len(families)
    assert len({f.group for f in families}) >= 10
    assert (CONFIGS / "synth_families.yaml").read_text().startswith("# Tool families")


def test_bad_values_are_all_reported():
    with pytest.raises(ConfigError) as error:
        load_config(LabelConfig, CONFIGS / "label.yaml",
                    ["teacher.engine=vllm", "teacher.http.max_concurrency=0", "teacher.http.url=ftp://x", "chunk_size=0"])
    text = str(error.value)
    for needle in ("observations: required", "max_concurrency: must be >= 1", "url: 'ftp://x'", "vllm.model: required",
                   "chunk_size: must be >= 1"):
        assert needle in text
    with pytest.raises(ConfigError, match="ratios: must sum to 1"):
        load_config(BuildConfig, CONFIGS / "build_dataset.yaml", ["ratios={train: 0.5, dev: 0.1, test: 0.1}"])
    with pytest.raises(ConfigError, match="rules cannot write outputs"):
        load_config(SynthesizeConfig, CONFIGS / "synthesize.yaml", ["output_dir=x", "teacher.engine=rules"])
    with pytest.raises(ConfigError, match="budget.grep: expected an integer"):
        load_config(SampleConfig, None, ["budget.grep=many"])


def test_family_errors_name_entry_and_key(tmp_path):
    bad = tmp_path / "families.yaml"
    bad.write_text("families:\n  - {name: a, group: g, ecosystem: e, tool: t, tool_type: build_output, scenarios: [x]}\n"
                   "  - {name: a, group: g, ecosystem: e, tool: t, tool_type: build_output, scenarios: [y]}\n"
                   "  - {name: b, group: g, tool: t, tool_type: build_output, scenarios: [y], colour: red}\n")
    with pytest.raises(SynthError) as error:
        load_families(bad)
    assert "families[1]: duplicate family name 'a'" in str(error.value)
    assert "families[2] (b): missing ['ecosystem'] / unknown keys ['colour']" in str(error.value)


def test_plan_rows_round_robins_scenarios_and_skips_done():
    families = load_families(CONFIGS / "synth_families.yaml")
    config = SynthesizeConfig(output_dir="x", per_family=4, only_families=["cargo_build"])
    rows = plan_rows(families, config, done={"synth:cargo_build:0001"})
    assert [r["instance_id"] for r in rows] == ["synth:cargo_build:0000", "synth:cargo_build:0002",
                                                "synth:cargo_build:0003"]
    assert rows[0]["scenario"] != rows[1]["scenario"] and rows[0]["group"] == "rust"
    with pytest.raises(SynthError, match="unknown families"):
        plan_rows(families, SynthesizeConfig(output_dir="x", only_families=["nope"]), done=set())
