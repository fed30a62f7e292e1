"""Evidence cut by a chunk boundary (issue 30): which claims to look at again, the window
across a chunk's edges the judge reads, and the rule that names the chunker.

Every judge reads one chunk at a time, so evidence that straddles a boundary is seen in
halves: a claim whose deciding quote stops at the edge of its chunk may rest on half its
evidence, and a claim no half supports looks like a hallucination although its evidence
stands in the document. Pure functions over tables; `tasks/steps/boundary.py` wires them.

The rule (docs/design.md §2, decisions.md #38):

- **Looked at again**: every `synthesis_error` and `hallucination` (its SPLIT_PASSAGES most
  probable passages, across both edges), and every supported claim whose deciding quote
  reaches an edge of its chunk (across that edge only). A `rank_failure` or
  `retrieval_miss` whose quote sits inside its chunk has its evidence whole in that chunk.
- **Window**: the chunk joined with the neighbouring chunk(s) of the same document, as one
  passage (across a stretch no chunk covers of up to MAX_GAP characters); the quote is
  placed in it and mapped to document offsets like any other. Judged only on the sides
  where the NEAR_EDGE characters on each side of the edge each hold a claim word the other
  lacks (words_across): elsewhere no cut can be, and no judge call is spent.
- **Cut**: a `supported` verdict on the window, at or above the threshold, whose quote
  crosses an edge of the chunk, where no chunk overlapping the quote holds within it every
  claim word the quote holds. `split_at` = the edge crossed (the chunk's start or end).
- **Label**: a claim a chunk already supported keeps its label. A claim that failed takes
  the label of the worst-placed part of its evidence: `correct` when every part sat in the
  context window, `rank_failure` when a part was retrieved below the cutoff,
  `retrieval_miss` when a part was never retrieved — never `synthesis_error` or
  `hallucination`: the evidence stands in the document.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass, replace
from functools import lru_cache

from ragspan.tasks.core.text import content_norms

# A failed claim's passages (most probable first) whose surroundings are judged: the half
# of a cut sentence that holds the claim's rarest words is among a claim's top two.
SPLIT_PASSAGES = 2
RECHECK_FAILED = frozenset({"synthesis_error", "hallucination"})
SUPPORTING = frozenset({"correct", "rank_failure", "retrieval_miss"})
# The longest stretch between two chunks of a document that a window joins across: the
# separators a chunker drops (blank lines, a page break, markup) are short; a longer stretch
# no chunk covers is text the corpus index left out, not part of one piece of evidence.
MAX_GAP = 200
# Characters on each side of a chunk edge in which a cut piece of evidence is looked for
# before any judge call (a long sentence; words_across).
NEAR_EDGE = 400
# Tiers of a part of the evidence, best first: the label a failed claim takes is its worst.
_TIER_LABEL = ("correct", "rank_failure", "retrieval_miss")


@dataclass(frozen=True)
class Chunk:
    """A chunk's place in its document (`text` = the document's [start:end])."""

    chunk_id: str
    doc_id: str
    start: int
    end: int


class Layout:
    """Every chunk of the corpus, ordered by document and start: neighbours and overlaps."""

    def __init__(self, chunks: Iterable[Chunk]) -> None:
        self._by_doc: dict[str, list[Chunk]] = {}
        for c in chunks:
            self._by_doc.setdefault(c.doc_id, []).append(c)
        for v in self._by_doc.values():
            v.sort(key=lambda c: (c.start, c.end))
        self._starts = {d: [c.start for c in v] for d, v in self._by_doc.items()}

    def before(self, doc_id: str, start: int, end: int) -> Chunk | None:
        """The chunk that precedes [start, end) in its document (the last one starting earlier)."""
        chunks = self._by_doc.get(doc_id, [])
        i = bisect.bisect_left(self._starts.get(doc_id, []), start)
        return chunks[i - 1] if i else None

    def after(self, doc_id: str, start: int, end: int) -> Chunk | None:
        """The chunk that follows [start, end): the first starting no earlier and ending later
        (with overlapping chunks, one that starts where this one does can run on past it)."""
        chunks = self._by_doc.get(doc_id, [])
        for c in chunks[bisect.bisect_left(self._starts.get(doc_id, []), start):]:
            if c.end > end:
                return c
        return None

    def overlapping(self, doc_id: str, start: int, end: int) -> list[Chunk]:
        chunks = self._by_doc.get(doc_id, [])
        return [c for c in chunks[: bisect.bisect_left(self._starts.get(doc_id, []), end)] if c.end > start]


@dataclass(frozen=True)
class Seen:
    """A passage a claim was judged on, to be joined with its neighbours on `sides`."""

    claim_id: str
    question_id: str
    source: str  # retrieved | corpus
    chunk: Chunk
    rank: int | None
    in_context: bool
    score: float | None
    sides: tuple[str, ...]  # "before", "after"
    claim: str = ""


def reaches(text: str, offset: int, edge: int, forward: bool) -> bool:
    """Whether a quote ending (forward) or starting at `offset` in chunk text reaches the
    chunk's edge: nothing but spaces, punctuation and stopwords between them (a judge's
    quote drops them, and a cut inside evidence often leaves "was the" behind)."""
    gap = text[offset:edge] if forward else text[edge:offset]
    return not content_norms(gap)


def passages_to_recheck(diagnoses: list[dict], judgements: list[dict], chunk_texts: dict[str, tuple[Chunk, str]],
                        split_passages: int = SPLIT_PASSAGES) -> list[Seen]:
    """The (claim, passage, sides) whose window is judged (the module's rule). `chunk_texts`:
    chunk_id → (its place, its text) for every passage judged."""
    by_claim: dict[str, list[dict]] = {}
    for j in judgements:
        if j["source"] in ("retrieved", "corpus") and j["error"] is None and j["chunk_id"] in chunk_texts:
            by_claim.setdefault(j["claim_id"], []).append(j)
    out: list[Seen] = []
    for d in diagnoses:
        mine = by_claim.get(d["claim_id"], [])
        if d["label"] in RECHECK_FAILED:
            ranked = sorted(mine, key=lambda j: (-_probability(j), j["rank"] or 10**9, j["chunk_id"]))
            taken: list[str] = []
            for j in ranked:
                if j["chunk_id"] not in taken and len(taken) < split_passages:
                    taken.append(j["chunk_id"])
                    out.append(_seen(d, j, chunk_texts[j["chunk_id"]][0], ("before", "after")))
        elif d["label"] in SUPPORTING and d["chunk_id"] in chunk_texts and d["char_start"] is not None:
            chunk, text = chunk_texts[d["chunk_id"]]
            s, e = int(d["char_start"]) - chunk.start, int(d["char_end"]) - chunk.start
            sides = tuple(side for side, hit in (("before", reaches(text, s, 0, False)),
                                                 ("after", reaches(text, e, len(text), True))) if hit)
            deciding = next((j for j in mine if j["chunk_id"] == d["chunk_id"]), None)
            if sides and deciding is not None:
                out.append(_seen(d, deciding, chunk, sides))
    return out


def _probability(j: dict) -> float:
    p = j.get("support")
    return float(p) if p is not None else float(j.get("confidence") or 0.0)


def _seen(d: dict, j: dict, chunk: Chunk, sides: tuple[str, ...]) -> Seen:
    return Seen(d["claim_id"], d["question_id"], j["source"], chunk, j["rank"], bool(j["in_context"]),
                j["score"], sides, d["claim"])


def words_across(claim: str, near_seen: str, near_other: str) -> bool:
    """Whether the text on each side of an edge holds a claim word the other side lacks —
    what a cut needs (cut_at), checked before the judge reads a window: a neighbour that
    adds none of the claim's words cannot complete its evidence."""
    words = _content_words(claim)
    other = words.intersection(_content_words(near_other))
    if not other:  # most neighbours: nothing of the claim at all (the seen side is not read)
        return False
    seen = words.intersection(_content_words(near_seen))
    return bool(seen - other) and bool(other - seen)


# A claim is read against several edges, and the same edge for every claim of an answer
# that retrieved the chunk (~4 a shard's answer): each text is tokenised once, not per pair.
@lru_cache(maxsize=8192)
def _content_words(text: str) -> frozenset[str]:
    return frozenset(content_norms(text))



def near_edges(seen: Seen, layout: Layout, text_of: dict[str, tuple[str, str | None, str | None]],
               chunk_text: str) -> Seen:
    """`seen` with only the sides where words_across holds for the NEAR_EDGE characters on
    each side of the chunk's edge (the neighbour's text beyond the edge, not its overlap)."""
    c, sides = seen.chunk, []
    for side in seen.sides:
        n = layout.before(c.doc_id, c.start, c.end) if side == "before" else layout.after(c.doc_id, c.start, c.end)
        if n is None or n.chunk_id not in text_of:
            continue
        ntext = text_of[n.chunk_id][0]
        if side == "before":
            other = ntext[: max(0, c.start - n.start)][-NEAR_EDGE:]
            mine = chunk_text[:NEAR_EDGE]
        else:
            other = ntext[max(0, c.end - n.start):][:NEAR_EDGE]
            mine = chunk_text[-NEAR_EDGE:]
        if words_across(seen.claim, mine, other):
            sides.append(side)
    return replace(seen, sides=tuple(sides))


def gaps_between(starts: list[int], ends: list[int], text: str) -> tuple[list[str | None], list[str | None]]:
    """Per chunk of one document (sorted by start), the text between it and the chunk
    before it / after it: "" where they touch or overlap (or at the document's ends), None
    where the stretch is longer than MAX_GAP. Stored in the corpus index, so a window can
    join chunks across the separators a chunker dropped without the corpus at hand."""
    before: list[str | None] = [""] * len(starts)
    after: list[str | None] = [""] * len(starts)
    reach = ends[0] if ends else 0  # the furthest end so far: a long chunk can cover its successors
    for i in range(1, len(starts)):
        gap = text[reach:starts[i]] if starts[i] > reach else ""
        before[i] = after[i - 1] = gap if len(gap) <= MAX_GAP else None
        reach = max(reach, ends[i])
    return before, after


def window(seen: Seen, layout: Layout, text_of: dict[str, tuple[str, str | None, str | None]],
           chunk_text: str) -> tuple[int, str] | None:
    """(document offset, text) of the chunk joined with its neighbours on `seen.sides`, or
    None when it has no neighbour there. `text_of`: chunk_id → (text, gap before, gap after)
    (gaps_between). Joined where chunks touch or overlap, or across a stretch no chunk covers
    up to MAX_GAP characters; a longer one is not in the index, so it is never guessed."""
    c = seen.chunk
    start, text = c.start, chunk_text
    prev = layout.before(c.doc_id, c.start, c.end) if "before" in seen.sides else None
    if prev is not None and prev.chunk_id in text_of:
        ptext, _, gap = text_of[prev.chunk_id]
        if prev.end >= c.start:
            start, text = prev.start, ptext[: c.start - prev.start] + text
        elif gap is not None and len(gap) >= c.start - prev.end:
            start, text = prev.start, ptext + gap[: c.start - prev.end] + text
    nxt = layout.after(c.doc_id, c.start, c.end) if "after" in seen.sides else None
    if nxt is not None and nxt.chunk_id in text_of:
        ntext, gap, _ = text_of[nxt.chunk_id]
        if nxt.start <= c.end:
            text += ntext[c.end - nxt.start:]
        elif gap is not None and len(gap) >= nxt.start - c.end:
            text += gap[len(gap) - (nxt.start - c.end):] + ntext
    return None if len(text) == len(chunk_text) else (start, text)


def cut_at(claim: str, span: tuple[int, int, str], chunk: Chunk, layout: Layout) -> int | None:
    """The edge of `chunk` the evidence span (start, end, text) is cut at, or None: the span
    crosses an edge and no chunk overlapping it holds every claim word the span holds."""
    s, e, text = span
    crossed = [edge for edge in (chunk.start, chunk.end) if s < edge < e]
    if not crossed:
        return None
    words = set(content_norms(claim)) & set(content_norms(text))
    if not words:
        return None
    for c in [chunk, *layout.overlapping(chunk.doc_id, s, e)]:
        piece = text[max(s, c.start) - s: min(e, c.end) - s]
        if words <= set(content_norms(piece)):
            return None  # one chunk holds what the evidence says: nothing was cut
    return crossed[0]


def label_of_split(label: str, parts: list[tuple[int, int]], retrieved: list[tuple[int, int, bool]]) -> str:
    """A split claim's label: its own when a chunk supported it, else the worst-placed
    part's tier. `parts`: the evidence's pieces (document offsets) on each side of the
    edge; `retrieved`: (start, end, in_context) of the question's retrieved passages of
    the document."""
    if label in SUPPORTING:
        return label
    worst = 0
    for ps, pe in parts:
        tiers = [0 if ctx else 1 for rs, re_, ctx in retrieved if rs <= ps and pe <= re_]
        worst = max(worst, min(tiers) if tiers else 2)
    return _TIER_LABEL[worst]
