"""The Python API (`import ragspan`, docs/api.md): evaluate a run, load results, compare two
evaluations, and the evaluate flow itself for use as a subflow. Wiring only: each function
does what its command does (`ragspan evaluate`, `ragspan compare --fail-on`) through the
same code, and returns Python objects instead of printing.

Prefect is imported inside the functions, never at module level: `evaluate` first sets
ragspan's Prefect defaults (state under `.ragspan/`, quiet logs; values the user set win)
and, like the command, uses the configured Prefect API or finds or starts the local
server. Inside a user's Prefect flow run it does neither: the evaluation is a subflow of
that run, on its API."""

from __future__ import annotations

import contextlib
import html
import os
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import pandas as pd

if TYPE_CHECKING:
    from ragspan.tasks.reporting.compare import Side

JudgeKind = Literal["local", "openai", "cascade"]
PathLike = str | os.PathLike[str]
# Keyword overrides that mirror the command's flags; any other `section__key=value` is
# the params.yaml key `section.key` (e.g. search__top_k=0).
_FLAG_KEYS = {"model": "judge.model", "base_url": "judge.base_url"}
# The tables of a results directory; each is validated by the model of tasks/core/schemas.py
# named after it (claims -> Claims, answer_spans -> AnswerSpans) when that model exists.
_TABLES = ("claims", "spans", "diagnoses", "answer_spans")
_OPTIONAL_TABLES = ("answer_spans",)  # written by newer versions only


@dataclass(frozen=True, repr=False, eq=False)  # DataFrames have no single truth value: no ==
class Results:
    """One evaluation as Python objects: the tables (validated by tasks/core/schemas.py),
    `metrics` (metrics.json: counts, rates over judged claims, 95% intervals), `manifest`
    (what the results were made from) and `run_facts` (run.json: judge calls, cache hits,
    task states)."""

    path: Path
    claims: pd.DataFrame
    spans: pd.DataFrame
    diagnoses: pd.DataFrame
    metrics: dict[str, Any]
    manifest: dict[str, Any]
    run_facts: dict[str, Any] = field(default_factory=dict)
    answer_spans: pd.DataFrame | None = None

    @property
    def run(self) -> str:
        return str(self.manifest.get("run") or self.path.name)

    @property
    def report_path(self) -> Path | None:
        """report.html of this evaluation (None if it was not written or was removed)."""
        page = self.path / "report.html"
        return page if page.is_file() else None

    def rates(self) -> pd.DataFrame:
        """One row per label: count, rate over judged claims and its 95% bootstrap interval
        (`unjudged` has a count, no rate)."""
        intervals = self.metrics.get("rate_ci95") or {}
        rows = [{"label": label, "count": v["count"], "rate": v["rate"],
                 "ci95_low": (intervals.get(label) or {}).get("low"),
                 "ci95_high": (intervals.get(label) or {}).get("high")}
                for label, v in (self.metrics.get("labels") or {}).items()]
        return pd.DataFrame(rows, columns=["label", "count", "rate", "ci95_low", "ci95_high"])

    def summary(self) -> str:
        """The taxonomy table `ragspan evaluate` prints."""
        from ragspan.tasks.reporting.report import taxonomy_text

        return f"run {self.run}: {self.path}\n" + taxonomy_text(self.metrics)

    def __repr__(self) -> str:
        return (f"Results(run={self.run!r}, path={str(self.path)!r}, claims={self.metrics.get('claims')}, "
                f"judged={self.metrics.get('judged')})")

    def _repr_html_(self) -> str:
        """What a notebook shows: the rates with their intervals, in one compact table."""
        def pct(x: object) -> str:
            return "—" if x is None or pd.isna(x) else f"{float(x):.1%}"

        body = "".join(
            f"<tr><td>{html.escape(str(r.label))}</td><td style='text-align:right'>{int(r.count)}</td>"
            f"<td style='text-align:right'>{pct(r.rate)}</td>"
            f"<td style='text-align:right'>{'' if pd.isna(r.ci95_low) else pct(r.ci95_low) + '–' + pct(r.ci95_high)}</td></tr>"
            for r in self.rates().itertuples())
        report = f" · <code>{html.escape(str(self.report_path))}</code>" if self.report_path else ""
        return (f"<div><b>ragspan</b> run <code>{html.escape(self.run)}</code>: "
                f"{self.metrics.get('claims')} claims, {self.metrics.get('judged')} judged{report}"
                "<table><thead><tr><th>label</th><th>count</th><th>rate</th><th>95% interval</th></tr></thead>"
                f"<tbody>{body}</tbody></table></div>")


@dataclass(frozen=True)
class Comparison:
    """Two evaluations compared: `details` is what `ragspan compare --format json` prints
    (rate deltas with intervals, transitions, claims that got worse, what kind of change);
    `gate` the verdict of the `fail_on` rules (None without rules)."""

    details: dict[str, Any]
    gate: dict[str, Any] | None = None

    @property
    def passed(self) -> bool:
        """False when a `fail_on` rule failed (what makes `ragspan compare --fail-on` exit 1)."""
        return self.gate is None or bool(self.gate["passed"])

    @property
    def failures(self) -> list[str]:
        return list(self.gate["failures"]) if self.gate else []

    def text(self, limit: int = 20) -> str:
        from ragspan.tasks.reporting.compare import as_text
        from ragspan.tasks.reporting.gate import gate_text

        return as_text(self.details, limit) + (gate_text(self.gate) if self.gate else "")

    def markdown(self, limit: int = 20) -> str:
        from ragspan.tasks.reporting.compare import as_markdown
        from ragspan.tasks.reporting.gate import gate_markdown

        return as_markdown(self.details, limit) + (gate_markdown(self.gate) if self.gate else "")

    def __str__(self) -> str:
        return self.text()


