"""Write a Serve config with its application's ``args`` overridden, for ``serve deploy``.

    python jobs/render_serve_config.py serve_configs/pruner_gpu.yaml model=/mnt/shared/models/squeez-2b \
        --out out/pruner_gpu.yaml && serve deploy out/pruner_gpu.yaml

``serve deploy`` sends the YAML to the cluster, which builds the application there: environment
variables set on the machine that runs ``serve deploy`` (``SQUEEZ_SERVE_MODEL=...``) are not seen, so
the model path has to be in the config itself. Overrides are dotted ``key=value`` pairs under the
application's ``args`` (``accelerator_type=H100``, ``model_deployment.autoscaling_config.max_replicas=8``);
the result is checked as ``build_app`` would check it, so a typo is one error here, not a failed deploy.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def render(path: str | Path, overrides: list[str], app: str | None = None) -> dict[str, Any]:
    """The Serve config at ``path`` with ``overrides`` applied to one application's args (ConfigError if wrong)."""
    import os

    import yaml

    from squeez_ray.config import ConfigError, parse_override, set_dotted
    from squeez_ray.serve.config import MODEL_ENV, load_app_config

    try:
        document = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as error:
        raise ConfigError([f"cannot read {path}: {error}"]) from None
    apps = (document or {}).get("applications") or []
    chosen = [a for a in apps if app is None or a.get("name") == app]
    if len(chosen) != 1:
        names = ", ".join(str(a.get("name")) for a in apps) or "none"
        raise ConfigError([f"{path}: choose one application with --app (applications: {names})"])
    args = chosen[0].setdefault("args", {})
    for text in overrides:
        set_dotted(args, *parse_override(text))
    saved = os.environ.pop(MODEL_ENV, None)  # validate what the cluster will see, not this shell
    try:
        load_app_config(args)
    finally:
        if saved is not None:
            os.environ[MODEL_ENV] = saved
    return document


def render_to(config: str, overrides: list[str], app: str | None = None, out: str | None = None) -> str:
    """:func:`render` as YAML, written to ``out`` (parent folders made) or returned for standard output."""
    import yaml

    text = yaml.safe_dump(render(config, overrides, app), sort_keys=False)
    if out:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(text)
    return text
