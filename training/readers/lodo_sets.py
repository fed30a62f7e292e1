"""The eight labelled groups of the leave-one-dataset-out (LODO) benchmark of the verifier.

    .venv/bin/python -m training.readers.lodo_sets [--limit 1500] [--seed 13] [--show 3]

Read-only from `RAGSPAN_BENCH_DATA` (default `<repo>/../shared/data`, see its README.md and
each folder's LOADER.md); nothing is copied into the repository. Every case is a
`claims.Case`: a claim judged against passages that all sit in the context window,
gold `supported` | `partial` | `unsupported` (the binary target is gold == "supported"),
one passage per case except Factcheck-GPT (its snippets), `group` the unit a split must
never cut (a claim, paragraph, document, dialogue knowledge text or question).

Mapping choices beyond the LOADER.md advice (details in each loader's docstring):
- XQuAD: the wrong answer is another question's answer on the same paragraph, of the same
  kind (year / number / entity / other phrase; year and number stand in for each other),
  so the wrong answer is always in the passage; a question without one has no negative.
- ClapNQ: the unanswerable records carry no answer text, so their claim is the long
  answer of a different answerable question (another page title, seeded draw): an
  off-topic, easy negative, but a certain one.
- Dialogue: BEGIN "Not fully attributable" merges partial and unsupported -> unsupported;
  FaithDial's 3-way label keeps `partial`; generic responses are dropped (no claim);
  a (knowledge, response) pair in both keeps FaithDial's expert label.
- AttributionBench: "[n]" citation markers are stripped, the references are joined into
  one passage, rows without reference text dropped; its four sources count as one set.
- PubMedQA: "maybe" questions are dropped; the wrong polarity is `unsupported`.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import random
import re
import time
from collections.abc import Callable

from training.readers.claims import DATA, GOLDS, Case, _read_jsonl, load_factcheck, load_wice
from training.readers.qa import _sentence_around, answer_kind

SETS: tuple[str, ...] = (
    "wice",
    "factcheck",
    "xquad",
    "clapnq",
    "dialogue",
    "summedits",
    "attributionbench",
    "pubmedqa",
)
_CITE = re.compile(r"\s*\[\d+\]")


def _key(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:12]


def _case(
    name: str,
    case_id: str,
    group: str,
    question: str,
    claim: str,
    passage: str,
    gold: str,
    spans: list[tuple[int, int]] | None = None,
) -> Case:
    return Case(
        set=name,
        case_id=f"{name}:{case_id}",
        group=group,
        question=question.strip(),
        claim=claim.strip(),
        passages=[passage],
        gold=gold,
        gold_spans=spans or [],
    )


# ---------------------------------------------------------------- XQuAD


_WH = re.compile(r"\b(how many|how much|what year|when|whom|whose|who|where|why|how|which|what)\b")


def _qtype(question: str) -> str:
    """The question's first wh-phrase ("how many", "who", "what", ...), or ""."""
    m = _WH.search(question.lower())
    return m.group(1) if m else ""


def _wrong_answer(qas: list[tuple[str, str, int]], j: int, qid: str) -> str | None:
    """Another answer on the paragraph to stand in for the answer of question `j`, overlapping
    it neither in text nor in offsets, by preference: of the same kind (`answer_kind`) to a
    question of the same wh-type; of the same year / number / entity kind; a year for a
    number or the other way round. A seeded draw from the first tier that has one, or None
    (an "other"-kind answer to a question with no same-type neighbour gets no negative)."""
    kinds = [answer_kind(t) for _, t, _ in qas]
    qtypes = [_qtype(q) for q, _, _ in qas]
    _, text, start = qas[j]
    numeric = {"year", "number"}
    tiers = (
        lambda k: kinds[k] == kinds[j] and qtypes[k] == qtypes[j],
        lambda k: kinds[j] is not None and kinds[k] == kinds[j],
        lambda k: {kinds[k], kinds[j]} <= numeric,
    )
    others = []
    for k, (_, t, s) in enumerate(qas):
        a, b = t.lower().strip(), text.lower().strip()
        if (
            k != j
            and a not in b
            and b not in a
            and not (s < start + len(text) and start < s + len(t))
        ):
            others.append(k)
    for tier in tiers:
        if pick := [k for k in others if tier(k)]:
            return qas[random.Random(f"xquad:{qid}").choice(pick)][1]
    return None


