"""The one path into the evaluate flow: `ragspan evaluate` (flows/cli/evaluate.py), the
Python API (`ragspan.evaluate`, flows/api.py) and the watch flow behind `ragspan serve` and
`prefect deploy` (flows/watch.py) all run it through `run_evaluate_flow`, so each gets the
same task runner (`pipeline.shard_concurrency` of the params file, not the flow's default)
and the same guard against a Prefect API that dies or hangs mid-run (`ApiWatch`).

The command and the API also prepare a run the same way, in `prepare_run`: which params
file applies (`params_path`), its settings parsed once (+ the caller's overrides), which
run of a data directory to evaluate (`choose_run`), and its inputs validated — a bad input
stops there, before any flow or judge call. What it returns goes to `run_evaluate_flow`
and on to the flow as arguments (the parsed `Settings`, never a params path to parse
again). Also here: the Prefect server to use (`settle_api`, `server_in_use`). Standard
library only at module level: the CLI's parser imports this module, and `--help` stays
fast."""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ragspan.flows.runners import RunnerKind
    from ragspan.tasks.config import Settings
    from ragspan.tasks.inputs.load import Workspace

DEFAULT_PARAMS = Path("params.yaml")


def params_path(given: str | None) -> str | None:
    """--params, else ./params.yaml when present, else built-in defaults."""
    if given:
        return given
    return str(DEFAULT_PARAMS) if DEFAULT_PARAMS.exists() else None


def choose_run(data: str, given: str | None, settings: Settings, params_file: str | None,
               run_option: str = "--run") -> str:
    """--run; else the first of data.runs when a params file lists them (a DVC workspace);
    else the data directory's only run file; else an error listing the runs there. A params
    file of another workspace (its data.dir is not DATA) never picks a run silently: DATA's
    own single run wins over a data.runs entry DATA does not hold, and a listed run chosen
    among several is said on stderr. `run_option`: how the caller names the choice in that
    error (`run=` from Python)."""
    from ragspan.tasks.errors import InputError, UsageError
    from ragspan.tasks.inputs.load import run_names

    if given:
        return given
    if not Path(data).is_dir():
        raise InputError(data, None, None, "data directory not found")
    listed = settings.data.runs if params_file and "runs" in settings.data.model_fields_set else []
    own = Path(data).resolve() == Path(settings.data.dir).resolve()
    if listed and own:
        return listed[0]
    names = run_names(data)
    run, note = run_of_another_workspace(names, listed, f"{params_file}'s data.runs", str(Path(data) / "runs"))
    if note:
        print(f"note: {note}", file=sys.stderr)
    if run is not None:
        return run
    if not names:
        raise UsageError(f"{Path(data) / 'runs'}: no run files (runs/<name>.jsonl): nothing to evaluate")
    raise UsageError(f"{Path(data) / 'runs'}: {len(names)} runs, choose one with {run_option}: {', '.join(names)}")


@dataclass(frozen=True, eq=False)  # eq=False: a Workspace holds DataFrames
class PreparedRun:
    """One evaluation, ready for the flow: where its inputs and results are, its settings
    (parsed once: the flow takes them as they are) and its validated inputs."""

    data_dir: str
    run: str
    out_dir: str
    settings: Settings
    params_file: str | None  # the file the settings were read from (None: built-in defaults)
    workspace: Workspace
    overrides: dict[str, str] = field(default_factory=dict)  # dotted params keys applied on top


def prepare_run(data: str | None, run: str | None, out: str | None, *, params: str | None,
                overrides: dict[str, str], run_option: str = "--run") -> PreparedRun:
    """What `ragspan evaluate` and `ragspan.evaluate` do before the flow, in one place:
    the params file (`params`, else ./params.yaml when present, else the defaults) parsed
    once with `overrides`; the data directory (`data`, else the params' data.dir); the run
    (`choose_run`; `run_option` names the choice in its error); the results directory
    (`out`, else results/RUN); the inputs loaded and validated — InputError on the first
    problem, before any flow or judge call. Raises ConfigError, UsageError, InputError."""
    from ragspan.tasks.config import load_settings
    from ragspan.tasks.inputs.load import checked_workspace

    params_file = params_path(params)
    settings = load_settings(params_file, overrides)
    data_dir = str(data) if data else settings.data.dir
    chosen = choose_run(data_dir, run, settings, params_file, run_option)
    # A bad input stops here. Kept deferred: the inputs' large tables live in the
    # validated-inputs cache, where the flow's load reads them (never twice in this process).
    workspace = checked_workspace(data_dir, chosen, settings, deferred=True)
    return PreparedRun(data_dir=data_dir, run=chosen, out_dir=str(out) if out else str(Path("results") / chosen),
                       settings=settings, params_file=params_file, workspace=workspace, overrides=dict(overrides))


def run_of_another_workspace(names: list[str], listed: list[str], source: str,
                             runs_dir: str) -> tuple[str | None, str | None]:
    """(the run to evaluate, the note saying why) for a data directory holding `names`,
    given the runs a params file of another workspace lists (`listed`, from `source`):
    its only run; else the first listed run it holds; else none."""
    if len(names) == 1:
        passed_over = [r for r in listed if r != names[0]]
        return names[0], (f"evaluating {names[0]}, the only run in {runs_dir}; {source} ({', '.join(listed)}) "
                          "is another workspace's" if passed_over else None)
    held = [r for r in listed if r in names]
    if held:
        return held[0], (f"evaluating {held[0]}, the first of {source} found among the {len(names)} runs in "
                         f"{runs_dir}; --run NAME chooses another")
    return None, None


