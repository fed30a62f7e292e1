"""Judges: one Protocol, a local and an OpenAI-compatible implementation, one cache.

A judge is built from two arguments: its `JudgeSpec` (what changes its answers: part of
every cache key) and its `JudgeRuntime` (where its caches are, how many processes it may
use: in no key). The evaluate flow makes both from the run's settings (`judge_spec`,
`judge_runtime`) and passes them down to the steps; nothing a judge needs is read from a
module variable the flow set (docs/decisions.md, "Settings reach steps and judges as
arguments")."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

# The judge caches' SQLite schemas are the judges': importing their modules registers how the
# state room opens them (ragspan cache stats / clear / prune, pruning after a run).
from ragspan.tasks.judges import cache as _judge_cache  # noqa: F401
from ragspan.tasks.judges import verdict_cache as _verdict_cache  # noqa: F401
from ragspan.tasks.judges.base import Judge, JudgeRuntime, JudgeSpec

if TYPE_CHECKING:
    from ragspan.tasks.config import JudgeParams, PipelineParams


def make_judge(spec: JudgeSpec, runtime: JudgeRuntime | None = None) -> Judge:
    """Build the judge a spec names (inside a task: clients are not task inputs), running
    as `runtime` says (None: a judge on its own, see JudgeRuntime)."""
    runtime = runtime or JudgeRuntime()
    if spec.kind == "local":
        from ragspan.tasks.judges.local import LocalJudge

        return LocalJudge(spec, runtime)
    if spec.kind == "openai":
        from ragspan.tasks.judges.openai_judge import OpenAIJudge

        return OpenAIJudge(spec, runtime=runtime)
    if spec.kind == "cascade":
        from ragspan.tasks.judges.cascade import CascadeJudge

        return CascadeJudge(spec, runtime)
    raise ValueError(f"unknown judge kind {spec.kind!r}")


def judge_runtime(pipeline: PipelineParams, state: Path, processes: int) -> JudgeRuntime:
    """The runtime of a run's judges: its caches under the state dir `state` (the verdict
    cache only with `pipeline.reuse_verdicts`), and `processes` local-judge worker
    processes (the flow decides: tasks.config.judge_process_count on its own threads, 1 on
    a Dask worker)."""
    from ragspan.tasks.judges.cache import CACHE_FILE as JUDGE_CACHE
    from ragspan.tasks.judges.verdict_cache import CACHE_FILE as VERDICTS

    return JudgeRuntime(verdict_cache=str(state / VERDICTS) if pipeline.reuse_verdicts else None,
                        judge_cache=str(state / JUDGE_CACHE), processes=max(1, processes))


# An LLM's stated confidence is not calibrated: ask for more of it than of a probability.
LLM_SUPPORT_THRESHOLD = 0.75


def support_threshold(params: JudgeParams) -> float:
    """The min probability of support that counts, for the judge params.yaml asks for."""
    if params.support_threshold != "auto":
        return float(params.support_threshold)
    if params.kind in ("local", "cascade"):  # a cascade's probabilities are the local judge's
        from ragspan.tasks.judges.local import local_support_threshold

        return local_support_threshold()
    return LLM_SUPPORT_THRESHOLD


def judge_spec(params: JudgeParams) -> JudgeSpec:
    """The spec for the judge params.yaml asks for (its identity in every cache key)."""
    from ragspan.tasks.judges.local import LOCAL_JUDGE_MODEL, local_judge_version

    local = JudgeSpec(kind="local", model=LOCAL_JUDGE_MODEL, prompt_version=local_judge_version())
    if params.kind == "local":
        return local
    from ragspan.tasks.judges.openai_options import openai_spec

    llm = openai_spec(params)
    if params.kind == "openai":
        return llm
    from ragspan.tasks.judges.cascade import cascade_spec

    band = params.uncertainty_band if params.cascade.band is None else params.cascade.band
    return cascade_spec(local, llm, params.cascade.route, band, support_threshold(params))
