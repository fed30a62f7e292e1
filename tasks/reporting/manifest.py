"""The manifest stamped on every output: what data, parameters, judge and code produced it.

Two reports with the same manifest have the same labels (the local judge is
deterministic; an LLM judge is made so by its content-hash cache).

    manifest
    ├── run, params, params_hash, judge (model, prompt_version, …)
    │                              params are those the run used: after CLI overrides, with
    │                              data.dir / data.runs the data directory and run evaluated
    ├── ragspan_version, code_version, output_schema
    ├── git_rev, git_dirty         the repository holding the data (None outside git)
    ├── inputs_md5                 {path relative to the data dir: md5} of every input read
    ├── data                       the data snapshot, hashed the way DVC hashes it
    │   ├── dir, dvc_md5           "<md5>.dir" of the whole data directory (dir: relative
    │   │                          to the DVC repository when there is one)
    │   ├── from_results           the data directory relative to the results directory,
    │   │                          so `ragspan compare` finds it from any current directory
    │   └── recorded               where DVC recorded it (`<dir>.dvc`, `dvc.lock`), and
    │                              whether the workspace still matches that record
    └── questions                  file, md5, count and ids_md5 (what `ragspan compare`
                                   checks before comparing two runs)

DVC (3.x, hash `md5`) hashes a file as the plain md5 of its bytes, so `inputs_md5` are
DVC md5s. A directory's md5 is the md5 of its JSON listing
`json.dumps(sorted([{"md5": …, "relpath": …}]), sort_keys=True)` plus ".dir"
(dvc_data.hashfile.tree.Tree.digest); `.git`, `.hg`, `.dvc` and the patterns of the
repository's top-level `.dvcignore` are left out, as DVC does.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path

import yaml
from ragspan.tasks.config import (
    OUTPUT_SCHEMA_VERSION,
    RAGSPAN_VERSION,
    DataParams,
    Settings,
    code_version,
)
from ragspan.tasks.judges.base import JudgeSpec
from ragspan.tasks.reporting.git import git_state
from ragspan.tasks.state import file_md5s

_ALWAYS_IGNORED = {".git", ".hg", ".dvc"}
_CHUNK = 1 << 20


# --------------------------------------------------------------------------- DVC hashes


def file_md5(path: Path) -> str:
    """DVC's md5 of a file: the plain md5 of its bytes (DVC 3 hash name `md5`)."""
    h = hashlib.md5()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(_CHUNK), b""):
            h.update(block)
    return h.hexdigest()


def dvc_root(start: Path) -> Path | None:
    """The nearest directory at or above `start` holding a `.dvc/` directory."""
    start = Path(start).resolve()
    for d in (start, *start.parents):
        if (d / ".dvc").is_dir():
            return d
    return None


def _dvcignore(root: Path | None):
    """A matcher for the repository's top-level .dvcignore (None when there is none)."""
    if root is None or not (root / ".dvcignore").is_file():
        return None
    import pathspec  # a dependency of dvc

    lines = (root / ".dvcignore").read_text(encoding="utf-8").splitlines()
    return pathspec.PathSpec.from_lines("gitwildmatch", lines)


def dir_listing(directory: Path, root: Path | None = None) -> list[dict[str, str]]:
    """The sorted `[{"md5", "relpath"}]` listing DVC hashes for a directory."""
    directory = Path(directory).resolve()
    spec = _dvcignore(root)
    files: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(directory):
        here = Path(dirpath)

        def ignored(name: str, is_dir: bool, here: Path = here) -> bool:
            if name in _ALWAYS_IGNORED:
                return True
            if spec is None:
                return False
            rel = (here / name).relative_to(root).as_posix() + ("/" if is_dir else "")
            return spec.match_file(rel)

        dirnames[:] = sorted(d for d in dirnames if not ignored(d, True))
        files += [here / name for name in filenames if not ignored(name, False)]
    # md5s remembered by stat fingerprint (tasks/state/_digests.py): unchanged files are not re-read
    entries = [{"md5": md5, "relpath": p.relative_to(directory).as_posix()} for p, md5 in zip(files, file_md5s(files))]
    return sorted(entries, key=lambda e: e["relpath"])


def dir_md5(directory: Path, root: Path | None = None) -> str:
    """DVC's md5 of a directory: md5 of its JSON listing, suffixed ".dir"."""
    blob = json.dumps(dir_listing(directory, root), sort_keys=True).encode()
    return hashlib.md5(blob).hexdigest() + ".dir"