def without_heartbeat():
    """A run that blocks until its flow ends (the command, the API) gains nothing from
    Prefect's flow-run heartbeat (zombie detection for workers) but ~1 s joining its thread
    at the end (docs/stack.md). Off unless PREFECT_FLOWS_HEARTBEAT_FREQUENCY is set; served
    deployments keep it."""
    if "PREFECT_FLOWS_HEARTBEAT_FREQUENCY" in os.environ:
        return contextlib.nullcontext()
    from prefect.settings import PREFECT_FLOWS_HEARTBEAT_FREQUENCY, temporary_settings

    return temporary_settings({PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None})


def settle_api(log: Callable[[str], None]) -> tuple[str | None, str]:
    """(API URL, how it was found) for a run outside any flow run: the configured API, else
    the local server (found or started, tasks/supervision/local_server.py), else (None, "ephemeral").
    An API that does not answer is one NoServer error, before anything runs: else every
    Prefect call would retry for a minute and end in a traceback."""
    from ragspan.tasks.errors import NoServer
    from ragspan.tasks.supervision import local_server
    from ragspan.tasks.supervision.runtime import api_answers

    url, how = local_server.ensure_server(log=log)
    if url and not api_answers(url):
        raise NoServer(f"the Prefect API at {url} does not answer: start its server, or unset "
                       "PREFECT_API_URL (ragspan then starts a local one)")
    return url, how


@contextlib.contextmanager
def server_in_use(how: str) -> Iterator[None]:
    """While a run uses the local server ragspan found or started, it is not idle (not stopped)."""
    if how not in ("reused", "started"):
        yield
        return
    from ragspan.tasks.supervision import local_server

    with local_server.in_use():
        yield


def current_api_url() -> str | None:
    """The API this process's Prefect talks to (None: a temporary in-process server)."""
    from prefect.settings import PREFECT_API_URL

    return PREFECT_API_URL.value() or None


def run_evaluate_flow(data_dir: str, run: str, out_dir: str, settings: Settings, *,
                      api_url: str | None, runner: RunnerKind = "thread", dask_address: str | None = None,
                      compare_to: str | None = None, artifacts_name: str | None = None,
                      quiet: bool = True, owns_process: bool = True,
                      previous: str | None = None) -> dict[str, Any]:
    """Run the evaluate flow on its task runner under the dead-API guard; its metrics.

    `settings`: the run's, parsed by the caller (params file + overrides); the flow takes
    them as they are, and the task runner is sized by their `pipeline.shard_concurrency`.
    `api_url`: the Prefect API to watch (None: a temporary in-process server, nothing to
    watch). `owns_process`: the caller's process
    exists for this run (the command, a script, a notebook): Prefect's heartbeat is off, and
    once the API is dead and the results are written the process ends (exit 0, one warning
    line) rather than wait on the API. False inside a flow run (the watch flow, a user's
    own flow): that run keeps its heartbeat and still has work after the evaluation."""
    from ragspan.flows.evaluate import evaluate
    from ragspan.flows.runners import task_runner
    from ragspan.tasks.errors import RagspanError
    from ragspan.tasks.supervision.runtime import ApiWatch, api_answers

    task_runner_ = task_runner(runner, settings.pipeline.shard_concurrency, dask_address)
    written = Path(out_dir) / "metrics.json"
    started = time.time()

    def finished() -> bool:  # this run's results are in place (written whole, renamed)
        return written.is_file() and written.stat().st_mtime >= started

    def abandon() -> None:
        print(f"warning: the Prefect API at {api_url} stopped answering during the run; results "
              f"written to {out_dir}/; not waiting for the API (the Prefect UI lacks part of this run)",
              file=sys.stderr, flush=True)

    watching = (ApiWatch(api_url, quiet, finished=finished if owns_process else None, on_abandon=abandon)
                if api_url else None)
    heartbeat = without_heartbeat() if owns_process else contextlib.nullcontext()
    with heartbeat, (watching or contextlib.nullcontext()) as watch:
        try:
            metrics = evaluate.with_options(task_runner=task_runner_)(
                data_dir=data_dir, run=run, out_dir=out_dir, settings=settings, compare_to=compare_to,
                artifacts_name=artifacts_name, previous=previous)
        except Exception as exc:
            # The API may die before the watch's next check (a flow run being created):
            # an unexpected error with the API gone now is the same one line.
            if watch and (watch.dead or (not isinstance(exc, RagspanError) and not api_answers(api_url))):
                raise RagspanError(f"the Prefect API at {api_url} stopped answering during the run "
                                   f"({type(exc).__name__}); results in {out_dir}/ may be incomplete") from None
            raise
    if watch and watch.dead:
        print(f"warning: the Prefect API at {api_url} stopped answering during the run; results "
              f"written to {out_dir}/, but the Prefect UI lacks part of this run", file=sys.stderr, flush=True)
    return metrics
