"""Settings: `params.yaml` → one validated object passed down; paths and versions.

Configuration flows one way: the CLI or the API reads params.yaml, validates it here, and
passes `Settings` to the flow, which passes what each step needs as arguments. Secrets never live here (the OpenAI key is read from the
environment by the judge that needs it).
"""

from __future__ import annotations

import hashlib
import json
import os
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from ragspan.tasks.errors import ConfigError
from ragspan.tasks.state import state_dir

if TYPE_CHECKING:
    from ragspan.tasks.code_identity import Parts

RAGSPAN_VERSION = metadata.version("ragspan")
__all__ = ["state_dir"]  # re-exported: callers import it from here
# The format of the Parquet/JSON outputs; bump when a column changes meaning.
OUTPUT_SCHEMA_VERSION = "1"
TASKS_DIR = Path(__file__).resolve().parent


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class DataParams(_Strict):
    dir: str = "data/sample"
    runs: list[str] = Field(default_factory=lambda: ["baseline"])


class ChunkingParams(_Strict):
    size: int = Field(800, gt=0)
    overlap: int = Field(100, ge=0)

    @model_validator(mode="after")
    def _overlap_below_size(self) -> ChunkingParams:
        if self.overlap >= self.size:
            raise ValueError("chunking.overlap must be smaller than chunking.size")
        return self


class CascadeParams(_Strict):
    """judge.kind cascade: which claims the local judge hands to the LLM (docs/judges.md)."""

    # uncertain: the claim's best probability of support is within `band` of the threshold;
    # not_supported: every claim the local judge does not call supported
    route: Literal["uncertain", "not_supported"] = "uncertain"
    band: float | None = Field(None, ge=0, le=0.5)  # None: judge.uncertainty_band


class JudgeParams(_Strict):
    kind: Literal["local", "openai", "cascade"] = "local"
    # Min probability of support for a `supported` verdict to count. "auto": the judge's
    # own (the local judge's fitted decision threshold; 0.75 for an LLM's stated confidence).
    support_threshold: float | Literal["auto"] = "auto"
    # Labels resting on a probability within this distance of the threshold are `uncertain`.
    uncertainty_band: float = Field(0.1, ge=0, le=0.5)
    model: str = ""
    base_url: str = ""
    # openai judge only (docs/judges.md); the key itself is never in params
    api_key_env: str = ""  # "" → RAGSPAN_JUDGE_API_KEY, then OPENAI_API_KEY
    temperature: float = Field(0.0, ge=0, le=2)
    seed: int = 0  # < 0: not sent
    max_completion_tokens: int = Field(2048, gt=0)
    max_passages_per_call: int = Field(8, gt=0)
    # auto: the best structured-output mode the server takes, negotiated on the first
    # rejection and remembered per endpoint + model; or force one (docs/judges.md)
    response_format: Literal["auto", "json_schema", "json_object_schema", "json_object", "prompt"] = "auto"
    max_rejections: int = Field(3, ge=0)  # identical rejections in a row before a run stops calling; 0 = never
    max_concurrency: int = Field(4, ge=1)
    max_retries: int = Field(4, ge=0)
    timeout_s: float = Field(60.0, gt=0)
    backoff_base_s: float = Field(0.5, ge=0)
    backoff_max_s: float = Field(30.0, ge=0)
    retry_after_max_s: float = Field(120.0, ge=0)
    max_calls: int = Field(0, ge=0)  # budget per run, 0 = no limit
    max_tokens: int = Field(0, ge=0)  # budget: prompt+completion tokens per run, 0 = no limit
    price_per_1k_prompt: float = Field(0.0, ge=0)
    price_per_1k_completion: float = Field(0.0, ge=0)
    cache: bool = True
    cascade: CascadeParams = Field(default_factory=CascadeParams)


class SearchParams(_Strict):
    top_k: int = Field(5, ge=0)


