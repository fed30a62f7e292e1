"""`ragspan evaluate` and `ragspan validate`: check the inputs once, then run the flow.

`ragspan evaluate` prepares its run as the Python API does (`prepare_run`,
flows/evaluation.py: params parsed once, run chosen, inputs validated) and hands the
parsed settings to the flow (`run_evaluate_flow`)."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from ragspan.flows.evaluation import params_path

if TYPE_CHECKING:
    from ragspan.flows.evaluation import PreparedRun


def _judge_overrides(args: argparse.Namespace) -> dict[str, str]:
    """CLI flags that mirror params.yaml judge keys."""
    given = {"judge.kind": getattr(args, "judge", None), "judge.model": getattr(args, "model", None),
             "judge.base_url": getattr(args, "base_url", None)}
    return {k: v for k, v in given.items() if v}


def cmd_validate(args: argparse.Namespace) -> int:
    from ragspan.tasks.config import load_settings
    from ragspan.tasks.errors import UsageError
    from ragspan.tasks.inputs.load import checked_workspace, run_names

    settings = load_settings(params_path(args.params))
    data = args.data or settings.data.dir
    runs = [args.run] if args.run else run_names(data)
    summaries = []
    for run in runs or [None]:  # no run file: the corpus, chunks and questions alone
        ws = checked_workspace(data, run, settings)
        summaries.append({
            "data": str(ws.data_dir), "run": run, "documents": len(ws.corpus), "chunks": len(ws.chunks),
            "questions": len(ws.questions), "answers": len(ws.answers), "retrieved": len(ws.retrieved),
            "answers_with_own_claims": int(ws.answers["claims"].notna().sum()) if len(ws.answers) else 0,
        })
    if args.json:
        print(json.dumps(summaries[0] if args.run else summaries, indent=2))
    else:
        for summary in summaries:
            print("ok: " + ", ".join(f"{k}={v}" for k, v in summary.items() if v is not None))
        if not runs:
            print(f"note: {Path(data) / 'runs'} holds no run file (runs/<name>.jsonl); only the corpus, "
                  "chunks and questions were checked")
    if not runs and args.strict:
        raise UsageError(f"{Path(data) / 'runs'}: no run files (runs/<name>.jsonl)")
    return 0


def cmd_evaluate(args: argparse.Namespace) -> int:
    from ragspan.flows.evaluation import prepare_run

    verbose = Verbose(args.verbose)
    with verbose.timed("validate inputs"):  # a bad input stops here, before any flow or judge call
        prepared = prepare_run(args.data, args.run, args.out, params=args.params, overrides=_judge_overrides(args))
    settings, ws, out = prepared.settings, prepared.workspace, prepared.out_dir
    verbose.inputs_cache()
    if args.dry_run:
        from ragspan.tasks.tools.estimate import judge_call_estimate

        estimate = judge_call_estimate(ws.answers, ws.retrieved, ws.questions, settings)
        print(json.dumps(estimate) if args.json else
              "dry run (no judge call made): " + ", ".join(f"{k}={v}" for k, v in estimate.items()))
        return 0
    if args.task_runner == "dask" and args.dask_address:
        from ragspan.flows.runners import check_workers, results_dir
        from ragspan.tasks.config import state_dir

        check_workers(args.dask_address, state_dir(), results_dir())  # before any shard is submitted
    from ragspan.flows.evaluation import server_in_use, settle_api

    with verbose.timed("find or start the Prefect server"):
        url, how = settle_api(log=lambda m: print(m, file=sys.stderr))
    verbose.server(url, how)
    with server_in_use(how):
        metrics = _run_flow(args, prepared, verbose, url)
    if args.json:
        print(json.dumps({k: metrics[k] for k in ("run", "claims", "judged", "unjudged", "labels")}))
        return 0
    if not args.quiet:
        from ragspan.tasks.reporting.report import taxonomy_text

        print(taxonomy_text(metrics))
        if metrics.get("rebuild"):  # after an index rebuild: the claims it moved (summary.md lists them)
            from ragspan.tasks.reporting.rebuild import rebuild_text

            print(rebuild_text(metrics["rebuild"]))
        states = metrics["judge"]["task_states"]
        print("tasks: " + ("; ".join(f"{n} " + ", ".join(f"{c} {s}" for s, c in sorted(v.items()))
                                     for n, v in states.items()) or "none ran"))
        print(f"answers reused from the answer store: {metrics['judge'].get('answers_reused', 0)} of "
              f"{len(ws.answers)}")
        print(f"judge calls: {metrics['judge']['calls']} · results: {out}/ "
              f"(report.html, summary.md, taxonomy.png)")
    verbose.report(metrics, len(ws.answers))
    return 0


def _run_flow(args: argparse.Namespace, prepared: PreparedRun, verbose: Verbose, api_url: str | None = None) -> dict:
    with verbose.timed("import the flow"):
        from ragspan.flows import progress
        from ragspan.flows.evaluation import run_evaluate_flow

    ws = prepared.workspace
    verbose.index_state(ws)
    shard_size = max(1, prepared.settings.pipeline.shard_size)
    mode = args.progress or ("none" if args.quiet else "auto")
    reporter = progress.make(mode)
    with progress.activate(reporter), verbose.step_timings(), verbose.timed("the evaluate flow"):
        reporter.start(prepared.run, len(ws.answers), -(-len(ws.answers) // shard_size))
        metrics = run_evaluate_flow(prepared.data_dir, prepared.run, prepared.out_dir, prepared.settings,
                                    api_url=api_url, runner=args.task_runner, dask_address=args.dask_address,
                                    compare_to=args.compare_to, quiet=not args.verbose)
        reporter.done(metrics["claims"], {k: v["count"] for k, v in metrics["labels"].items()})
    return metrics


class Verbose:
    """What `--verbose` adds to `ragspan evaluate` on stderr: where the time went (phases
    of the command, and every step task from RAGSPAN_TIMINGS, flows/ledger.py) and each
    cache decision: validated-inputs cache, search index, Prefect server, answer store,
    step cache (Cached task runs)."""

    def __init__(self, on: bool) -> None:
        self.on = on
        self.t0 = time.perf_counter()
        self.phases: list[tuple[str, float]] = []
        self.steps: list[dict] = []

    def say(self, line: str) -> None:
        if self.on:
            print(f"[verbose] {line}", file=sys.stderr, flush=True)

    @contextlib.contextmanager
    def timed(self, phase: str):
        start = time.perf_counter()
        try:
            yield
        finally:
            self.phases.append((phase, time.perf_counter() - start))

    def inputs_cache(self) -> None:
        from ragspan.tasks.inputs.load.workspace import LAST_LOAD

        self.say(LAST_LOAD.get("source", "validated-inputs cache: not used"))

    def index_state(self, ws) -> None:
        if not self.on:
            return
        from ragspan.tasks.state import store_path
        from ragspan.tasks.steps.corpus_search import CHUNKS_FILE, index_name

        key = index_name(ws)
        built = (store_path("indexes") / key / CHUNKS_FILE).exists()
        self.say(f"search index {key}: {'reused' if built else 'to be built'} ({len(ws.chunks)} chunks)")

    def server(self, url: str | None, how: str) -> None:
        self.say({"configured": f"Prefect server: {url} (configured)",
                  "reused": f"Prefect server: {url} (reused; `ragspan server stop` stops it)",
                  "started": f"Prefect server: {url} (started now, kept for later runs)",
                  }.get(how, "Prefect server: a temporary one inside this process "
                             "(RAGSPAN_PREFECT_SERVER=ephemeral or the local server failed)"))

    @contextlib.contextmanager
    def step_timings(self):
        """Collect the step tasks' timings through RAGSPAN_TIMINGS (a file the ledger appends
        to; a user's own file is kept and only its new lines are read)."""
        if not self.on:
            yield
            return
        own = os.environ.get("RAGSPAN_TIMINGS")
        fd, tmp = tempfile.mkstemp(prefix="ragspan-timings-", suffix=".jsonl")
        os.close(fd)
        path = Path(own) if own else Path(tmp)
        offset = path.stat().st_size if path.exists() else 0
        os.environ["RAGSPAN_TIMINGS"] = str(path)
        try:
            yield
        finally:
            if own:
                os.environ["RAGSPAN_TIMINGS"] = own
            else:
                os.environ.pop("RAGSPAN_TIMINGS", None)
            with contextlib.suppress(OSError), open(path, encoding="utf-8") as fh:
                fh.seek(offset)
                self.steps = [json.loads(line) for line in fh if line.strip()]
            Path(tmp).unlink(missing_ok=True)

    def report(self, metrics: dict, answers: int) -> None:
        if not self.on:
            return
        reused = metrics["judge"].get("answers_reused", 0)
        self.say(f"answer store: {reused} of {answers} answers reused, {answers - reused} evaluated")
        by_step: dict[str, dict] = {}
        for row in self.steps:
            agg = by_step.setdefault(row["step"], {"calls": 0, "seconds": 0.0, "states": {}})
            agg["calls"] += 1
            agg["seconds"] += row["seconds"]
            agg["states"][row["state"]] = agg["states"].get(row["state"], 0) + 1
        for step, agg in by_step.items():
            states = ", ".join(f"{n} {s}" for s, n in sorted(agg["states"].items()))
            cache = " (step cache hit)" if agg["states"].get("Cached") else ""
            self.say(f"step {step:<18} {agg['seconds']:7.2f} s  {states}{cache}")
        for phase, seconds in self.phases:
            self.say(f"phase {phase:<30} {seconds:7.2f} s")
        self.say(f"total in the command {time.perf_counter() - self.t0:7.2f} s "
                 "(+ Python start-up and imports before it)")


