"""The `ragspan` command line: the parser and `main`; each command lives in its own
module of this package (or flows/serve.py) exposing `register(subparsers)`.

Exit codes: 0 ok, 1 failure, 2 bad input or usage, 3 the output directory is being
written by another run — carried by the exceptions themselves (tasks/errors.py)."""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from pathlib import Path

from ragspan.flows.runtime import configure_prefect
from ragspan.tasks.errors import RagspanError

DEFAULT_PARAMS = Path("params.yaml")
# Further subcommands, each module exposing `register(subparsers)` that adds its parsers
# with `set_defaults(func=...)`; the func returns the exit code.
_COMMAND_MODULES: tuple[str, ...] = (
    "ragspan.flows.cli.evaluate",
    "ragspan.flows.cli.cache",
    "ragspan.flows.cli.init",
    "ragspan.flows.cli.compare",
    "ragspan.flows.cli.serve",
    "ragspan.flows.cli.aggregate",
    "ragspan.flows.cli.judge",
)


def params_path(given: str | None) -> str | None:
    """--params, else ./params.yaml when present, else built-in defaults."""
    if given:
        return given
    return str(DEFAULT_PARAMS) if DEFAULT_PARAMS.exists() else None


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ragspan", description="Character-level diagnosis of RAG answers.")
    p.add_argument("--verbose", action="store_true", help="show Prefect logs and tracebacks")
    sub = p.add_subparsers(dest="command", required=True)

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

    try:
        return args.func(args)
    except RagspanError as exc:  # every expected failure carries its own exit code
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