class PipelineParams(_Strict):
    shard_size: int = Field(1000, gt=0)  # issue 7: fewer task runs; the answer store makes small shards unnecessary
    shard_concurrency: int = Field(2, ge=1)  # shards in flight on the default thread runner
    reuse_answers: bool = True  # serve unchanged answers from the answer store (tasks/reuse/answer_store.py)
    reuse_verdicts: bool = True  # reuse local-judge verdicts by content (tasks/judges/verdict_cache.py)
    judge_processes: int = Field(0, ge=0)  # local judge worker processes; 0 = one per core (at most 4), 1 = in-process
    default_context_k: int = Field(3, ge=0)


# Each local-judge worker keeps its own passage caches (~0.6 GB at 100k chunks), so "one per
# core" stops here unless pipeline.judge_processes asks for more.
DEFAULT_MAX_JUDGE_PROCESSES = 4


def judge_process_count(pipeline: PipelineParams) -> int:
    return pipeline.judge_processes or min(os.cpu_count() or 1, DEFAULT_MAX_JUDGE_PROCESSES)


class RagParams(_Strict):
    """How a scheduled/triggered run obtains answers (flows/watch.py, docs/operations.md)."""

    command: str = ""  # template that writes a run file; "" = runs come from events only
    index: str = "demo"  # index name of scheduled runs
    timeout: int = Field(1800, gt=0)  # seconds rag.command may take


class StateParams(_Strict):
    """Limits on the state dir's caches, applied after each run (tasks/state/_stores.py)."""

    max_size: str = "10GB"  # the ten caches together; "0" = no size limit
    max_age_days: float = Field(0.0, ge=0)  # entries unused this long are removed; 0 = no age limit

    @field_validator("max_size")
    @classmethod
    def _a_size(cls, v: str) -> str:
        from ragspan.tasks.state import parse_size

        parse_size(v)  # ValueError names the bad value
        return v


class ScheduleParams(_Strict):
    cron: str = ""  # "" = no schedule (`ragspan serve --cron` overrides)
    timezone: str = "UTC"


# Sections that decide *when* and *on what* ragspan runs, not what a judgement is: they
# stay out of the fingerprint so a new cron line does not invalidate every cache.
_OPERATIONAL = frozenset({"rag", "schedule", "state"})