def load_results(path: PathLike) -> Results:
    """A results directory (what `ragspan evaluate --out` wrote) as `Results`; every table
    is validated against its pandera model (pandera.errors.SchemaError if one does not fit)."""
    from ragspan.tasks.core import schemas
    from ragspan.tasks.errors import SideError
    from ragspan.tasks.reporting.results_files import RESULT_KEYS, read_results

    directory = Path(path)
    if not (directory / "metrics.json").is_file():
        raise SideError(f"{directory}: no metrics.json (is this a ragspan results directory?)")
    view = read_results(directory)
    tables: dict[str, pd.DataFrame | None] = {}
    for name in _TABLES:
        file = directory / f"{name}.parquet"
        if not file.is_file():
            if name not in _OPTIONAL_TABLES:
                raise SideError(f"{file}: missing (`dvc pull` restores DVC outs)")
            tables[name] = None
            continue
        model = getattr(schemas, "".join(part.title() for part in name.split("_")), None)
        frame = pd.read_parquet(file)
        tables[name] = model.validate(frame) if model is not None else frame
    return Results(path=directory, claims=tables["claims"], spans=tables["spans"],
                   diagnoses=tables["diagnoses"], answer_spans=tables["answer_spans"],
                   metrics={k: view[k] for k in RESULT_KEYS if k in view},
                   manifest=view.get("manifest") or {}, run_facts=view.get("judge") or {})


def evaluate(data: PathLike, run: str | None = None, *, judge: JudgeKind = "local",
             params: PathLike | None = None, out: PathLike | None = None, **overrides: object) -> Results:
    """Evaluate one run of a data directory, as `ragspan evaluate --data DATA --run RUN`
    does, and return its results.

    `run`: DATA/runs/RUN.jsonl (None: the first of data.runs in the params file, else the
    data directory's only run file). `params`: a params.yaml (None: ./params.yaml when
    present, else the built-in defaults). `out`: the results directory (None:
    results/RUN). `overrides`: params keys as `section__key=value` (e.g.
    `search__top_k=0`), plus `model=` and `base_url=` for the openai judge. Inputs are
    validated before any flow starts: a bad row raises InputError naming file, row and
    field; a run already writing `out` raises OutputBusy."""
    from ragspan.tasks.supervision.runtime import configure_prefect

    configure_prefect()  # before Prefect is imported: its state and logging defaults
    from ragspan.flows.evaluation import prepare_run

    # as the command: params parsed once, the run chosen, a bad input stops here
    prepared = prepare_run(str(data), run, None if out is None else str(out),
                           params=None if params is None else str(params),
                           overrides={"judge.kind": judge, **params_overrides(overrides)}, run_option="run=")
    with _prefect_api() as (api_url, owns_process):
        from ragspan.flows.evaluation import run_evaluate_flow

        run_evaluate_flow(prepared.data_dir, prepared.run, prepared.out_dir, prepared.settings,
                          api_url=api_url, owns_process=owns_process)
    return load_results(prepared.out_dir)


def params_overrides(overrides: dict[str, object]) -> dict[str, str]:
    """Keyword overrides as the dotted params keys the command line passes (values as text)."""
    return {_FLAG_KEYS.get(key, key.replace("__", ".")): str(value) for key, value in overrides.items()}


def _inside_a_flow_run() -> bool:
    if "prefect" not in sys.modules:
        return False
    from prefect.context import FlowRunContext

    return FlowRunContext.get() is not None


@contextlib.contextmanager
def _prefect_api() -> Iterator[tuple[str | None, bool]]:
    """(the Prefect API to watch, whether this process is the run's own) for the run:
    `ragspan evaluate`'s server (the configured API, else the local server, started if need
    be); inside a user's flow run, that run's API (the evaluation is its subflow)."""
    from ragspan.flows.evaluation import current_api_url, server_in_use, settle_api

    if _inside_a_flow_run():
        yield current_api_url(), False
        return
    url, how = settle_api(log=lambda m: print(m, file=sys.stderr))
    with server_in_use(how):
        yield url, True


def compare(a: Results | PathLike, b: Results | PathLike, fail_on: str | Iterable[str] | None = None, *,
            run: str | None = None, force: bool = False, resamples: int = 2000, seed: int = 0,
            level: float = 0.95, repo: PathLike = ".") -> Comparison:
    """B against A, as `ragspan compare A B --fail-on RULES`: each side a `Results`, a
    results directory, a git revision or a DVC experiment (`run` picks the run for the
    last two). `fail_on`: rules such as "significant,hallucination:2pp,correct-lost:3"
    (docs/ci.md); a failed rule makes `passed` False. Over different questions it raises
    QuestionsDiffer unless `force`."""
    from ragspan.tasks.reporting.compare_sides import compared, load_side, side_from_dir
    from ragspan.tasks.reporting.gate import parse_rules

    rules = parse_rules([fail_on] if isinstance(fail_on, str) else list(fail_on or []))

    def side(x: Results | PathLike) -> Side:
        return side_from_dir(x.path) if isinstance(x, Results) else load_side(str(x), run, Path(repo))

    details, gate = compared(side(a), side(b), rules, force=force, resamples=resamples, seed=seed, level=level)
    return Comparison(details, gate)

