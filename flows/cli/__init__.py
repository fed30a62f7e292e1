"""The `ragspan` command line: the parser and `main`; each command lives in its own
module of this package (or flows/serve.py) exposing `register(subparsers)`.

Exit codes: 0 ok, 1 failure, 2 bad input or usage, 3 the output directory is being
written by another run — carried by the exceptions themselves (tasks/errors.py)."""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import sys
from pathlib import Path

from ragspan.flows.runtime import configure_prefect

DEFAULT_PARAMS = Path("params.yaml")
# Further subcommands, each module exposing `register(subparsers)` that adds its parsers
# with `set_defaults(func=...)`; the func returns the exit code.
_COMMAND_MODULES: tuple[str, ...] = (
    "ragspan.flows.cli.cache",
    "ragspan.flows.cli.init",
    "ragspan.flows.cli.compare",
    "ragspan.flows.serve",
    "ragspan.flows.cli.aggregate",
)


def _params_path(given: str | None) -> str | None:
    """--params, else ./params.yaml when present, else built-in defaults."""
    if given:
        return given
    return str(DEFAULT_PARAMS) if DEFAULT_PARAMS.exists() else None


def _resolve_run(args: argparse.Namespace) -> tuple[str, str]:
    from ragspan.tasks.config import load_settings

    settings = load_settings(_params_path(args.params))
    data = args.data or settings.data.dir
    run = args.run or (settings.data.runs[0] if settings.data.runs else None)
    if run is None:
        raise SystemExit("error: no --run given and params.yaml lists no data.runs")
    return data, run


def _judge_overrides(args: argparse.Namespace) -> dict[str, str]:
    """CLI flags that mirror params.yaml judge keys."""
    given = {"judge.kind": getattr(args, "judge", None), "judge.model": getattr(args, "model", None),
             "judge.base_url": getattr(args, "base_url", None)}
    return {k: v for k, v in given.items() if v}


def _checked_workspace(data: str | None, run: str | None, params: str | None):
    """Load and validate every input in this process, without Prefect: a bad input is
    reported as one line here, before a flow (or any judge call) starts."""
    from ragspan.tasks.config import load_settings
    from ragspan.tasks.io.load import load_workspace

    settings = load_settings(_params_path(params))
    return load_workspace(data or settings.data.dir, run, settings.chunking.size,
                          settings.chunking.overlap, settings.pipeline.default_context_k)


def cmd_validate(args: argparse.Namespace) -> int:
    ws = _checked_workspace(args.data, args.run, args.params)
    data = ws.data_dir
    summary = {
        "data": str(data), "run": args.run, "documents": len(ws.corpus), "chunks": len(ws.chunks),
        "questions": len(ws.questions), "answers": len(ws.answers), "retrieved": len(ws.retrieved),
        "answers_with_own_claims": int(ws.answers["claims"].notna().sum()) if len(ws.answers) else 0,
    }
    print(json.dumps(summary, indent=2) if args.json else
          "ok: " + ", ".join(f"{k}={v}" for k, v in summary.items() if v is not None))
    return 0


def _without_heartbeat():
    """A CLI run blocks until its flow ends, so Prefect's flow-run heartbeat (zombie
    detection for workers) adds nothing but ~1 s joining its thread at the end (STACK.md).
    Off unless PREFECT_FLOWS_HEARTBEAT_FREQUENCY is set; served deployments keep it."""
    import contextlib
    import os

    if "PREFECT_FLOWS_HEARTBEAT_FREQUENCY" in os.environ:
        return contextlib.nullcontext()
    from prefect.settings import PREFECT_FLOWS_HEARTBEAT_FREQUENCY, temporary_settings

    return temporary_settings({PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None})


def cmd_evaluate(args: argparse.Namespace) -> int:
    from ragspan.flows import progress
    from ragspan.flows.evaluate import evaluate
    from ragspan.flows.runners import task_runner
    from ragspan.tasks.config import load_settings
    from ragspan.tasks.reporting.report import taxonomy_text

    data, run = _resolve_run(args)
    out = args.out or str(Path("results") / run)
    ws = _checked_workspace(data, run, args.params)
    overrides = _judge_overrides(args)
    settings = load_settings(_params_path(args.params), overrides)
    if args.dry_run:
        from ragspan.tasks.tools.estimate import judge_call_estimate

        estimate = judge_call_estimate(ws.answers, ws.retrieved, ws.questions, settings)
        print(json.dumps(estimate) if args.json else
              "dry run (no judge call made): " + ", ".join(f"{k}={v}" for k, v in estimate.items()))
        return 0
    shard_size = max(1, settings.pipeline.shard_size)
    mode = args.progress or ("none" if args.quiet else "auto")
    reporter = progress.make(mode)
    with progress.activate(reporter):
        reporter.start(run, len(ws.answers), -(-len(ws.answers) // shard_size))
        runner = task_runner(args.task_runner, settings.pipeline.shard_concurrency, args.dask_address)
        with _without_heartbeat():
            metrics = evaluate.with_options(task_runner=runner)(
                data_dir=data, run=run, out_dir=out, params_path=_params_path(args.params), overrides=overrides,
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


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ragspan", description="Character-level diagnosis of RAG answers.")
    p.add_argument("--verbose", action="store_true", help="show Prefect logs and tracebacks")
    sub = p.add_subparsers(dest="command", required=True)

    ev = sub.add_parser("evaluate", help="diagnose every claim of one run")
    ev.add_argument("--data", help="data directory (default: params data.dir)")
    ev.add_argument("--run", help="run name: DATA/runs/NAME.jsonl (default: first of params data.runs)")
    ev.add_argument("--out", help="results directory (default: results/NAME)")
    ev.add_argument("--judge", choices=["local", "openai"], help="override params judge.kind")
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

    for module in _COMMAND_MODULES:
        importlib.import_module(module).register(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    configure_prefect()
    args = build_parser().parse_args(argv)
    if not args.verbose:
        # A bad input or judge failure is reported once, below, not as a Prefect traceback.
        for name in ("prefect.flow_runs", "prefect.task_runs", "prefect.engine"):
            logging.getLogger(name).setLevel(logging.CRITICAL)
    from ragspan.tasks.errors import RagspanError

    try:
        return args.func(args)
    except RagspanError as exc:  # every expected failure carries its own exit code
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