def register(sub) -> None:
    ev = sub.add_parser("evaluate", help="diagnose every claim of one run")
    ev.add_argument("--data", help="data directory (default: params data.dir, else data/sample)")
    ev.add_argument("--run", help="run name: DATA/runs/NAME.jsonl (default: the first of params data.runs "
                                  "when a params file lists them, else the only run file in DATA/runs)")
    ev.add_argument("--out", help="results directory (default: results/NAME)")
    ev.add_argument("--judge", choices=["local", "openai", "cascade"],
                    help="override params judge.kind (cascade: local first, the LLM only for uncertain claims)")
    ev.add_argument("--model", help="override params judge.model (openai judge)")
    ev.add_argument("--base-url", help="override params judge.base_url (openai judge)")
    ev.add_argument("--compare-to", metavar="JSON",
                    help="a `ragspan compare --format json` file: the report shows its deltas")
    ev.add_argument("--dry-run", action="store_true",
                    help="validate, print how many judge calls the run would make, and stop")
    ev.add_argument("--params", help="parameters file (default: ./params.yaml if present, else built-in defaults)")
    ev.add_argument("--task-runner", choices=["thread", "dask"], default="thread",
                    help="where shards run (default: a thread pool; see flows/runners.py)")
    ev.add_argument("--dask-address", help="with --task-runner dask: scheduler address (default: a local cluster)")
    ev.add_argument("--quiet", action="store_true", help="print nothing on success")
    ev.add_argument("--json", action="store_true", help="print the label counts as one JSON line")
    ev.add_argument("--progress", choices=["auto", "bar", "plain", "jsonl", "none"],
                    help="progress on stderr: bar (a terminal), plain (one line per shard), jsonl "
                         "(one JSON object per event, for CI logs) or none; default auto = bar on a "
                         "terminal, plain otherwise, none with --quiet")
    ev.set_defaults(func=cmd_evaluate)

    va = sub.add_parser("validate", help="check the inputs without judging")
    va.add_argument("--data", help="data directory (default: params data.dir, else data/sample)")
    va.add_argument("--run", help="check only DATA/runs/NAME.jsonl (default: every run file in DATA/runs)")
    va.add_argument("--params", help="parameters file (default: ./params.yaml if present, else built-in defaults)")
    va.add_argument("--json", action="store_true",
                    help="print the counts as JSON (one object with --run, else a list, one per run)")
    va.add_argument("--strict", action="store_true", help="fail (exit 2) when DATA/runs holds no run file")
    va.set_defaults(func=cmd_validate)
