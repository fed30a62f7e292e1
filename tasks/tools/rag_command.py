"""A run obtained for the watch flow: `rag.command` (params.yaml) filled in and executed,
and a candidate run file validated and moved into DATA/runs/ (flows/watch.py).

`rag.command` placeholders: {data_dir} {questions} {out} {index} {version} {revision}
{run} {python} (this interpreter), each substituted into one argument (no shell)."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from ragspan.tasks.config import Settings
from ragspan.tasks.errors import ConfigError


def questions_file(data_dir: Path) -> Path:
    """The questions file of a data directory (`{questions}`)."""
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
    from ragspan.tasks.inputs.load import load_workspace

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
