"""The watch flow: what a scheduled run or an index-rebuilt event runs.

    obtain the run → evaluate it (the `evaluate` flow, as a subflow) → record it

1. **Obtain the run**, first that applies:
   a. the event names a run file (`payload.run`): it is validated against the data and
      copied into `DATA/runs/<run name>.jsonl`;
   b. `params.yaml` has `rag.command`: the template is filled in (placeholders below)
      and executed in the workspace; the run file it writes is validated and moved in;
   c. a *scheduled* run with neither re-evaluates the first run of `data.runs` (drift
      of the judge, the code or the data). An *event* with neither fails, saying so.
2. **Evaluate** with the evaluate flow into `results/<run name>/` (atomic, locked).
3. **Record**: in a git + DVC workspace, `dvc exp save` names an experiment after the
   trigger and time (the run file and results are included when git does not track
   them; DVC-tracked data is re-committed by DVC). In every workspace, one JSON line
   is appended to `results/history.jsonl` (`ragspan history` reads it).

Run names: in a DVC workspace the run is named after the index (`results/<index>/`,
stable, so `dvc exp show` and `ragspan compare EXP_A EXP_B --run <index>` line the
experiments up; the experiment carries the trigger and time). Elsewhere every record
gets its own run `<trigger>-<index>-<UTC time>`, so earlier results stay on disk and
`ragspan compare results/A results/B` works on any two of them.

The steps that touch files, processes and DVC live in tasks/: the workspace lock
(tasks/state/_locks.py), `rag.command` and run installation (tasks/tools/rag_command.py,
its placeholders documented there), `dvc exp save` (tasks/reporting/experiments.py) and the
history file (tasks/reporting/history.py). This module wires them.

Overlapping runs queue: the deployment has a concurrency limit of 1 (ENQUEUE), and the
flow also waits for a workspace lock, so a manual run or a second deployment queues too.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
from datetime import UTC, datetime
from pathlib import Path

from prefect import flow, get_run_logger
from prefect.states import Completed
from ragspan.flows.evaluation import current_api_url, run_evaluate_flow
from ragspan.tasks.config import Settings, load_settings
from ragspan.tasks.reporting.experiments import is_dvc_workspace, save_experiment
from ragspan.tasks.reporting.git import git_state
from ragspan.tasks.reporting.history import append_history, previous_results_dir
from ragspan.tasks.reporting.rebuild import rebuild_text
from ragspan.tasks.state import state_path, workspace_lock
from ragspan.tasks.tools.rag_command import (
    fill_command,
    install_run,
    questions_file,
    run_rag_command,
)

EVENT = "ragspan.index.rebuilt"
RESOURCE_PREFIX = "ragspan.index."


# ----- parameters (params.yaml `rag:` and `schedule:`) ------------------------------------

def load_watch_params(path: Path | None) -> Settings:
    """The validated settings; the watch flow reads `rag` and `schedule` from them."""
    return load_settings(path if path is not None and path.is_file() else None)


def evaluate_params(path: Path | None) -> Path | None:
    """The params file the evaluate subflow reads (the same file; None without one)."""
    return path if path is not None and path.is_file() else None


# ----- the request: event/schedule parameters → a normalised record ----------------------

_UNSET = {"", "none", "null"}


def _clean(value: object) -> str:
    """Rendered templates give "" or "None" for a payload key the event did not set."""
    text = "" if value is None else str(value).strip()
    return "" if text.lower() in _UNSET else text


def index_name(resource_id_or_name: str) -> str:
    """`ragspan.index.demo` → `demo`; a bare name is kept."""
    text = _clean(resource_id_or_name)
    return text.removeprefix(RESOURCE_PREFIX)


def safe_name(text: str) -> str:
    """A name usable as a file name, a git ref component and a DVC experiment name."""
    out = re.sub(r"[^A-Za-z0-9_-]+", "-", text).strip("-_")
    return re.sub(r"-{2,}", "-", out)[:80] or "run"


def record_name(trigger: str, index: str, when: datetime) -> str:
    """`<trigger>-<index>-<UTC time>`, e.g. `event-demo-20261201T101502Z`."""
    stamp = when.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")
    return safe_name(f"{trigger}-{index or 'default'}-{stamp}")


def event_parameters(workspace: str, params_path: str) -> dict[str, str]:
    """The watch flow's parameters as templates over the triggering event. A payload key
    the event does not carry must have a default: Prefect renders a single-expression
    template through `tojson`, which fails on an undefined value (and on a UUID)."""
    return {
        "index": "{{ event.resource.id }}",
        "version": "{{ event.payload.version | default('') }}",
        "run_path": "{{ event.payload.run | default('') }}",
        "revision": "{{ event.payload.revision | default('') }}",
        "event_id": "{{ event.id | string }}",  # a UUID: `tojson` needs a str
        "trigger": "event",
        "workspace": workspace,
        "params_path": params_path,
    }


# ----- helpers -------------------------------------------------------------------------

def _history_git(root: Path) -> dict | None:
    state = git_state(root)
    return None if state["git_rev"] is None else {"rev": state["git_rev"], "dirty": state["git_dirty"]}


def _rates(metrics: dict) -> dict[str, float | None]:
    return {k: v.get("rate") for k, v in (metrics.get("labels") or {}).items()}


# ----- the flow -------------------------------------------------------------------------

@flow(name="watch", log_prints=True, validate_parameters=False)  # event values: str, int or None
def watch(index: str = "", version: str = "", run_path: str = "", revision: str = "",
          trigger: str = "manual", workspace: str = ".", params_path: str = "params.yaml",
          event_id: str = "") -> dict:
    """Obtain a run for `index`, evaluate it, record it. Returns the history record."""
    log = get_run_logger()
    root = Path(workspace).resolve()
    os.environ.setdefault("RAGSPAN_HOME", str(root / ".ragspan"))
    started = datetime.now(UTC)
    trigger = safe_name(_clean(trigger) or "manual")
    params_file = (root / params_path) if params_path else None
    wp = load_watch_params(params_file)
    index = index_name(index) or wp.rag.index
    version, revision, run_path, event_id = map(_clean, (version, revision, run_path, event_id))
    name = record_name(trigger, index, started)
    ev_params = evaluate_params(params_file)
    settings = load_settings(ev_params)
    data_dir = (root / settings.data.dir).resolve()
    dvc_mode = is_dvc_workspace(root)
    run = safe_name(index) if dvc_mode else name
    out_dir = root / "results" / run

    with workspace_lock(root):
        waited = (datetime.now(UTC) - started).total_seconds()
        if run_path:
            source, candidate = "event run file", (root / run_path)
        elif wp.rag.command:
            source = "rag.command"
            candidate = state_path("watch", f"{name}.jsonl")
            candidate.parent.mkdir(parents=True, exist_ok=True)
            values = {"data_dir": str(data_dir), "questions": str(questions_file(data_dir)),
                      "out": str(candidate), "index": index, "version": version,
                      "revision": revision, "run": run, "python": sys.executable}
            argv = fill_command(wp.rag.command, values)
            log.info("rag.command: %s", shlex.join(argv))
            run_rag_command(argv, root, wp.rag.timeout)
        elif trigger != "event" and settings.data.runs:
            source = f"existing run {settings.data.runs[0]}"
            candidate = data_dir / "runs" / f"{settings.data.runs[0]}.jsonl"
        else:
            raise ValueError(f"index {index!r} rebuilt, but the event names no run file (payload.run) "
                             "and params.yaml sets no rag.command: nothing to evaluate")
        run_file = install_run(candidate, data_dir, run, settings)
        if source == "rag.command":
            candidate.unlink(missing_ok=True)
        log.info("evaluating %s (%s) → %s", run_file, source, out_dir)
        metrics = run_evaluate_flow(str(data_dir), run, str(out_dir), settings,  # as parsed here, not again
                                    api_url=current_api_url(), artifacts_name=safe_name(index),
                                    owns_process=False, previous=previous_results_dir(root, index, out_dir))
        finished = datetime.now(UTC)
        record = {
            "name": name, "trigger": trigger, "index": index, "version": version or None,
            "revision": revision or None, "event_id": event_id or None, "source": source,
            "run": run, "run_file": os.path.relpath(run_file, root),
            "results": os.path.relpath(out_dir, root),
            "started": started.isoformat(timespec="seconds"),
            "finished": finished.isoformat(timespec="seconds"),
            "queued_s": round(waited, 2), "duration_s": round((finished - started).total_seconds(), 2),
            "claims": metrics.get("claims"), "judged": metrics.get("judged"),
            "unjudged": metrics.get("unjudged"), "rates": _rates(metrics),
            "counts": {k: v.get("count") for k, v in (metrics.get("labels") or {}).items()},
            "git": _history_git(root),
            "rebuild": {k: (metrics.get("rebuild") or {}).get(k) for k in ("transitions", "also_changed")}
            if metrics.get("rebuild") else None,
            "experiment": None, "flow_run_id": _flow_run_id(),
        }
        error = None
        if dvc_mode:
            msg = f"ragspan {trigger}: index {index}" + (f" {version}" if version else "")
            try:
                record["experiment"] = save_experiment(root, name, [run_file, out_dir], msg)
            except Exception as exc:  # noqa: BLE001 - the evaluation stands; the record says why
                error = str(exc)
                record["record_error"] = error
        append_history(root, record)
        if metrics.get("rebuild"):
            log.info(rebuild_text(metrics["rebuild"]))
        skipped = (record["experiment"] or {}).get("skipped")
        if skipped:
            log.warning("experiment %s saved; stages whose outs are missing here were not re-committed: %s "
                        "(`dvc pull` or `dvc repro` brings them)", name, ", ".join(skipped))
        if error:
            # The evaluation succeeded and its results are written: the run is Completed,
            # and its state message (and the history line's record_error) says what failed.
            note = f"evaluated → {os.path.relpath(out_dir, root)}, but the experiment was not recorded: {error}"
            log.warning(note)
            return Completed(message=note[:2000], data=record)
        log.info("recorded %s: %s", name, json.dumps(record["rates"]))
        return record


def _flow_run_id() -> str | None:
    from prefect.runtime import flow_run

    return str(flow_run.id) if flow_run.id else None
