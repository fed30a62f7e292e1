"""compare: what changed between two evaluations of the same questions.

Pure functions over two diagnoses tables (one row per claim, docs/design.md §4):

- `rate_deltas`: per label, the rate (over judged claims) in A and B, B − A, and a paired
  bootstrap confidence interval that resamples *questions* (claims of one answer are not
  independent); a change whose interval covers 0 is `within_noise`.
- `transition_matrix`: claims matched across A and B (same question, same claim text;
  the n-th repeat of a text matches the n-th) counted by (label in A, label in B): the
  matching of tasks/reporting/matching.py, which the rebuild section of a run shares.
- `worse_claims`: matched claims whose label moved down the order
  correct > rank_failure > retrieval_miss > synthesis_error > hallucination;
  `unjudged_changes`: claims that became or stopped being `unjudged` (kept apart: a
  judge failure is neither better nor worse).
- `questions_mismatch`: why two manifests show different question sets (None if same).

`compare_runs` assembles them into one JSON-ready dict; `as_text` / `as_markdown`
render it. tasks/reporting/compare_sides.py finds and loads the two sides.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from ragspan.tasks.core.taxonomy import JUDGED_LABELS, rank_of
from ragspan.tasks.errors import QuestionsDiffer
from ragspan.tasks.reporting.change_kind import HEADLINES, change_kind, worse_title
from ragspan.tasks.reporting.chunker import chunker_share
from ragspan.tasks.reporting.formatting import pct as _pct
from ragspan.tasks.reporting.formatting import pp as _pp
from ragspan.tasks.reporting.matching import (
    direction,
    matched_claims,
    normalised_claim_text,
    transition_matrix,
    transition_name,
    transitions,
)
from ragspan.tasks.reporting.stats import question_weights  # one resampler for every interval

# Best first (the taxonomy's decision order). `unjudged` is outside the order on purpose.
ORDER: tuple[str, ...] = JUDGED_LABELS
JUDGED = ORDER
_RANK = {label: rank_of(label) for label in ORDER}
# A group whose judged claims come from fewer questions than this has a degenerate
# bootstrap (each resample holds the question or not): its changes count as noise.
MIN_QUESTIONS = 5


@dataclass(frozen=True)
class Side:
    """One side of a comparison: a display name, its diagnoses and metrics.json.

    `groups` (optional) has one row per claim (`claim_id`) and one column per metadata
    key (`doc.doc_type`, `question.topic`, …) giving the group the claim counts under.
    """

    name: str
    diagnoses: pd.DataFrame
    metrics: dict
    groups: pd.DataFrame | None = None
    source: str = ""
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def manifest(self) -> dict:
        return self.metrics.get("manifest") or {}


# --------------------------------------------------------------------------- questions


def questions_mismatch(a: Mapping, b: Mapping) -> str | None:
    """A message saying how the question sets of two manifests differ, or None.

    Uses the manifest's `questions` block (file md5, ids hash, count); for manifests
    written before it existed, the md5 of the `questions.*` input file.
    """
    qa, qb = a.get("questions") or {}, b.get("questions") or {}
    if qa and qb:
        problems = []
        if qa.get("ids_md5") != qb.get("ids_md5"):
            problems.append(f"question ids differ ({qa.get('count')} vs {qb.get('count')} questions)")
        if qa.get("md5") != qb.get("md5"):
            problems.append(f"questions file md5 differs ({qa.get('file')}: {qa.get('md5')} vs "
                            f"{qb.get('file')}: {qb.get('md5')})")
        return "; ".join(problems) or None
    fa, fb = _questions_md5(a), _questions_md5(b)
    if fa is None or fb is None:
        return None if fa == fb else "only one manifest records its questions file"
    return None if fa == fb else f"questions file md5 differs ({fa} vs {fb})"


def _questions_md5(manifest: Mapping) -> str | None:
    for path, md5 in (manifest.get("inputs_md5") or {}).items():
        if "/" not in path and path.split(".")[0] == "questions":
            return md5
    return None


# --------------------------------------------------------------------------- rates


def _counts_by_question(diagnoses: pd.DataFrame, questions: pd.Index) -> np.ndarray:
    """(questions × judged labels) claim counts."""
    judged = diagnoses[diagnoses["label"].isin(JUDGED)]
    table = pd.crosstab(judged["question_id"], judged["label"])
    return table.reindex(index=questions, columns=list(JUDGED), fill_value=0).to_numpy(float)


def _rates(totals: np.ndarray) -> np.ndarray:
    n = totals.sum(axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n > 0, totals / np.where(n > 0, n, 1), np.nan)


def rate_deltas(a: pd.DataFrame, b: pd.DataFrame, questions: Iterable[str] | None = None,
                resamples: int = 2000, seed: int = 0, level: float = 0.95,
                weights: np.ndarray | None = None, min_questions: int = 1) -> list[dict]:
    """Per judged label: counts and rates in A and B, delta = B − A, and the paired
    bootstrap percentile interval of the delta over resampled questions. With judged
    claims from fewer than `min_questions` questions every change is `within_noise`."""
    qs = pd.Index(sorted(set(questions) if questions is not None
                         else set(a["question_id"]) | set(b["question_id"])))
    ca, cb = _counts_by_question(a, qs), _counts_by_question(b, qs)
    w = question_weights(len(qs), resamples, seed) if weights is None else weights
    ra, rb = _rates(ca.sum(0)), _rates(cb.sum(0))
    n_questions = int(((ca.sum(1) + cb.sum(1)) > 0).sum())
    few = n_questions < min_questions
    boot = _rates(w @ cb) - _rates(w @ ca)  # (resamples × labels)
    alpha = (1 - level) / 2
    rows = []
    for j, label in enumerate(JUDGED):
        col = boot[:, j]
        col = col[~np.isnan(col)]
        lo, hi = (np.quantile(col, [alpha, 1 - alpha]) if len(col) else (np.nan, np.nan))
        delta = rb[j] - ra[j]
        rows.append({
            "label": label,
            "a_count": int(ca[:, j].sum()), "a_rate": _num(ra[j]),
            "b_count": int(cb[:, j].sum()), "b_rate": _num(rb[j]),
            "delta": _num(delta), "ci_low": _num(lo), "ci_high": _num(hi),
            "questions": n_questions, "few_questions": few,
            "within_noise": bool(few or np.isnan(delta) or np.isnan(lo) or lo <= 0 <= hi or delta == 0),
        })
    return rows


def _num(x: float) -> float | None:
    return None if x is None or np.isnan(x) else round(float(x), 4)


def metadata_deltas(a: pd.DataFrame, b: pd.DataFrame, groups_a: pd.DataFrame, groups_b: pd.DataFrame,
                    questions: Iterable[str], resamples: int = 2000, seed: int = 0,
                    level: float = 0.95) -> dict[str, dict[str, list[dict]]]:
    """`rate_deltas` within each metadata value. A claim's group comes from its own side
    (its evidence document can change between runs); questions are resampled jointly;
    groups drawn from fewer than MIN_QUESTIONS questions never leave the noise."""
    qs = sorted(set(questions))
    w = question_weights(len(qs), resamples, seed)
    out: dict[str, dict[str, list[dict]]] = {}
    keys = [c for c in groups_a.columns if c != "claim_id" and c in groups_b.columns]
    ga = a.merge(groups_a, on="claim_id", how="left")
    gb = b.merge(groups_b, on="claim_id", how="left")
    for key in keys:
        va, vb = ga[key].astype("string").fillna("(none)"), gb[key].astype("string").fillna("(none)")
        out[key] = {
            str(v): rate_deltas(ga[va == v], gb[vb == v], qs, resamples, seed, level, weights=w,
                                min_questions=MIN_QUESTIONS)
            for v in sorted(set(va) | set(vb))
        }
    return out


# --------------------------------------------------------------------------- matching
# matched_claims, transition_matrix, transitions and direction: tasks/reporting/matching.py
# (the rebuild section of a run matches with them too).


def worse_claims(matched: pd.DataFrame) -> pd.DataFrame:
    """Matched claims whose label got worse, worst drop first."""
    if not len(matched):
        return matched.assign(drop=pd.Series(dtype=int))
    d = matched[[direction(f, t) == "worse" for f, t in zip(matched["label_a"], matched["label_b"])]]
    d = d.assign(drop=[_RANK[t] - _RANK[f] for f, t in zip(d["label_a"], d["label_b"])])
    return d.sort_values(["drop", "question_id", "claim_id_a"], ascending=[False, True, True]).reset_index(drop=True)


def unjudged_changes(matched: pd.DataFrame) -> pd.DataFrame:
    if not len(matched):
        return matched
    keep = [direction(f, t) == "unjudged" for f, t in zip(matched["label_a"], matched["label_b"])]
    return matched[keep].reset_index(drop=True)


# --------------------------------------------------------------------------- assembly


def _summary(side: Side) -> dict:
    m = side.manifest
    return {
        "name": side.name, "source": side.source, "run": side.metrics.get("run"),
        "claims": len(side.diagnoses),
        "unjudged": int((side.diagnoses["label"] == "unjudged").sum()),
        "git_rev": m.get("git_rev"), "git_dirty": m.get("git_dirty"),
        "params_hash": m.get("params_hash"), "code_version": m.get("code_version"),
        "data_md5": (m.get("data") or {}).get("dvc_md5"), "judge": m.get("judge"),
        "notes": list(side.notes),
    }


def compare_runs(a: Side, b: Side, force: bool = False, resamples: int = 2000, seed: int = 0,
                 level: float = 0.95) -> dict:
    """Everything `ragspan compare` reports, as one JSON-ready dict.

    Raises QuestionsDiffer when the manifests show different question sets, unless
    `force`."""
    mismatch = questions_mismatch(a.manifest, b.manifest)
    if mismatch and not force:
        raise QuestionsDiffer(
            f"{a.name} and {b.name} were not evaluated on the same questions: {mismatch}. "
            "Label rates over different questions are not comparable; pass --force to compare anyway.")
    questions = sorted(set(a.diagnoses["question_id"]) | set(b.diagnoses["question_id"]))
    matched, only_a, only_b = matched_claims(a.diagnoses, b.diagnoses)
    matrix = transition_matrix(matched)
    params_changed = _params_changed((a.manifest.get("params") or {}), (b.manifest.get("params") or {}))
    # Where the data sat and which run name it had are not parameters of the result: what
    # the data and run were is compared by md5 (change_kind's "system" list).
    params_changed = {k: v for k, v in params_changed.items() if not k.startswith("data.")}
    by_meta = {}
    if a.groups is not None and b.groups is not None:
        by_meta = metadata_deltas(a.diagnoses, b.diagnoses, a.groups, b.groups, questions,
                                  resamples, seed, level)
    cols = ["question_id", "claim_id_a", "claim_id_b", "claim", "label_a", "label_b"]
    return {
        "a": _summary(a), "b": _summary(b),
        "questions": {"count": len(questions), "same": mismatch is None, "mismatch": mismatch},
        "params_changed": params_changed,
        "change": change_kind(a.manifest, b.manifest),
        "bootstrap": {"unit": "question", "resamples": resamples, "seed": seed, "level": level,
                      "rates_over": "judged claims (unjudged excluded)"},
        "overall": rate_deltas(a.diagnoses, b.diagnoses, questions, resamples, seed, level),
        "by_metadata": by_meta,
        "transitions": {
            "labels": list(matrix.index),
            "matrix": {f: {t: int(matrix.loc[f, t]) for t in matrix.columns} for f in matrix.index},
            "changed": transitions(matrix),
            "matched": len(matched), "unchanged": int(np.trace(matrix.to_numpy())),
            "only_in_a": only_a, "only_in_b": only_b,
        },
        "answer_chars": answer_char_deltas(a.metrics, b.metrics),
        "chunk_split": chunk_split_delta(a.diagnoses, b.diagnoses),
        "worse": worse_claims(matched)[cols].to_dict("records"),
        "unjudged_changes": unjudged_changes(matched)[cols].to_dict("records") if len(matched) else [],
    }


def answer_char_deltas(a: Mapping, b: Mapping) -> dict[str, dict]:
    """Per character class of the answers (tasks/reporting/answer_chars.py), the share in
    A and B and the change; plus `unsupported_or_contradicted`, what a gate watches.
    Empty when either side predates the metric."""
    sa, sb = (a.get("answer_chars") or {}).get("share"), (b.get("answer_chars") or {}).get("share")
    if not sa or not sb:
        return {}
    out = {}
    for name in (*sa, "unsupported_or_contradicted"):
        if name == "unsupported_or_contradicted":
            va, vb = (_bad_chars(sa), _bad_chars(sb))
        else:
            va, vb = sa.get(name), sb.get(name)
        out[name] = {"a": va, "b": vb, "delta": None if va is None or vb is None else round(vb - va, 4)}
    return out


def chunk_split_delta(a: pd.DataFrame, b: pd.DataFrame) -> dict:
    """The chunker's share of failures (tasks/reporting/chunker.py) in A and B, its change,
    and the split claims on each side (results written before issue 30 have none)."""
    sa, sb = chunker_share(a), chunker_share(b)
    delta = None if sa["share"] is None or sb["share"] is None else round(sb["share"] - sa["share"], 4)
    return {"a": sa["share"], "b": sb["share"], "delta": delta, "a_claims": sa["claims"], "b_claims": sb["claims"]}


def _bad_chars(share: Mapping) -> float | None:
    u, c = share.get("unsupported"), share.get("contradicted")
    return None if u is None or c is None else round(u + c, 4)


def _params_changed(pa: Mapping, pb: Mapping, prefix: str = "") -> dict[str, list]:
    out: dict[str, list] = {}
    for key in sorted(set(pa) | set(pb)):
        va, vb = pa.get(key), pb.get(key)
        name = f"{prefix}{key}"
        if isinstance(va, Mapping) and isinstance(vb, Mapping):
            out.update(_params_changed(va, vb, name + "."))
        elif va != vb:
            out[name] = [va, vb]
    return out


# --------------------------------------------------------------------------- rendering


def _ci(r: dict) -> str:
    return "—" if r["ci_low"] is None else f"[{r['ci_low'] * 100:+.1f}, {r['ci_high'] * 100:+.1f}]"


def _noise(r: dict) -> str:
    return "within noise" if r["within_noise"] else "CHANGED"


def _grid(header: list[str], rows: list[list[str]], markdown: bool, left: int = 1) -> list[str]:
    """A table; the first `left` columns are left-aligned, the rest right-aligned."""
    if markdown:
        return ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|",
                *("| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in rows)]
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    def fmt(cells: list[str]) -> str:
        return "  ".join(c.ljust(w) if i < left else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))

    return [fmt(header), "-" * (sum(widths) + 2 * (len(widths) - 1)), *(fmt(r) for r in rows)]


def _render(result: dict, markdown: bool, limit: int) -> str:
    a, b = result["a"], result["b"]
    h = (lambda s: f"### {s}") if markdown else (lambda s: f"\n{s}\n{'=' * len(s)}")
    lines = [("## " if markdown else "") + f"ragspan compare: {a['name']} → {b['name']}", ""]
    lines.append(f"A = {a['name']} ({a['source']}; run {a['run']}, {a['claims']} claims, "
                 f"{a['unjudged']} unjudged)  ")
    lines.append(f"B = {b['name']} ({b['source']}; run {b['run']}, {b['claims']} claims, "
                 f"{b['unjudged']} unjudged)  ")
    q = result["questions"]
    lines.append(f"{q['count']} questions; " + ("same question set" if q["same"]
                                               else f"DIFFERENT questions (forced): {q['mismatch']}"))
    lines += _change_lines(result.get("change"), markdown)
    for note in a["notes"] + b["notes"]:
        lines.append(f"note: {note}")
    bs = result["bootstrap"]
    lines += ["", h("Label rates (over judged claims)"), "",
              (f"Δ = B − A in percentage points; {int(bs['level'] * 100)}% bootstrap CI over "
               f"{bs['resamples']} resamples of questions (seed {bs['seed']}); "
               "'within noise' = the CI covers 0."), ""]
    rows = [[r["label"], f"{r['a_count']} ({_pct(r['a_rate'])})", f"{r['b_count']} ({_pct(r['b_rate'])})",
             _pp(r["delta"]), _ci(r), _noise(r)] for r in result["overall"]]
    lines += _grid(["label", "A", "B", "Δ", "95% CI", ""], rows, markdown)
    if result["by_metadata"]:
        lines += ["", h("By metadata (changes outside noise)"), ""]
        rows = [[f"{key}={value}", r["label"], _pct(r["a_rate"]), _pct(r["b_rate"]),
                 _pp(r["delta"]), _ci(r)]
                for key, values in result["by_metadata"].items() for value, rs in values.items()
                for r in rs if not r["within_noise"]]
        lines.append(f"(groups with judged claims from fewer than {MIN_QUESTIONS} questions are "
                     "always counted as noise)")
        lines.append("")
        lines += _grid(["group", "label", "A", "B", "Δ", "95% CI"], rows, markdown, left=2) if rows else \
            ["(no per-metadata change outside noise)"]
    if result.get("answer_chars"):
        lines += ["", h("Answer characters (share of all answer text)"), ""]
        rows = [[name, _pct(r["a"]), _pct(r["b"]), "—" if r["delta"] is None else _pp(r["delta"])]
                for name, r in result["answer_chars"].items()]
        lines += _grid(["characters", "A", "B", "Δ"], rows, markdown)
    cs = result.get("chunk_split") or {}
    if cs.get("a_claims") or cs.get("b_claims"):
        lines += ["", h("Evidence cut by a chunk boundary (share of failures)"), ""]
        lines += _grid(["", "A", "B", "Δ"], [["chunk_split claims", str(cs["a_claims"]), str(cs["b_claims"]), ""],
                                             ["share of failures", _pct(cs["a"]), _pct(cs["b"]),
                                              "—" if cs["delta"] is None else _pp(cs["delta"])]], markdown)
    t = result["transitions"]
    lines += ["", h("Transitions of matched claims"), "",
              (f"{t['matched']} claims matched ({t['unchanged']} unchanged); "
               f"{t['only_in_a']} only in A, {t['only_in_b']} only in B."), ""]
    if t["changed"]:
        lines += [("- " if markdown else "  ") + f"{c['count']} {transition_name(c['from'], c['to'])}"
                  for c in t["changed"]]
        lines.append("")
    labels = t["labels"]
    rows = [[f, *(str(t["matrix"][f][to]) for to in labels)] for f in labels]
    lines += _grid(["A \\ B", *labels], rows, markdown)
    for title, items in ((worse_title((result.get("change") or {}).get("kind", "")), result["worse"]),
                         ("Claims that became or stopped being unjudged", result["unjudged_changes"])):
        lines += ["", h(f"{title} ({len(items)})"), ""]
        if not items:
            lines.append("(none)")
            continue
        rows = [[i["claim_id_a"], transition_name(i["label_a"], i["label_b"]), _clip(i["claim"])] for i in items[:limit]]
        lines += _grid(["claim", "change", "text"], rows, markdown, left=3)
        if len(items) > limit:
            lines.append(f"… and {len(items) - limit} more (--limit, or --format json for all)")
    return "\n".join(lines) + "\n"


def _change_lines(change: dict | None, markdown: bool) -> list[str]:
    """Which kind of comparison this is (tasks/reporting/change_kind.py) and what changed."""
    if not change:
        return []
    lines = [("**" if markdown else "") + HEADLINES[change["kind"]] + ("**" if markdown else "")]
    for side in ("evaluator", "system"):
        if change[side]:
            lines.append(f"{side} changed: " + "; ".join(change[side]))
    return lines


def _clip(text: str, n: int = 90) -> str:
    text = normalised_claim_text(text)
    return text if len(text) <= n else text[: n - 1] + "…"


def as_text(result: dict, limit: int = 20) -> str:
    return _render(result, markdown=False, limit=limit)


def as_markdown(result: dict, limit: int = 20) -> str:
    return _render(result, markdown=True, limit=limit)


# --------------------------------------------------------------------------- groups
