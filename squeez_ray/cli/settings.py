"""Settings of the ``squeez`` command: CLI flags > environment (``SQUEEZ_*``) > config file > defaults.

The config file is YAML (``$SQUEEZ_CONFIG``, else ``$XDG_CONFIG_HOME/squeez/config.yaml``, else
``~/.config/squeez/config.yaml``; a missing default file is fine, a missing named file is an
error). It is flat: the command's own keys (``backend``, ``markers``, ``store_dir``, ...) and every
``BackendOptions`` field (``model``, ``server_url``, ``system_prompt``, ``engine_kwargs``, ...), so
that a released checkpoint can be served with the prompt it was trained with::

    backend: vllm
    model: /models/squeez-2b
    system_prompt: "..."

Every field can also come from ``SQUEEZ_<FIELD>`` (``SQUEEZ_MODEL``, ``SQUEEZ_MIN_LINES``, ...), plus
the short names ``SQUEEZ_TIMEOUT`` (``timeout_s``) and ``SQUEEZ_STORE`` (``store_dir``). Errors name
the file or variable, the key, the value and what was allowed.
"""

from __future__ import annotations

import dataclasses
import math
import os
import types
import typing
from pathlib import Path
from typing import Any

from squeez_ray.config import ConfigError, load_config
from squeez_ray.infer.registry import BACKENDS, MODEL_BACKENDS, SERVER_BACKENDS, BackendOptions

# With no backend, model or server configured: the encoder shipped in the package (squeez_ray/models/default).
DEFAULT_BACKEND = "encoder"


@dataclasses.dataclass
class CommandSettings:
    """The command's own knobs (the backend's knobs are BackendOptions fields, merged in below)."""

    backend: str | None = None  # None: the shipped encoder when no model / server is set, else explain
    line_numbers: bool = False
    markers: bool = False
    strict: bool = False  # backend error / timeout -> exit 1 instead of passing the output through
    tool_type: str | None = None
    store_outputs: bool = True  # keep the full output of each pruned call for `squeez show ID`
    store_dir: str | None = None  # None: ~/.cache/squeez/store
    store_max_mb: float = 256.0  # oldest entries are evicted beyond this
    # Prune even when the full output cannot be kept for `squeez show` (read-only HOME, sandbox):
    # off by default, so that a pipe never drops lines it cannot give back.
    lossy: bool = False
    # Inputs bigger than this are streamed through unpruned: no backend prunes them inside any sane
    # timeout, and streaming keeps memory flat however large the input is.
    max_input_mb: float = 16.0
    # The agent hooks (squeez hook claude-code|codex): family -> regexes of commands to wrap in
    # `squeez run`; replaces the default regexes of each family named (hooks/patterns.py), [] turns it off.
    hook_patterns: dict[str, list[str]] | None = None
    # The warm pruner process (daemon.py): used and started on first use for the local CPU backends
    # (false, or SQUEEZ_DAEMON=0: every call loads its own pruner); it exits after daemon_idle_s idle.
    daemon: bool = True
    daemon_idle_s: float = 600.0
    # How long a call waits for the warm process's answer before pruning in its own process
    # (None: half of timeout_s, which leaves the other half for that).
    daemon_wait_s: float | None = None
    # Seconds a call may spend pruning (warm or in-process) before it answers from the lines scored so far,
    # marked "over its time budget" (squeez_ray.infer.budget): well inside timeout_s, the hooks' 30 s and
    # the warm process's wait, so a long output gets a rougher answer rather than none.
    budget_s: float = 10.0


ENV_ALIASES = {"timeout_s": "SQUEEZ_TIMEOUT", "store_dir": "SQUEEZ_STORE"}

# Longer waits than this are read as this (30 days: no limit in practice). Python's timers and
# thread joins overflow near 9.2e9 s, which turned SQUEEZ_TIMEOUT=99999999999 into no answer at all.
MAX_WAIT_S = 30 * 86400.0
_WAITS = ("timeout_s", "daemon_idle_s", "daemon_wait_s", "budget_s")


