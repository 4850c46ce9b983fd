"""The generative pruner: prompt contract -> (chunks) -> engine -> parse -> verbatim mapping -> spans.

Two pure steps wrap the engine call so async callers (the Serve ingress) can drive their own engine:

    prepared = pruner.prepare(requests)          # chunk jobs: rendered prompts + token limits
    generations = <any engine>(prepared.jobs)     # one Generation per job, same order
    results = pruner.assemble(prepared, generations, render_options)

``_prune_batch`` is exactly that with ``self.engine``. Engines (vllm, transformers, openai, fake)
only turn jobs into text; everything that decides which source lines come back lives here.
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from squeez_ray.infer.base import PruneRequest, PruneResult, Pruner, RenderOptions, make_result
from squeez_ray.infer.chunking import Chunk, split_into_chunks
from squeez_ray.infer.mapping import map_lines_to_spans
from squeez_ray.model_family import family_of
from squeez_ray.prompt import DEFAULT_SYSTEM_PROMPT, PROMPT_FORMAT, RANGES_FORMAT, check_prompt_format, parse_target
from squeez_ray.prompt_ranges import default_system_prompt, number_lines, parse_ranges
from squeez_ray.spans import spans_from_line_numbers, split_lines

log = logging.getLogger(__name__)

# Room for the answer's tags and end-of-turn token on top of the kept lines themselves.
ANSWER_MARGIN_TOKENS = 32
# Below this many tokens for the output itself a chunk shows too little to be worth a call.
MIN_CHUNK_TOKENS = 16


# How many times a chunk the engine rejected as over its context is halved again.
MAX_RESPLITS = 4


class PromptTooLongError(ValueError):
    """The query and system prompt alone leave no room for the tool output in the context."""


class ContextOverflowError(RuntimeError):
    """The engine refused some prompts as longer than its context (token counts were estimates).

    ``generations`` holds the answers of the jobs that did fit and None for those that did not, so
    only the rejected chunks are split and sent again.
    """

    def __init__(self, message: str, generations: Sequence["Generation | None"]):
        super().__init__(message)
        self.generations = list(generations)


@dataclass(frozen=True)
class Generation:
    text: str
    input_tokens: int = 0
    output_tokens: int = 0


@dataclass(frozen=True)
class ChunkJob:
    request_index: int  # which request of the batch this chunk belongs to
    first_line: int  # 1-based source line of lines[0]
    lines: tuple[str, ...]  # the lines shown to the model (what the reply is mapped against)
    prompt: str  # the rendered prompt: the released layout (squeez_ray.prompt) after the family's prefix
    max_new_tokens: int
    stop: tuple[str, ...] = ()  # the model family's stop strings (empty: its eos ids end the answer)


@dataclass
class PreparedBatch:
    requests: list[PruneRequest]
    jobs: list[ChunkJob] = field(default_factory=list)


class Engine:
    """Turns chunk jobs into generations. Subclasses set the attributes and implement ``generate``.

    ``count_tokens`` uses the tokenizer when there is one, else characters / 4 (an estimate, as
    METRICS.md allows for servers whose tokenizer is not at hand).
    """

    model_name: str = "model"
    tokenizer: Any | None = None
    max_context_tokens: int = 8192

    def count_tokens(self, text: str) -> int:
        if self.tokenizer is None:
            return math.ceil(len(text) / 4)
        return len(self.tokenizer.encode(text, add_special_tokens=False))

    def count_tokens_batch(self, texts: Sequence[str]) -> list[int]:
        if self.tokenizer is None or not texts:
            return [self.count_tokens(t) for t in texts]
        encoded = self.tokenizer(list(texts), add_special_tokens=False)["input_ids"]
        return [len(ids) for ids in encoded]

    def generate(self, jobs: Sequence[ChunkJob]) -> list[Generation]:
        raise NotImplementedError

    def close(self) -> None:
        pass


class PromptOnlyEngine(Engine):
    """A checkpoint's tokenizer and context without a model: for callers that generate elsewhere."""

    def __init__(self, model_dir: str | Path, max_context_tokens: int | None = None):
        self.tokenizer = load_tokenizer(model_dir)
        self.max_context_tokens = max_context_tokens or checkpoint_context_length(model_dir)
        self.model_name = Path(model_dir).name

    def generate(self, jobs: Sequence[ChunkJob]) -> list[Generation]:
        raise RuntimeError("this pruner only prepares prompts; generate with your own engine and call assemble()")