def load_xquad() -> list[Case]:
    """XQuAD English (Artetxe et al. 2020; the SQuAD v1.1 dev text), CC BY-SA 4.0.

    Per question: claim = its gold answer, passage = its paragraph -> supported, gold span
    = the sentence(s) around `answer_start`; and, when there is one, claim = a wrong answer
    -> unsupported: the answer of another question on the same paragraph, of the same kind
    (`_wrong_answer`), so lexical presence in the passage cannot decide. Group = the
    paragraph."""
    with open(DATA / "xquad_en" / "xquad.en.json", encoding="utf-8") as f:
        data = json.load(f)["data"]
    cases = []
    for art in data:
        for i, p in enumerate(art["paragraphs"]):
            ctx, group = p["context"], f"{art['title']}#{i}"
            firsts = [(qa["question"], qa["answers"][0]) for qa in p["qas"]]
            qas = [(q, a["text"], a["answer_start"]) for q, a in firsts]
            for j, qa in enumerate(p["qas"]):
                _, text, start = qas[j]
                end = start + len(text)
                if ctx[start:end] != text:
                    raise ValueError(f"xquad {qa['id']}: answer_start does not match")
                q, span = qa["question"], _sentence_around(ctx, start, end)
                cases.append(_case("xquad", qa["id"], group, q, text, ctx, "supported", [span]))
                if wrong := _wrong_answer(qas, j, qa["id"]):
                    cases.append(
                        _case("xquad", f"{qa['id']}:wrong", group, q, wrong, ctx, "unsupported")
                    )
    return cases


# ---------------------------------------------------------------- ClapNQ


def load_clapnq() -> list[Case]:
    """ClapNQ dev (Rosenthal et al. 2024; passages from Natural Questions), Apache-2.0.

    Answerable (300): claim = the first human long answer that has selected sentences,
    passage = the record's passage (NQ-tokenised, kept as is) -> supported, gold spans =
    those selected sentences (verbatim substrings). Unanswerable (300): the passage is
    related but does not answer the question, and the records have no answer text
    (LOADER.md: any asserted answer is a hallucination), so the claim is the long answer
    of a different answerable question whose passage has another title (a seeded
    permutation) -> unsupported. Group = the record id."""
    folder = DATA / "clapnq_dev"
    cases, answers = [], []
    for r in _read_jsonl(folder / "clapnq_dev_answerable.jsonl"):
        p = r["passages"][0]
        out = next(
            (o for o in r["output"] if o["answer"].strip() and o["selected_sentences"]), None
        )
        if out is None:
            continue
        spans = []
        for s in out["selected_sentences"]:
            if (at := p["text"].find(s)) < 0:
                raise ValueError(f"clapnq {r['id']}: selected sentence not in the passage")
            spans.append((at, at + len(s)))
        cases.append(
            _case(
                "clapnq",
                r["id"],
                r["id"],
                r["input"],
                out["answer"],
                p["text"],
                "supported",
                sorted(set(spans)),
            )
        )
        answers.append((p["title"], out["answer"]))
    random.Random("clapnq").shuffle(answers)
    for i, r in enumerate(_read_jsonl(folder / "clapnq_dev_unanswerable.jsonl")):
        p = r["passages"][0]
        k = i % len(answers)
        answer = next(a for t, a in answers[k:] + answers[:k] if t != p["title"])
        cases.append(
            _case("clapnq", r["id"], r["id"], r["input"], answer, p["text"], "unsupported")
        )
    return cases


# ---------------------------------------------------------------- BEGIN + FaithDial

BEGIN_GOLD = {"Fully attributable": "supported", "Not fully attributable": "unsupported"}


