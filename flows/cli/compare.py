"""`ragspan compare A B`: label-rate deltas, claim transitions and regressions between two
evaluations. The logic is in tasks/reporting/compare.py; the sides (results directories,
git revisions, DVC experiments) are found and loaded by tasks/reporting/compare_sides.py."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ragspan.tasks.reporting.compare_sides import compared, load_side


def cmd_compare(args: argparse.Namespace) -> int:
    from ragspan.tasks.reporting.compare import as_markdown, as_text
    from ragspan.tasks.reporting.gate import gate_markdown, gate_text, parse_rules

    rules = parse_rules(args.fail_on or [])  # a bad rule stops here, before anything is read
    repo = Path(args.repo or ".")
    a, b = load_side(args.a, args.run, repo), load_side(args.b, args.run, repo)
    result, gate = compared(a, b, rules, force=args.force, resamples=args.resamples, seed=args.seed,
                            level=args.level)
    if args.format == "json":
        print(json.dumps({**result, "gate": gate} if gate else result, indent=2, ensure_ascii=False, default=str))
    elif args.format == "markdown":
        sys.stdout.write(as_markdown(result, args.limit) + (gate_markdown(gate) if gate else ""))
    else:
        sys.stdout.write(as_text(result, args.limit))
    if gate is None:
        return 0
    sys.stderr.write(gate_text(gate))
    return 0 if gate["passed"] else 1


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "compare", help="compare two evaluations: rate deltas, claim transitions, regressions",
        description="A and B: results directories, git revisions or DVC experiment names.")
    p.add_argument("a", metavar="A", help="baseline: results dir, git revision or DVC experiment")
    p.add_argument("b", metavar="B", help="candidate: results dir, git revision or DVC experiment")
    p.add_argument("--run", help="run name for revisions/experiments (default: first of params data.runs)")
    p.add_argument("--format", choices=["table", "markdown", "json"], default="table",
                   help="output: a terminal table (default), Markdown (a PR comment) or JSON "
                        "(`ragspan evaluate --compare-to` reads it)")
    p.add_argument("--force", action="store_true", help="compare even if the question sets differ")
    p.add_argument("--resamples", type=int, default=2000, help="bootstrap resamples (default 2000)")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    p.add_argument("--level", type=float, default=0.95, help="confidence level (default 0.95)")
    p.add_argument("--limit", type=int, default=20, help="claims listed per section (table/markdown)")
    p.add_argument("--repo", help="git/DVC repository for revisions (default: current directory)")
    p.add_argument("--fail-on", action="append", metavar="RULES",
                   help="exit 1 when B is worse than A by these rules (comma-separated, repeatable): "
                        "LABEL:Npp (e.g. hallucination:2pp, any:5pp), significant[:LABEL], "
                        "correct-lost[:N], unsupported-chars:Npp, chunk-split:Npp|N; see docs/ci.md")
    p.set_defaults(func=cmd_compare)
