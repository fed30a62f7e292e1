"""The local judge's rules, one behaviour per test (numbers, names, negation, quotes)."""

from __future__ import annotations

import pytest
from ragspan.tasks.judges.base import JudgeFailure, JudgeItem, JudgeSpec, Verdict
from ragspan.tasks.judges.local import LocalJudge, local_support_threshold, split_claims

PASSAGE = (
    "Northwind Cloud was founded in 2014 in Lisbon. Customers can request a full refund "
    "within 30 days of purchase. Refunds are not available for reserved instances. "
    "The Pro plan costs $49 per month."
)


@pytest.fixture
def judge() -> LocalJudge:
    return LocalJudge(JudgeSpec())


def verdict(judge: LocalJudge, claim: str, passage: str = PASSAGE) -> Verdict:
    (v,) = judge.judge(claim, [passage])
    assert isinstance(v, Verdict)
    return v


def test_paraphrase_is_supported_with_a_verbatim_minimal_quote(judge):
    v = verdict(judge, "Customers can get a full refund within 30 days of purchase.")
    assert v.verdict == "supported" and v.confidence == v.support >= local_support_threshold()
    assert v.quote in PASSAGE and PASSAGE[v.quote_start : v.quote_start + len(v.quote)] == v.quote
    assert "Lisbon" not in v.quote and "reserved" not in v.quote  # minimal, not the whole passage


@pytest.mark.parametrize(
    "claim, problem",
    [
        ("Customers can request a full refund within 60 days of purchase.", "number"),
        ("Northwind Cloud was founded in 2014 in Porto.", "name"),
        ("Refunds are available for reserved instances.", "negation"),
        ("Customers cannot request a full refund within 30 days of purchase.", "negation"),
    ],
)
def test_near_match_that_disagrees_is_partial(judge, claim, problem):
    v = verdict(judge, claim)
    assert v.verdict == "partial"
    assert problem in v.reason


def test_unrelated_claim_is_unsupported_without_quote(judge):
    v = verdict(judge, "Northwind offers a free GPU tier for students.")
    assert v.verdict == "unsupported" and v.quote is None


def test_numbers_are_compared_by_value(judge):
    assert verdict(judge, "Over 1,200 users joined.", "More than 1200 users joined in May.").verdict == "supported"
    assert verdict(judge, "It lasts twelve days.", "The trial lasts 12 days.").verdict == "supported"


def test_claim_without_words_is_a_typed_failure_not_a_verdict(judge):
    (v,) = judge.judge("👍👍", [PASSAGE])
    assert isinstance(v, JudgeFailure) and v.kind == "no_content"


def test_one_verdict_per_passage_in_order(judge):
    out = judge.judge("The Pro plan costs $49 per month.", ["Nothing here.", PASSAGE, ""])
    assert [v.verdict for v in out] == ["unsupported", "supported", "unsupported"]


def test_split_claims_gives_exact_answer_offsets():
    answer = "Refunds take 30 days; they are not available for reserved plans.  Dr. Müller approved it.\nSee 東京 region."
    claims = split_claims(answer)
    assert [c.text for c in claims] == [
        "Refunds take 30 days",
        "they are not available for reserved plans.",
        "Dr. Müller approved it.",
        "See 東京 region.",
    ]
    for c in claims:
        assert answer[c.start : c.end] == c.text


def test_judge_is_deterministic(judge):
    claims = ["The Pro plan costs $49 per month.", "Refunds are available for reserved instances."]
    assert [judge.judge(c, [PASSAGE]) for c in claims] == [LocalJudge(JudgeSpec()).judge(c, [PASSAGE]) for c in claims]


def test_worker_processes_give_the_same_verdicts_as_in_process():
    import json

    from conftest import SAMPLE
    from ragspan.tasks.judges import local
    from ragspan.tasks.judges.base import JudgeRuntime, JudgeSpec

    docs = [json.loads(line)["text"] for line in (SAMPLE / "corpus.jsonl").read_text(encoding="utf-8").splitlines()]
    passages = [d[i:i + 600] for d in docs for i in range(0, len(d), 500)][:40]
    answers = [json.loads(line)["answer"] for line in (SAMPLE / "runs" / "baseline.jsonl").read_text(encoding="utf-8").splitlines()]
    claims = [c.text for a in answers for c in local.split_claims(a)] + ["🙂"]  # and one with no words
    items = [(c, passages) for c in claims]
    assert sum(len(p) for _, p in items) >= local.MIN_POOLED_PAIRS
    judge, pooling = local.LocalJudge(JudgeSpec()), local.LocalJudge(JudgeSpec(), JudgeRuntime(processes=2))
    try:
        alone = judge.judge_many(items)  # the default runtime: in-process
        assert local._pool_for(local.MIN_POOLED_PAIRS, 2) is not None
        pooled = pooling.judge_many(items)
    finally:
        local.shutdown_workers()
    assert pooled == alone
    assert judge.stats.calls == pooling.stats.calls == len(items)
    assert {v.verdict for row in alone for v in row if hasattr(v, "verdict")} >= {"supported", "unsupported"}
    assert alone[-1][0].kind == "no_content"


