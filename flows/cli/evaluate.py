"""`ragspan evaluate` and `ragspan validate`: check the inputs once, then run the flow."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
from pathlib import Path

from ragspan.flows.cli import params_path
from ragspan.tasks.config import Settings, load_settings


def _judge_overrides(args: argparse.Namespace) -> dict[str, str]:
    """CLI flags that mirror params.yaml judge keys."""
    given = {"judge.kind": getattr(args, "judge", None), "judge.model": getattr(args, "model", None),
             "judge.base_url": getattr(args, "base_url", None)}
    return {k: v for k, v in given.items() if v}


def _run_of(args: argparse.Namespace, settings: Settings) -> tuple[str, str]:
    data = args.data or settings.data.dir
    run = args.run or (settings.data.runs[0] if settings.data.runs else None)
    if run is None:
        raise SystemExit("error: no --run given and params.yaml lists no data.runs")
    return data, run


def cmd_validate(args: argparse.Namespace) -> int:
    from ragspan.tasks.io.load import checked_workspace

    settings = load_settings(params_path(args.params))
    ws = checked_workspace(args.data or settings.data.dir, args.run, settings)
    summary = {
        "data": str(ws.data_dir), "run": args.run, "documents": len(ws.corpus), "chunks": len(ws.chunks),
        "questions": len(ws.questions), "answers": len(ws.answers), "retrieved": len(ws.retrieved),
        "answers_with_own_claims": int(ws.answers["claims"].notna().sum()) if len(ws.answers) else 0,
    }
    print(json.dumps(summary, indent=2) if args.json else
          "ok: " + ", ".join(f"{k}={v}" for k, v in summary.items() if v is not None))
    return 0


def _without_heartbeat():
    """A CLI run blocks until its flow ends, so Prefect's flow-run heartbeat (zombie
    detection for workers) adds nothing but ~1 s joining its thread at the end (docs/stack.md).
    Off unless PREFECT_FLOWS_HEARTBEAT_FREQUENCY is set; served deployments keep it."""
    if "PREFECT_FLOWS_HEARTBEAT_FREQUENCY" in os.environ:
        return contextlib.nullcontext()
    from prefect.settings import PREFECT_FLOWS_HEARTBEAT_FREQUENCY, temporary_settings

    return temporary_settings({PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None})


def cmd_evaluate(args: argparse.Namespace) -> int:
    from ragspan.flows import progress
    from ragspan.flows.evaluate import evaluate
    from ragspan.flows.runners import task_runner
    from ragspan.tasks.io.load import checked_workspace, hand_over
    from ragspan.tasks.reporting.report import taxonomy_text

    overrides = _judge_overrides(args)
    settings = load_settings(params_path(args.params), overrides)  # parsed once; the flow reuses it
    data, run = _run_of(args, settings)
    out = args.out or str(Path("results") / run)
    ws = checked_workspace(data, run, settings)  # a bad input stops here, before any flow or judge call
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
    hand_over(ws, settings)  # the flow's load step takes it instead of loading again
    shard_size = max(1, settings.pipeline.shard_size)
    mode = args.progress or ("none" if args.quiet else "auto")
    reporter = progress.make(mode)
    with progress.activate(reporter):
        reporter.start(run, len(ws.answers), -(-len(ws.answers) // shard_size))
        runner = task_runner(args.task_runner, settings.pipeline.shard_concurrency, args.dask_address)
        with _without_heartbeat():
            metrics = evaluate.with_options(task_runner=runner)(
                data_dir=data, run=run, out_dir=out, params_path=params_path(args.params), overrides=overrides,
                compare_to=args.compare_to)
        reporter.done(metrics["claims"], {k: v["count"] for k, v in metrics["labels"].items()})
    if args.json:
        print(json.dumps({k: metrics[k] for k in ("run", "claims", "judged", "unjudged", "labels")}))
        return 0
    if not args.quiet:
        print(taxonomy_text(metrics))
        states = metrics["judge"]["task_states"]
        print("tasks: " + ("; ".join(f"{n} " + ", ".join(f"{c} {s}" for s, c in sorted(v.items()))
                                     for n, v in states.items()) or "none ran"))
        print(f"answers reused from the answer store: {metrics['judge'].get('answers_reused', 0)} of "
              f"{len(ws.answers)}")
        print(f"judge calls: {metrics['judge']['calls']} · results: {out}/ "
              f"(report.html, summary.md, taxonomy.png)")
    return 0


def register(sub) -> None:
    ev = sub.add_parser("evaluate", help="diagnose every claim of one run")
    ev.add_argument("--data", help="data directory (default: params data.dir)")
    ev.add_argument("--run", help="run name: DATA/runs/NAME.jsonl (default: first of params data.runs)")
    ev.add_argument("--out", help="results directory (default: results/NAME)")
    ev.add_argument("--judge", choices=["local", "openai", "cascade"],
                    help="override params judge.kind (cascade: local first, the LLM only for uncertain claims)")
    ev.add_argument("--model", help="override params judge.model (openai judge)")
    ev.add_argument("--base-url", help="override params judge.base_url (openai judge)")
    ev.add_argument("--compare-to", metavar="JSON",
                    help="a `ragspan compare --format json` file: the report shows its deltas")
    ev.add_argument("--dry-run", action="store_true",
                    help="validate, print how many judge calls the run would make, and stop")
    ev.add_argument("--params", help="parameters file (default: ./params.yaml if present)")
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
    va.add_argument("--data", help="data directory (default: params data.dir)")
    va.add_argument("--run", help="also check DATA/runs/NAME.jsonl")
    va.add_argument("--params")
    va.add_argument("--json", action="store_true")
    va.set_defaults(func=cmd_validate)

