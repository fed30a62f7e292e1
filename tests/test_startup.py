"""What an unchanged re-run does before it writes the kept results: only what it needs.
The flow module imports no shard chain (nor nltk), the flow's load takes the workspace
`prepare_run` validated in the same process (and still reads a changed file again), and
the corpus index's name is computed once per validated-inputs entry."""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from ragspan.tasks.config import load_settings
from ragspan.tasks.errors import InputError
from ragspan.tasks.inputs.load import checked_workspace
from ragspan.tasks.inputs.load import workspace as workspace_module
from ragspan.tasks.steps import corpus_search

from tests.conftest import SAMPLE


def test_the_flow_module_imports_no_shard_chain_and_no_nltk():
    probe = ("import sys; import ragspan.flows.evaluate; print(sorted(m for m in ('nltk', 'ragspan.flows.shard', "
             "'ragspan.tasks.steps.decompose', 'ragspan.tasks.steps.extract', 'ragspan.tasks.judges.local') "
             "if m in sys.modules))")
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "[]"


@pytest.fixture
def data(tmp_path: Path) -> Path:
    copy = tmp_path / "data"
    shutil.copytree(SAMPLE, copy)
    return copy


@pytest.mark.usefixtures("state_dir")
def test_a_prepared_workspace_holds_no_large_table_and_a_changed_file_is_read_again(data: Path):
    """No hand-over through the module: what prepare_run validated reaches the flow's load
    through the validated-inputs cache, keyed by the files' content; the caller keeps only
    the head (its large tables deferred), so the process never holds them twice."""
    settings = load_settings(None)
    prepared = checked_workspace(data, "baseline", settings, deferred=True)
    assert prepared.inputs_key and isinstance(prepared.tables, workspace_module.DeferredTables)
    assert prepared.tables._tables is None  # not read: the entry it was kept in holds them
    taken = checked_workspace(data, "baseline", settings)  # the flow's load: the cache's hit
    assert taken.inputs_key == prepared.inputs_key and taken.answers is not prepared.answers
    assert taken.chunks.equals(prepared.chunks) and len(taken.answers) == len(prepared.answers)

    run_file = data / "runs" / "baseline.jsonl"
    lines = run_file.read_text(encoding="utf-8").splitlines(keepends=True)
    run_file.write_text("".join(lines[:-1]), encoding="utf-8")  # one answer fewer
    changed = checked_workspace(data, "baseline", settings)
    assert len(changed.answers) == len(prepared.answers) - 1 and changed.inputs_key != prepared.inputs_key
    assert not hasattr(workspace_module, "_HANDOVER")


@pytest.mark.usefixtures("state_dir")
def test_the_index_name_is_computed_once_per_validated_inputs_entry(data: Path, monkeypatch):
    ws = checked_workspace(data, "baseline", load_settings(None))
    expected = corpus_search.chunk_table_hash(ws.chunks, ws.corpus)
    assert corpus_search.index_name(ws) == expected

    def not_again(*_: object) -> str:
        raise AssertionError("hashed every chunk again")

    monkeypatch.setattr(corpus_search, "snapshot_digest", not_again)
    assert corpus_search.index_name(ws) == expected
    with pytest.raises(AssertionError):  # other inputs (or none known): hashed now
        corpus_search.index_name(dataclasses.replace(ws, inputs_key="another-inputs-key"))
    with pytest.raises(AssertionError):
        corpus_search.index_name(dataclasses.replace(ws, inputs_key=""))


@pytest.mark.usefixtures("state_dir")
def test_a_cache_hit_reads_the_large_tables_only_when_used(data: Path, state_dir: Path):
    settings = load_settings(None)
    first = checked_workspace(data, "baseline", settings)  # a miss: read, validated, kept
    hit = checked_workspace(data, "baseline", settings)
    assert isinstance(hit.tables, workspace_module.DeferredTables) and len(hit.answers) == len(first.answers)
    assert hit.corpus.equals(first.corpus) and hit.chunks.equals(first.chunks)
    assert hit.retrieved.equals(first.retrieved)

    for entry in (state_dir / "inputs").glob("tables-*.pickle"):  # gone: the files are read again
        entry.unlink()
    again = checked_workspace(data, "baseline", settings)
    assert again.chunks.equals(first.chunks) and list((state_dir / "inputs").glob("tables-*.pickle"))

    for entry in (state_dir / "inputs").glob("tables-*.pickle"):
        entry.unlink()
    changed = checked_workspace(data, "baseline", settings)
    (data / "questions.csv").write_text((data / "questions.csv").read_text(encoding="utf-8") + "\n",
                                        encoding="utf-8")
    with pytest.raises(InputError, match="changed during the run"):
        _ = changed.corpus