def load_tokenizer(model_dir: str | Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(model_dir))


def checkpoint_context_length(model_dir: str | Path, default: int = 32768) -> int:
    """``max_position_embeddings`` from config.json (top level or ``text_config``), else ``default``."""
    path = Path(model_dir) / "config.json"
    if not path.is_file():
        return default
    config = json.loads(path.read_text())
    value = config.get("max_position_embeddings") or (config.get("text_config") or {}).get("max_position_embeddings")
    return int(value) if value else default


def resolve_system_prompt(system_prompt: str | None, model_dir: str | Path | None) -> str:
    return resolve_prompt(system_prompt, model_dir)[1]


def resolve_prompt(system_prompt: str | None, model_dir: str | Path | None) -> tuple[str, str]:
    """(prompt format, system prompt): the format the checkpoint manifest records (the released
    verbatim one when none is), and the configured prompt, else the manifest's, else the format's default.

    A manifest naming a format we do not render is refused in one line (``check_prompt_format``).
    No manifest (e.g. the released checkpoint as published) means the released layout.
    """
    manifest_path = Path(model_dir) / "manifest.json" if model_dir else None
    if manifest_path is None or not manifest_path.is_file():
        return PROMPT_FORMAT, system_prompt or DEFAULT_SYSTEM_PROMPT
    try:
        manifest = json.loads(manifest_path.read_text())
    except json.JSONDecodeError as error:
        raise ValueError(f"{manifest_path}: not valid JSON ({error})") from None
    # Checked even when a system prompt is configured: the layout, not just its wording, must match.
    check_prompt_format(manifest.get("prompt_format"), str(manifest_path))
    prompt_format = manifest.get("prompt_format") or PROMPT_FORMAT
    return prompt_format, system_prompt or manifest.get("system_prompt") or default_system_prompt(prompt_format)


