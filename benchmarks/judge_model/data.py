"""The labelled (question, claim, passage) cases the local judge's model is trained on.

Read-only from `RAGSPAN_BENCH_DATA` (default `<repo>/../shared/data`, as
benchmarks/_data.py and benchmarks/_real_claims.py); nothing is copied into the repo.

Each case is a dict:
    ds        wice | wice_extra | factcheck | xquad | clapnq | clapnq_abs
    group     cross-validation group: the WiCE page (every derivative of a WiCE dev claim
              cites the same page, so it stays with its claim: checked by `check_groups`),
              the Factcheck claim (all its pairs together), the XQuAD/ClapNQ article
    source    the real claim a case belongs to, in benchmarks/_real_claims.py's ids
              (WiCE dev `dev02986`, Factcheck `fc0000`): a WiCE dev claim and its
              sub-claims (`dev02986-2`) share it; "" for cases of no real claim (WiCE
              train sub-claims, XQuAD/ClapNQ). `fit_for_cv` drops the held-out sources.
    question, claim, passage, label (supported | partial | unsupported)
    claim_id  claim-level aggregation key (Factcheck: one claim, several passages)
    kind      real | sub_partial | sub_deleted | <Factcheck stance> | gold_sentence |
              swap_<year|int|number|entity> | unrelated | long_answer

Ported from the research prototype that fitted local-4 (same cases, same order, same
groups, so the same folds): WiCE dev, WiCE non_supported_tokens sub-claims (train + dev),
Factcheck-GPT pairs, and the question-aware XQuAD / ClapNQ synthetic cases.
"""

from __future__ import annotations

import json
import random
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # benchmarks/: _real_claims, _data

from _data import CLAPNQ, XQUAD, detok, sentence_chunks
from _real_claims import DATA, FACTCHECK, STANCE_GOLD, WICE, WICE_GOLD, _read_jsonl
from ragspan.tasks.core.text import STOPWORDS, sentence_spans

WICE_EXTRA = (
    DATA / "wice_dev" / "non_supported_tokens_train.jsonl",
    DATA / "wice_dev" / "non_supported_tokens_dev.jsonl",
)

# The sets, where they come from and their licenses (each folder's LICENSE file under
# ../shared/data); written into the model file's `training_sets`.
SETS = {
    "wice": (
        "WiCE dev claims vs the page they cite (github ryokamoi/wice)",
        "ODC-BY (annotations), CC-BY-SA (Wikipedia / web text)",
    ),
    "wice_extra": (
        "WiCE non_supported_tokens sub-claims, train + dev (github ryokamoi/wice)",
        "ODC-BY (annotations), CC-BY-SA (Wikipedia / web text)",
    ),
    "factcheck": (
        "Factcheck-GPT claim-evidence stance pairs (github yuxiaw/Factcheck-GPT)",
        "Apache-2.0",
    ),
    "xquad": (
        "XQuAD English, synthetic cases built from it (github google-deepmind/xquad)",
        "CC BY-SA 4.0",
    ),
    "clapnq": ("ClapNQ dev, synthetic cases built from it (github primeqa/clapnq)", "Apache-2.0"),
    "clapnq_abs": (
        "ClapNQ dev human long answers vs their passage (github primeqa/clapnq)",
        "Apache-2.0",
    ),
}


def _page(evidence) -> str:
    return "\n".join(evidence) if isinstance(evidence, list) else evidence


def _title(evidence) -> str:
    return (evidence[0] if isinstance(evidence, list) else evidence[:80]).strip()


def _case(ds, group, source, question, claim, passage, label, claim_id, kind) -> dict:
    return {
        "ds": ds,
        "group": group,
        "source": source,
        "question": question,
        "claim": claim,
        "passage": passage,
        "label": label,
        "claim_id": claim_id,
        "kind": kind,
    }


def load_wice(path: Path = WICE) -> list[dict]:
    """WiCE dev: each claim against its whole cited page (the sentences joined with "\\n",
    as benchmarks/_real_claims.py's `wice_document`)."""
    return [
        _case(
            "wice",
            "wice:" + _title(r["evidence"]),
            r["meta"]["id"],
            "",
            r["claim"],
            _page(r["evidence"]),
            WICE_GOLD[r["label"]],
            r["meta"]["id"],
            "real",
        )
        for r in _read_jsonl(path)
    ]


def wice_source(sub_id: str) -> str:
    """The WiCE claim a sub-claim was cut from: `dev02986-2` -> `dev02986`."""
    return sub_id.rsplit("-", 1)[0]


