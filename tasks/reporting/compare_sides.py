"""The two sides of a comparison, found and loaded: what `ragspan compare A B` and the
Python API's `compare` both read (the comparison itself is tasks/reporting/compare.py).

A side is one of:
- a results directory (holding metrics.json, manifest.json and diagnoses.parquet), e.g. results/baseline;
- a git revision (branch, tag, sha, HEAD~1): results/<run>/ read at that revision;
- a DVC experiment name (as listed by `dvc exp show`), resolved to its commit.

Revisions are read through DVC's file system (`dvc.api.DVCFileSystem`): metrics.json and
manifest.json are in git (`cache: false`), the Parquet tables come from the DVC cache, so an experiment
made elsewhere needs `dvc exp pull` / `dvc pull` first. pandas, DVC and the comparison are
imported inside the functions: the command's parser imports this module.
"""

from __future__ import annotations

import io
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from ragspan.tasks.errors import SideError
from ragspan.tasks.reporting.git import experiment_commits, git

if TYPE_CHECKING:
    import pandas as pd
    from ragspan.tasks.reporting.compare import Side
    from ragspan.tasks.reporting.gate import Rule


def resolve_rev(repo: Path, name: str) -> tuple[str, str] | None:
    """(commit sha, kind) for a git revision or a DVC experiment name, else None."""
    sha = git(repo, "rev-parse", "--verify", "--quiet", f"{name}^{{commit}}")
    if sha:
        return sha, "git revision"
    hits = experiment_commits(repo, name)
    if len(hits) > 1:
        raise SideError(f"{name!r} names {len(hits)} DVC experiments; use the commit sha instead")
    return (hits[0], "DVC experiment") if hits else None


def _load_groups(data_dir: Path, run: str, diagnoses: pd.DataFrame, manifest: dict) -> tuple[pd.DataFrame | None, str | None]:
    """Per-claim metadata groups from the data the run was evaluated on; (None, why) if
    that data is not available unchanged."""
    from ragspan.tasks.inputs.load import load_workspace
    from ragspan.tasks.reporting.groups import claim_groups

    params = manifest.get("params") or {}
    chunking, pipeline = params.get("chunking") or {}, params.get("pipeline") or {}
    want = manifest.get("inputs_md5") or {}
    try:
        ws = load_workspace(data_dir, run, chunking.get("size", 800), chunking.get("overlap", 100),
                            pipeline.get("default_context_k", 3))
    except Exception as exc:  # noqa: BLE001 - any input problem: the breakdown is optional
        return None, f"per-metadata deltas skipped: cannot load {data_dir}: {exc}"
    if want and ws.input_files != want:
        changed = sorted(k for k in set(want) | set(ws.input_files) if want.get(k) != ws.input_files.get(k))
        return None, (f"per-metadata deltas skipped: {data_dir} no longer matches the run's manifest "
                      f"({', '.join(changed[:3])} changed)")
    return claim_groups(diagnoses, ws.corpus, ws.questions, ws.retrieved), None


def side_from_dir(path: Path, label: str | None = None) -> Side:
    import pandas as pd
    from ragspan.tasks.reporting.compare import Side
    from ragspan.tasks.reporting.results_files import read_results

    diag_path = path / "diagnoses.parquet"
    if not diag_path.is_file():
        raise SideError(f"{path}: no diagnoses.parquet (is this a ragspan results directory? "
                        "`dvc pull` or `dvc repro` restores DVC outs)")
    metrics = read_results(path)
    diagnoses = pd.read_parquet(diag_path)
    manifest = metrics.get("manifest") or {}
    run = metrics.get("run") or path.name
    data_dir = data_dir_of_results(path, manifest)
    groups, note = (None, "per-metadata deltas skipped: the manifest names no data directory")
    if data_dir is not None:
        groups, note = _load_groups(data_dir, run, diagnoses, manifest)
    return Side(label or str(path), diagnoses, metrics, groups, source="results directory",
                notes=(note,) if note else ())


def data_dir_of_results(results: Path, manifest: dict) -> Path | None:
    """Where the data a results directory was evaluated on is now, found from the manifest
    alone (so `compare` works from any current directory): the path recorded relative to
    the results directory, then the DVC-repository-relative path against the repository
    holding the results, then the params' data.dir against that repository. The first
    that exists; else the first candidate (its load error is the note shown)."""
    results = Path(results).resolve()
    data = manifest.get("data") or {}
    candidates: list[Path] = []
    if data.get("from_results"):
        candidates.append(results / data["from_results"])
    root = git(results, "rev-parse", "--show-toplevel")
    for rel in (data.get("dir"), _data_dir_for(manifest)):
        if rel:
            candidates.append(Path(root) / rel if root and not Path(rel).is_absolute() else Path(rel))
    for candidate in candidates:
        if candidate.is_dir():
            return candidate.resolve()
    return candidates[0] if candidates else None


