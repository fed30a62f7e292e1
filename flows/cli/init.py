"""`ragspan init [DIR] [--data PATH]`: a git + DVC workspace for a user's own data.

What it does, each step skipped when already done (re-running is safe):

1. `git init` unless DIR is already inside a git work tree;
2. `dvc init` (with `--subdir` when DIR is below the git top level), `core.analytics
   false`, `core.autostage true` (DVC stages the `.dvc`/.gitignore files it writes);
3. the data: `--data PATH` outside DIR is copied to DIR/data; then `dvc add <data>`;
4. a default local remote, `<parent>/<DIR name>.dvc-storage` (or `--remote URL`), so
   `dvc push` / `dvc pull` work offline;
5. `params.yaml` pointing at the data (runs = DATA/runs/*.jsonl), `dvc.yaml` (one
   evaluate stage per run and the `aggregate` stage, like ragspan's own), `prefect.yaml`
   (the watch flow for `prefect deploy`, flows/deploy.py), the plot templates and the
   offline plots page under .dvc/plots/, and `.ragspan/` (caches) in .gitignore;
6. a commit "ragspan init" only when git has a user configured (nothing is assumed);
   otherwise the files are staged and the command to commit is printed.

Everything shells out to the real `git` and `dvc` (dvc from this Python environment).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from importlib import resources
from pathlib import Path

from ragspan.flows.deploy import PREFECT_YAML
from ragspan.tasks.core.taxonomy import COLORS as LABEL_COLORS
from ragspan.tasks.core.taxonomy import LABELS
from ragspan.tasks.errors import InitError
from ragspan.tasks.reporting.results_files import CACHED_OUTS, TRACKED_OUTS

# The files `ragspan init` writes from templates (package data in flows/cli/templates/):
# dvc.yaml, with the data directory and the evaluate stage's outs filled in, and the DVC
# plot templates, with the taxonomy's labels and colours filled in. ragspan's own dvc.yaml
# and .dvc/plots/ are the same; tests keep them so.
_TEMPLATES = resources.files("ragspan.flows.cli.templates")
PLOT_TEMPLATE_NAMES = ("taxonomy_stacked.json", "taxonomy_bars.json")

# The offline DVC plots page (Vega inlined; scripts/vendor-vega builds it), copied to
# .dvc/plots/ and set as `plots.html_template`, so `dvc plots show/diff` pages render offline.
PLOTS_PAGE = resources.files("ragspan.tasks.reporting") / "dvc_plots.html"
PLOTS_PAGE_NAME = "offline.html"


def plot_templates() -> dict[str, dict]:
    """{file name: Vega-Lite spec} of the DVC plot templates, labels and colours from
    tasks/core/taxonomy.py (the template files hold placeholders, not a copy of them)."""
    fill = {"<RAGSPAN_LABELS>": list(LABELS), "<RAGSPAN_LABEL_COLORS>": [LABEL_COLORS[x] for x in LABELS]}

    def filled(node: object) -> object:
        if isinstance(node, dict):
            return {key: filled(value) for key, value in node.items()}
        if isinstance(node, list):
            return [filled(value) for value in node]
        return fill.get(node, node) if isinstance(node, str) else node

    return {name: filled(json.loads((_TEMPLATES / name).read_text(encoding="utf-8")))
            for name in PLOT_TEMPLATE_NAMES}


def dvc_yaml(data: str) -> str:
    """The workspace's dvc.yaml text for the data directory `data` (relative to it)."""
    # named dvc.yaml.template: a dvc.yaml anywhere in this repository is a DVC pipeline file
    text = (_TEMPLATES / "dvc.yaml.template").read_text(encoding="utf-8")
    return text.replace("@DATA@", data).replace("@OUTS@", evaluate_outs_yaml())


def evaluate_outs_yaml() -> str:
    """The evaluate stage's `outs:` entries (dvc.yaml's @OUTS@)."""
    lines = [f"        - results/${{item}}/{name}" for name in CACHED_OUTS]
    lines += [f"        - results/${{item}}/{name}:\n            cache: false" for name in TRACKED_OUTS]
    return "\n".join(lines)


