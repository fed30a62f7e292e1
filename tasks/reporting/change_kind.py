"""What changed between two evaluations, from their manifests: the evaluator (how ragspan
judged) or the system (what the RAG system produced, or the data it ran on).

- evaluator: the judge (kind, model, prompt version, endpoint), its params (`judge.*`:
  thresholds, …), the corpus-wide search depth (`search.*`), ragspan's own chunking
  (`chunking.*`), and the code version of the label-deciding code;
- system: the run file (answers and what was retrieved), the corpus, chunks or questions
  files, and the context window applied to runs that do not give one
  (`pipeline.default_context_k`).

A comparison is then of one kind — "the RAG system changed, judged the same way", or "the
same answers judged differently" — or of both, which `ragspan compare` warns about: its
deltas then mix the two and no list of claims can say which change moved them.
"""

from __future__ import annotations

from collections.abc import Mapping

EVALUATOR_PARAMS = ("judge.", "search.", "chunking.")
SYSTEM_PARAMS = ("pipeline.default_context_k",)
# Every other setting (data., pipeline., rag., schedule.: where files are, shard sizes)
# changes neither a label nor what was evaluated.


def _flat(d: Mapping, prefix: str = "") -> dict[str, object]:
    out: dict[str, object] = {}
    for k, v in (d or {}).items():
        if isinstance(v, Mapping):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def change_kind(a: Mapping, b: Mapping) -> dict:
    """{"kind": "none" | "evaluator" | "system" | "both", "evaluator": [...], "system": [...]}:
    each list names what changed, in words, from manifests `a` and `b`."""
    evaluator: list[str] = []
    system: list[str] = []
    pa, pb = _flat(a.get("params") or {}), _flat(b.get("params") or {})
    for key in sorted(set(pa) | set(pb)):
        if pa.get(key) == pb.get(key):
            continue
        what = f"{key} {pa.get(key)!r} → {pb.get(key)!r}"
        if key.startswith(EVALUATOR_PARAMS):
            evaluator.append(what)
        elif key in SYSTEM_PARAMS:
            system.append(what)
    ja, jb = a.get("judge") or {}, b.get("judge") or {}
    for key in sorted(set(ja) | set(jb)):
        if ja.get(key) != jb.get(key) and not any(e.startswith(f"judge.{key} ") for e in evaluator):
            evaluator.append(f"judge {key} {ja.get(key)!r} → {jb.get(key)!r}")
    if a.get("code_version") != b.get("code_version"):
        evaluator.append(f"code version {a.get('code_version')} → {b.get('code_version')}")
    fa, fb = a.get("inputs_md5") or {}, b.get("inputs_md5") or {}
    runs_a = {k: v for k, v in fa.items() if k.startswith("runs/")}
    runs_b = {k: v for k, v in fb.items() if k.startswith("runs/")}
    if sorted(runs_a.values()) != sorted(runs_b.values()):
        system.append(f"run file ({', '.join(sorted(runs_a)) or '?'} → {', '.join(sorted(runs_b)) or '?'}): "
                      "answers or retrieval")
    data_a = {k: v for k, v in fa.items() if not k.startswith("runs/")}
    data_b = {k: v for k, v in fb.items() if not k.startswith("runs/")}
    changed = sorted(k for k in set(data_a) | set(data_b) if data_a.get(k) != data_b.get(k))
    if changed:
        system.append("data: " + ", ".join(changed))
    kind = ("both" if evaluator and system else "evaluator" if evaluator else "system" if system else "none")
    return {"kind": kind, "evaluator": evaluator, "system": system}


HEADLINES = {
    "none": "same evaluator, same system and data: any difference is noise or a nondeterministic judge",
    "evaluator": ("EVALUATOR change — the same answers judged differently (judge, thresholds, search depth "
                  "or code); the deltas measure ragspan's judgement, not the RAG system"),
    "system": ("SYSTEM change — the RAG system's answers or retrieval (or the data) changed, judged the "
               "same way; the deltas measure the system"),
    "both": ("WARNING: both the evaluator and the system changed; the deltas mix the two and no claim list "
             "can say which change moved a claim — change one at a time"),
}

WORSE_TITLES = {
    "evaluator": "Claims judged worse by B's evaluator",
    "both": "Claims labelled worse (evaluator and system both changed)",
}


def worse_title(kind: str) -> str:
    return WORSE_TITLES.get(kind, "Claims that got worse")
