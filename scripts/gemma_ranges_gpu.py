"""Range decoding vs the verbatim contract on Gemma 3 270M: train on a lent GPU, score here.

The lent GPU machine has torch, transformers and peft but no Ray, vLLM or network, and each run
carries 64 MiB of the working tree; the Gemma base is a ~250 MB GGUF. So:

    python scripts/gemma_ranges_gpu.py stage                 # here: .gpu/pNN (GGUF in parts), .gpu/small
    # device, one run per part (each carries one .gpu/pNN; a warm machine keeps the earlier ones),
    # the last one also carrying .gpu/small and running:
    python3 scripts/gemma_ranges_gpu.py device --out $OUT    # convert, train, generate for both adapters
    python scripts/gemma_ranges_gpu.py score DIR             # here: the replies -> METRICS.md's table

``device`` trains the recipe (jobs/configs/gemma270m_lora_cpu.yaml: same data, steps, rank, batches)
with ``data.prompt_format=squeez-ranges-v1``, in-process and float32 as the CPU run was, merges both
the shipped verbatim adapter and the new one onto the same de-quantised base, and generates with the
project's transformers engine, one case at a time (latency per example), greedy, on the cases the
verbatim adapter's model card used (the public cases whose whole Gemma prompt + 300 answer tokens fit
4,096; evaluation only). ``score`` replays those replies through the same GenerativePruner (parsing,
mapping, metrics) that serving and ``squeez eval`` use.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
STAGE = REPO / "build" / "gpu"
PART_BYTES = 22 * 1024 * 1024  # the tree is ~39.4 MiB of the 64 MiB a run carries
CONTEXT, ANSWER = 4096, 300
RANGES = "squeez-ranges-v1"
SHIPPED = "adapters/gemma270m-squeez-lora"
CONFIG = "jobs/configs/gemma270m_lora_cpu.yaml"


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def stage(args: argparse.Namespace) -> None:
    import importlib
    import subprocess

    from squeez_ray.base_models import PACKAGED, materialize
    from squeez_ray.evaluate.context_fit import fitting_examples
    from squeez_ray.schema.files import read_examples

    base = materialize("gemma-3-270m")
    examples = read_examples(args.cases, for_evaluation=True)
    kept = fitting_examples(examples, base, context_tokens=CONTEXT, answer_tokens=ANSWER)
    print(f"{len(kept)} of {len(examples)} cases fit {CONTEXT} tokens with {ANSWER} for the answer")
    small = STAGE / "small"
    small.mkdir(parents=True, exist_ok=True)
    package = importlib.import_module(PACKAGED["gemma-3-270m"][0])
    (small / "cases.json").write_text(json.dumps({
        "gguf_sha256": package.EXPECTED_SHA256, "gguf_name": package.MODEL_NAME,
        "cases": [{"instance_id": e["instance_id"], "query": e["query"], "tool_output": e["tool_output"]} for e in kept]}))
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", "-d",
                    str(small), "gguf==0.19.0"], check=True)
    gguf = package.assemble(STAGE / package.MODEL_NAME)
    data = gguf.read_bytes()
    for i in range(0, len(data), PART_BYTES):
        part = STAGE / f"p{i // PART_BYTES + 1:02d}"
        part.mkdir(exist_ok=True)
        (part / "gguf.part").write_bytes(data[i:i + PART_BYTES])
    gguf.unlink()
    print(f"{len(data)} bytes of GGUF in {-(-len(data) // PART_BYTES)} parts under {STAGE}")


def _convert(small: Path, work: Path) -> Path:
    """The GGUF parts -> the checked GGUF -> the base directory, as squeez_ray.base_models builds it."""
    meta = json.loads((small / "cases.json").read_text())
    gguf = work / meta["gguf_name"]
    digest = hashlib.sha256()
    with gguf.open("wb") as out:
        for part in sorted(STAGE.glob("p*/gguf.part")):
            data = part.read_bytes()
            digest.update(data)
            out.write(data)
    if digest.hexdigest() != meta["gguf_sha256"]:
        sys.exit(f"GGUF sha256 {digest.hexdigest()} is not the package's {meta['gguf_sha256']}: a part is missing")
    from squeez_ray.base_models import _convert as convert

    base = work / "gemma-3-270m"
    convert(gguf, base, "gemma-3-270m")
    return base


def device(args: argparse.Namespace) -> None:
    import torch

    from squeez_ray.config import load_config
    from squeez_ray.infer.base import PruneRequest
    from squeez_ray.infer.generative import GenerativePruner
    from squeez_ray.infer.hf_engine import TransformersEngine
    from squeez_ray.infer.registry import BackendOptions
    from squeez_ray.train.adapter_export import export_adapter
    from squeez_ray.train.config import TrainConfig
    from squeez_ray.train.in_process import train_in_process
    from squeez_ray.train.merge import merge_adapter

    out, work = Path(args.out), Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    small = STAGE / "small"
    started = time.perf_counter()
    base = Path(args.base) if args.base else _convert(small, work)
    report = {"convert_s": round(time.perf_counter() - started, 1), "device": torch.cuda.get_device_name()
              if torch.cuda.is_available() else "cpu"}
    # Both switches: the loop trains on the CPU unless scaling.use_gpu is set too (the first device run
    # left it false and trained 75 steps on the device's CPUs before its time ran out).
    gpu = "true" if torch.cuda.is_available() else "false"
    overrides = [f"model.base={base}", f"data.prompt_format={RANGES}", f"train.use_cpu={'false' if gpu == 'true' else 'true'}",
                 f"scaling.use_gpu={gpu}",
                 f"run.storage_path={work / 'runs'}", *args.set]
    config = load_config(TrainConfig, REPO / args.config, overrides)
    started = time.perf_counter()
    if args.checkpoint:
        checkpoint, report["train"] = args.checkpoint, {"checkpoint": args.checkpoint}
    else:
        outcome = train_in_process(config, work / "runs" / config.run.name)
        report["train"] = {"wall_s": round(time.perf_counter() - started, 1), "counts": outcome["counts"],
                           "losses": [(r.get("step"), r["loss"]) for r in outcome["reports"] if "loss" in r]}
        checkpoint = outcome["checkpoints"][-1]
        export_adapter(checkpoint, out / "ranges_adapter", base_name="gemma-3-270m", overwrite=True)
    cases = json.loads((small / "cases.json").read_text())["cases"][:args.limit or None]
    options = BackendOptions(max_context_tokens=CONTEXT, max_new_tokens=ANSWER)
    report["systems"] = {}
    for name, adapter in (("ranges", Path(checkpoint)), ("verbatim", REPO / args.shipped)):
        merged = work / f"merged-{name}"
        merge_adapter(adapter, merged, base_override=str(base), overwrite=True)
        engine = TransformersEngine(str(merged), dtype="float32", batch_size=1)
        pruner = GenerativePruner(engine, options, model_dir=merged)
        engine.generate(pruner.prepare([PruneRequest("warm up", "a\nb")]).jobs)  # kernels, caches
        rows = []
        for case in cases:
            prepared = pruner.prepare([PruneRequest(case["query"], case["tool_output"])])
            if torch.cuda.is_available():
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            generations = engine.generate(prepared.jobs)
            if torch.cuda.is_available():
                torch.cuda.synchronize()
            rows.append({"instance_id": case["instance_id"], "seconds": time.perf_counter() - t0,
                         "jobs": [{"prompt_sha": sha(job.prompt), "first_line": job.first_line, "n_lines": len(job.lines),
                                   "max_new_tokens": job.max_new_tokens, "text": g.text, "input_tokens": g.input_tokens,
                                   "output_tokens": g.output_tokens} for job, g in zip(prepared.jobs, generations)]})
            report["systems"][name] = {"prompt_format": pruner.prompt_format, "rows": rows}
            (out / "generations.json").write_text(json.dumps(report, indent=1))
        report["systems"][name] = {"prompt_format": pruner.prompt_format, "rows": rows}
        engine.close()
        print(name, "mean s/example", sum(r["seconds"] for r in rows) / max(len(rows), 1), flush=True)
    (out / "generations.json").write_text(json.dumps(report, indent=1))


def score(args: argparse.Namespace) -> None:
    from squeez_ray.base_models import materialize
    from squeez_ray.evaluate.local import score_row, summarize_systems
    from squeez_ray.infer.base import PruneRequest
    from squeez_ray.infer.generative import ChunkJob, Generation, GenerativePruner, PreparedBatch, PromptOnlyEngine
    from squeez_ray.spans import split_lines
    from squeez_ray.infer.registry import BackendOptions
    from squeez_ray.prompt_ranges import default_system_prompt
    from squeez_ray.schema.files import read_examples

    report = json.loads((Path(args.dir) / "generations.json").read_text())
    base = materialize("gemma-3-270m")
    examples = {e["instance_id"]: e for e in read_examples(args.cases, for_evaluation=True)}
    print(f"device: {report['device']}; training: {json.dumps(report['train']['counts'])}, "
          f"{report['train']['wall_s']} s; last losses {report['train']['losses'][-3:]}")
    header = "| system | P | R | strict F1 | F1 | compression | neg. empty | parsed | verbatim | dropped | output tokens / example | s / example |"
    print(header)
    print("|---|" + "---:|" * 11)
    for name, system in report["systems"].items():
        replies = {job["prompt_sha"]: Generation(job["text"], job["input_tokens"], job["output_tokens"])
                   for row in system["rows"] for job in row["jobs"]}
        model_dir = Path(args.work) / f"prompt-{name}"  # the base's tokenizer + a manifest naming the format
        model_dir.mkdir(parents=True, exist_ok=True)
        for item in base.iterdir():
            if item.name != "model.safetensors" and not (model_dir / item.name).exists():
                (model_dir / item.name).symlink_to(item)
        (model_dir / "manifest.json").write_text(json.dumps({
            "prompt_format": system["prompt_format"], "system_prompt": default_system_prompt(system["prompt_format"])}))

        pruner = GenerativePruner(PromptOnlyEngine(model_dir, CONTEXT), BackendOptions(
            max_context_tokens=CONTEXT, max_new_tokens=ANSWER), model_dir=model_dir)
        chosen = [examples[row["instance_id"]] for row in system["rows"]]
        results = []
        for example, row in zip(chosen, system["rows"]):
            # The device's own chunks (its tokenizer build may chunk a little differently from this one's).
            lines = split_lines(example["tool_output"])
            jobs = [ChunkJob(0, j["first_line"], tuple(lines[j["first_line"] - 1:j["first_line"] - 1 + j["n_lines"]]),
                             "", j["max_new_tokens"]) for j in row["jobs"]]
            prepared = PreparedBatch([PruneRequest(example["query"], example["tool_output"])], jobs)
            results.append(pruner.assemble(prepared, [replies[j["prompt_sha"]] for j in row["jobs"]])[0])
        rows = [score_row(e, r, system=name, example_index=i) for i, (e, r) in enumerate(zip(chosen, results))]
        m = summarize_systems(rows)[name]["overall"]
        tokens = sum(r["output_tokens"] for r in rows) / len(rows)
        seconds = sum(r["seconds"] for r in system["rows"]) / len(system["rows"])
        neg = "" if m.get("negatives_empty") is None else f"{m['negatives_empty']:.2f}"
        print(f"| {name} ({len(rows)} cases) | {m['precision']:.3f} | {m['recall']:.3f} | {m['strict_f1']:.3f} | "
              f"{m['f1']:.3f} | {m['compression']:.3f} | {neg} | {m.get('answers_parsed', 0):.2f} | "
              f"{m.get('lines_verbatim', 0):.2f} | {m.get('lines_dropped', 0):.2f} | {tokens:.1f} | {seconds:.3f} |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="step", required=True)
    p = sub.add_parser("stage")
    p.add_argument("--cases", default=str(REPO.parent / "shared" / "eval" / "public_cases.jsonl"))
    p = sub.add_parser("device")
    p.add_argument("--out", required=True)
    p.add_argument("--work", default="/tmp/ranges-gpu")
    p.add_argument("--base", help="an already converted base directory (skips the GGUF parts)")
    p.add_argument("--config", default=CONFIG)
    p.add_argument("--shipped", default=SHIPPED)
    p.add_argument("--checkpoint", help="generate with this trained checkpoint (skips training)")
    p.add_argument("--limit", type=int, default=0, help="first N cases only (a smoke run)")
    p.add_argument("--set", nargs="*", default=[], help="more config overrides, key=value")
    p = sub.add_parser("score")
    p.add_argument("dir")
    p.add_argument("--cases", default=str(REPO.parent / "shared" / "eval" / "public_cases.jsonl"))
    p.add_argument("--work", default=str(REPO / "runs" / "ranges-score"))
    args = parser.parse_args(argv)
    {"stage": stage, "device": device, "score": score}[args.step](args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