def test_a_judge_worker_that_dies_falls_back_to_judging_in_process():
    import os
    import signal

    from ragspan.tasks.judges import local
    from ragspan.tasks.judges.base import JudgeRuntime, JudgeSpec

    items = [("Paris is the capital of France.", ["Paris is the capital of France."] * 50)] * 60
    judge = local.LocalJudge(JudgeSpec(), JudgeRuntime(processes=2))
    try:
        pool = local._pool_for(local.MIN_POOLED_PAIRS, 2)
        import time

        list(pool.map(time.sleep, [0.3, 0.3]))  # both workers are up (one is started per idle-less submit)
        for pid in list(pool._processes):  # kill them: the pool is broken
            os.kill(pid, signal.SIGKILL)
        verdicts = judge.judge_many(items)
        assert local._workers_failed and local._pool_for(local.MIN_POOLED_PAIRS, 2) is None  # stays in-process
    finally:
        local.shutdown_workers()
    assert len(verdicts) == 60 and all(v.verdict == "supported" for row in verdicts for v in row)
    assert judge.stats.calls == 60


def test_judge_processes_default_to_the_cores_but_at_most_four():
    import os

    from ragspan.tasks.config import (
        DEFAULT_MAX_JUDGE_PROCESSES,
        PipelineParams,
        judge_process_count,
    )

    assert judge_process_count(PipelineParams(judge_processes=6)) == 6  # asked for: given
    assert judge_process_count(PipelineParams(judge_processes=1)) == 1
    assert judge_process_count(PipelineParams()) == min(os.cpu_count() or 1, DEFAULT_MAX_JUDGE_PROCESSES) <= 4


def test_words_a_claim_only_repeats_from_its_question_are_not_evidence(judge):
    """A claim restating its question needs the words it adds: without them in the passage
    its probability of support drops (with the question) below what the same claim gets
    alone; with them, the question changes nothing."""
    claim, question = "The default retention period for backups is configurable.", "What is the default retention period for backups?"
    passage = "The default retention period for backups depends on the plan you choose when you create the backup policy."
    (with_q,), (alone,) = judge.judge(claim, [passage], question), judge.judge(claim, [passage])
    assert with_q.support < alone.support and with_q.verdict != "supported"
    assert "words the claim adds to its question" in with_q.reason
    told = "Backups are stored in a separate region from your servers."
    (a,), (b,) = judge.judge("Backups are stored in a separate region.", [told], "Where are backups stored?"), \
        judge.judge("Backups are stored in a separate region.", [told])
    assert a.verdict == b.verdict == "supported" and a.support == b.support


def test_a_short_answer_is_judged_as_the_answer_to_its_question(judge):
    (v,) = judge.judge("Titan.", ["Titan, the largest moon of Saturn, has a thick atmosphere."],
                       "What is the largest moon of Saturn?", whole_answer=True)
    assert v.verdict == "supported" and v.quote.startswith("Titan")
    capital, passage = "What is the capital of India?", ["Mumbai is the largest city in India and its financial centre."]
    (as_answer,) = judge.judge("Mumbai.", passage, capital, whole_answer=True)
    (as_piece,) = judge.judge("Mumbai.", passage, capital)  # a fragment of a longer answer
    assert as_piece.verdict == "supported"  # on its own words, the word is simply there ...
    assert as_answer.verdict != "supported"  # ... as the answer to the question, nothing says so


def test_every_verdict_carries_a_probability_of_support_and_the_verdicts_agree_with_it(judge):
    claims = ["Customers can get a full refund within 30 days of purchase.", "The Pro plan costs $49 per month.",
              "Northwind offers a free GPU tier for students.", "Refunds are available for reserved instances."]
    for v in (verdict(judge, c) for c in claims):
        assert 0 <= v.support <= 1
        assert (v.verdict == "supported") == (v.support >= local_support_threshold() and v.verdict == "supported")
        if v.verdict == "supported":
            assert v.confidence == v.support