def faithdial_gold(label: str) -> str | None:
    """A FaithDial audit label (BEGIN taxonomy, may be several) -> gold, None for generic /
    unlabelled rows; normalised as LOADER.md says."""
    norm = label.lower().replace(".", ",").replace(" ", "")
    parts = set(
        norm.replace("entailmentt", "entailment")
        .replace("hallucinated", "hallucination")
        .split(",")
    )
    if parts in ({""}, {"generic"}):
        return None
    if "partialhallucination" in parts or {"entailment", "hallucination"} <= parts:
        return "partial"
    if parts == {"hallucination"}:
        return "unsupported"
    if parts <= {"entailment", "uncooperative"}:
        return "supported"
    raise ValueError(f"unknown FaithDial label {label!r}")


def _dialogue_rows() -> list[tuple[str, str, str, str, str | None]]:
    """(row id, knowledge, previous turn, response, gold or None): FaithDial first (expert
    labels, 3-way), then BEGIN (crowd labels)."""
    csv.field_size_limit(1 << 30)
    rows = []
    for path in sorted((DATA / "faithdial_audit" / "data-audit").glob("*/*.csv")):
        with open(path, encoding="utf-8", newline="") as f:
            for n, r in enumerate(list(csv.reader(f))[1:]):
                rows.append(
                    (
                        f"faithdial/{path.parent.name}/{path.stem}/{n}",
                        r[0],
                        r[1],
                        r[2],
                        faithdial_gold(r[3]),
                    )
                )
    for path in sorted((DATA / "begin_dialogue").glob("*/*.tsv")):
        with open(path, encoding="utf-8", newline="") as f:
            reader = csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
            for n, r in enumerate(reader):
                rows.append(
                    (
                        f"begin/{path.stem}/{n}",
                        r["knowledge"],
                        r["message"],
                        r["response"],
                        BEGIN_GOLD.get(r["begin_label"]),
                    )
                )
    return rows


def load_dialogue() -> list[Case]:
    """BEGIN (Dziri et al. 2022; WoW CC-BY-4.0, CMU-DoG licence, Topical-Chat CDLA-Sharing-1.0)
    and the FaithDial data audit (Dziri et al. 2022, MIT), as one group: they share dialogues
    and knowledge texts.

    Claim = the response, passage = its knowledge snippet, question = the previous turn
    (may be empty). BEGIN: fully attributable -> supported, not fully attributable ->
    unsupported (partial is merged into it upstream). FaithDial: entailment (also
    uncooperative) -> supported, partial hallucination / entailment+hallucination ->
    partial, hallucination -> unsupported. Generic responses (no factual content, so
    neither supported nor not) are dropped, as are rows without a label or text. An
    identical (knowledge, response) pair is kept once, the first seen (FaithDial's expert
    label before BEGIN's; the labels differ for 2 such pairs). Group = the knowledge text,
    so a passage never splits (BEGIN and FaithDial share knowledge texts)."""
    cases, seen = [], set()
    for row_id, knowledge, turn, response, gold in _dialogue_rows():
        pair = (knowledge.strip(), response.strip())
        if gold is None or not all(pair) or pair in seen:
            continue
        seen.add(pair)
        cases.append(_case("dialogue", row_id, _key(pair[0]), turn, pair[1], pair[0], gold))
    return cases


# ---------------------------------------------------------------- SummEdits


def load_summedits() -> list[Case]:
    """SummEdits (Laban et al. 2023; 6 domains: news, QMSum meetings, sales calls and
    e-mails, ECTSum earnings calls, SciTLDR), Apache-2.0.

    Claim = the summary (the verified seed or a small LLM edit of it), passage = its
    document; human label consistent -> supported, inconsistent -> unsupported. A repeated
    (document, summary) pair is kept once. No question. Group = the document (its text:
    two QMSum seeds share a transcript)."""
    cases, seen = [], set()
    for path in sorted((DATA / "summedits").glob("summedits_*.json")):
        domain = path.stem.removeprefix("summedits_")
        with open(path, encoding="utf-8") as f:
            for r in json.load(f):
                if (r["doc"], r["summary"]) in seen:
                    continue
                seen.add((r["doc"], r["summary"]))
                gold = "supported" if r["label"] == 1 else "unsupported"
                cases.append(
                    _case(
                        "summedits",
                        r["id"],
                        f"{domain}:{_key(r['doc'])}",
                        "",
                        r["summary"],
                        r["doc"],
                        gold,
                    )
                )
    return cases