def _dvc() -> list[str]:
    """The dvc of this Python environment (ragspan pins it), else the one on PATH."""
    exe = Path(sys.executable).with_name("dvc")
    return [str(exe)] if exe.exists() else ["dvc"]


def _run(cmd: list[str], cwd: Path, what: str) -> str:
    try:
        out = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False, timeout=600)
    except OSError as exc:
        raise InitError(f"{what}: cannot run {cmd[0]}: {exc}") from exc
    if out.returncode != 0:
        raise InitError(f"{what} failed ({' '.join(cmd)}):\n{(out.stderr or out.stdout).strip()}")
    return out.stdout.strip()


def _git_ok(cwd: Path, *args: str) -> str | None:
    try:
        out = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=False, timeout=30)
    except OSError:
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def _append_line(path: Path, line: str) -> None:
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    if line not in text.splitlines():
        path.write_text(text + ("" if not text or text.endswith("\n") else "\n") + line + "\n",
                        encoding="utf-8")


def _runs_in(data: Path) -> list[str]:
    return sorted(p.stem for p in (data / "runs").glob("*.jsonl"))


def _place_data(root: Path, given: str | None) -> Path:
    """The data directory inside the workspace (copied in when given from outside)."""
    if given is None:
        data = root / "data"
        if not data.is_dir():
            raise InitError(f"no data directory: put your data in {data} or pass --data PATH")
        return data
    src = Path(given).resolve()
    if not src.is_dir():
        raise InitError(f"--data {given}: not a directory")
    if src == root or root in src.parents:
        return src
    dest = root / "data"
    if dest.exists():
        raise InitError(f"--data {given} is outside {root} and {dest} already exists: "
                        "move your data into the workspace yourself")
    shutil.copytree(src, dest)
    print(f"copied {src} → {dest}")
    return dest


def _check_data(data: Path, runs: list[str]) -> None:
    """Fail early, with the loader's message (file, row, field), on unusable data."""
    from ragspan.tasks.config import Settings
    from ragspan.tasks.inputs.load import load_workspace

    defaults = Settings()
    for run in runs or [None]:
        load_workspace(data, run, defaults.chunking.size, defaults.chunking.overlap,
                       defaults.pipeline.default_context_k)