def test_verdicts_do_not_depend_on_the_hash_seed(tmp_path):
    """Sets iterate in a per-process order; every sum over them is exact (math.fsum), so
    two processes with different PYTHONHASHSEED give the same probabilities."""
    import json
    import os
    import subprocess
    import sys

    code = ("import json; from ragspan.tasks.judges.local import LocalJudge; from ragspan.tasks.judges.base import JudgeSpec;"
            "j = LocalJudge(JudgeSpec()); P = " + repr(PASSAGE) + ";"
            "print(json.dumps([v.model_dump() for c in ('Customers can get a full refund within a month.',"
            " 'Northwind Cloud started in Lisbon in 2014.', 'The Pro plan is 49 dollars.') for v in j.judge(c, [P])]))")
    outs = [subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONHASHSEED": seed},
                           capture_output=True, text=True, check=True).stdout for seed in ("1", "2")]
    assert json.loads(outs[0]) == json.loads(outs[1])


def test_another_model_file_is_another_judge_version(tmp_path, monkeypatch):
    import json

    from ragspan.tasks.judges.local import local_judge_version
    from ragspan.tasks.judges.verifier import MODEL_ENV, PACKAGED_MODEL

    packaged = local_judge_version()
    other = tmp_path / "model.json"
    spec = json.loads(PACKAGED_MODEL.read_text(encoding="utf-8"))
    spec["threshold"] = 0.9
    other.write_text(json.dumps(spec), encoding="utf-8")
    monkeypatch.setenv(MODEL_ENV, str(other))
    assert local_judge_version() != packaged and local_judge_version().startswith(spec["version"] + "+")
    (v,) = LocalJudge(JudgeSpec()).judge("Customers can get a full refund within 30 days of purchase.", [PASSAGE])
    assert v.verdict != "supported"  # the stricter threshold of the other file is in force


# ---------------------------------------------------------------- local-5 invariants
LONG = (
    "The Halden mill opened in 1887 on the river Tista. Its first owner, Ole Brekke, sold it in 1902 "
    "to the Saugbrugs company, which still runs it. The mill produces 240,000 tonnes of paper a year "
    "and employs 430 people. Visitors are admitted at no cost on Sundays. The mill was not damaged "
    "during the war, unlike the town's bridge. In 1995 a museum opened in the old boiler house."
)
STATED = [
    "The Halden mill opened in 1887 on the river Tista.",
    "Ole Brekke sold the mill in 1902 to the Saugbrugs company.",
    "The mill produces 240,000 tonnes of paper a year.",
    "Visitors are admitted at no cost on Sundays.",
    "The mill was not damaged during the war.",
]
CHANGED = [  # each one thing changed: name, date, number, unit, negation (both ways)
    ("The Halden mill opened in 1887 on the river Glomma.", "name"),
    ("Ole Brekke sold the mill in 1903 to the Saugbrugs company.", "number"),
    ("The mill produces 420,000 tonnes of paper a year.", "number"),
    ("The mill produces 240,000 kg of paper a year.", "unit"),
    ("The mill was damaged during the war.", "negation"),
    ("Visitors are not admitted on Sundays.", "negation"),
]


@pytest.mark.parametrize("claim", STATED)
def test_a_stated_claim_is_supported_and_its_reason_names_no_problem(judge, claim):
    v = verdict(judge, claim, LONG)
    assert v.verdict == "supported", v.reason
    for problem in ("not in the passage", "another", "negation differs", "below the support threshold"):
        assert problem not in v.reason  # the reason never contradicts the label


@pytest.mark.parametrize("claim, problem", CHANGED)
def test_one_changed_name_number_unit_or_negation_is_not_supported(judge, claim, problem):
    v = verdict(judge, claim, LONG)
    assert v.verdict != "supported" and v.support < local_support_threshold()
    assert problem in v.reason


def test_not_supported_verdicts_say_why_and_report_a_probability_below_the_threshold(judge):
    for claim in ["The mill was founded by Karen Holm.", "Tickets cost 15 euros.", *[c for c, _ in CHANGED]]:
        (v,) = judge.judge(claim, [LONG])
        assert isinstance(v, Verdict) and v.verdict != "supported"
        assert v.support < local_support_threshold()
        assert v.reason.count(";") >= 1  # the probability and at least one fact behind it


@pytest.mark.parametrize(
    "question, answer, expected",
    [
        ("Did the Halden mill open in 1887?", "Yes.", "supported"),
        ("Did the Halden mill open in 1887?", "No.", "partial"),
        ("Was the mill damaged during the war?", "No.", "supported"),
        ("Was the mill damaged during the war?", "Yes.", "partial"),
    ],
)
def test_yes_and_no_are_judged_as_the_statement_question_and_answer_make(judge, question, answer, expected):
    (v,) = judge.judge(answer, [LONG], question, True)
    assert isinstance(v, Verdict) and v.verdict == expected, v.reason


