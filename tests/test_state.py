"""The state dir's stores (tasks/state/_stores.py, `ragspan cache stats|clear|prune`), on the
state a real evaluate run leaves: every store listed with its size, pruning by age and by
total size (least recently used first, judge-cache rows included), `clear --all`, the
params.yaml limit applied after each run, and a cold run after everything was pruned."""

from __future__ import annotations

import argparse
import json
import os
import re
import sqlite3
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import SAMPLE
from ragspan.flows.cli import cache as cache_cmd
from ragspan.tasks.state import _stores as state

pytestmark = pytest.mark.usefixtures("prefect_server")


def _cli(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="ragspan")
    cache_cmd.register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(list(argv))
    return args.func(args)


def _evaluate(out: Path, params: Path | None = None) -> dict:
    from ragspan.flows.evaluate import evaluate

    return evaluate(data_dir=str(SAMPLE), run="baseline", out_dir=str(out), params_path=str(params) if params else None)


def _judge_rows(n: int, created: float, tag: str) -> None:
    from ragspan.tasks.judges.cache import JudgeCache, cache_key

    with JudgeCache() as cache:
        for i in range(n):
            parts = {"kind": "openai", "model": "m", "prompt_id": "extract", "prompt_version": tag,
                     "messages": [{"role": "user", "content": f"{tag}-{i}" * 50}]}
            cache.put(cache_key(parts), parts, {"ok": i})
    with sqlite3.connect(state.store_paths()["judge_cache"]) as conn:
        conn.execute("UPDATE judge_calls SET created_at = ? WHERE prompt_version = ?", (created, tag))


def _age(path: Path, seconds: float) -> None:
    t = time.time() - seconds
    os.utime(path, (t, t))


def test_sizes_parse():
    assert state.parse_size("10GB") == 10**10 and state.parse_size("500 MB") == 5 * 10**8
    assert state.parse_size("1.5g") == 15 * 10**8 and state.parse_size("0") == 0 and state.parse_size(2048) == 2048
    for bad in ("ten", "5 parsecs", "GB"):
        with pytest.raises(ValueError, match="not a size"):
            state.parse_size(bad)


