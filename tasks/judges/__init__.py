"""Judges: one Protocol, a local and an OpenAI-compatible implementation, one cache."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ragspan.tasks.judges.base import Judge, JudgeSpec

if TYPE_CHECKING:
    from ragspan.tasks.config import JudgeParams


def make_judge(spec: JudgeSpec) -> Judge:
    """Build the judge a spec names (inside a task: clients are not task inputs)."""
    if spec.kind == "local":
        from ragspan.tasks.judges.local import LocalJudge

        return LocalJudge(spec)
    if spec.kind == "openai":
        from ragspan.tasks.judges.openai_judge import OpenAIJudge

        return OpenAIJudge(spec)
    if spec.kind == "cascade":
        from ragspan.tasks.judges.cascade import CascadeJudge

        return CascadeJudge(spec)
    raise ValueError(f"unknown judge kind {spec.kind!r}")


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
