"""`ragspan judge check`: can this OpenAI-compatible endpoint serve as the judge, and how?

Checks, in order, each with what it measured:

1. reachable — `GET /models` answers (a server without it is still usable);
2. the model is listed there;
3. which structured-output modes work (output_modes.MODES, each tried once on a
   built-in example, nothing cached) — the first that gives a schema-valid verdict is
   the one to use, and it is remembered for later runs like a negotiated one;
4. one decomposition and one verdict on the built-in example in that mode, with their
   latency and tokens;
5. optionally (a workspace and run given) the calls, tokens, time and cost a run would take.

The endpoint can serve as a judge when a mode works and both example calls return valid
output; `ok` is False otherwise (the CLI exits 1).
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from ragspan.tasks.judges.base import JudgeFailure, JudgeSpec, Verdict
from ragspan.tasks.judges.output_modes import MODES

EXAMPLE_QUESTION = "How long are backups kept?"
EXAMPLE_ANSWER = "Backups run every night at 02:00 UTC. They are kept for 7 days."
EXAMPLE_CLAIM = "Backups are kept for 7 days."
EXAMPLE_PASSAGES = ("Backups run every night at 02:00 UTC and are kept for 7 days.",
                    "Compute instances are billed per second, with a minimum charge of 60 seconds.")
EXAMPLE_EXPECTED = ("supported", "unsupported")


@dataclass
class Probe:
    ok: bool
    detail: str = ""
    latency_s: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0


@dataclass
class CheckReport:
    endpoint: str
    model: str
    reachable: bool = False
    models_listed: list[str] | None = None  # None: the server has no usable /models
    modes: dict[str, Probe] = field(default_factory=dict)
    best_mode: str | None = None
    decomposition: Probe | None = None
    verdict: Probe | None = None
    estimate: dict[str, Any] | None = None
    problems: list[str] = field(default_factory=list)

    @property
    def model_listed(self) -> bool | None:
        return None if self.models_listed is None else self.model in self.models_listed

    @property
    def ok(self) -> bool:
        return bool(self.best_mode and self.decomposition and self.decomposition.ok
                    and self.verdict and self.verdict.ok)

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out.update(ok=self.ok, model_listed=self.model_listed)
        return out


def _judge(spec: JudgeSpec, mode: str):
    from ragspan.tasks.judges.openai_judge import OpenAIJudge

    options = dict(spec.options) | {"response_format": mode, "max_retries": "0", "max_rejections": "0",
                                    "max_concurrency": "1"}
    return OpenAIJudge(replace(spec, options=tuple(sorted(options.items()))), cache=False)


def _timed(judge, fn) -> tuple[Any, Probe]:
    before = judge.stats.model_copy()
    t0 = time.perf_counter()
    value = fn()
    probe = Probe(ok=True, latency_s=round(time.perf_counter() - t0, 3),
                  prompt_tokens=judge.stats.prompt_tokens - before.prompt_tokens,
                  completion_tokens=judge.stats.completion_tokens - before.completion_tokens)
    return value, probe


def _listed_models(spec: JudgeSpec, api_key: str, timeout: float) -> tuple[bool, list[str] | None, str]:
    """(reachable, model ids or None, problem)."""
    import httpx

    try:
        r = httpx.get(spec.base_url.rstrip("/") + "/models", headers={"Authorization": f"Bearer {api_key}"},
                      timeout=timeout)
    except httpx.HTTPError as e:
        return False, None, f"cannot reach {spec.base_url}: {type(e).__name__}"
    if r.status_code in (401, 403):
        return True, None, f"GET /models answered HTTP {r.status_code}: check the API key"
    if r.status_code != 200:
        return True, None, ""
    try:
        return True, sorted(str(m.get("id")) for m in r.json().get("data", []) if isinstance(m, dict)), ""
    except ValueError:
        return True, None, ""


def check_endpoint(spec: JudgeSpec, timeout: float = 60.0) -> CheckReport:
    """Run checks 1–4 against the endpoint of an openai spec."""
    from ragspan.tasks.judges.openai_options import OpenAIOptions, api_key_for

    report = CheckReport(endpoint=spec.base_url, model=spec.model)
    key = api_key_for(OpenAIOptions.from_spec(spec), spec.base_url) or ""
    report.reachable, report.models_listed, problem = _listed_models(spec, key, min(timeout, 15.0))
    if problem:
        report.problems.append(problem)
    if not report.reachable:
        return report
    if report.model_listed is False:
        report.problems.append(f"model {spec.model!r} is not among the listed models "
                               f"({', '.join(report.models_listed or []) or 'none'})")
    judge_log = logging.getLogger("ragspan.judge")
    level = judge_log.level
    judge_log.setLevel(logging.ERROR)  # the probes' own mode announcements are noise here
    try:
        for mode in MODES:
            judge = _judge(spec, mode)
            try:
                out, probe = _timed(judge, lambda j=judge: j.judge(EXAMPLE_CLAIM, list(EXAMPLE_PASSAGES),
                                                                    EXAMPLE_QUESTION))
            finally:
                judge.close()
            # A wrong quote is the model's mistake, not the mode's: the server took the mode and
            # answered in the schema (small models do this; ragspan drops such verdicts).
            failed = [v for v in out if isinstance(v, JudgeFailure) and v.kind != "invalid_quote"]
            wrong = [v for v in out if isinstance(v, JudgeFailure) and v.kind == "invalid_quote"]
            if failed:
                # the hint after " — " is about forcing a mode, which is what this probe does
                probe = replace(probe, ok=False,
                                detail=f"{failed[0].kind}: {failed[0].detail.split(' — ')[0]}"[:200])
            else:
                got = tuple(v.verdict if isinstance(v, Verdict) else "invalid quote" for v in out)
                probe = replace(probe, detail="verdicts " + ", ".join(got)
                                + ("" if got == EXAMPLE_EXPECTED else f" (expected {', '.join(EXAMPLE_EXPECTED)})")
                                + (f"; {len(wrong)} quote(s) not in the passage even after a re-ask" if wrong else ""))
            report.modes[mode] = probe
            if probe.ok:
                report.best_mode = mode
                report.verdict = probe
                break
        if report.best_mode is None:
            report.problems.append("no structured-output mode gave a valid verdict")
            return report
        judge = _judge(spec, report.best_mode)
        try:
            claims, probe = _timed(judge, lambda: judge.decompose(EXAMPLE_ANSWER, EXAMPLE_QUESTION))
        finally:
            judge.close()
        if isinstance(claims, JudgeFailure):
            probe = replace(probe, ok=False, detail=f"{claims.kind}: {claims.detail}"[:300])
            report.problems.append(f"decomposition failed: {claims.kind}")
        else:
            located = sum(c.start is not None for c in claims)
            probe = replace(probe, detail=f"{len(claims)} claims, {located} located in the answer")
        report.decomposition = probe
    finally:
        judge_log.setLevel(level)
    _remember(spec, report.best_mode)
    return report


def _remember(spec: JudgeSpec, mode: str | None) -> None:
    """The mode that worked, stored like a negotiated one: the next run starts there."""
    if mode is None:
        return
    from ragspan.tasks.judges.cache import JudgeCache, endpoint_label

    with JudgeCache() as cache:
        cache.remember_output_mode(endpoint_label(spec.base_url), spec.model, mode, "found by `ragspan judge check`")


def run_estimate(report: CheckReport, calls: dict[str, Any], concurrency: int, price_in: float,
                 price_out: float) -> dict[str, Any]:
    """Calls, tokens, wall time and cost of a run, from its call counts and the example's
    measured latency and tokens per call (an order of magnitude: real passages are longer)."""
    d, v = report.decomposition, report.verdict
    assert d is not None and v is not None
    n_dec = int(calls["decompose_calls"])
    n_ext = int(calls["extract_calls"]) + int(calls["corpus_search_calls_at_most"])
    prompt = n_dec * d.prompt_tokens + n_ext * v.prompt_tokens
    completion = n_dec * d.completion_tokens + n_ext * v.completion_tokens
    seconds = (n_dec * d.latency_s + n_ext * v.latency_s) / max(1, concurrency)
    cost = round(prompt / 1000 * price_in + completion / 1000 * price_out, 4) if (price_in or price_out) else None
    return {"calls_at_most": n_dec + n_ext, "decompose_calls": n_dec, "extract_calls_at_most": n_ext,
            "prompt_tokens": prompt, "completion_tokens": completion, "minutes": round(seconds / 60, 1),
            "cost": cost}


def suggested_settings(report: CheckReport) -> tuple[str, str]:
    """(the CLI flags, the params.yaml lines) to use this endpoint as the judge."""
    flags = f"--judge openai --model {report.model} --base-url {report.endpoint}"
    lines = ["judge:", "  kind: openai", f"  model: {report.model}", f"  base_url: {report.endpoint}"]
    if report.best_mode and report.best_mode != MODES[0]:
        lines.append(f"  response_format: {report.best_mode}  # or auto: negotiated and remembered")
    return flags, "\n".join(lines)
