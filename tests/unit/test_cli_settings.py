"""Settings of `squeez`: flags > SQUEEZ_* environment > config file > defaults, with clear errors."""

from __future__ import annotations

import dataclasses

import pytest

from squeez_ray.infer.registry import BackendOptions
from squeez_ray.config import ConfigError
from squeez_ray.cli import settings


def test_every_setting_has_its_own_environment_variable():
    names = [settings.env_name(f) for f in settings.FIELDS]
    assert len(set(names)) == len(names)
    assert {"SQUEEZ_BACKEND", "SQUEEZ_MODEL", "SQUEEZ_SERVER_URL", "SQUEEZ_SERVER_MODEL", "SQUEEZ_API_KEY",
            "SQUEEZ_TIMEOUT", "SQUEEZ_MIN_LINES", "SQUEEZ_STORE"} <= set(names)


def test_every_backend_option_is_a_setting():
    # A new BackendOptions field becomes configurable from the file and the environment by itself.
    assert {f.name for f in dataclasses.fields(BackendOptions)} <= set(settings.FIELDS)


def test_precedence_flags_environment_file_defaults(tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text("backend: bm25\nmin_lines: 7\ntimeout_s: 9\nsystem_prompt: from the file\n")
    env = {"SQUEEZ_CONFIG": str(config), "SQUEEZ_MIN_LINES": "3", "HOME": str(tmp_path)}
    resolved = settings.resolve({"timeout_s": 2.5, "model": None}, env=env)
    assert (resolved.backend, resolved.min_lines, resolved.timeout_s) == ("bm25", 3, 2.5)
    assert resolved.system_prompt == "from the file"
    assert resolved.max_input_mb == settings.CommandSettings.max_input_mb  # untouched default
    options = settings.backend_options(resolved)
    assert isinstance(options, BackendOptions) and options.timeout_s == 2.5 and options.min_lines == 3


def test_defaults_without_any_config(tmp_path):
    resolved = settings.resolve({}, env={"HOME": str(tmp_path)})
    # nothing configured: the encoder shipped in the package, no model path needed
    assert resolved.backend == "encoder" and resolved.model is None
    assert resolved.min_lines == 20 and resolved.timeout_s == 60.0
    assert settings.missing_model_message(resolved) is None
    # a model without a backend is ambiguous (vllm? encoder?): still an explained error
    with_model = settings.resolve({"model": str(tmp_path)}, env={"HOME": str(tmp_path)})
    assert with_model.backend is None
    assert settings.missing_model_message(with_model).startswith("no backend configured")


def test_environment_strings_stay_strings_and_structured_values_parse(tmp_path):
    env = {"HOME": str(tmp_path), "SQUEEZ_API_KEY": "0123", "SQUEEZ_MARKERS": "true",
           "SQUEEZ_ENGINE_KWARGS": '{"max_model_len": 2048}'}
    resolved = settings.resolve({}, env=env)
    assert resolved.api_key == "0123" and resolved.markers is True
    assert resolved.engine_kwargs == {"max_model_len": 2048}


def test_all_environment_problems_are_reported_at_once(tmp_path):
    env = {"HOME": str(tmp_path), "SQUEEZ_MIN_LINES": "abc", "SQUEEZ_TIMEOUT": "-1"}
    with pytest.raises(ConfigError) as error:
        settings.resolve({}, env=env)
    text = str(error.value)
    assert "SQUEEZ_MIN_LINES='abc': expected an integer" in text and "SQUEEZ_TIMEOUT='-1': must be a finite number > 0" in text


def test_config_file_errors_name_the_file_and_key(tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text("backend: bm25\nmodle: /m\nmarkers: maybe\n")
    with pytest.raises(ConfigError) as error:
        settings.resolve({}, env={"HOME": str(tmp_path)}, config_path=str(config))
    text = str(error.value)
    assert str(config) in text and "modle: unknown key" in text and "markers: expected true or false" in text


def test_a_named_config_file_must_exist_but_the_default_may_not(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        settings.resolve({}, env={"HOME": str(tmp_path), "SQUEEZ_CONFIG": str(tmp_path / "missing.yaml")})
    settings.resolve({}, env={"HOME": str(tmp_path)})  # ~/.config/squeez/config.yaml absent: defaults


def test_xdg_locations(tmp_path):
    env = {"HOME": "/home/u", "XDG_CONFIG_HOME": str(tmp_path / "cfg"), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    assert settings.default_config_path(env) == tmp_path / "cfg" / "squeez" / "config.yaml"
    assert settings.default_store_dir(env) == tmp_path / "cache" / "squeez" / "store"
    assert str(settings.default_store_dir({"HOME": "/home/u"})) == "/home/u/.cache/squeez/store"


@pytest.mark.parametrize("values, expected", [
    ({"backend": "vllm"}, "--model DIR"),
    ({"backend": "encoder"}, None),  # the shipped default model
    ({"backend": "encoder", "model": "/no/such/dir"}, "/no/such/dir does not exist"),
    ({"backend": "server"}, "--server-url URL"),
    ({"model": "/m"}, "a model is set: add --backend vllm"),
    ({"server_url": "http://x"}, "a server URL is set"),
    ({"backend": "bm25"}, None),
    ({"backend": "openai", "server_url": "http://127.0.0.1:1"}, None),
])
def test_missing_model_message(tmp_path, values, expected):
    message = settings.missing_model_message(settings.resolve(values, env={"HOME": str(tmp_path)}))
    assert (message is None) if expected is None else (expected in message)


def test_a_model_directory_that_is_an_encoder_needs_no_backend(tmp_path):
    # `squeez --model runs/encoder/v3-l3 "q"`: the directory's squeez_encoder.json says which backend
    encoder_dir = tmp_path / "enc"
    encoder_dir.mkdir()
    (encoder_dir / "squeez_encoder.json").write_text("{}")
    resolved = settings.resolve({"model": str(encoder_dir)}, env={"HOME": str(tmp_path)})
    assert resolved.backend == "encoder" and settings.missing_model_message(resolved) is None
    other = tmp_path / "merged"  # a generative checkpoint could be vllm, transformers or openai's
    other.mkdir()
    assert settings.resolve({"model": str(other)}, env={"HOME": str(tmp_path)}).backend is None


def test_an_unreadable_config_file_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="cannot read config file"):
        settings.resolve({}, env={"HOME": str(tmp_path)}, config_path=str(tmp_path))  # a folder
    binary = tmp_path / "c.yaml"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(ConfigError, match=str(binary)):
        settings.resolve({}, env={"HOME": str(tmp_path)}, config_path=str(binary))


def test_operating_point_knobs_come_from_the_file_and_are_range_checked(tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text("recall_target: 0.7\nmax_kept_lines: 40\n")
    resolved = settings.resolve({}, env={"HOME": str(tmp_path)}, config_path=str(config))
    assert (resolved.recall_target, resolved.max_kept_lines) == (0.7, 40)
    env = {"HOME": str(tmp_path), "SQUEEZ_RECALL_TARGET": "1.5", "SQUEEZ_MAX_KEPT_LINES": "0"}
    with pytest.raises(ConfigError) as error:
        settings.resolve({}, env=env)
    assert "SQUEEZ_RECALL_TARGET='1.5': must be in (0, 1]" in str(error.value)
    assert "SQUEEZ_MAX_KEPT_LINES='0': must be >= 1" in str(error.value)


def test_settings_is_a_written_class_with_the_pipes_own_defaults():
    # A class written out (not built by make_dataclass) is one callers and type checkers can name:
    # `settings: Settings`. Its fields stay the command's own, then every BackendOptions field.
    import inspect

    assert "class Settings(" in inspect.getsource(settings.Settings)
    names = [f.name for f in dataclasses.fields(settings.Settings)]
    backend = [f.name for f in dataclasses.fields(BackendOptions)]
    assert names[-len(backend):] == backend and names[0] == "backend"
    assert (settings.Settings().min_lines, BackendOptions().min_lines) == (20, 0)