def test_a_one_word_answer_is_judged_with_its_question_and_question_names_are_never_missing(judge):
    (v,) = judge.judge("Saugbrugs.", [LONG], "To which company did Ole Brekke sell the Halden mill?", True)
    assert isinstance(v, Verdict) and v.verdict == "supported", v.reason
    (w,) = judge.judge("Norske Skog.", [LONG], "To which company did Ole Brekke sell the Halden mill?", True)
    assert isinstance(w, Verdict) and w.verdict != "supported"
    assert "Brekke" not in w.reason and "Halden" not in w.reason  # the question's names are not the answer's


def test_a_claim_with_words_but_nothing_to_check_gets_a_verdict_not_a_failure(judge):
    (v,) = judge.judge("Thanks, that is all!", [LONG])
    assert isinstance(v, Verdict) and v.verdict == "unsupported"


def test_a_word_the_window_negates_once_and_states_plainly_elsewhere_is_no_negation_conflict(judge):
    passage = ("The telescope is not in orbit around the Earth, like Hubble is; it orbits the Sun, "
               "1.5 million kilometres away from the Earth, at the second Lagrange point.")
    v = verdict(judge, "The telescope orbits the Sun, 1.5 million kilometres away from the Earth.", passage)
    assert "negation differs" not in v.reason and v.verdict == "supported", v.reason
    w = verdict(judge, "The telescope orbits the Sun.", "The telescope does not orbit the Sun.")
    assert w.verdict != "supported" and "negation differs" in w.reason  # negated only: a conflict


def test_a_reply_opening_with_no_negates_nothing_that_follows(judge):
    passage = "Rotten Tomatoes gives the film 92% with an average rating of 8.6/10."
    v = verdict(judge, "No, but it has 92% on Rotten Tomatoes with an average rating of 8.6/10.", passage)
    assert v.verdict == "supported" and "negation differs" not in v.reason, v.reason


def test_a_paraphrase_is_supported_and_added_content_is_not(judge):
    """Issue 41: a claim whose numbers, names and rare words the passage all states is
    supported though worded otherwise; one that adds a number or a name is not, and that
    added word is marked."""
    passage = "The museum opens at nine in the morning and shuts its doors at five in the afternoon on weekdays."
    (v,) = judge.judge("On weekdays the museum is open from the morning until the afternoon.", [passage])
    assert v.verdict == "supported" and not v.marks
    claim = "On weekdays the museum is open until the afternoon, with guided tours by Hendrickson."
    (w,) = judge.judge(claim, [passage])
    assert w.verdict != "supported"
    assert any(claim[m.start:m.end].endswith("Hendrickson") for m in w.marks)


EIFFEL = ["The Eiffel Tower was completed in 1889 for the World Fair.",
          "Gustave Eiffel's company designed and built the tower in Paris."]
EIFFEL_CLAIM = "Designed by Gustave Eiffel's firm, the Paris landmark opened in 1889."


def _eiffel(judge: LocalJudge, claim: str, passages: list[str], shown: tuple[bool, ...]) -> list[Verdict]:
    got = judge.judge_many([JudgeItem(claim, passages, "When was the Eiffel Tower built?", False, shown)])[0]
    assert all(isinstance(v, Verdict) for v in got)
    return got  # type: ignore[return-value]


def test_a_claim_the_passages_state_together_is_supported_by_its_best_passage(judge):
    """local-5.2 (issue 41): no single passage supports the claim, but the passages of its
    context window state every number, name and rare word it adds: the most probable one
    supports it, quoting its own window. Not when the passages were not shown, when one
    passage alone is shown, when the claim adds a word no passage states, or when a shown
    passage conflicts with it."""
    alone = _eiffel(judge, EIFFEL_CLAIM, EIFFEL, ())
    assert [v.verdict for v in alone] != ["supported"] * 2 and "supported" not in [v.verdict for v in alone]
    together = _eiffel(judge, EIFFEL_CLAIM, EIFFEL, (True, True))
    carried = [v for v in together if v.verdict == "supported"]
    assert len(carried) == 1 and "across passages" in carried[0].reason and not carried[0].marks
    k = [v.verdict for v in together].index("supported")
    assert EIFFEL[k][carried[0].quote_start:].startswith(carried[0].quote)
    assert carried[0].support >= 0.88
    # the others keep their own rows
    assert [v for i, v in enumerate(together) if i != k] == [v for i, v in enumerate(alone) if i != k]
    assert "supported" not in [v.verdict for v in _eiffel(judge, EIFFEL_CLAIM, EIFFEL, (True, False))]
    assert "supported" not in [v.verdict for v in _eiffel(judge, EIFFEL_CLAIM, EIFFEL[:1], (True,))]
    added = "Designed by Gustave Eiffel's firm with engineer Koechlin, the Paris landmark opened in 1889."
    assert "supported" not in [v.verdict for v in _eiffel(judge, added, EIFFEL, (True, True))]
    clash = ["The Eiffel Tower was completed in 1887 for the World Fair.", EIFFEL[1]]
    assert "supported" not in [v.verdict for v in _eiffel(judge, EIFFEL_CLAIM, clash, (True, True))]


