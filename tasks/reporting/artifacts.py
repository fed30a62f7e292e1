"""Prefect artifacts of an evaluate run: what the Prefect UI shows without opening a file.

Every evaluate flow run (the CLI, a DVC stage, a scheduled or triggered watch run)
publishes two artifacts under keys that stay the same for every run of one name, so the
UI's Artifacts page shows each run name's history:

- `ragspan-<name>`: Markdown — label rates with their 95% intervals, the change against
  the previous run of the same name (read back from the server: the latest table
  artifact under the same key), what to fix first, and where the report is (host and
  absolute path: a scheduled run's report sits on its worker's disk).
- `ragspan-<name>-rates`: a table, one row per label (count, rate, interval, change).

Prefect keys allow lowercase letters, digits and dashes only: a name that needs changing
to fit gets a short hash of the original, so two names never share a key.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import socket
from pathlib import Path

from prefect import task
from prefect.cache_policies import NO_CACHE
from ragspan.tasks.core.taxonomy import LABELS, STAGES
from ragspan.tasks.reporting.findings import concentration, fix_order
from ragspan.tasks.reporting.formatting import pct, pp
from ragspan.tasks.reporting.rebuild import rebuild_lines

KEY_PREFIX = "ragspan-"
TABLE_SUFFIX = "-rates"
_KEY_OK = re.compile(r"^[a-z0-9-]+$")


def artifact_key(name: str) -> str:
    """The Markdown artifact's key for a run name: `ragspan-<slug>` (+ `-<hash>` when the
    slug is not the name itself, or is cut to 60 characters)."""
    slug = re.sub(r"-+", "-", re.sub(r"[^a-z0-9]+", "-", name.lower())).strip("-") or "run"
    if slug != name or len(slug) > 60:
        slug = f"{slug[:60].strip('-')}-{hashlib.sha256(name.encode('utf-8')).hexdigest()[:6]}"
    key = KEY_PREFIX + slug
    assert _KEY_OK.match(key), key
    return key


def table_key(name: str) -> str:
    return artifact_key(name) + TABLE_SUFFIX


def previous_rates(table_data: str | list | None) -> dict[str, float | None]:
    """{label: rate} from a previous table artifact's data (a JSON string, as the server
    stores it, or the rows themselves); {} when there is none or it is not ours."""
    if table_data is None:
        return {}
    rows = json.loads(table_data) if isinstance(table_data, str) else table_data
    if not isinstance(rows, list):
        return {}
    return {r["label"]: r.get("rate") for r in rows if isinstance(r, dict) and "label" in r}


def rate_rows(metrics: dict, previous: dict[str, float | None]) -> list[dict]:
    """The table artifact: one row per label, with the change when a previous run exists."""
    ci = metrics.get("rate_ci95") or {}
    rows = []
    for label in LABELS:
        v = (metrics.get("labels") or {}).get(label) or {"count": 0, "rate": None}
        c = ci.get(label) or {}
        before = previous.get(label)
        change = None if v["rate"] is None or before is None else round(v["rate"] - before, 4)
        rows.append({"label": label, "count": v["count"], "rate": v["rate"], "ci95_low": c.get("low"),
                     "ci95_high": c.get("high"), "previous_rate": before, "change": change})
    return rows


def report_location(out_dir: Path) -> str:
    return f"{socket.gethostname()}:{(Path(out_dir).resolve() / 'report.html').as_posix()}"


def _md(text: object) -> str:
    return re.sub(r"([\\`*_\[\]<>|#!~])", r"\\\1", " ".join(str(text).split()))


def artifact_markdown(metrics: dict, rows: list[dict], location: str, previous: dict | None) -> str:
    """The Markdown artifact. `previous`: {"created": ..., "flow_run_id": ...} of the
    previous run of the same name, or None."""
    judge = metrics.get("judge") or {}
    lines = [f"## ragspan: {_md(metrics.get('run', '?'))}", "",
             (f"{metrics.get('claims', 0)} claims, {metrics.get('judged', 0)} judged, "
             f"{metrics.get('unjudged', 0)} unjudged (excluded from rates) · judge "
             f"{_md(judge.get('judge', '?'))} ({_md(judge.get('model', '?'))})"), ""]
    head, rule = "| label | claims | rate | 95% CI |", "|---|---:|---:|---:|"
    if previous:
        head += " change vs previous |"
        rule += "---:|"
    lines += [head, rule]
    for r in rows:
        interval = "—" if r["ci95_low"] is None else f"{pct(r['ci95_low'])} – {pct(r['ci95_high'])}"
        row = f"| {r['label']} | {r['count']} | {pct(r['rate'])} | {interval} |"
        if previous:
            row += f" {pp(r['change'])} |"
        lines.append(row)
    if previous:
        lines += ["", (f"Previous run of this name: {_md(previous.get('created') or '?')} "
                      f"(flow run `{previous.get('flow_run_id') or '-'}`).")]
    else:
        lines += ["", "First run of this name on this Prefect server: nothing to compare with yet."]
    if metrics.get("rebuild"):  # after an index rebuild: the claims it moved
        lines += ["", *rebuild_lines(metrics["rebuild"], _md)]
    lines += ["", "### What to fix first", ""]
    share = metrics.get("failure_share") or {}
    for i, label in enumerate(fix_order(metrics), 1):
        n = metrics["labels"][label]["count"]
        if not n:
            continue
        where = concentration(metrics, label)
        conc = "" if where is None else (f"; concentrated in {_md(where['key'])} = {_md(where['value'])} "
                                         f"({where['count']} of {where['of']})")
        s = share.get(label)
        lines.append(f"{i}. **{label}** — {STAGES[label]}: {n} claims"
                     f"{'' if s is None else f', {s:.0%} of failures'}{conc}")
    if not any(metrics["labels"][lab]["count"] for lab in STAGES):
        lines.append("No failures.")
    lines += ["", "### The report", "", (f"`{location}` (every claim with its evidence; "
              "`summary.md` and `metrics.json` next to it)"), ""]
    return "\n".join(lines)


def _latest(key: str) -> dict | None:
    """The latest artifact under `key` on the current Prefect API, as plain data."""
    from prefect.artifacts import Artifact

    found = Artifact.get(key, _sync=True)
    if found is None:
        return None
    return {"data": found.data, "created": found.created.isoformat(timespec="seconds") if found.created else None,
            "flow_run_id": str(found.flow_run_id) if found.flow_run_id else None}


@task(name="publish-artifacts", cache_policy=NO_CACHE)
def publish_artifacts(metrics: dict, out_dir: str, name: str) -> dict[str, str]:
    """Create the two artifacts of this run under `name`'s keys; returns {kind: key}.
    A server that refuses them costs a warning, never the results already written."""
    from prefect.artifacts import create_markdown_artifact, create_table_artifact

    md_key, tab_key = artifact_key(name), table_key(name)
    try:
        before = _latest(tab_key)
        rows = rate_rows(metrics, previous_rates(before["data"]) if before else {})
        text = artifact_markdown(metrics, rows, report_location(Path(out_dir)), before)
        create_table_artifact(rows, key=tab_key, description=f"ragspan label rates of {name}")
        create_markdown_artifact(text, key=md_key, description=f"ragspan taxonomy of {name}")
    except Exception as exc:  # noqa: BLE001 - the results are on disk; say so and go on
        logging.getLogger("ragspan").warning("Prefect artifacts of %s not published: %s", name, exc)
        return {}
    return {"markdown": md_key, "table": tab_key}