def recorded_md5s(data_dir: Path, root: Path | None) -> list[dict[str, str]]:
    """Where DVC recorded a hash of `data_dir`: its `.dvc` file and dvc.lock deps/outs."""
    data_dir = Path(data_dir).resolve()
    found: list[dict[str, str]] = []
    dvc_file = data_dir.with_name(data_dir.name + ".dvc")
    if dvc_file.is_file():
        for out in (_yaml(dvc_file) or {}).get("outs", []) or []:
            if out.get("path") == data_dir.name and out.get("md5"):
                found.append({"in": _rel(dvc_file, root), "md5": out["md5"]})
    lock = root / "dvc.lock" if root else None
    if lock is not None and lock.is_file():
        rel = _rel(data_dir, root)
        for name, stage in sorted(((_yaml(lock) or {}).get("stages") or {}).items()):
            for entry in (stage.get("deps") or []) + (stage.get("outs") or []):
                if entry.get("path") == rel and entry.get("md5"):
                    found.append({"in": f"dvc.lock:{name}", "md5": entry["md5"]})
                    break
    return found


def _yaml(path: Path) -> dict | None:
    try:
        loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return None
    return loaded if isinstance(loaded, dict) else None


def _rel(path: Path, root: Path | None) -> str:
    if root is not None:
        try:
            return Path(path).resolve().relative_to(root).as_posix()
        except ValueError:
            pass
    return Path(path).as_posix()


def data_snapshot(data_dir: Path) -> dict[str, object]:
    """The data directory's DVC md5, and how it relates to what DVC recorded.

    `recorded` lists each record (`<dir>.dvc`, a dvc.lock stage) with `matches`: False
    means the data changed since DVC last saw it (e.g. during `dvc repro`, the previous
    lock; or data edited without `dvc add`). The computed md5 is always what was used.
    """
    root = dvc_root(data_dir)
    md5 = dir_md5(data_dir, root)
    recorded = [{**r, "matches": r["md5"] == md5} for r in recorded_md5s(data_dir, root)]
    return {"dir": _rel(data_dir, root), "dvc_md5": md5, "recorded": recorded}


def questions_fingerprint(input_files: dict[str, str], question_ids: Sequence[str]) -> dict:
    """What identifies the question set: file md5 and a hash of the sorted ids."""
    files = [k for k in input_files if Path(k).stem == "questions" and "/" not in k]
    ids = sorted(str(q) for q in question_ids)
    return {
        "file": files[0] if files else None,
        "md5": input_files[files[0]] if files else None,
        "count": len(ids),
        "ids_md5": hashlib.md5("\n".join(ids).encode()).hexdigest(),
    }


def settings_as_run(settings: Settings, data_dir: str | Path, run: str) -> Settings:
    """The settings a run actually used: params.yaml (or the defaults) after CLI overrides,
    with `data` naming the data directory and run evaluated rather than the file's (or the
    bundled sample's) defaults."""
    return settings.model_copy(update={"data": DataParams(dir=Path(data_dir).as_posix(), runs=[run])})


def manifest_for(run: str, data_dir: Path, input_files: dict[str, str], settings: Settings,
                 spec: JudgeSpec, question_ids: Sequence[str] | None = None,
                 out_dir: Path | None = None) -> dict:
    """The manifest of one run. `question_ids` defaults to re-reading the questions file;
    `out_dir` (the results directory) adds `data.from_results`."""
    if question_ids is None:
        from ragspan.tasks.inputs.load import load_questions

        question_ids = load_questions(Path(data_dir))["question_id"].tolist()
    used = settings_as_run(settings, data_dir, run)
    data = data_snapshot(Path(data_dir))
    if out_dir is not None:
        data["from_results"] = Path(os.path.relpath(Path(data_dir).resolve(), Path(out_dir).resolve())).as_posix()
    return {
        "run": run,
        "inputs_md5": dict(sorted(input_files.items())),
        "data": data,
        "questions": questions_fingerprint(input_files, question_ids),
        "params": used.model_dump(mode="json"),
        "params_hash": used.fingerprint(),
        "judge": spec.as_dict(),
        "ragspan_version": RAGSPAN_VERSION,
        "code_version": code_version(),
        "output_schema": OUTPUT_SCHEMA_VERSION,
        **git_state(data_dir),
    }
