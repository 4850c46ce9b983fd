"""Where a call's time goes, and what block-first pruning saves: one warm process, the shipped encoder.

    .venv/bin/python tests/bench/bench_block_first.py [--sizes 300,1000,5000,20000] [--repeat 3] [--model DIR]

For synthetic pytest-like logs of each size (one failure in the middle, a burst of warnings, the summary
last; the same generator as bench_call_latency's) and the query "which test failed and why", it prints:

- the profile of scoring every line (issue 36 item 1): line tokens, window tokens scored and their ratio
  to the output's tokens (the query repeated per window, overlap lines scored twice, markers), windows,
  the seconds in onnxruntime against the rest (tokenising, segmenting, fusion features, decoding);
- the same for the shipped path (a shortlist of the model's ``shortlist_tokens`` line tokens);
- medians over ``--repeat`` runs and the ratio full / block-first, measured in this one run.

Numbers depend on the machine's load: read the ratios, and the absolute times only from an idle machine.
"""

from __future__ import annotations

import argparse
import statistics
import time


def pytest_log(n_lines: int) -> str:
    """A pytest -v run of about ``n_lines`` lines with one failure section and the summary last."""
    failure = ["", "=" * 35 + " FAILURES " + "=" * 35, "_" * 29 + " test_parse_config " + "_" * 29, "",
               "    def test_parse_config():", "        cfg = parse_config('a.toml')", ">       assert cfg.retries == 3",
               "E       AssertionError: assert 5 == 3", "E        +  where 5 = Config(retries=5).retries", "",
               "tests/test_config.py:42: AssertionError"]
    passed = max(n_lines - len(failure) - 40, 1)
    out = ["=" * 29 + " test session starts " + "=" * 29, f"collected {passed + 1} items", ""]
    out += [f"tests/test_mod{i % 40}.py::test_case_{i} PASSED{' ' * 10}[{min(99, i * 100 // passed):3d}%]"
            for i in range(passed)]
    out += failure + [f"WARNING deprecated call number {j} in module m{j}" for j in range(34)]
    out += ["=" * 27 + " short test summary info " + "=" * 27,
            "FAILED tests/test_config.py::test_parse_config - AssertionError: assert 5 == 3",
            f"============ 1 failed, {passed} passed in 12.34s ============"]
    return "\n".join(out)


def profile(pruner, query: str, output: str) -> dict:
    """Seconds in the forward pass vs the rest, and the tokens the windows hold, for one call."""
    forward, spent = pruner._forward, [0.0, 0, 0]

    def timed(ids, mask, types, owner, n_lines):
        started = time.perf_counter()
        try:
            return forward(ids, mask, types, owner, n_lines)
        finally:
            spent[0] += time.perf_counter() - started
            spent[1] += int(mask.sum())
            spent[2] += ids.shape[0]

    pruner._forward = timed
    try:
        started = time.perf_counter()
        result = pruner.prune(query, output)
        total = time.perf_counter() - started
    finally:
        pruner._forward = forward
    return {"total_s": total, "onnx_s": spent[0], "window_tokens": spent[1], "windows": spent[2],
            "kept": result.kept_lines}


def main(argv: list[str] | None = None) -> int:
    from squeez_ray.infer.encoder.scoring import encode_output
    from squeez_ray.infer.registry import build_pruner

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="300,1000,5000,20000")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--model", default=None, help="encoder directory (default: the shipped model)")
    parser.add_argument("--query", default="which test failed and why")
    parser.add_argument("--full-up-to", type=int, default=5000,
                        help="score every line only for outputs up to this many lines (minutes beyond)")
    args = parser.parse_args(argv)

    full = build_pruner("encoder", model=args.model, engine_kwargs={"decoder": "lines", "shortlist_tokens": 0},
                        min_lines=0)
    blocks = build_pruner("encoder", model=args.model, min_lines=0)
    print(f"shipped path: decoder {'blocks' if blocks.block_decoder else 'lines'}, "
          f"shortlist_tokens {blocks.shortlist_tokens}")
    header = ("lines | line tokens | path | window tokens | / output tokens | windows | onnx s | rest s | total s "
              "| kept")
    print(header + "\n" + "|".join(" --- " for _ in header.split("|")))
    for size in [int(s) for s in args.sizes.split(",")]:
        output = pytest_log(size)
        line_tokens = sum(len(ids) + 1 for ids in encode_output(full.tokenizer, args.query, output.split("\n"),
                                                                   full.settings.window)[1])
        medians = {}
        for name, pruner in (("every line", full), ("shortlist", blocks)):
            if name == "every line" and size > args.full_up_to:
                continue  # minutes per run on 2 cores; the smaller rows already show the trend
            runs = [profile(pruner, args.query, output) for _ in range(args.repeat)]
            m = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
            medians[name] = m
            print(f"{size:,} | {line_tokens:,} | {name} | {m['window_tokens']:,.0f} | "
                  f"{m['window_tokens'] / line_tokens:.2f} | {m['windows']:.0f} | {m['onnx_s']:.2f} | "
                  f"{m['total_s'] - m['onnx_s']:.2f} | {m['total_s']:.2f} | {m['kept']:.0f}")
        if len(medians) == 2:
            print(f"{size:,} lines: every line / shortlist = "
                  f"{medians['every line']['total_s'] / max(medians['shortlist']['total_s'], 1e-9):.1f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
