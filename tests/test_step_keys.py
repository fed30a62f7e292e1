"""Step cache keys: a table is hashed once while it lives (tasks/steps/cache_policy.py), which
holds only because no step changes a table it is given — checked here over a whole run."""

from __future__ import annotations

import gc

import pandas as pd
import pytest
from conftest import SAMPLE
from ragspan.tasks.steps import cache_policy
from ragspan.tasks.steps.cache_policy import fingerprint, frame_content_hash


def _table(**extra: list) -> pd.DataFrame:
    return pd.DataFrame({"claim_id": ["c1", "c2"], "text": ["Refunds take 30 days.", "Shipping is free."],
                         "score": [0.5, 1.5], **extra})


def test_a_table_keeps_its_content_hash_and_equal_tables_share_it():
    a, b = _table(), _table()
    assert fingerprint(a) == fingerprint(a) == frame_content_hash(a) == fingerprint(b)
    changed = _table()
    changed.loc[1, "text"] = "Shipping costs 5 euros."
    assert fingerprint(changed) != fingerprint(a)
    assert fingerprint(_table(claims=[["x"], None])) != fingerprint(_table(claims=[["y"], None]))


def test_string_columns_hash_by_value_not_by_layout():
    """Arrow string columns are hashed from their buffers: a table's key is its values',
    whatever its chunks or slice, and any change to a value, or a missing one, changes it."""
    texts = pd.Series(["Refunds take 30 days.", "", None, "Shipping is free.", "é"], dtype="str")
    whole = pd.DataFrame({"text": texts})
    chunked = pd.concat([whole.iloc[:2], whole.iloc[2:]], ignore_index=True)
    sliced = pd.DataFrame({"text": pd.Series(["x", *texts], dtype="str")}).iloc[1:].reset_index(drop=True)
    assert chunked["text"].array.__arrow_array__().num_chunks == 2
    assert frame_content_hash(whole) == frame_content_hash(chunked) == frame_content_hash(sliced)
    for changed in (["Refunds take 31 days.", "", None, "Shipping is free.", "é"],
                    ["Refunds take 30 days.", None, None, "Shipping is free.", "é"],
                    ["Refunds take 30 days.", "", "", "Shipping is free.", "é"],
                    ["Refunds take 30 days.", "", None, "Shipping is", " free.é"]):
        assert frame_content_hash(pd.DataFrame({"text": pd.Series(changed, dtype="str")})) != frame_content_hash(whole)
    assert frame_content_hash(whole.iloc[1:]) != frame_content_hash(whole.iloc[1:].reset_index(drop=True))


def test_a_table_gone_leaves_the_memo():
    t = _table()
    fingerprint(t)
    key = id(t)
    assert key in cache_policy._frame_digests
    del t
    gc.collect()
    assert key not in cache_policy._frame_digests


@pytest.mark.usefixtures("prefect_server")
def test_no_step_changes_a_table_it_is_given(tmp_path, state_dir, monkeypatch):
    """Every table any step was keyed by has, after the whole run, the content it was keyed
    by: the memo's premise, on the sample (every label, the chunk-split windows, corpus search)."""
    from ragspan.flows.evaluate import evaluate

    seen: list[tuple[str, pd.DataFrame, str]] = []
    keyed = cache_policy.ContentInputs.compute_key

    def recording(self, task_ctx, inputs, flow_parameters, **kwargs):
        for name, value in inputs.items():
            if isinstance(value, pd.DataFrame):
                seen.append((f"{task_ctx.task.name}.{name}", value, frame_content_hash(value)))
        return keyed(self, task_ctx, inputs, flow_parameters, **kwargs)

    monkeypatch.setattr(cache_policy.ContentInputs, "compute_key", recording)
    evaluate(data_dir=str(SAMPLE), run="baseline", out_dir=str(tmp_path / "out"))
    steps = {name.split(".")[0] for name, _, _ in seen}
    assert {"decompose", "extract", "validate-offsets", "corpus-search", "diagnose", "chunk-windows",
            "chunk-split"} <= steps
    changed = [name for name, table, digest in seen if frame_content_hash(table) != digest]
    assert not changed
