"""The taxonomy: the closed set of labels a claim can get, in decision order, and what
each one means for the team that reads the report. Every other module imports it from
here — schemas, diagnose, stats, compare, the report, charts, the CLI and benchmarks.

    claim
    ├── an in-context chunk supports it ........................ correct
    ├── a retrieved chunk below the cutoff supports it ..... rank_failure
    ├── a never-retrieved chunk (corpus-wide search) supports it  retrieval_miss
    ├── an in-context chunk is about it, does not support it  synthesis_error
    ├── nothing ........................................... hallucination
    └── the judge failed where it could have decided ........... unjudged
"""

from __future__ import annotations

from typing import Literal

Label = Literal["correct", "rank_failure", "retrieval_miss", "synthesis_error", "hallucination", "unjudged"]

# Decision order (diagnose takes the first that applies), which is also the order of
# "better to worse" that `compare` uses for transitions.
JUDGED_LABELS: tuple[str, ...] = ("correct", "rank_failure", "retrieval_miss", "synthesis_error", "hallucination")
UNJUDGED = "unjudged"
LABELS: tuple[str, ...] = (*JUDGED_LABELS, UNJUDGED)
FAILURE_LABELS: tuple[str, ...] = JUDGED_LABELS[1:]
# Labels whose evidence supports the claim somewhere (the judge said `supported`).
SUPPORTED_LABELS: frozenset[str] = frozenset({"correct", "rank_failure", "retrieval_miss"})
# The stage of the RAG pipeline to fix, per failure: a short name and the longer advice.
STAGES: dict[str, str] = {
    "rank_failure": "Reranking / context cutoff",
    "retrieval_miss": "Retrieval: index, embeddings, chunking, query",
    "synthesis_error": "Generation: reading the context",
    "hallucination": "Generation: grounding and abstention",
}
FIX_FOR: dict[str, str] = {
    "rank_failure": "reranking / context cutoff: the evidence was retrieved but ranked too low",
    "retrieval_miss": "retrieval: embeddings, chunking or query rewriting missed the evidence",
    "synthesis_error": "generation: the model had the evidence in context and misread it",
    "hallucination": "generation / abstention: the model asserted something with no support",
}
COLORS: dict[str, str] = {
    "correct": "#2e7d32", "rank_failure": "#f9a825", "retrieval_miss": "#ef6c00",
    "synthesis_error": "#6a1b9a", "hallucination": "#c62828", "unjudged": "#757575",
}
# Column headers where a table must be narrow (history, benchmark confusion matrices).
SHORT: dict[str, str] = {
    "correct": "correct", "rank_failure": "rank", "retrieval_miss": "miss",
    "synthesis_error": "synth", "hallucination": "halluc", "unjudged": "unj",
}

_RANK = {label: i for i, label in enumerate(JUDGED_LABELS)}


def rank_of(label: str) -> int:
    """Position in decision order (0 = correct); unjudged sorts after every judged label."""
    return _RANK.get(label, len(JUDGED_LABELS))