@pytest.mark.parametrize("answer", ["Steps:\n1. Boil the water.\n2. Add the tea.", "(a) Boil the water. b) Add the tea."])
def test_a_list_enumerator_alone_is_no_claim(answer):
    """A numbered list splits after each number; "2." alone states nothing to judge."""
    claims = [c.text for c in split_claims(answer)]
    assert not any(c.rstrip(".)").lstrip("(") in {"1", "2", "a", "b"} for c in claims), claims
    assert any("Boil the water" in c for c in claims) and any("Add the tea" in c for c in claims)


def _with_rules(tmp_path, monkeypatch, **rules) -> LocalJudge:
    """A local judge whose model file sets these Rules (RAGSPAN_LOCAL_JUDGE_MODEL)."""
    import json

    from ragspan.tasks.judges.verifier import MODEL_ENV, PACKAGED_MODEL

    spec = json.loads(PACKAGED_MODEL.read_text(encoding="utf-8"))
    spec["rules"] = {**spec.get("rules", {}), **rules}
    path = tmp_path / ("-".join(f"{k}{v}" for k, v in rules.items()) + ".json")
    path.write_text(json.dumps(spec), encoding="utf-8")
    monkeypatch.setenv(MODEL_ENV, str(path))
    return LocalJudge(JudgeSpec())


def test_words_scattered_over_passages_carry_nothing(tmp_path, monkeypatch):
    """Paragraphs of one subject hold each other's names and rare words: the carrying
    passage must itself be about the claim (Rules.carried_about: 0.4 of the claim's weighted
    words in its window), and each added word must be stated beside another word of the
    claim (Rules.carried_company). Either guard alone stops these passages; without both
    they would carry the claim."""
    scattered = ["Gustave lived in Dijon.", "Paris has a port.", "It grew after 1889.", "A landmark stands there."]
    shown = (True,) * 4

    def carried(judge: LocalJudge) -> bool:
        return "supported" in [v.verdict for v in _eiffel(judge, EIFFEL_CLAIM, scattered, shown)]

    assert not carried(LocalJudge(JudgeSpec()))
    # (the claim's "Eiffel" comes from its question, which these passages never name: that
    # guard is off here, tested below)
    assert not carried(_with_rules(tmp_path, monkeypatch, carried_asked=0.0, carried_about=0.0))
    assert not carried(_with_rules(tmp_path, monkeypatch, carried_asked=0.0, carried_company=0))
    assert carried(_with_rules(tmp_path, monkeypatch, carried_asked=0.0, carried_about=0.0, carried_company=0))


def test_passages_that_never_state_what_the_claim_takes_from_its_question_carry_nothing(judge):
    """The passages hold the claim's new words (Northwind Cloud) but not the NAT gateway its
    question asked about: nothing states the claim, however about Northwind they are."""
    passages = ["Q: Does Northwind Cloud support IPv6? A: Yes, every instance can have an IPv6 address.",
                "Northwind Cloud load balancers distribute traffic across instances in one region."]
    got = judge.judge_many([JudgeItem("Northwind Cloud does not provide a managed NAT gateway.", passages,
                                      "Is there a managed NAT gateway?", False, (True, True))])[0]
    assert "supported" not in [v.verdict for v in got if isinstance(v, Verdict)]


def test_the_words_a_claim_takes_from_its_question_must_be_in_the_passages(tmp_path, monkeypatch):
    """Rules.carried_asked: with the guard off, the same passages carry the claim."""
    passages = ["Q: Does Northwind Cloud support IPv6? A: Yes, every instance can have an IPv6 address.",
                "Northwind Cloud load balancers distribute traffic across instances in one region."]
    judge = _with_rules(tmp_path, monkeypatch, carried_asked=0.0)
    got = judge.judge_many([JudgeItem("Northwind Cloud does not provide a managed NAT gateway.", passages,
                                      "Is there a managed NAT gateway?", False, (True, True))])[0]
    assert "supported" in [v.verdict for v in got if isinstance(v, Verdict)]