# ---------------------------------------------------------------- AttributionBench


ATTRIBUTION_GOLD = {"attributable": "supported", "not attributable": "unsupported"}


def load_attributionbench() -> list[Case]:
    """AttributionBench, open subsets (Li et al. 2024; Stanford-GenSearch MIT, AttributedQA
    Apache-2.0, HAGRID Apache-2.0, AttrScore-GenSearch MIT; dataset card Apache-2.0).

    Question = `question`, claim = `claim` (an answer sentence, or AttributedQA's short
    answer as a sentence), passage = its `references` joined with blank lines, "[n]"
    citation markers stripped from both; attributable -> supported, not attributable ->
    unsupported (partial is merged into it upstream). Rows with no reference text (75
    HAGRID) are dropped, a repeated (claim, passage) pair is kept once. Group = the
    question (several claims of one answer stay together)."""
    cases, seen = [], set()
    for name in ("dev_open", "test_sampled500_open", "test_ood_open"):
        for r in _read_jsonl(DATA / "attributionbench_open" / f"{name}.jsonl"):
            refs = [_CITE.sub("", ref).strip() for ref in r["references"]]
            passage = "\n\n".join(ref for ref in refs if ref)
            claim = _CITE.sub("", r["claim"]).strip()
            if not passage or (claim, passage) in seen:
                continue
            seen.add((claim, passage))
            cases.append(
                _case(
                    "attributionbench",
                    r["id"],
                    _key(r["question"].strip()),
                    r["question"],
                    claim,
                    passage,
                    ATTRIBUTION_GOLD[r["attribution_label"]],
                )
            )
    return cases


# ---------------------------------------------------------------- PubMedQA


def load_pubmedqa() -> list[Case]:
    """PubMedQA PQA-L (Jin et al. 2019), MIT.

    Per yes/no question (maybe dropped): question = `QUESTION`, passage = the abstract's
    CONTEXTS joined with "\\n" (never LONG_ANSWER, which states the answer), two cases:
    claim "Yes." and claim "No."; the one equal to `final_decision` -> supported, the other
    -> unsupported (contradicted). Group = the PMID, so its two cases stay together."""
    with open(DATA / "pubmedqa_labeled" / "ori_pqal.json", encoding="utf-8") as f:
        data = json.load(f)
    cases = []
    for pmid, r in data.items():
        if r["final_decision"] not in ("yes", "no"):
            continue
        passage = "\n".join(c.strip() for c in r["CONTEXTS"])
        for answer in ("yes", "no"):
            gold = "supported" if answer == r["final_decision"] else "unsupported"
            cases.append(
                _case(
                    "pubmedqa",
                    f"{pmid}:{answer}",
                    pmid,
                    r["QUESTION"],
                    f"{answer.capitalize()}.",
                    passage,
                    gold,
                )
            )
    return cases


# ---------------------------------------------------------------- API

LOADERS: dict[str, Callable[[], list[Case]]] = {
    "wice": load_wice,
    "factcheck": load_factcheck,
    "xquad": load_xquad,
    "clapnq": load_clapnq,
    "dialogue": load_dialogue,
    "summedits": load_summedits,
    "attributionbench": load_attributionbench,
    "pubmedqa": load_pubmedqa,
}


def check(cases: list[Case]) -> None:
    """Raise ValueError unless every case is well formed: non-empty claim, passages and
    group, a known gold, a unique case_id, and gold spans inside passages[0]."""
    ids: set[str] = set()
    for c in cases:
        where = f"{c.set} {c.case_id}"
        if c.case_id in ids:
            raise ValueError(f"{where}: duplicate case_id")
        ids.add(c.case_id)
        if not (isinstance(c.claim, str) and c.claim.strip() and c.group and c.gold in GOLDS):
            raise ValueError(f"{where}: empty claim or group, or unknown gold {c.gold!r}")
        if not c.passages or not all(isinstance(p, str) and p.strip() for p in c.passages):
            raise ValueError(f"{where}: empty passage")
        if not all(0 <= s < e <= len(c.passages[0]) for s, e in c.gold_spans):
            raise ValueError(f"{where}: gold span outside passages[0]")