def load_wice_extra(synthetic: bool = True) -> list[dict]:
    """WiCE non-supported-token sub-claims (train + dev): the sub-claim itself is partial;
    with `synthetic`, the sub-claim with its unsupported words deleted is added as supported
    (when >= 3 content words remain). Grouped by page title, the key of load_wice."""
    out = []
    for path in WICE_EXTRA:
        for r in _read_jsonl(path):
            g = "wice:" + _title(r["evidence"])
            page = _page(r["evidence"])
            sid = r["meta"]["id"]
            src = (
                wice_source(sid) if sid.startswith("dev") else ""
            )  # train claims are in no benchmark
            out.append(
                _case("wice_extra", g, src, "", r["claim"], page, "partial", sid, "sub_partial")
            )
            if synthetic:
                kept = [
                    t
                    for t, bad in zip(r["claim_tokens"], r["non_supported_spans"], strict=True)
                    if not bad
                ]
                text = re.sub(r" ([,.;:!?)%'])", r"\1", " ".join(kept))
                if len([t for t in kept if t.lower() not in STOPWORDS and t.isalnum()]) >= 3:
                    out.append(
                        _case(
                            "wice_extra",
                            g,
                            src,
                            "",
                            text,
                            page,
                            "supported",
                            sid + "+del",
                            "sub_deleted",
                        )
                    )
    return out


def load_factcheck(path: Path = FACTCHECK) -> list[dict]:
    """Factcheck-GPT: every (claim, snippet) row in file order (3,305; a snippet listed twice
    for a claim is two cases, as when local-4 was fitted). Claims are numbered by first
    appearance, as benchmarks/_real_claims.py does: group `fc:N`, source `fcNNNN`."""
    out = []
    ids: dict[str, int] = {}
    for r in _read_jsonl(path):
        n = ids.setdefault(r["claim"], len(ids))
        out.append(
            _case(
                "factcheck",
                f"fc:{n}",
                f"fc{n:04d}",
                "",
                r["claim"],
                r["evidence"],
                STANCE_GOLD[r["stance"]],
                f"fc:{n}",
                r["stance"],
            )
        )
    return out


# ------------------------------------------------------------------- QA synthetic cases
_YEAR = re.compile(r"(1[0-9]|20)\d\d")
_DIGIT = re.compile(r"\d")
_NUM_IN_TEXT = re.compile(r"(?<![\w.,])\d[\d,]*(?:\.\d+)?(?![\w])")
_CAPS_IN_TEXT = re.compile(r"(?<=[a-z,] )[A-Z][a-z]+(?: [A-Z][a-z]+){0,2}")
_W = re.compile(r"\w+")


def _answer_kind(text: str) -> str | None:
    t = text.strip().rstrip(".")
    if not t:
        return None
    if _YEAR.fullmatch(t):
        return "year"
    if _DIGIT.search(t):
        return "int" if re.fullmatch(r"[\d,]+", t) else "number"
    words = t.split()
    if t.lower() in STOPWORDS or words[0].lower() in STOPWORDS:
        return None
    if (
        t[0].isupper()
        and len(words) <= 4
        and all(w[0].isupper() or w.lower() in {"of", "the", "de", "and"} for w in words)
    ):
        return "entity"
    return None


def _items() -> tuple[list[dict], list[dict]]:
    """(docs, items): docs {id, title, text, chunks, source}; items {question, doc, sent, swap, kind}."""
    docs, items = [], []
    d = json.loads(XQUAD.read_text(encoding="utf-8"))
    for art in d["data"]:
        for i, p in enumerate(art["paragraphs"]):
            ctx = p["context"]
            doc = {
                "id": f"{art['title']}#{i}",
                "title": art["title"],
                "text": ctx,
                "chunks": sentence_chunks(ctx),
                "source": "xquad",
            }
            docs.append(doc)
            spans = sentence_spans(ctx)
            for qa in p["qas"]:
                a = qa["answers"][0]
                gs, ge = a["answer_start"], a["answer_start"] + len(a["text"])
                first = next((s for s in spans if s[0] <= gs < s[1] or gs < s[0]), spans[-1])
                last = next((s for s in spans if s[0] < ge <= s[1]), first)
                sent = (first[0], max(first[1], last[1]))
                ch = next((c for c in doc["chunks"] if c[0] <= sent[0] and sent[1] <= c[1]), None)
                if ch is None:
                    continue
                kind = _answer_kind(a["text"])
                se = ge - (1 if a["text"].endswith(".") else 0)
                items.append(
                    {
                        "question": qa["question"],
                        "doc": doc,
                        "sent": sent,
                        "chunk": ch,
                        "swap": (gs, se) if kind else None,
                        "kind": kind,
                        "source": "xquad",
                    }
                )
    for name in ("clapnq_dev_answerable.jsonl", "clapnq_dev_unanswerable.jsonl"):
        for r in _read_jsonl(CLAPNQ / name):
            p = r["passages"][0]
            text = p["text"]
            doc = {
                "id": f"clapnq:{r['id']}",
                "title": p["title"],
                "text": text,
                "chunks": sentence_chunks(text),
                "source": "clapnq",
                "answers": [o["answer"].strip() for o in r["output"] if o["answer"].strip()],
                "question": r["input"],
            }
            docs.append(doc)
            if "unanswerable" in name:
                continue
            sents = [s for o in r["output"] if o["answer"] for s in o["selected_sentences"]]
            sents = [s for s in sents if len(s.split()) >= 6]
            if not sents:
                continue
            s = sents[0]
            start = text.find(s)
            if start < 0:
                continue
            sent = (start, start + len(s))
            ch = next((c for c in doc["chunks"] if c[0] <= sent[0] and sent[1] <= c[1]), None)
            if ch is None:
                continue
            swap = kind = None
            m = _NUM_IN_TEXT.search(s) or _CAPS_IN_TEXT.search(s)
            if m:
                kind = _answer_kind(m.group(0))
                if kind:
                    swap = (start + m.start(), start + m.end())
            items.append(
                {
                    "question": r["input"],
                    "doc": doc,
                    "sent": sent,
                    "chunk": ch,
                    "swap": swap,
                    "kind": kind,
                    "source": "clapnq",
                }
            )
    return docs, items