def init_workspace(root: Path, data_arg: str | None = None, remote: str | None = None,
                   runs: list[str] | None = None, commit: bool = True) -> dict:
    """Scaffold (or complete) a ragspan workspace at `root`; returns what was done."""
    root = root.resolve()
    root.mkdir(parents=True, exist_ok=True)
    done: dict[str, object] = {"root": str(root)}

    data = _place_data(root, data_arg)
    rel_data = data.relative_to(root).as_posix()
    runs = runs or _runs_in(data)
    if not runs:
        raise InitError(f"{data}/runs/ has no <run>.jsonl files: nothing to evaluate")
    _check_data(data, runs)

    top = _git_ok(root, "rev-parse", "--show-toplevel")
    if top is None:
        _run(["git", "init", "-q"], root, "git init")
        top = str(root)
        done["git_init"] = True
    if not (root / ".dvc").is_dir():
        subdir = ["--subdir"] if Path(top).resolve() != root else []
        _run([*_dvc(), "init", "-q", *subdir], root, "dvc init")
        done["dvc_init"] = True
    _run([*_dvc(), "config", "core.analytics", "false"], root, "dvc config core.analytics")
    _run([*_dvc(), "config", "core.autostage", "true"], root, "dvc config core.autostage")

    plots = root / ".dvc" / "plots"
    plots.mkdir(exist_ok=True)
    for name, content in plot_templates().items():
        (plots / name).write_text(json.dumps(content, indent=2) + "\n", encoding="utf-8")
    (plots / PLOTS_PAGE_NAME).write_text(PLOTS_PAGE.read_text(encoding="utf-8"), encoding="utf-8")
    _run([*_dvc(), "config", "plots.html_template", f"plots/{PLOTS_PAGE_NAME}"], root,
         "dvc config plots.html_template")

    _append_line(root / ".gitignore", "/.ragspan/")
    _append_line(root / ".dvcignore", "/.ragspan/")

    _run([*_dvc(), "add", "-q", rel_data], root, f"dvc add {rel_data}")
    done["dvc_add"] = rel_data

    existing = _run([*_dvc(), "remote", "list"], root, "dvc remote list")
    if remote or not existing:
        url = remote or str(root.parent / f"{root.name}.dvc-storage")
        if not remote:
            Path(url).mkdir(parents=True, exist_ok=True)
        _run([*_dvc(), "remote", "add", "--default", "--force", "storage", url], root, "dvc remote add")
        done["remote"] = url

    params = root / "params.yaml"
    if not params.exists():
        import yaml
        from ragspan.tasks.config import Settings

        settings = Settings.model_validate({"data": {"dir": rel_data, "runs": runs}})
        header = ("# ragspan parameters (written by `ragspan init`). Every key is validated by\n"
                  "# ragspan; dvc.yaml lists the sections each stage reads, so\n"
                  "# `dvc exp run -S judge.support_threshold=0.8` re-runs what depends on it.\n")
        params.write_text(header + yaml.safe_dump(settings.model_dump(mode="json"), sort_keys=False),
                          encoding="utf-8")
        done["params"] = True
    if not (root / PREFECT_YAML).exists():
        from ragspan.flows.deploy import prefect_yaml
        from ragspan.tasks.config import load_settings

        wp = load_settings(params)  # the schedule and index the user's params.yaml sets
        (root / PREFECT_YAML).write_text(prefect_yaml(cron=wp.schedule.cron, timezone=wp.schedule.timezone,
                                                      schedule_index=wp.rag.index), encoding="utf-8")
        done["prefect_yaml"] = True
    if not (root / "dvc.yaml").exists():
        (root / "dvc.yaml").write_text(dvc_yaml(rel_data),
                                       encoding="utf-8")
        done["dvc_yaml"] = True

    files = [".gitignore", ".dvcignore", ".dvc/config", ".dvc/plots", "params.yaml", "dvc.yaml",
             PREFECT_YAML, f"{rel_data}.dvc"]
    _run(["git", "add", "--", *[f for f in files if (root / f).exists()]], root, "git add")
    user = _git_ok(root, "config", "user.email")
    if commit and user and _git_ok(root, "diff", "--cached", "--quiet") is None:
        _run(["git", "commit", "-q", "-m", "ragspan init: DVC-tracked data, params, pipeline"],
             root, "git commit")
        done["commit"] = _git_ok(root, "rev-parse", "HEAD")
    else:
        done["commit"] = None
    done["runs"] = runs
    return done


def cmd_init(args: argparse.Namespace) -> int:
    try:
        done = init_workspace(Path(args.dir), args.data, args.remote, args.run, commit=not args.no_commit)
    except InitError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1 if "failed" in str(exc) else 2
    root = done["root"]
    print(f"ragspan workspace ready in {root}")
    print(f"  data: {done['dvc_add']} (DVC-tracked; {done['dvc_add']}.dvc is what git keeps)")
    print(f"  runs: {', '.join(done['runs'])}")
    if done.get("remote"):
        print(f"  DVC remote 'storage': {done['remote']}  (switch: dvc remote add -d -f storage s3://…)")
    if done["commit"]:
        print(f"  committed {str(done['commit'])[:7]} (your git user)")
    else:
        print("  files staged, not committed: git commit -m 'ragspan init'")
    print("next: dvc repro && git add -A && git commit -m 'first report' && dvc push")
    if done.get("prefect_yaml"):
        print(f"  {PREFECT_YAML}: the watch flow for `prefect deploy --all` to a process work pool "
              "(docs/operations.md)")
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser("init", help="scaffold a git + DVC workspace for your own data")
    p.add_argument("dir", nargs="?", default=".", help="workspace directory (default: .)")
    p.add_argument("--data", help="data directory (default: DIR/data; copied into DIR/data if outside)")
    p.add_argument("--run", action="append", help="run name to evaluate (repeatable; default: all of DATA/runs/*.jsonl)")
    p.add_argument("--remote", help="DVC remote URL (default: a local folder DIR/../<name>.dvc-storage)")
    p.add_argument("--no-commit", action="store_true", help="stage the files but never commit")
    p.set_defaults(func=cmd_init)