def sample(cases: list[Case], limit: int, seed: int) -> list[Case]:
    """About `limit` cases in whole groups, the supported share as in `cases`: groups in a
    seeded random order, each taken if it overflows neither the supported nor the other
    quota; then, in the same order, any left over that brings the counts closer to the
    quotas (large groups); the kept cases stay in load order."""
    if len(cases) <= limit:
        return cases
    groups: dict[str, list[int]] = {}
    for i, c in enumerate(cases):
        groups.setdefault(c.group, []).append(i)
    order = sorted(groups)
    random.Random(seed).shuffle(order)
    quota_pos = round(limit * sum(c.gold == "supported" for c in cases) / len(cases))
    quota_neg = limit - quota_pos
    taken: set[str] = set()
    pos = neg = 0
    for strict in (True, False):
        for g in order:
            gp = sum(cases[i].gold == "supported" for i in groups[g])
            gn = len(groups[g]) - gp
            fits = pos + gp <= quota_pos and neg + gn <= quota_neg
            nearer = abs(quota_pos - pos - gp) + abs(quota_neg - neg - gn) < (
                abs(quota_pos - pos) + abs(quota_neg - neg)
            )
            if g not in taken and (fits if strict else nearer):
                taken.add(g)
                pos, neg = pos + gp, neg + gn
    return [c for c in cases if c.group in taken]


def load(name: str, limit: int = 1500, seed: int = 13) -> list[Case]:
    """The cases of set `name` (one of SETS), checked; more than `limit` -> a seeded,
    group-whole, label-stratified sample of about `limit` (deterministic for a seed)."""
    if name not in LOADERS:
        raise ValueError(f"unknown set {name!r}; expected one of {', '.join(SETS)}")
    cases = LOADERS[name]()
    check(cases)
    return sample(cases, limit, seed)


def _row(name: str, cases: list[Case], total: int, seconds: float) -> str:
    n = len(cases)
    return (
        f"{name:<17}{total:>6}{n:>6}{sum(c.gold == 'supported' for c in cases) / n:>6.2f}"
        f"{sum(c.gold == 'partial' for c in cases) / n:>6.2f}{len({c.group for c in cases}):>7}"
        f"{sum(len(c.claim) for c in cases) / n:>7.0f}"
        f"{sum(sum(map(len, c.passages)) for c in cases) / n:>8.0f}"
        f"{sum(bool(c.question) for c in cases):>6}{sum(bool(c.gold_spans) for c in cases):>6}"
        f"{seconds:>6.1f}"
    )


def summary(limit: int = 1500, seed: int = 13, show: int = 0) -> str:
    """Per set: all cases, sampled cases, and of the sample the supported and partial share,
    groups, mean claim / passage chars, cases with a question / gold spans, load seconds;
    then `show` random cases per set."""
    head = f"{'set':<17}{'all':>6}{'cases':>6}{'sup':>6}{'part':>6}{'groups':>7}"
    lines = [head + f"{'claim':>7}{'passage':>8}{'qst':>6}{'spans':>6}{'sec':>6}"]
    shown = []
    for name in SETS:
        t = time.perf_counter()
        full = LOADERS[name]()
        check(full)
        cases = sample(full, limit, seed)
        lines.append(_row(name, cases, len(full), time.perf_counter() - t))
        for c in random.Random(seed).sample(cases, min(show, len(cases))):
            spans = [c.passages[0][s:e][:80] for s, e in c.gold_spans[:2]]
            shown.append(
                f"[{c.case_id} | group {c.group} | {c.gold}]\n  Q: {c.question[:150]}\n"
                f"  C: {c.claim[:250]}\n  P: {c.passages[0][:250]!r} (+{len(c.passages) - 1})"
                f"\n  spans: {spans}"
            )
    return "\n".join(lines + ([""] + shown if shown else []))


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--limit", type=int, default=1500)
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--show", type=int, default=0, help="random cases to print per set")
    args = ap.parse_args()
    print(summary(args.limit, args.seed, args.show))
