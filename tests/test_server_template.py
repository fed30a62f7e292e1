"""A fresh state dir's Prefect database starts from a migrated template
(tasks/supervision/server_template.py): the first real server ragspan starts keeps one in
the user's cache dir, holding the schema and nothing a run wrote; the next fresh state dir's
server starts from it and serves a flow run; a database holding a run's rows never becomes
the template; a configured database URL is left alone."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path

from ragspan.tasks.supervision import server_template
from servers import free_port, healthy, stop, wait_for


def _rows(database: Path, table: str) -> int:
    with closing(sqlite3.connect(database)) as db:
        return db.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0]


def _schema_db(path: Path, extra: str | None = None) -> Path:
    with closing(sqlite3.connect(path)) as db:
        db.execute("CREATE TABLE alembic_version (version_num TEXT)")
        db.execute("INSERT INTO alembic_version VALUES ('abc')")
        db.execute("CREATE TABLE block_type (id TEXT)")
        db.execute("INSERT INTO block_type VALUES ('t')")
        db.execute("CREATE TABLE flow_run (id TEXT)")
        if extra:
            db.execute(f"INSERT INTO {extra} VALUES ('x')")
        db.commit()
    return path


def test_only_a_schema_becomes_the_template_and_seeds_only_a_missing_database(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    for key in ("PREFECT_API_DATABASE_CONNECTION_URL", "PREFECT_SERVER_DATABASE_CONNECTION_URL"):
        monkeypatch.delenv(key, raising=False)
    dirty, clean = tmp_path / "dirty", tmp_path / "clean"
    dirty.mkdir(), clean.mkdir()
    _schema_db(dirty / server_template.DATABASE, extra="flow_run")
    assert not server_template.keep(dirty)  # a run's row: not a template
    assert not server_template.template_path().exists() and not list(server_template.template_dir().iterdir())
    _schema_db(clean / server_template.DATABASE)
    assert server_template.keep(clean) and server_template.schema_only(server_template.template_path())
    assert not server_template.keep(clean)  # one template: kept, not replaced
    fresh, existing = tmp_path / "fresh", dirty
    assert server_template.seed(fresh) and _rows(fresh / server_template.DATABASE, "alembic_version") == 1
    assert not server_template.seed(existing) and _rows(existing / server_template.DATABASE, "flow_run") == 1
    monkeypatch.setenv("PREFECT_API_DATABASE_CONNECTION_URL", "postgresql+asyncpg://u@h/db")
    assert not server_template.seed(tmp_path / "configured")  # the user's database, not ours
    assert not (tmp_path / "configured" / server_template.DATABASE).exists()


def _start(home: Path, env: dict[str, str]) -> tuple[subprocess.Popen, str]:
    port = free_port()
    home.mkdir()
    with open(home / "supervisor.log", "w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "ragspan.flows.cli", "server", "start", "--port", str(port)],
                                env={**env, "RAGSPAN_HOME": str(home)}, stdout=log, stderr=subprocess.STDOUT)
    api = f"http://127.0.0.1:{port}/api"
    wait_for(lambda: healthy(api) or proc.poll() is not None, 120, "the Prefect server")
    assert proc.poll() is None
    return proc, api


def test_a_fresh_state_dirs_server_starts_from_the_template_and_serves_runs(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "RAGSPAN_"))}
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache")
    first, api = _start(tmp_path / "first", env)
    try:
        template = tmp_path / "cache" / "ragspan" / server_template.template_path().name
        wait_for(template.exists, 30, "the template")
    finally:
        stop(first)
    assert server_template.schema_only(template) and _rows(template, "block_type") > 0
    assert "database from" not in (tmp_path / "first" / "supervisor.log").read_text()  # migrated itself
    made = template.stat().st_mtime_ns
    second, api = _start(tmp_path / "second", env)
    try:
        flow = ("from prefect import flow\n@flow\ndef hello():\n    return 42\nassert hello() == 42\n")
        ran = subprocess.run([sys.executable, "-c", flow], env={**env, "PREFECT_API_URL": api},
                             capture_output=True, text=True, timeout=120, check=False)
        assert ran.returncode == 0, ran.stderr[-2000:]
        db = tmp_path / "second" / "prefect" / server_template.DATABASE
        deadline = time.time() + 30
        while _rows(db, "flow_run") == 0 and time.time() < deadline:
            time.sleep(0.2)
        assert _rows(db, "flow_run") == 1  # the seeded database records runs
        assert f"database from {template}" in (tmp_path / "second" / "supervisor.log").read_text()
    finally:
        stop(second)
    assert template.stat().st_mtime_ns == made and server_template.schema_only(template)


def test_no_home_directory_means_no_template_and_no_error(tmp_path, monkeypatch):
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setattr(Path, "home", classmethod(lambda cls: (_ for _ in ()).throw(RuntimeError("no home"))))
    assert server_template.template_path() is None
    assert not server_template.seed(tmp_path) and not server_template.keep(tmp_path)


def test_schema_only_refuses_any_row_outside_the_schema_tables(tmp_path):
    assert server_template.schema_only(_schema_db(tmp_path / "a.db"))
    assert not server_template.schema_only(_schema_db(tmp_path / "b.db", extra="flow_run"))
