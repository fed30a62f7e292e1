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

`rag.command` placeholders: {data_dir} {questions} {out} {index} {version} {revision}
{run} {python} (this interpreter), each substituted into one argument (no shell).

Overlapping runs queue: the deployment has a concurrency limit of 1 (ENQUEUE), and the
flow also waits for a workspace lock, so a manual run or a second deployment queues too.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

from prefect import flow, get_run_logger
from prefect.states import Completed
from ragspan.flows.evaluate import evaluate
from ragspan.tasks.config import Settings, load_settings, state_dir
from ragspan.tasks.errors import ConfigError
from ragspan.tasks.io.git import experiment_commits, git, git_state, is_work_tree
from ragspan.tasks.reporting.rebuild import rebuild_text

EVENT = "ragspan.index.rebuilt"
RESOURCE_PREFIX = "ragspan.index."
HISTORY = Path("results") / "history.jsonl"
LOCK_WAIT_S = 6 * 3600


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

def is_dvc_workspace(root: Path) -> bool:
    if not (root / ".dvc").is_dir() or shutil.which("git") is None:
        return False
    return is_work_tree(root)


@contextlib.contextmanager
def workspace_lock(root: Path, wait_s: float = LOCK_WAIT_S) -> Iterator[None]:
    """Wait (not refuse) for the workspace: overlapping watch runs queue."""
    locks = state_dir() / "locks"
    locks.mkdir(parents=True, exist_ok=True)
    path = locks / ("watch-" + hashlib.sha256(str(root).encode()).hexdigest()[:16] + ".lock")
    with open(path, "a+", encoding="utf-8") as fh:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{root}: another ragspan watch run held the workspace "
                                       f"for over {wait_s:.0f} s") from None
                time.sleep(0.5)
        yield


def _questions_file(data_dir: Path) -> Path:
    found = sorted(p for p in data_dir.glob("questions.*") if p.suffix in (".jsonl", ".csv", ".parquet"))
    return found[0] if found else data_dir / "questions.csv"


def fill_command(template: str, values: dict[str, str]) -> list[str]:
    """Split the template like a shell would, then fill each argument (values never split)."""
    try:
        return [arg.format(**values) for arg in shlex.split(template)]
    except KeyError as exc:
        raise ConfigError(f"rag.command: unknown placeholder {{{exc.args[0]}}}; known: "
                          + " ".join(f"{{{k}}}" for k in values)) from None
    except ValueError as exc:
        raise ConfigError(f"rag.command: cannot parse {template!r}: {exc}") from None


def run_rag_command(argv: list[str], cwd: Path, timeout: int) -> None:
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"  # `ragspan` itself
    try:
        done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    except FileNotFoundError:
        raise RuntimeError(f"rag.command: {argv[0]!r} not found") from None
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"rag.command timed out after {timeout} s: {shlex.join(argv)}") from None
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-5:]
        raise RuntimeError(f"rag.command exited with {done.returncode}: {shlex.join(argv)}\n" + "\n".join(tail))


def install_run(candidate: Path, data_dir: Path, run: str, settings: Settings) -> Path:
    """Validate `candidate` as DATA/runs/<run>.jsonl (in a scratch copy of the data dir
    made of symlinks), then move it into place atomically. A bad run never lands."""
    from ragspan.tasks.io.load import load_workspace

    if not candidate.is_file():
        raise FileNotFoundError(f"run file not found: {candidate}")
    with tempfile.TemporaryDirectory(prefix="ragspan-watch-") as tmp:
        scratch = Path(tmp) / "data"
        (scratch / "runs").mkdir(parents=True)
        for item in data_dir.iterdir():
            if item.name != "runs":
                (scratch / item.name).symlink_to(item.resolve())
        shutil.copyfile(candidate, scratch / "runs" / f"{run}.jsonl")
        load_workspace(scratch, run, settings.chunking.size, settings.chunking.overlap,
                       settings.pipeline.default_context_k)  # InputError names file, row, field
        target = data_dir / "runs" / f"{run}.jsonl"
        target.parent.mkdir(parents=True, exist_ok=True)
        staged = target.with_name(f".{target.name}.tmp-{os.getpid()}")
        shutil.copyfile(scratch / "runs" / f"{run}.jsonl", staged)
        os.replace(staged, target)
    return target


