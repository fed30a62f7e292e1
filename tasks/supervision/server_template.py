"""A fresh state dir's Prefect database starts as a copy of an empty, already migrated one.

Why: the first `prefect server start` on a fresh PREFECT_HOME runs Prefect's whole chain of
Alembic migrations on an empty SQLite file — ~3 of the server's ~7 CPU-s of start-up and
~3 s of a cold run's wall at any size (docs/decisions.md #70) — and the outcome is the same
empty database every time for a given Prefect. So the first server ragspan starts on a
machine keeps a copy of its database as it is when the API first answers, checked to hold
the schema and Prefect's block types and nothing else (no flow run, no event, no log), in
the user's cache dir (`template_dir`); a server starting on a state dir without a database
starts from that copy. Prefect checks on every start what it always checks — the Alembic
revision (a copy made by another Prefect is migrated on), the block registry (registered
again when it differs) — so a copy costs start-up time at worst, never correctness.

Only the default database (SQLite at PREFECT_HOME/prefect.db) is seeded or kept: a
configured PREFECT_API_DATABASE_CONNECTION_URL is the user's. Standard library only; every
failure (no cache dir, no room, a locked file) costs the migration and nothing else.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import tempfile
from collections.abc import Callable
from contextlib import closing
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

DATABASE = "prefect.db"  # Prefect's default SQLite file under PREFECT_HOME
# The tables a freshly started server has filled: anything else is a run's, not the schema's.
SCHEMA_TABLES = frozenset({"alembic_version", "block_schema", "block_schema_reference", "block_type"})
_URL_ENV = ("PREFECT_API_DATABASE_CONNECTION_URL", "PREFECT_SERVER_DATABASE_CONNECTION_URL")


def template_dir() -> Path:
    """Where templates are kept: the user's cache dir (XDG_CACHE_HOME, else ~/.cache) /ragspan."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ragspan"


def template_path() -> Path | None:
    """The template for the Prefect installed (None: its version is unknown, or there is no
    home directory to keep it in — Path.home() raises RuntimeError without one)."""
    try:
        return template_dir() / f"prefect-{version('prefect')}.db"
    except (PackageNotFoundError, RuntimeError):
        return None


def _default_database(prefect_home: Path) -> Path | None:
    """PREFECT_HOME/prefect.db, unless a database URL is configured."""
    return None if any(os.environ.get(k) for k in _URL_ENV) else prefect_home / DATABASE


def seed(prefect_home: Path) -> bool:
    """Before the server starts: a state dir without a database gets the template's copy
    (written aside, then renamed). True when it did."""
    database, template = _default_database(prefect_home), template_path()
    if database is None or template is None or database.exists() or not template.is_file():
        return False
    return _copied(lambda tmp: shutil.copyfile(template, tmp), database)


def _copied(write: Callable[[Path], object], target: Path) -> bool:
    """`write(tmp)` into a file beside `target`, renamed onto it; False (and nothing left
    behind) when anything fails."""
    tmp = None
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}-")
        os.close(fd)
        tmp = Path(name)
        if write(tmp) is False:
            return False
        os.replace(tmp, target)
        tmp = None
        return True
    except (OSError, sqlite3.Error):
        return False
    finally:
        if tmp is not None:
            tmp.unlink(missing_ok=True)


def schema_only(database: Path) -> bool:
    """The database holds rows in no table but SCHEMA_TABLES (and has those)."""
    with closing(sqlite3.connect(f"file:{database}?mode=ro", uri=True)) as db:
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        filled = {t for t in tables if db.execute(f'SELECT 1 FROM "{t}" LIMIT 1').fetchone()}
    return bool(filled) and filled <= SCHEMA_TABLES and "alembic_version" in filled


def keep(prefect_home: Path) -> bool:
    """Once a server started on a fresh database answers: a consistent copy of that
    database (SQLite's backup API: the server may be writing) becomes the template, unless
    there is one or the copy holds more than the schema (a run already wrote to it). True
    when it did."""
    database, template = _default_database(prefect_home), template_path()
    if database is None or template is None or template.exists() or not database.is_file():
        return False

    def backup(tmp: Path) -> bool:
        with closing(sqlite3.connect(f"file:{database}?mode=ro", uri=True)) as source, \
                closing(sqlite3.connect(tmp)) as copy:
            source.backup(copy)
            copy.execute("PRAGMA journal_mode = DELETE")  # one file (the source's WAL mode came with its pages)
        return schema_only(tmp)

    return _copied(backup, template)