def load_qa(seed: int = 0, per_source: int = 400) -> list[dict]:
    """Question-aware synthetic cases from XQuAD and ClapNQ (per item, one of):
    supported = the gold sentence vs its chunk; partial = the sentence with its number /
    name swapped for another article's (none of whose words is in the document) vs its chunk;
    unsupported = the sentence vs the most word-overlapping chunk of another article.
    Plus ClapNQ human long answers (each sentence) vs the whole passage = supported."""
    rng = random.Random(seed)
    docs, items = _items()
    pool: dict[str, list[dict]] = {}
    for it in items:
        if it["swap"]:
            pool.setdefault(it["kind"], []).append(it)
    all_chunks = [(d, c) for d in docs for c in d["chunks"]]
    chunk_words = [
        {w.lower() for w in _W.findall(d["text"][a:b])} - STOPWORDS for d, (a, b) in all_chunks
    ]
    out = []
    for source in ("xquad", "clapnq"):
        its = [it for it in items if it["source"] == source]
        rng.shuffle(its)
        for n, it in enumerate(its[:per_source]):
            doc = it["doc"]
            text = doc["text"]
            a, b = it["chunk"]
            chunk = text[a:b]
            s, e = it["sent"]
            claim = re.sub(r"\s+", " ", text[s:e]).strip()
            if source == "clapnq":
                claim = detok(claim)
            g = f"qa:{doc['title']}"
            role = n % 3
            if role == 1 and it["swap"]:
                dw = {w.lower() for w in _W.findall(text)}
                cands = pool.get(it["kind"], [])
                rep = None
                for _ in range(60):
                    o = rng.choice(cands)
                    st = o["doc"]["text"][o["swap"][0] : o["swap"][1]]
                    if (
                        o["doc"]["title"] == doc["title"]
                        or st == text[it["swap"][0] : it["swap"][1]]
                    ):
                        continue
                    if not ({w.lower() for w in _W.findall(st)} & dw):
                        rep = st
                        break
                if rep is not None:
                    sw = re.sub(
                        r"\s+", " ", text[s : it["swap"][0]] + rep + text[it["swap"][1] : e]
                    ).strip()
                    if source == "clapnq":
                        sw = detok(sw)
                    out.append(
                        _case(
                            source,
                            g,
                            "",
                            it["question"],
                            sw,
                            chunk,
                            "partial",
                            f"{source}:{n}",
                            "swap_" + it["kind"],
                        )
                    )
                    continue
            if role == 2:
                cw = {w.lower() for w in _W.findall(claim)} - STOPWORDS
                cands = [
                    k
                    for k in rng.sample(range(len(all_chunks)), 300)
                    if all_chunks[k][0]["title"] != doc["title"]
                ]
                k = max(cands, key=lambda k: (len(cw & chunk_words[k]), -k))
                d2, (a2, b2) = all_chunks[k]
                out.append(
                    _case(
                        source,
                        g,
                        "",
                        it["question"],
                        claim,
                        d2["text"][a2:b2],
                        "unsupported",
                        f"{source}:{n}",
                        "unrelated",
                    )
                )
                continue
            out.append(
                _case(
                    source,
                    g,
                    "",
                    it["question"],
                    claim,
                    chunk,
                    "supported",
                    f"{source}:{n}",
                    "gold_sentence",
                )
            )
    # ClapNQ abstractive long answers: each sentence vs the whole passage = supported
    k = 0
    for d in docs:
        if d["source"] != "clapnq" or not d.get("answers"):
            continue
        ans = d["answers"][0]
        for s, e in sentence_spans(ans):
            sent = ans[s:e]
            if len(sent.split()) < 5:
                continue
            out.append(
                _case(
                    "clapnq_abs",
                    f"qa:{d['title']}",
                    "",
                    d["question"],
                    sent,
                    d["text"],
                    "supported",
                    f"abs:{k}",
                    "long_answer",
                )
            )
            k += 1
    return out


def check_groups(cases: list[dict]) -> None:
    """Every case of one real claim (`source`) sits in one CV group: a WiCE dev claim with
    its sub-claims, a Factcheck claim with all its pairs."""
    group_of: dict[str, str] = {}
    for c in cases:
        if c["source"] and group_of.setdefault(c["source"], c["group"]) != c["group"]:
            raise AssertionError(
                f"{c['source']}: cases in groups {group_of[c['source']]} and {c['group']}"
            )


def load_all() -> list[dict]:
    """Every labelled case, in the order the model was fitted with (the folds depend on it)."""
    cases = load_wice() + load_wice_extra() + load_factcheck() + load_qa()
    check_groups(cases)
    return cases
