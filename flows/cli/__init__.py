"""The `ragspan` command line: the parser and `main`; each command lives in its own
module of this package (or flows/serve.py) exposing `register(subparsers)`.

Exit codes: 0 ok, 1 failure, 2 bad input or usage, 3 the output directory is being
written by another run, 4 no space left writing results — carried by the exceptions
themselves (tasks/errors.py), each printed as one `error: ` line (its traceback, too,
only with --verbose).

Start-up time: building the parser imports only the command modules, which import only
the standard library at module level (pandas, Prefect, pydantic are imported inside the
command that needs them), so `ragspan --help` and `--version` answer in ~0.1 s."""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
import traceback

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
    "ragspan.flows.cli.explain",
    "ragspan.flows.cli.import_",
)


VERBOSE_HELP = ("show step timings, cache decisions (answer store, step cache, inputs cache, "
                "search index, Prefect server) and Prefect's logs and tracebacks")


def version() -> str:
    from importlib import metadata

    return metadata.version("ragspan")


def add_verbose(p: argparse.ArgumentParser) -> None:
    """--verbose on a subcommand too (`ragspan evaluate --verbose`); SUPPRESS keeps the
    subparser from resetting a `ragspan --verbose evaluate` given before the command."""
    p.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help=VERBOSE_HELP)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ragspan", description="Character-level diagnosis of RAG answers.")
    p.add_argument("-v", "--verbose", action="store_true", help=VERBOSE_HELP)
    p.add_argument("--version", action="version", version=f"ragspan {version()}",
                   help="print ragspan's version and exit")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    for module in _COMMAND_MODULES:
        importlib.import_module(module).register(sub)
    for parser in _all_subparsers(p):
        if not any("--verbose" in a.option_strings for a in parser._actions):
            add_verbose(parser)
    return p


def _all_subparsers(p: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    found = []
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                found += [child, *_all_subparsers(child)]
    return found


# Prefect logs a flow's or task's exception with its traceback on these loggers.
_RUN_LOGGERS = ("prefect.flow_runs", "prefect.task_runs", "prefect.engine")


def quiet_prefect_tracebacks(quiet: bool) -> None:
    """Without --verbose an expected error is reported once, by `main`, not also as a
    Prefect log with a traceback. Setting the loggers' levels is not enough on its own:
    `import prefect` (later, inside the command) re-applies Prefect's logging config,
    which resets them; its environment overrides survive that, and reach Dask workers."""
    level = logging.CRITICAL if quiet else logging.NOTSET
    for name in _RUN_LOGGERS:
        logging.getLogger(name).setLevel(level)
        if name != "prefect.engine":  # the two that Prefect's config sets
            env = "PREFECT_LOGGING_LOGGERS_" + name.upper().replace(".", "_") + "_LEVEL"
            os.environ[env] = logging.getLevelName(level)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from ragspan.tasks.errors import RagspanError
    from ragspan.tasks.supervision.runtime import configure_prefect

    configure_prefect()
    quiet_prefect_tracebacks(not args.verbose)

    try:
        return args.func(args)
    except RagspanError as exc:  # every expected failure carries its own exit code
        if args.verbose:  # else the one line below is all: no traceback, here or in Prefect's logs
            traceback.print_exc()
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
