"""The whole pipeline on one embedded local Ray: sample data -> LoRA training -> merge -> Serve ->
prune a real tool output (HTTP and the ``squeez`` command) -> bulk evaluation against the baselines.

Each step calls the same library code as its job (``jobs/sample_data.py``, ``jobs/train.py``,
``jobs/merge.py``, ``serve run``, ``jobs/evaluate.py --ray``); this module only chains them, so what
the quickstart shows is what the cluster runs. The CPU config serves a real pretrained model on a
laptop: Gemma 3 270M with the LoRA adapter shipped in ``adapters/gemma270m-squeez-lora`` (trained by
``jobs/configs/gemma270m_lora_cpu.yaml``), trained two more steps on the sample with Ray Train;
``quickstart_tiny_cpu.yaml`` runs the same stages on a tiny random-weight model (machinery only).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from squeez_ray.infer.registry import BASELINES
from squeez_ray.ray_init import init_ray
from squeez_ray.errors import JobError

REPO_ROOT = Path(__file__).resolve().parents[1]


@dataclass
class QuickstartConfig:
    out_dir: str = "runs/quickstart"  # data, run, merged model, eval, summary.json
    data_dir: str | None = None  # an existing {train,dev,test}.parquet folder; None: build the local sample
    sample_overrides: list[str] = field(default_factory=list)  # key=value for jobs/sample_data.py
    train_config: str = "jobs/configs/tiny_cpu.yaml"  # training YAML (jobs/train.py)
    train_overrides: list[str] = field(default_factory=list)  # key=value for jobs/train.py
    serve_config: str = "serve_configs/pruner_cpu.yaml"  # Ray Serve config to deploy the merged model with
    port: int = 8000  # Serve HTTP port
    eval_split: str = "test"  # split of the data evaluated
    eval_limit: int = 30  # examples per system; the served model on CPU is the slow one
    # Outputs the evaluation sends the served model at a time (one call, its HTTP batches in flight
    # together): they must all be answered within the Serve config's request timeout (60 s on CPU), or
    # every output of the call comes back unpruned.
    eval_examples_per_call: int = 16
    # Over the Serve config's limits.request_timeout_s: a real model on a laptop's CPU needs minutes for
    # a long output (chunked, each chunk prefilled and answered); None keeps the config's.
    request_timeout_s: float | None = None
    # Evaluate only the outputs the served model reads whole (prompt + the Serve config's pruner
    # max_new_tokens within its engine max_model_len), the first eval_limit of them: one model call per
    # output, so even a loaded laptop CPU answers each call well within the timeout (a 534-line output cut
    # into chunks took Gemma 180-300 s). False: the first eval_limit outputs, whatever their length.
    eval_whole_outputs: bool = False
    # Systems evaluated beside the served model: the encoder shipped in the package (a model that
    # prunes, on ONNX Runtime, no training needed) and the heuristics.
    baselines: list[str] = field(default_factory=lambda: ["encoder=shipped-encoder", *BASELINES])
    notice: str = ""  # printed first and last: what the served model is, and what it is not

    def validate(self) -> list[str]:
        problems = []
        for name in ("train_config", "serve_config"):
            if not (REPO_ROOT / getattr(self, name)).exists() and not Path(getattr(self, name)).exists():
                problems.append(f"{name}: {getattr(self, name)} does not exist")
        if not 0 < self.port < 65536:
            problems.append(f"port: {self.port} is not a TCP port")
        return problems


class QuickstartError(JobError, RuntimeError):  # JobError: the job runner reports it as one line, exit 2
    pass


def _step(number: int, total: int, title: str) -> float:
    print(f"\n=== [{number}/{total}] {title}", flush=True)
    return time.perf_counter()


def _done(started: float, what: str) -> float:
    seconds = time.perf_counter() - started
    print(f"    done in {seconds:.0f}s: {what}", flush=True)
    return seconds


def _check(code: int, step: str) -> None:
    if code != 0:
        raise QuickstartError(f"step '{step}' failed (exit {code}); its error is printed above")


def _http_json(url: str, body: dict[str, Any] | None = None, timeout: float = 120.0) -> Any:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.loads(response.read())


def _wait_healthy(url: str, timeout_s: float = 600.0) -> None:
    deadline = time.time() + timeout_s
    last_error: Exception | None = None
    while time.time() < deadline:
        try:
            _http_json(f"{url}/healthz", timeout=5)
            return
        except Exception as error:  # noqa: BLE001 - not up yet: keep polling until the deadline
            last_error = error
            time.sleep(2)
    raise QuickstartError(f"the Serve endpoint {url} did not become healthy in {timeout_s:.0f}s: {last_error}")


def demo_tool_output(workdir: Path) -> tuple[str, str]:
    """A real test run to prune: pytest over a small module with one failing test."""
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "test_inventory.py").write_text(textwrap.dedent('''
        import pytest

        STOCK = {"apple": 3, "pear": 0, "plum": 7}

        def reserve(item, count):
            if STOCK.get(item, 0) < count:
                raise ValueError(f"not enough {item}: have {STOCK.get(item, 0)}, need {count}")
            STOCK[item] -= count
            return STOCK[item]

        @pytest.mark.parametrize("item", ["apple", "plum"])
        def test_reserve_one(item):
            assert reserve(item, 1) >= 0

        def test_reserve_pear():
            assert reserve("pear", 1) == 0

        def test_unknown_item_rejected():
            with pytest.raises(ValueError):
                reserve("kiwi", 1)
    '''))
    # Its own pytest root: else pytest finds this checkout's pyproject.toml above runs/ and runs the demo with
    # the repo's addopts (two xdist workers, a slowest-25 list): noise in the output to prune, and ~7 s of CPU.
    (workdir / "pytest.ini").write_text("[pytest]\n")
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "test_inventory.py"],
                         cwd=workdir, capture_output=True, text=True, timeout=120)
    return run.stdout + run.stderr, "which test failed and why"


def encoder_answer(tool_output: str, query: str) -> str:
    """The shipped encoder's answer (``squeez``'s default pruner) to the demo, for beside the served one:
    in-process (no warm process left behind), and ``--strict``, so a failure is an error here rather than
    the full output passed through looking like an answer."""
    run = subprocess.run([sys.executable, "-m", "squeez_ray.cli", query, "--backend", "encoder", "--min-lines", "0",
                          "--strict"], input=tool_output, capture_output=True, text=True, timeout=300,
                         env={**os.environ, "SQUEEZ_DAEMON": "0"})
    _check(run.returncode, "squeez --backend encoder")
    return run.stdout.rstrip()


def demo_answers(query: str, answers: dict[str, str]) -> str:
    """Each pruner's answer to the demo's query, one under the other, for the summary."""
    parts = [f"    the answers to {query!r} on the pytest run:"]
    for name, text in answers.items():
        parts += [f"    {name}:", textwrap.indent(text.rstrip() or "(no lines kept)", "    | ")]
    return "\n".join(parts)


STAGES = ("ray", "data", "train", "merge", "serve", "prune", "evaluate")  # summary.json "seconds": these and "total"


def stage_times(seconds: dict[str, float]) -> str:
    """The summary's line of where the run's time went, stage by stage (summary.json keeps the same)."""
    stages = ", ".join(f"{name} {seconds[name]:.0f}s" for name in STAGES if name in seconds)
    return f"    stage times: {stages}; total {seconds['total']:.0f}s"


def _serve_spec(config: QuickstartConfig) -> dict[str, Any]:
    """The Serve config file of ``config.serve_config``, parsed."""
    import yaml

    path = Path(config.serve_config)
    return yaml.safe_load((path if path.exists() else REPO_ROOT / path).read_text())


def _serve_app(config: QuickstartConfig, merged_dir: str):
    """Start the Serve app of ``config.serve_config`` with the merged checkpoint, on loopback."""
    from ray import serve

    from squeez_ray.serve.app import build_app

    spec = _serve_spec(config)
    application = spec["applications"][0]
    args = dict(application.get("args") or {})
    args["model"] = merged_dir
    if config.request_timeout_s:
        args["limits"] = {**(args.get("limits") or {}), "request_timeout_s": config.request_timeout_s}
    os.environ.pop("SQUEEZ_SERVE_MODEL", None)  # it would win over args.model
    http = dict(spec.get("http_options") or {})
    http["port"] = config.port
    http.setdefault("host", "127.0.0.1")
    serve.start(http_options=http)
    serve.run(build_app(args), name=application.get("name", "squeez"),
              route_prefix=application.get("route_prefix", "/"), blocking=False)
    return f"http://{http['host']}:{config.port}", args.get("model_id", "squeez-pruner")


def whole_output_examples(config: QuickstartConfig, data: Path, model_dir: Path, out: Path) -> str:
    """Write to ``out`` the first ``eval_limit`` examples of ``data`` the served model reads in one call;
    returns a line saying how many fit."""
    from squeez_ray.evaluate.context_fit import fitting_examples
    from squeez_ray.schema.files import read_examples, write_examples

    args = _serve_spec(config)["applications"][0].get("args") or {}
    context = (args.get("engine_kwargs") or {}).get("max_model_len")
    answer = (args.get("pruner") or {}).get("max_new_tokens")
    if not context or not answer:
        raise QuickstartError(f"eval_whole_outputs needs engine_kwargs.max_model_len and pruner.max_new_tokens "
                              f"in {config.serve_config}")
    examples = read_examples(data, for_evaluation=True)
    whole = fitting_examples(examples, model_dir, context_tokens=int(context), answer_tokens=int(answer))
    if not whole:
        raise QuickstartError(f"no output of {data} fits {context} tokens with {answer} for the answer")
    write_examples(whole[:config.eval_limit], out)
    return (f"{len(whole)} of {len(examples)} {config.eval_split} outputs fit the served context whole "
                 f"({context} tokens with {answer} for the answer); evaluating the first {min(len(whole), config.eval_limit)}")


def run_quickstart(config: QuickstartConfig) -> dict[str, Any]:

    from squeez_ray.io_utils import write_json_atomic

    out = Path(config.out_dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    timings: dict[str, float] = {}
    total = 7
    started_all = time.perf_counter()
    if config.notice:
        print(f"NOTE: {config.notice}")
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")  # a local, loopback-only cluster
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    init_ray()
    timings["ray"] = time.perf_counter() - started_all  # the embedded local Ray's start

    from squeez_ray.config import load_config

    # 1. data: the same builder as jobs/sample_data.py
    t = _step(1, total, "build the sample dataset from local sources (real tool runs, rule teacher)")
    if config.data_dir is None:
        from squeez_ray.dataset.sample import SampleConfig, build_sample

        data_dir = str(out / "data")
        manifest = build_sample(load_config(SampleConfig, None, [*config.sample_overrides, f"output_dir={data_dir}"]))
        counts = manifest["counts"]
        what = f"{data_dir}: train {counts['train']}, dev {counts['dev']}, test {counts['test']} examples"
    else:
        data_dir, what = config.data_dir, f"using {config.data_dir}"
    timings["data"] = _done(t, what)

    # 2. training: the same run as jobs/train.py
    t = _step(2, total, f"LoRA fine-tune on Ray Train ({config.train_config})")
    from squeez_ray.train.config import TrainConfig
    from squeez_ray.train.run import run_training

    train_config = load_config(TrainConfig, REPO_ROOT / config.train_config
                               if not Path(config.train_config).exists() else config.train_config,
                               [f"data.train_path={data_dir}", "data.train_split=train", "data.eval_split=dev",
                                f"run.storage_path={out / 'train'}", *config.train_overrides])
    outcome = run_training(train_config, config_path=config.train_config)
    if not outcome.checkpoint:
        raise QuickstartError(f"training wrote no checkpoint under {outcome.run_dir}")
    timings["train"] = _done(t, f"checkpoint {outcome.checkpoint}; final metrics "
                                f"{ {k: v for k, v in outcome.metrics.items() if k in ('loss', 'train_loss', 'step')} }")

    # 3. merge: the same code as jobs/merge.py (Serve loading it below is the vLLM check)
    t = _step(3, total, "merge the adapter into the base model")
    from squeez_ray.train.merge import merge_adapter

    merged = out / "merged"
    merge_adapter(outcome.checkpoint, merged, overwrite=True)
    timings["merge"] = _done(t, str(merged))

    # 4. serve: the app of serve_configs/*.yaml with the merged checkpoint
    t = _step(4, total, f"deploy on Ray Serve with vLLM ({config.serve_config})")
    url, model_id = _serve_app(config, str(merged))
    _wait_healthy(url)
    timings["serve"] = _done(t, f"{url} (POST /v1/prune, /v1/prune/batch, /v1/chat/completions; docs at {url}/docs)")

    # 5. prune one real tool output through the endpoint and through the squeez command
    t = _step(5, total, "prune a real pytest run: HTTP endpoint and `squeez`")
    tool_output, query = demo_tool_output(out / "demo")
    answer = _http_json(f"{url}/v1/prune", {"query": query, "tool_output": tool_output})
    print(f"    POST /v1/prune: kept {answer['kept_lines']}/{answer['total_lines']} lines, pruned={answer['pruned']}"
          f"{', reason: ' + answer['reason'] if answer.get('reason') else ''}, {answer['latency_ms']:.0f} ms")
    # Clients wait as long as the service does (their default is 60 s; a loaded laptop CPU took longer)
    timeout_flag = ["--timeout", str(config.request_timeout_s)] if config.request_timeout_s else []
    squeez = [sys.executable, "-m", "squeez_ray.cli", query, "--backend", "server", "--server-url", url,
              "--min-lines", "0", "--stats", *timeout_flag]
    print(f"    $ pytest ... | squeez {query!r} --backend server --server-url {url}")
    # bounded, with room for the client's own retries of a slow answer
    piped = subprocess.run(squeez, input=tool_output, capture_output=True, text=True,
                           timeout=4 * (config.request_timeout_s or 60) + 60)
    _check(piped.returncode, "squeez")
    print(textwrap.indent(piped.stdout.rstrip() or "(no lines kept)", "    | "))
    print(textwrap.indent(piped.stderr.rstrip(), "    stderr: "))
    # the shipped encoder on the same output, printed beside the served answer in the summary
    answers = {f"served model ({model_id})": piped.stdout, "shipped encoder (squeez's default)":
               encoder_answer(tool_output, query)}
    timings["prune"] = _done(t, "both answers hold only lines of the pytest output")

    # 6. bulk evaluation of the served model and the baselines in one run (jobs/evaluate.py --ray)
    t = _step(6, total, f"bulk evaluation on Ray Data: served model + {', '.join(config.baselines)}")
    from squeez_ray.evaluate.bulk import BulkSettings, evaluate_bulk
    from squeez_ray.evaluate.local import SystemSpec
    from squeez_ray.evaluate.report import console_report
    from squeez_ray.infer.registry import BackendError, BackendOptions

    eval_dir = out / "eval"
    eval_data = Path(data_dir) / f"{config.eval_split}.parquet"
    if config.eval_whole_outputs:
        whole = out / "eval_data.parquet"
        print(f"    {whole_output_examples(config, eval_data, merged, whole)}")
        eval_data = whole
    # the library call of `squeez eval --ray` (a bad data file: DataError; both are one line, exit 2)
    systems = [SystemSpec.parse(s) for s in (f"server={model_id}", *config.baselines)]
    options = BackendOptions(server_url=url, **({"timeout_s": config.request_timeout_s} if config.request_timeout_s else {}))
    try:
        metrics = evaluate_bulk(eval_data, systems, eval_dir, options=options, limit=config.eval_limit, resume=False,
                                bulk=BulkSettings(batch_size=config.eval_examples_per_call))
    except BackendError as error:
        raise QuickstartError(f"step 'evaluate': {error}") from error
    print(textwrap.indent(console_report(metrics), "    "))
    timings["evaluate"] = _done(t, str(eval_dir))

    # 7. summary
    _step(7, total, "summary")
    from ray import serve

    serve.shutdown()
    timings["total"] = time.perf_counter() - started_all
    summary = {"data": data_dir, "checkpoint": outcome.checkpoint, "merged": str(merged), "endpoint": url,
               "report": str(eval_dir / "report.md"), "metrics": str(eval_dir / "metrics.json"),
               "plot": str(eval_dir / "recall_vs_compression.png"), "seconds": {k: round(v, 1) for k, v in timings.items()},
               "demo": {"query": query, "answers": answers}}
    write_json_atomic(out / "summary.json", summary)
    print(demo_answers(query, answers))
    print(f"    report: {summary['report']}\n    plot:   {summary['plot']}\n    all paths: {out / 'summary.json'}")
    print(stage_times(summary["seconds"]))
    if config.notice:
        print(f"NOTE: {config.notice}")
    return summary