class Settings(_Strict):
    data: DataParams = Field(default_factory=DataParams)
    chunking: ChunkingParams = Field(default_factory=ChunkingParams)
    judge: JudgeParams = Field(default_factory=JudgeParams)
    search: SearchParams = Field(default_factory=SearchParams)
    pipeline: PipelineParams = Field(default_factory=PipelineParams)
    rag: RagParams = Field(default_factory=RagParams)
    schedule: ScheduleParams = Field(default_factory=ScheduleParams)
    state: StateParams = Field(default_factory=StateParams)

    def fingerprint(self) -> str:
        """A short stable hash of every parameter that can change a result. `data` (where
        the inputs are and which run) is left out: the manifest identifies the data by its
        md5s, and the same parameters over two runs should hash alike."""
        blob = json.dumps(self.model_dump(mode="json", exclude=set(_OPERATIONAL) | {"data"}), sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


def load_settings(path: str | Path | None = None, overrides: dict | None = None) -> Settings:
    """Read params.yaml (or defaults when `path` is None) and validate it.

    Parsed once per process and file version: an unchanged file (same size and mtime) is
    not read again by another caller here (the watch flow reads its `rag:` and `schedule:`
    from the file it then evaluates with). The command and the API parse once anyway
    (`prepare_run`, flows/evaluation.py) and hand the result to the flow."""
    key: tuple = (None,)
    if path is not None:
        try:
            st = Path(path).stat()
            key = (str(Path(path).resolve()), st.st_mtime_ns, st.st_size)
        except OSError:
            key = (str(path), None, None)  # _parse_settings raises the ConfigError
    return _parse_settings(key, path, tuple(sorted((overrides or {}).items())))


@lru_cache(maxsize=16)
def _parse_settings(_key: tuple, path: str | Path | None, overrides: tuple[tuple[str, str], ...]) -> Settings:
    raw: dict = {}
    if path is not None:
        p = Path(path)
        try:
            raw = yaml.safe_load(p.read_text(encoding="utf-8")) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise ConfigError(f"{p}: cannot read parameters: {exc}") from exc
        if not isinstance(raw, dict):
            raise ConfigError(f"{p}: expected a mapping at the top level")
    for dotted, value in overrides:
        node = raw
        *parents, leaf = dotted.split(".")
        for key in parents:
            node = node.setdefault(key, {})
        node[leaf] = value
    try:
        return Settings.model_validate(raw)
    except Exception as exc:  # pydantic.ValidationError: re-raise with the file named
        raise ConfigError(f"{path or '<defaults>'}: invalid parameters: {exc}") from exc


# What each kind of cached value is computed by: the root modules whose code — they and
# every ragspan module they import, with the data files beside them (tasks/code_identity.py)
# — keys it. No list of paths kept by hand: a helper a step starts importing is in the key
# the moment it is imported. What computes no value is left out by room (`outside`): the
# walk never enters it, so editing it keeps the key (docs/architecture.md, "The cache-key rule").
#
# Rooms that compute no cached value, whoever imports them: where values are kept (the state
# room), how failures are named (the error tree), how the settings are read (their values
# are in every key on their own: spec, thresholds, params hash), how the code is hashed, how
# the Prefect side is supervised, and what the run prints (progress, the CLI).
KEEPS_OR_SHOWS: tuple[str, ...] = (
    "ragspan.tasks.state", "ragspan.tasks.errors", "ragspan.tasks.config", "ragspan.tasks.code_identity",
    "ragspan.tasks.supervision", "ragspan.flows.progress", "ragspan.flows.cli",
)
# - a shard's tables (every step's cache key, the answer store's context, kept verdicts):
#   the shard's chain of steps, which imports every step, judge and schema. The steps take
#   their input tables by content, so the code that read the inputs is not in this key.
EVALUATION_ROOTS: tuple[str, ...] = ("ragspan.flows.shard",)
EVALUATION_OUTSIDE: tuple[str, ...] = (*KEEPS_OR_SHOWS, "ragspan.tasks.inputs")
# - validated inputs: the loader;
LOADER_ROOTS: tuple[str, ...] = ("ragspan.tasks.inputs.load",)
# - a run's written results (the report snapshot): the evaluate flow and all it imports, the
#   loader included (the snapshot is keyed by the input files' bytes, not their tables).
RESULTS_ROOTS: tuple[str, ...] = ("ragspan.flows.evaluate",)
_OUTSIDE: dict[tuple[str, ...], tuple[str, ...]] = {
    EVALUATION_ROOTS: EVALUATION_OUTSIDE, LOADER_ROOTS: KEEPS_OR_SHOWS, RESULTS_ROOTS: KEEPS_OR_SHOWS,
}


def source_hash(roots: tuple[str, ...], parts: Parts | None = None) -> str:
    """sha256 (12 hex digits) over the ragspan version and every file `roots` depend on,
    the rooms their key leaves out aside (`parts`: another copy of ragspan's code, for
    tests; default the one running)."""
    from ragspan.tasks.code_identity import code_hash

    return code_hash(RAGSPAN_VERSION, roots, parts, _OUTSIDE.get(roots, KEEPS_OR_SHOWS)) if parts else _installed_hash(roots)


@lru_cache(maxsize=8)
def _installed_hash(roots: tuple[str, ...]) -> str:
    """source_hash of the code running: once per process (it does not change under it)."""
    from ragspan.tasks.code_identity import code_hash

    return code_hash(RAGSPAN_VERSION, roots, outside=_OUTSIDE.get(roots, KEEPS_OR_SHOWS))


@lru_cache(maxsize=1)
def code_version() -> str:
    """ragspan version + a hash of the code that computes a shard's tables (EVALUATION_ROOTS).

    Prefect's TASK_SOURCE only sees a task's own body; helpers, judges and schemas
    change results too, so every cached task also takes this as an input."""
    return f"{RAGSPAN_VERSION}+{source_hash(EVALUATION_ROOTS)}"


@lru_cache(maxsize=1)
def loader_version() -> str:
    """ragspan version + a hash of the code that reads and validates inputs."""
    return f"{RAGSPAN_VERSION}+{source_hash(LOADER_ROOTS)}"