def test_stats_prune_and_clear_on_a_real_run(tmp_path, state_dir, capsys):
    first = _evaluate(tmp_path / "a")
    _judge_rows(3, time.time() - 20 * 86400, "old")  # LLM-judge calls made 20 days ago
    _judge_rows(3, time.time(), "new")
    (state_dir / "demo-index" / "demo").mkdir(parents=True)
    (state_dir / "demo-index" / "demo" / "index.json").write_text("{}")

    assert _cli("cache", "stats", "--json") == 0
    stats = json.loads(capsys.readouterr().out)
    for store in state.CACHES:
        if store == "spill":  # a finished run leaves no spill: listed, empty
            assert stats[store]["entries"] == 0 and stats[store]["pruned"]
            continue
        assert stats[store]["entries"] > 0, store
        assert stats[store]["bytes"] > 0, store
    assert stats["judge_cache"]["entries"] == 6 and stats["indexes"]["entries"] == 1
    results = state.store_paths()["step_results"]
    # every record's bytes; the sweep's marker and the register of runs (dot-names) are not entries
    disk = sum(p.stat().st_size for p in results.rglob("*")
               if p.is_file() and not p.relative_to(results).parts[0].startswith("."))
    assert (results / ".runs").is_dir()
    assert stats["step_results"]["bytes"] == disk
    assert stats["demo_indexes"]["entries"] == 1 and not stats["demo_indexes"]["pruned"]
    assert _cli("cache", "stats") == 0
    text = capsys.readouterr().out
    for title in ("judge cache", "answer store", "validated inputs", "step results", "corpus indexes"):
        assert title in text

    # by age: only what has not been used for 10 days goes
    old_index = state_dir / "index" / "stale"
    old_index.mkdir()
    (old_index / "x.bin").write_bytes(b"x" * 5000)
    _age(old_index, 30 * 86400)
    assert _cli("cache", "prune", "--older-than", "10") == 0
    assert "removed judge cache: 3 entries" in capsys.readouterr().out
    assert not old_index.exists() and state.stats()["judge_cache"]["entries"] == 3
    with sqlite3.connect(state.store_paths()["judge_cache"]) as conn:
        assert {r[0] for r in conn.execute("SELECT prompt_version FROM judge_calls")} == {"new"}
    assert state.stats()["indexes"]["entries"] == 1  # the run's own index stays

    # by total size: least recently used first, until the caches fit
    order = sorted((e for s in state.CACHES for e in state.entries(s)), key=lambda e: e.used)
    total = sum(e.bytes for e in order)
    limit = total // 2
    removed = state.prune(limit)
    after = state.stats()
    assert sum(after[s]["bytes"] for s in state.CACHES if s not in state.SQLITE) <= limit
    gone = sum(r["entries"] for r in removed.values())
    assert 0 < gone < len(order)
    assert not any(e.path.exists() for e in order[:gone] if e.store not in state.SQLITE)
    assert all(e.path.exists() for e in order[gone:])

    # clear --all: every cache empty, the demo index kept; a cold run gives the same labels
    assert _cli("cache", "clear", "--all") == 0
    after = state.stats()
    assert all(after[s]["entries"] == 0 for s in state.CACHES), after
    assert (state_dir / "demo-index" / "demo" / "index.json").is_file()
    second = _evaluate(tmp_path / "b")
    assert {k: v["count"] for k, v in second["labels"].items()} == {k: v["count"] for k, v in first["labels"].items()}
    a = pd.read_parquet(tmp_path / "a" / "diagnoses.parquet")
    b = pd.read_parquet(tmp_path / "b" / "diagnoses.parquet")
    assert a["label"].tolist() == b["label"].tolist()


def test_the_params_limit_applies_after_each_run_and_spares_recent_use(tmp_path, state_dir):
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump({"state": {"max_size": "1kB"}}))
    stale = state_dir / "index" / "stale"
    stale.mkdir(parents=True)
    (stale / "x.bin").write_bytes(b"x" * 50_000)
    _age(stale, 2 * 3600)
    _evaluate(tmp_path / "a", params)
    assert not stale.exists(), "an entry unused for 2 h past the limit must go after the run"
    left = state.stats()
    # everything the run just used is spared (used in the last hour), though over the limit
    assert left["indexes"]["entries"] == 1 and left["answer_store"]["entries"] == 1
    assert sum(left[s]["bytes"] for s in state.CACHES) > 1000


def test_a_bad_limit_is_refused_with_its_value(tmp_path):
    from ragspan.tasks.config import load_settings
    from ragspan.tasks.errors import ConfigError

    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump({"state": {"max_size": "lots"}}))
    with pytest.raises((ConfigError, ValueError), match="lots"):
        load_settings(params)


_NUMBERS = {w: i for i, w in enumerate(
    ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen"])}


def test_every_count_of_caches_in_docs_and_code_is_the_registrys():
    """A doc saying "the nine caches" when the registry holds ten drifts silently: every
    "<number> caches" / "<number> stores are caches" in the docs and the code is checked."""
    from conftest import REPO
    from ragspan.tasks.state import CACHES

    said = []
    for path in [*REPO.glob("docs/*.md"), REPO / "README.md", *REPO.glob("tasks/**/*.py"), *REPO.glob("flows/**/*.py")]:
        for m in re.finditer(r"\b(" + "|".join(_NUMBERS) + r") (?:caches\b|stores are caches)",
                             path.read_text(encoding="utf-8"), flags=re.IGNORECASE):
            said.append((path.name, m.group(0), _NUMBERS[m.group(1).lower()]))
    assert said, "the check found no count at all"
    assert [s for s in said if s[2] != len(CACHES)] == []