def _data_dir_for(manifest: dict) -> str | None:
    """The data directory as written in the params the run used (relative to where it ran)."""
    return ((manifest.get("params") or {}).get("data") or {}).get("dir")


def _data_dir_in_repo(manifest: dict) -> str | None:
    """The data directory relative to the repository root: the manifest's DVC-relative
    path, else the params' data.dir (as the DVC stage passes it)."""
    return (manifest.get("data") or {}).get("dir") or _data_dir_for(manifest)


def side_from_rev(repo: Path, name: str, sha: str, kind: str, run: str | None) -> Side:
    import pandas as pd
    import yaml
    from dvc.api import DVCFileSystem
    from ragspan.tasks.reporting.compare import Side
    from ragspan.tasks.reporting.results_files import merge_results

    try:
        fs = DVCFileSystem(str(repo), rev=sha)
    except Exception as exc:  # DVC raises many kinds; reported, not swallowed
        raise SideError(f"{name}: cannot open the DVC repository at {repo}: {exc}") from exc
    if run is None:
        try:
            params = yaml.safe_load(fs.read_text("params.yaml")) or {}
            run = ((params.get("data") or {}).get("runs") or [None])[0]
        except (FileNotFoundError, yaml.YAMLError, AttributeError):
            run = None
        if run is None:
            raise SideError(f"{name}: no --run given and params.yaml at {sha[:7]} lists no data.runs")
    base = f"results/{run}"
    def read(name: str) -> str | None:
        try:
            return fs.read_text(f"{base}/{name}")
        except Exception:  # noqa: BLE001 - absent, or a DVC out not in the local cache
            return None

    try:
        metrics = merge_results(read)
    except FileNotFoundError:
        raise SideError(f"{name} ({kind} {sha[:7]}): no {base}/metrics.json at that revision") from None
    try:
        diagnoses = pd.read_parquet(io.BytesIO(fs.read_bytes(f"{base}/diagnoses.parquet")))
    except Exception as exc:  # noqa: BLE001 - missing from the DVC cache, unreadable, …
        raise SideError(f"{name} ({kind} {sha[:7]}): cannot read {base}/diagnoses.parquet from the "
                        f"DVC cache ({type(exc).__name__}: {exc}); run `dvc pull` or `dvc exp pull` "
                        "first") from None
    manifest = metrics.get("manifest") or {}
    groups, note = None, "per-metadata deltas skipped: the manifest names no data directory"
    data_dir = _data_dir_in_repo(manifest)
    if data_dir is not None and not Path(data_dir).is_absolute():
        with tempfile.TemporaryDirectory(prefix="ragspan-compare-") as tmp:
            local = Path(tmp) / "data"
            try:
                fs.get(data_dir.rstrip("/"), str(local), recursive=True)
            except Exception as exc:  # noqa: BLE001 - optional breakdown; the reason is shown
                note = f"per-metadata deltas skipped: cannot read {data_dir} at {sha[:7]}: {exc}"
            else:
                groups, note = _load_groups(local, run, diagnoses, manifest)
    return Side(name, diagnoses, metrics, groups, source=f"{kind} {sha[:7]}, {base}",
                notes=(note,) if note else ())


def load_side(spec: str, run: str | None, repo: Path) -> Side:
    path = Path(spec)
    if path.is_dir() and (path / "metrics.json").is_file():
        return side_from_dir(path)
    root = git(repo, "rev-parse", "--show-toplevel")
    resolved = resolve_rev(Path(root), spec) if root else None
    if resolved is None:
        where = f"git repository {root}" if root else f"{repo} (not a git repository)"
        raise SideError(f"{spec!r} is neither a results directory (with metrics.json) nor a git "
                        f"revision or DVC experiment in {where}")
    return side_from_rev(Path(root), spec, *resolved, run)


def compared(a: Side, b: Side, rules: list[Rule], *, force: bool = False, resamples: int = 2000,
             seed: int = 0, level: float = 0.95) -> tuple[dict, dict | None]:
    """(the comparison, the gate's verdict or None without rules): what `ragspan compare`
    prints and exits on, and what the Python API's `compare` returns (flows/api.py)."""
    from ragspan.tasks.reporting.compare import compare_runs
    from ragspan.tasks.reporting.gate import gate_failures, gate_summary

    result = compare_runs(a, b, force=force, resamples=resamples, seed=seed, level=level)
    return result, (gate_summary(rules, gate_failures(result, rules)) if rules else None)