@dataclasses.dataclass
class Settings(BackendOptions, CommandSettings):
    """Everything ``squeez`` reads, flat: CommandSettings' fields, then BackendOptions' (the config file
    stays one mapping), with the defaults below changed for an interactive pipe rather than a bulk job."""

    # Below ~20 lines an output fits in one glance (a few hundred tokens): pruning saves less than
    # the model call costs in latency, and risks cutting the one line that mattered.
    min_lines: int = 20
    # The whole call (engine start included) must finish in this time or the output passes through.
    timeout_s: float = 60.0

    def validate(self) -> list[str]:
        problems = []
        if self.backend is not None and self.backend not in BACKENDS:
            problems.append(f"backend: {self.backend!r} is not a backend (choose one of: {', '.join(BACKENDS)})")
        # Wrong types were already reported by the loader; only check the range of real numbers here.
        def number(name: str) -> float | None:
            value = getattr(self, name)
            return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None

        for name in ("timeout_s", "store_max_mb", "max_input_mb", "daemon_idle_s", "daemon_wait_s", "budget_s"):
            value = number(name)
            # .inf / .nan parse as floats from YAML and from SQUEEZ_* alike; neither is a usable limit.
            if value is not None and not (math.isfinite(value) and value > 0):
                problems.append(f"{name}: must be a finite number > 0, got {value!r}")
        # Counts and shares: a negative or out-of-range value would silently change what is kept.
        for name, low, high in (("min_lines", 0, None), ("chunk_overlap_lines", 0, None), ("max_retries", 0, None),
                                ("batch_size", 1, None), ("max_concurrency", 1, None), ("max_context_tokens", 1, None),
                                ("max_new_tokens", 1, None), ("keep_ratio", 0, 1), ("fuzzy_threshold", 0, 100),
                                ("threshold", 0, None)):
            value = number(name)
            if value is None:
                continue
            if not math.isfinite(value) or value < low or (high is not None and value > high):
                allowed = f">= {low}" if high is None else f"between {low} and {high}"
                problems.append(f"{name}: must be {allowed}, got {value!r}")
        value = number("recall_target")
        if value is not None and not 0 < value <= 1:
            problems.append(f"recall_target: must be in (0, 1], got {value!r}")
        value = number("max_kept_lines")
        if value is not None and value < 1:
            problems.append(f"max_kept_lines: must be >= 1, got {value!r}")
        from squeez_ray.cli.hooks.patterns import pattern_problems

        problems.extend(pattern_problems(self.hook_patterns))
        return problems


FIELDS: dict[str, Any] = typing.get_type_hints(Settings)


def env_name(field: str) -> str:
    return ENV_ALIASES.get(field, "SQUEEZ_" + field.upper())


def default_config_path(env: typing.Mapping[str, str]) -> Path:
    base = env.get("XDG_CONFIG_HOME") or str(Path(env.get("HOME") or Path.home()) / ".config")
    return Path(base) / "squeez" / "config.yaml"


def default_store_dir(env: typing.Mapping[str, str]) -> Path:
    base = env.get("XDG_CACHE_HOME") or str(Path(env.get("HOME") or Path.home()) / ".cache")
    return Path(base) / "squeez" / "store"


def resolve(cli: dict[str, Any] | None = None, env: typing.Mapping[str, str] | None = None,
            config_path: str | None = None) -> Settings:
    """The merged Settings; ``cli`` holds only the flags the user gave (None means not given).

    Raises ConfigError naming the file / variable and key of every problem found.
    """
    env = os.environ if env is None else env
    explicit = config_path or env.get("SQUEEZ_CONFIG")
    path = Path(explicit).expanduser() if explicit else default_config_path(env)
    if explicit or path.is_file():
        try:
            _check_config_file(path)
            settings = load_config(Settings, path)  # errors name the file and the key
        except (OSError, UnicodeDecodeError) as error:  # a folder, no permission, not text
            raise ConfigError([f"cannot read config file {path}: {error}"], str(path)) from None
        except RecursionError:  # the YAML parser recurses per nesting level
            raise ConfigError([f"config file {path} is nested too deeply to read (it must be a flat mapping)"],
                              str(path)) from None
        except ConfigError:
            raise
        except ValueError:  # an integer over Python's 4,300-digit conversion limit
            raise ConfigError([f"config file {path} holds a number too long to read (over 4,300 digits)"],
                              str(path)) from None
    else:
        settings = Settings()
    problems: list[str] = []
    for name, value in _env_values(env, problems).items():
        setattr(settings, name, value)
    if problems:
        raise ConfigError(problems, "from the environment")
    for name, value in (cli or {}).items():
        if name not in FIELDS:
            raise KeyError(f"not a squeez setting: {name}")
        if value is not None:
            setattr(settings, name, value)
    problems = settings.validate()
    if problems:
        raise ConfigError(problems)
    for name in _WAITS:
        value = getattr(settings, name, None)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value > MAX_WAIT_S:
            setattr(settings, name, MAX_WAIT_S)
    # Nothing configured at all: the encoder shipped in the package (ONNX, no torch). A model set
    # without a backend is the encoder when its directory says so (squeez_encoder.json: only the
    # encoder backend runs it); any other model or server stays an error, since vllm, transformers
    # and openai could each be meant.
    if settings.backend is None and not settings.server_url:
        if not settings.model:
            settings.backend = DEFAULT_BACKEND
        elif _is_encoder_dir(settings.model):
            settings.backend = "encoder"
    return settings