class GenerativePruner(Pruner):
    """A chat LLM as a pruner; which LLM is the engine's business (see the module docstring)."""

    def __init__(self, engine: Engine, options: Any, *, model_dir: str | Path | None = None):
        self.engine = engine
        self.options = options  # BackendOptions (infer/registry.py)
        limit = options.max_new_tokens
        if limit and limit < ANSWER_MARGIN_TOKENS + MIN_CHUNK_TOKENS:
            # Every line shown to the model must fit in one answer; a smaller limit would cut each
            # line to a token or two, and the model could copy nothing back.
            raise ValueError(f"max_new_tokens={limit} is too small: need at least "
                             f"{ANSWER_MARGIN_TOKENS + MIN_CHUNK_TOKENS} tokens for one answer")
        self.prompt_format, self.system_prompt = resolve_prompt(options.system_prompt, model_dir)
        self.ranges = self.prompt_format == RANGES_FORMAT  # numbered lines in, line ranges out
        # <bos> and stop strings by the checkpoint's family (model_family.py); Qwen adds nothing.
        self.family = family_of(model_dir)

    _name: str | None = None

    @property
    def name(self) -> str:  # type: ignore[override]
        # Read at use: a server backend learns its model's name only once the server has answered.
        return self._name or self.engine.model_name

    @name.setter
    def name(self, value: str) -> None:  # callers may report another name (e.g. the served model id)
        self._name = value

    @classmethod
    def for_prompting(cls, model_dir: str | Path, options: Any) -> "GenerativePruner":
        """A pruner that prepares and assembles but does not generate (the Serve ingress's case)."""
        return cls(PromptOnlyEngine(model_dir, options.max_context_tokens), options, model_dir=model_dir)

    # -- budget -------------------------------------------------------------------------------
    @property
    def context_tokens(self) -> int:
        limits = [n for n in (self.engine.max_context_tokens, self.options.max_context_tokens) if n]
        return min(limits)

    @property
    def answer_cap(self) -> int:
        """Most tokens one answer may take: the configured limit, else a quarter of the context."""
        if self.options.max_new_tokens:
            return int(self.options.max_new_tokens)
        return max(ANSWER_MARGIN_TOKENS, min(4096, self.context_tokens // 4))

    def _render(self, query: str, text: str) -> str:
        return self.family.render_prompt(query, text, self.system_prompt)

    def _shown(self, chunk: Chunk) -> str:
        """The chunk's text as the model reads it (numbered in the range format)."""
        return number_lines(chunk.lines, chunk.first_line) if self.ranges else chunk.text

    # -- the two pure steps -------------------------------------------------------------------
    def prepare(self, requests: Sequence[PruneRequest]) -> PreparedBatch:
        prepared = PreparedBatch(list(requests))
        for index, request in enumerate(requests):
            prepared.jobs.extend(self._jobs_for(index, request))
        return prepared

    def _jobs_for(self, index: int, request: PruneRequest) -> list[ChunkJob]:
        context, cap = self.context_tokens, self.answer_cap
        overhead = self.engine.count_tokens(self._render(request.query, ""))
        budget = context - overhead - cap
        if budget < MIN_CHUNK_TOKENS:
            raise PromptTooLongError(
                f"the query and system prompt take {overhead} tokens and the answer {cap} of the model's {context}-token "
                f"context, leaving {budget} for the tool output (need {MIN_CHUNK_TOKENS}); shorten the query or raise "
                f"max_context_tokens")
        lines = split_lines(request.tool_output)
        whole = Chunk(1, tuple(lines))
        total = self.engine.count_tokens(self._shown(whole) if self.ranges else request.tool_output)
        if total <= budget:
            chunks, chunk_tokens = [whole], [total]
        else:
            shown = number_lines(lines).split("\n") if self.ranges else lines
            line_tokens = [n + 1 for n in self.engine.count_tokens_batch(shown)]  # +1: the newline
            # A line shown to the model must also fit in one answer, or the model could not copy it.
            line_cap = max(1, min(budget // 2, cap - ANSWER_MARGIN_TOKENS))
            chunks = split_into_chunks(lines, line_tokens, budget, overlap_lines=self.options.chunk_overlap_lines,
                                       count_tokens=self.engine.count_tokens, max_line_tokens=line_cap)
            chunk_tokens = [self.engine.count_tokens(self._shown(c)) for c in chunks]
        jobs: list[ChunkJob] = []
        for chunk, tokens in zip(chunks, chunk_tokens):
            jobs.extend(self._fit(index, request.query, chunk, tokens, context, cap))
        return jobs

    def _fit(self, index: int, query: str, chunk: Chunk, tokens: int, context: int, cap: int) -> list[ChunkJob]:
        """One job for the chunk, or (when the exact prompt is over the context) jobs for its halves.

        Chunks are planned from per-line counts; the rendered prompt can tokenise a little longer,
        so each prompt is checked (exactly where a tokenizer exists).
        """
        prompt = self._render(query, self._shown(chunk))
        max_new = min(cap, tokens + ANSWER_MARGIN_TOKENS)
        if len(chunk.lines) > 1 and self.engine.count_tokens(prompt) + max_new > context:
            half = len(chunk.lines) // 2
            parts = [Chunk(chunk.first_line, chunk.lines[:half]), Chunk(chunk.first_line + half, chunk.lines[half:])]
            return [job for part in parts
                    for job in self._fit(index, query, part, self.engine.count_tokens(self._shown(part)), context, cap)]
        return [ChunkJob(index, chunk.first_line, chunk.lines, prompt, max_new, self.family.stop)]

    def assemble(self, prepared: PreparedBatch, generations: Sequence[Generation],
                 render_options: RenderOptions = RenderOptions()) -> list[PruneResult]:
        if len(generations) != len(prepared.jobs):
            raise ValueError(f"got {len(generations)} generations for {len(prepared.jobs)} jobs")
        kept: list[set[int]] = [set() for _ in prepared.requests]
        stats = [{"input_tokens": 0, "output_tokens": 0, "unmatched_lines": 0, "chunks": 0, "cut": 0,
                  "unparsed": 0, "answer_lines": 0, "fuzzy_lines": 0} for _ in prepared.requests]
        for job, generation in zip(prepared.jobs, generations):
            s = stats[job.request_index]
            s["input_tokens"] += generation.input_tokens
            s["output_tokens"] += generation.output_tokens
            s["chunks"] += 1
            if self.ranges:  # numbers of the shown lines; "lines" written are the range items
                answer = parse_ranges(generation.text, job.first_line, job.first_line + len(job.lines) - 1)
                kept[job.request_index].update(answer.line_numbers)
                s["unmatched_lines"] += answer.malformed + answer.out_of_range
                s["cut"] += 0 if answer.complete else 1
                s["unparsed"] += 0 if answer.complete and answer.tagged else 1
                s["answer_lines"] += answer.items
                continue
            parsed = parse_target(generation.text)
            mapping = map_lines_to_spans(parsed.lines, job.lines, threshold=self.options.fuzzy_threshold,
                                         first_line=job.first_line, partial_last=not parsed.complete)
            kept[job.request_index].update(mapping.line_numbers)
            s["unmatched_lines"] += mapping.unmatched
            s["cut"] += 0 if parsed.complete else 1
            # Parsed: the contract's tags, opened and closed (or the legacy JSON); bare text or a
            # reply cut at the token limit is mapped all the same, but counted here.
            s["unparsed"] += 0 if parsed.complete and parsed.format != "bare" else 1
            s["answer_lines"] += sum(1 for line in parsed.lines if line.strip())
            s["fuzzy_lines"] += mapping.fuzzy
        results = []
        for request, lines, s in zip(prepared.requests, kept, stats):
            notes = []
            if s["chunks"] > 1:
                notes.append(f"chunked into {s['chunks']}")
            if s["cut"]:
                notes.append(f"{s['cut']} answer(s) cut at the token limit")
            results.append(make_result(
                request.tool_output, spans_from_line_numbers(lines), model=self.name, render_options=render_options,
                reason="; ".join(notes) or None, input_tokens=s["input_tokens"], output_tokens=s["output_tokens"],
                unmatched_lines=s["unmatched_lines"], answers=s["chunks"], unparsed_answers=s["unparsed"],
                answer_lines=s["answer_lines"], fuzzy_lines=s["fuzzy_lines"]))
        return results

    def _prune_batch(self, requests: Sequence[PruneRequest], render_options: RenderOptions) -> list[PruneResult]:
        prepared = self.prepare(requests)
        prepared.jobs, generations = self._generate(prepared, prepared.jobs)
        return self.assemble(prepared, generations, render_options)

    def _generate(self, prepared: PreparedBatch, jobs: list[ChunkJob],
                  depth: int = 0) -> tuple[list[ChunkJob], list[Generation]]:
        """Generate all jobs; chunks the engine finds over its context are halved and sent again.

        Only engines that count tokens by estimate (a server without a local tokenizer) can overflow;
        the jobs come back with the generations because split chunks replace the rejected ones.
        """
        try:
            return jobs, list(self.engine.generate(jobs))
        except ContextOverflowError as error:
            if depth >= MAX_RESPLITS or len(error.generations) != len(jobs):
                raise
            done_jobs, done = [], []
            retry: list[ChunkJob] = []
            for job, generation in zip(jobs, error.generations):
                if generation is not None:
                    done_jobs.append(job)
                    done.append(generation)
                elif len(job.lines) < 2:
                    raise
                else:
                    retry.extend(self._halves(prepared.requests[job.request_index].query, job))
            log.info("%d chunk(s) over the engine's context; retrying as %d smaller ones",
                     len(jobs) - len(done_jobs), len(retry))
            more_jobs, more = self._generate(prepared, retry, depth + 1)
            return done_jobs + more_jobs, done + more

    def _halves(self, query: str, job: ChunkJob) -> list[ChunkJob]:
        half = len(job.lines) // 2
        parts = [Chunk(job.first_line, job.lines[:half]), Chunk(job.first_line + half, job.lines[half:])]
        return [new for part in parts for new in self._fit(job.request_index, query, part,
                                                          self.engine.count_tokens(self._shown(part)),
                                                          self.context_tokens, self.answer_cap)]

    def close(self) -> None:
        self.engine.close()
