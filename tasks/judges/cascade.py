"""The cascade judge (`judge.kind: cascade`): the local judge decides every claim, and
only the claims it is unsure of go to the LLM judge.

    claim × its passages
    ├── local judge: a verdict and a probability of support per passage (always)
    ├── route? judge.cascade.route
    │   ├── uncertain (default): the claim's best probability of support is within
    │   │                        judge.cascade.band of the local threshold
    │   └── not_supported:       no passage is `supported` at the local threshold
    ├── routed ........ the LLM judge's verdicts replace the local ones (an LLM failure
    │                   is a failure: the claim is `unjudged`, counted, never the local
    │                   verdict in disguise)
    └── not routed .... the local verdicts stand; the LLM calls it would have taken are
                        counted as `calls_saved`

Every verdict records the judge that decided it (`decided_by`: local / openai).
Decomposition is the local judge's (deterministic and free; claims keep exact offsets).
The support threshold of a cascade is the local judge's: an LLM's `supported` verdict
is its decision, not a probability to compare with the local scale.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import ceil

from ragspan.tasks.judges.base import (
    AnswerItem,
    ClaimText,
    JudgeFailure,
    JudgeItem,
    JudgeRuntime,
    JudgeSpec,
    JudgeStats,
    Verdict,
    judge_items,
)


def cascade_spec(local: JudgeSpec, llm: JudgeSpec, route: str, band: float, threshold: float) -> JudgeSpec:
    """One spec naming both judges and the routing: all of it changes verdicts."""
    options = (*llm.options, ("cascade.band", repr(band)), ("cascade.local", local.prompt_version),
               ("cascade.route", route), ("cascade.threshold", repr(threshold)))
    return JudgeSpec(kind="cascade", model=llm.model, base_url=llm.base_url,
                     prompt_version=f"{local.prompt_version}+{llm.prompt_version}", options=options)


def parts_of(spec: JudgeSpec) -> tuple[JudgeSpec, JudgeSpec, str, float, float]:
    """(local spec, LLM spec, route, band, threshold) of a cascade spec."""
    from ragspan.tasks.judges.local import LOCAL_JUDGE_MODEL

    opts = dict(spec.options)
    llm_opts = tuple((k, v) for k, v in spec.options if not k.startswith("cascade."))
    local = JudgeSpec(kind="local", model=LOCAL_JUDGE_MODEL, prompt_version=opts["cascade.local"])
    llm = JudgeSpec(kind="openai", model=spec.model, base_url=spec.base_url,
                    prompt_version=spec.prompt_version.split("+", 1)[1], options=llm_opts)
    return local, llm, opts["cascade.route"], float(opts["cascade.band"]), float(opts["cascade.threshold"])


def needs_llm(verdicts: Sequence[Verdict | JudgeFailure], route: str, band: float, threshold: float) -> bool:
    """Should the LLM judge this claim, given the local verdicts on its passages?"""
    supports = [v.support for v in verdicts if isinstance(v, Verdict) and v.support is not None]
    if not supports:
        return False  # nothing the local judge could read (e.g. no words): the LLM cannot do better
    best = max(supports)
    if route == "not_supported":
        return not any(isinstance(v, Verdict) and v.verdict == "supported" and v.support is not None
                       and v.support >= threshold for v in verdicts)
    return abs(best - threshold) <= band


class CascadeJudge:
    """The Judge protocol over a local judge and an OpenAI-compatible one."""

    def __init__(self, spec: JudgeSpec, runtime: JudgeRuntime | None = None) -> None:
        from ragspan.tasks.judges.local import LocalJudge
        from ragspan.tasks.judges.openai_judge import OpenAIJudge, OpenAIOptions

        self.spec = spec
        local, llm, self.route, self.band, self.threshold = parts_of(spec)
        self.local = LocalJudge(local, runtime)  # both parts run as the cascade does
        self.llm = OpenAIJudge(llm, runtime=runtime)
        self._per_call = max(1, OpenAIOptions.from_spec(llm).max_passages_per_call)
        self._routing = JudgeStats()

    @property
    def stats(self) -> JudgeStats:
        """The LLM's calls, tokens and cache hits, and how many claims it was spared."""
        return self.llm.stats + self._routing

    def decompose(self, answer: str, question: str = "") -> list[ClaimText] | JudgeFailure:
        return self.local.decompose(answer, question)

    def decompose_many(self, items: Sequence[AnswerItem | tuple | str]) -> list[list[ClaimText] | JudgeFailure]:
        return self.local.decompose_many(items)

    def judge(self, claim: str, passages: Sequence[str], question: str = "") -> list[Verdict | JudgeFailure]:
        return self.judge_many([JudgeItem(claim, passages, question)])[0]

    def judge_many(self, items: Sequence[JudgeItem | tuple]) -> list[list[Verdict | JudgeFailure]]:
        items = judge_items(items)
        local = self.local.judge_many(items)
        routed = [i for i, verdicts in enumerate(local) if needs_llm(verdicts, self.route, self.band, self.threshold)]
        llm = self.llm.judge_many([items[i] for i in routed]) if routed else []
        out = [[_by(v, "local") for v in verdicts] for verdicts in local]
        for i, verdicts in zip(routed, llm, strict=True):
            out[i] = [_by(v, "openai") for v in verdicts]
        kept = set(range(len(items))) - set(routed)
        self._routing += JudgeStats(routed=len(routed), not_routed=len(kept),
                                    calls_saved=sum(ceil(len(items[i].passages) / self._per_call) for i in kept))
        return out

    def close(self) -> None:
        self.llm.close()


def _by(v: Verdict | JudgeFailure, judge: str) -> Verdict | JudgeFailure:
    return v.model_copy(update={"decided_by": judge})