def _is_encoder_dir(model: str) -> bool:
    from squeez_ray.infer.encoder.model import ENCODER_CONFIG

    return (Path(model).expanduser() / ENCODER_CONFIG).is_file()


def store_only_settings(store_dir: str | None, env: typing.Mapping[str, str] | None = None,
                        config_path: str | None = None) -> Settings:
    """Where the store is when the full config does not resolve: the flag, ``SQUEEZ_STORE``, the config
    file's ``store_dir`` if that one key is readable, else the default (``squeez show`` needs no more)."""
    env = os.environ if env is None else env
    settings = Settings()
    settings.store_dir = store_dir or env.get(env_name("store_dir")) or _store_dir_from_file(env, config_path)
    return settings


def _store_dir_from_file(env: typing.Mapping[str, str], config_path: str | None) -> str | None:
    import yaml

    explicit = config_path or env.get("SQUEEZ_CONFIG")
    path = Path(explicit).expanduser() if explicit else default_config_path(env)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError, RecursionError):
        return None
    value = data.get("store_dir") if isinstance(data, dict) else None
    return value if isinstance(value, str) and value else None


def _env_values(env: typing.Mapping[str, str], problems: list[str]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for name, hint in FIELDS.items():
        var = env_name(name)
        raw = env.get(var)
        if raw is None or raw == "":
            continue
        if _is_str(hint):  # keep strings as typed: an API key "0123" must not become a number
            values[name] = raw
            continue
        if hint is bool and raw.strip() in ("0", "1"):  # SQUEEZ_DAEMON=0, as shells spell a switch
            values[name] = raw.strip() == "1"
            continue
        try:
            parsed = _parse_scalar(raw)
        except ValueError:  # an integer over Python's 4,300-digit conversion limit (ConfigError is not raised)
            problems.append(f"{var}: a value of {len(raw)} characters is out of range")
            continue
        try:
            checked = load_config(Settings, None, {name: parsed})
        except ConfigError as error:
            problems.extend(f"{var}={raw!r}: {p.split(': ', 1)[-1]}" for p in error.problems)
            continue
        values[name] = getattr(checked, name)
    return values


def _is_str(hint: Any) -> bool:
    return hint is str or (typing.get_origin(hint) in (typing.Union, types.UnionType)
                           and set(typing.get_args(hint)) == {str, type(None)})


def _parse_scalar(raw: str) -> Any:
    import yaml

    try:
        if yaml_expands_past(raw, MAX_CONFIG_VALUES):
            return raw  # an alias bomb stays a string (and a type error naming it)
        return yaml.safe_load(raw)
    except (yaml.YAMLError, RecursionError):
        return raw


# A config file is a flat mapping of a few dozen keys: this many values, aliases expanded, is far
# beyond any real one, and far below what an alias bomb (a few hundred bytes of `&a [*a, *a, ...]`
# that expand to billions) costs once anything walks or prints it.
MAX_CONFIG_VALUES = 100_000


def _check_config_file(path: Path) -> None:
    """Refuse, in one line, a config file whose YAML aliases expand it too far (the loader reports the rest)."""
    try:
        text = path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        return  # the loader says it does not exist
    if yaml_expands_past(text, MAX_CONFIG_VALUES):
        raise ConfigError([f"config file {path} expands to over {MAX_CONFIG_VALUES:,} values through YAML aliases "
                           f"(an alias bomb?): not read"], str(path))


def yaml_expands_past(text: str, limit: int) -> bool:
    """Whether ``text`` holds over ``limit`` YAML values once its aliases are expanded, counted without
    expanding anything (each node's expanded size is computed once); a cycle counts as too many.
    Invalid YAML is False (its loader reports it); deep nesting raises RecursionError."""
    import yaml

    if "*" not in text:  # no alias: nothing can expand
        return False
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return False
    sizes: dict[int, int] = {}

    def size(node: Any) -> int:
        known = sizes.get(id(node))
        if known is not None:
            return known
        sizes[id(node)] = limit + 1  # while it is being counted: a node that contains itself is too many
        if isinstance(node, yaml.MappingNode):
            total = 1 + sum(size(key) + size(value) for key, value in node.value)
        elif isinstance(node, yaml.SequenceNode):
            total = 1 + sum(size(child) for child in node.value)
        else:
            total = 1
        sizes[id(node)] = min(total, limit + 1)
        return sizes[id(node)]

    return root is not None and size(root) > limit


def backend_options(settings: Settings) -> BackendOptions:
    names = {f.name for f in dataclasses.fields(BackendOptions)}
    options = BackendOptions(**{n: getattr(settings, n) for n in names})
    if settings.backend == "encoder" and "negative_gate" not in options.engine_kwargs:
        # In an agent's pipe an empty answer is shown as a head-and-tail sample unless the output is clearly
        # beside the query (pruning.never_empty: the CLI's own test for a negative), so the model's negative
        # gate could only turn answers into that sample: replayed over ../shared/trajectories it doubled the
        # fallbacks (4 -> 8 of 17) and cut "saved with re-reads" from 42% to 23% (docs/ENCODER.md). Off here
        # unless engine_kwargs ask for it; Serve, evaluation and re-prune keep the model's default.
        options.engine_kwargs = {**options.engine_kwargs, "negative_gate": False}
    return options


def missing_model_message(settings: Settings) -> str | None:
    """Why the chosen backend cannot run as configured (and how to fix it), or None when it can."""
    backend = settings.backend
    if backend is None:
        hint = ""
        if settings.model:
            hint = " (a model is set: add --backend vllm or --backend transformers)"
        elif settings.server_url:
            hint = " (a server URL is set: add --backend openai or --backend server)"
        return ("no backend configured" + hint + ". Choose one:\n" + CONFIGURE_HELP)
    if backend in MODEL_BACKENDS:
        if not settings.model and backend == DEFAULT_BACKEND:
            return None  # the shipped default model
        if not settings.model:
            return (f"backend {backend!r} needs a checkpoint directory: pass --model DIR or set SQUEEZ_MODEL "
                    f"(or 'model:' in the config file). Without a model, use --backend bm25.")
        from squeez_ray.hub import is_hub_id

        if "://" not in settings.model and not Path(settings.model).expanduser().exists() \
                and not is_hub_id(settings.model):
            return (f"model directory {settings.model} does not exist and is not a hub id like Org/name "
                    f"(from --model / SQUEEZ_MODEL / config 'model')")
    if backend in SERVER_BACKENDS and not settings.server_url:
        return (f"backend {backend!r} needs a server: pass --server-url URL (and --server-model NAME) or set "
                f"SQUEEZ_SERVER_URL. Without a server, use --backend bm25.")
    return None


CONFIGURE_HELP = """\
  --backend vllm --model DIR            a Squeez checkpoint directory, run in this process (GPU: fast)
  --backend transformers --model DIR    the same checkpoint through transformers (slower, no vLLM needed)
  --backend openai --server-url URL --server-model NAME
                                        an OpenAI-compatible server (e.g. vLLM) serving the checkpoint
  --backend server --server-url URL     a squeez Serve endpoint (POST /v1/prune)
  --backend encoder [--model DIR]       the CPU line classifier (default when nothing is configured: the
                                        model shipped with squeez-ray); DIR: jobs/export_encoder.py output
  --backend bm25                        a lexical baseline: no model, much weaker recall
Or set SQUEEZ_BACKEND / SQUEEZ_MODEL / SQUEEZ_SERVER_URL, or the same keys (backend, model,
server_url, ...) in ~/.config/squeez/config.yaml (or the file named by $SQUEEZ_CONFIG)."""
