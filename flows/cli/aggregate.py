"""`ragspan aggregate`: the cross-run report (tasks/reporting/aggregate.py), the last DVC stage."""

from __future__ import annotations

import argparse
from pathlib import Path

from ragspan.flows.evaluation import params_path


def cmd_aggregate(args: argparse.Namespace) -> int:
    from ragspan.tasks.config import load_settings
    from ragspan.tasks.reporting.aggregate import aggregate_markdown, write_aggregate

    runs = args.runs or load_settings(params_path(args.params)).data.runs
    metrics = write_aggregate(Path(args.results), list(runs), Path(args.out))
    if not args.quiet:
        print(aggregate_markdown(metrics), end="")
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser("aggregate", help="all evaluated runs side by side (reports/)")
    p.add_argument("runs", nargs="*", help="run names (default: params data.runs)")
    p.add_argument("--results", default="results", help="where results/<run>/ live (default: results)")
    p.add_argument("--out", default="reports", help="output directory (default: reports)")
    p.add_argument("--params", help="parameters file (default: ./params.yaml if present)")
    p.add_argument("--quiet", action="store_true", help="print nothing on success")
    p.set_defaults(func=cmd_aggregate)