def append_history(root: Path, record: dict) -> Path:
    path = root / HISTORY
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        fh.write(json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n")
        fh.flush()
        os.fsync(fh.fileno())
    return path


def read_history(root: Path) -> list[dict]:
    path = root / HISTORY
    if not path.is_file():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        with contextlib.suppress(json.JSONDecodeError):  # a torn last line is skipped
            if line.strip():
                out.append(json.loads(line))
    return out


def committable_targets(root: Path) -> tuple[list[str], list[str]]:
    """(stages and .dvc files whose outs all exist, those with an out missing).

    `dvc exp save` re-commits every stage's outs and fails on the first one missing, e.g.
    `results/baseline/claims.parquet` in a fresh clone where `dvc repro` has not run. A
    watch run changes only its own run file and results, so it commits what is there
    and leaves the other stages' lock entries as they are."""
    from dvc.repo import Repo

    ok, missing = [], []
    with Repo(str(root)) as repo:
        for stage in repo.index.stages:
            (ok if all(o.exists for o in stage.outs) else missing).append(stage.addressing)
    return ok, missing


def save_experiment(root: Path, name: str, paths: list[Path], message: str) -> dict:
    """`dvc exp save -n NAME [targets]`, including `paths` where git neither tracks nor
    ignores them; stages with a missing out are left out (listed under `skipped`)."""
    rel = [p.resolve().relative_to(root).as_posix() for p in paths if p.exists()]
    untracked = (git(root, "ls-files", "--others", "--exclude-standard", "--", *rel) or "").splitlines()
    targets, skipped = committable_targets(root)
    dvc = str(Path(sys.executable).parent / "dvc")
    cmd = [dvc if Path(dvc).exists() else "dvc", "exp", "save", "-f", "-n", name, "-m", message]
    for p in untracked:
        cmd += ["-I", p]
    if skipped:
        # No target means "every stage" to DVC; a directory holding no DVC file (-R)
        # means none: the experiment then records the included files alone.
        cmd += targets or ["-R", rel[-1] if rel else "results"]
    env = {**os.environ, "DVC_NO_ANALYTICS": "1"}
    done = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, check=False, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"dvc exp save failed ({done.returncode}): {(done.stderr or done.stdout).strip()[-800:]}")
    sha = git(root, "rev-parse", "--verify", "--quiet", f"refs/exps/{_exp_ref_dir(root)}/{name}")
    if sha is None:  # the ref layout is DVC's business: search for it
        sha = next(iter(experiment_commits(root, name)), None)
    return {"name": name, "sha": sha, "included": untracked, "skipped": skipped}


def _exp_ref_dir(root: Path) -> str:
    base = git(root, "rev-parse", "HEAD") or ""
    return f"{base[:2]}/{base[2:]}"


def _history_git(root: Path) -> dict | None:
    state = git_state(root)
    return None if state["git_rev"] is None else {"rev": state["git_rev"], "dirty": state["git_dirty"]}


def previous_results_dir(root: Path, index: str, out_dir: Path) -> str | None:
    """The results an index rebuild is told against: `out_dir`'s own (a DVC workspace's run
    is named after the index), else the latest recorded run of the same index."""
    if (out_dir / "manifest.json").is_file():
        return None  # the evaluate flow's default: the results it replaces
    for record in reversed(read_history(root)):
        if record.get("index") == index and (root / str(record.get("results"))).is_dir():
            return str(root / record["results"])
    return None


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
            candidate = state_dir() / "watch" / f"{name}.jsonl"
            candidate.parent.mkdir(parents=True, exist_ok=True)
            values = {"data_dir": str(data_dir), "questions": str(_questions_file(data_dir)),
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
        metrics = evaluate(data_dir=str(data_dir), run=run, out_dir=str(out_dir),
                           params_path=str(ev_params) if ev_params else None,
                           artifacts_name=safe_name(index), previous=previous_results_dir(root, index, out_dir))
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
