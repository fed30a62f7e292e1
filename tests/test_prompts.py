"""Prompt files: versioned, parseable, and never losing a required instruction."""

from __future__ import annotations

import re

import pytest
from ragspan.tasks.judges.openai_judge import (
    DecomposedClaim,
    Decomposition,
    Extraction,
    PassageVerdict,
)
from ragspan.tasks.judges.prompts import (
    PROMPTS_DIR,
    PromptError,
    load_prompt,
    parse_prompt,
    prompt_version,
)

# Instructions the judge's correctness depends on (the seed article's warnings): a prompt
# edit that drops one of these must fail here, not silently in a report.
REQUIRED = {
    "decompose": {
        "system": ["atomic", "independently verifiable", "self-contained", "copied verbatim",
                   "substring of the answer", "Do not paraphrase", "negation", "JSON only",
                   "complete a short answer from its question"],
        "user": ["<question>", "$question", "<answer>", "$answer"],
    },
    "extract": {
        "system": ["one claim and several numbered passages", "exactly one verdict for every passage",
                   "`supported`", "`partial`", "`unsupported`", "copied verbatim",
                   "exact substring of that passage", "Do not paraphrase", "empty string",
                   "Use only the passages", "between 0 and 1", "JSON only",
                   "what it asserts in answer to the question", "only repeats from the question"],
        "user": ["<question>", "$question", "<claim>", "$claim", "$passages"],
        "reask": ["$problems", "verbatim", "exact substring", "JSON only", "`unsupported` with an empty quote"],
    },
}

FIELD_REQUIRED = [
    (DecomposedClaim, "answer_text", ["verbatim", "substring of the answer"]),
    (DecomposedClaim, "claim", ["atomic", "negation"]),
    (Decomposition, "claims", ["in the order"]),
    (PassageVerdict, "quote", ["verbatim", "exact substring", "empty string"]),
    (PassageVerdict, "verdict", ["supported", "partial", "unsupported"]),
    (PassageVerdict, "confidence", ["between 0 and 1"]),
    (Extraction, "verdicts", ["every passage"]),
]


@pytest.mark.parametrize("prompt_id", sorted(REQUIRED))
def test_prompt_files_keep_their_required_instructions(prompt_id):
    raw = (PROMPTS_DIR / f"{prompt_id}.md").read_text(encoding="utf-8")
    prompt = parse_prompt(raw, prompt_id)
    for section, phrases in REQUIRED[prompt_id].items():
        text = getattr(prompt, section)
        assert text, f"{prompt_id}: missing section {section}"
        for phrase in phrases:
            assert phrase in text, f"{prompt_id} `# {section}` lost the instruction {phrase!r}"


@pytest.mark.parametrize(("model", "field", "phrases"), FIELD_REQUIRED)
def test_schema_field_descriptions_carry_instructions(model, field, phrases):
    description = model.model_fields[field].description or ""
    for phrase in phrases:
        assert phrase in description, f"{model.__name__}.{field} lost {phrase!r}"


def test_every_prompt_file_is_versioned_and_named_after_its_id():
    files = sorted(PROMPTS_DIR.glob("*.md"))
    assert {f.stem for f in files} >= set(REQUIRED)
    for f in files:
        p = load_prompt(f.stem)
        assert p.id == f.stem
        assert re.fullmatch(r"[0-9][0-9A-Za-z.\-]*", p.version), p.version
        assert p.tag == f"{p.id}@{p.version}"
        assert len(p.sha256) == 64


def test_prompt_version_stamp_names_every_prompt():
    stamp = prompt_version("decompose", "extract")
    assert stamp == f"decompose@{load_prompt('decompose').version}+extract@{load_prompt('extract').version}"


def test_rendering_inserts_values_verbatim():
    p = load_prompt("extract")
    text = p.render("user", claim="costs $5 {per} month", question="Why $$?",
                    passages='<passage id="1">\n$x ${y}\n</passage>')
    assert "costs $5 {per} month" in text and "Why $$?" in text
    assert "$x ${y}" in text


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("# system\nhi\n# user\n$answer\n", "front matter"),
        ("---\nid: decompose\n---\n# system\nhi\n# user\n$answer\n", "version"),
        ("---\nid: decompose\nversion: 1\n---\n# user\n$answer\n", "# system"),
        ("---\nid: decompose\nversion: 1\n---\n# system\nhi\n# user\nno placeholder\n", "placeholder"),
        ("---\nid: extract\nversion: 1\n---\n# system\nhi\n# user\n$claim $question $passages\n# reask\nnone\n", "problems"),
        ("---\nid: extract\nversion: 1\n---\n# system\nhi\n# user\n$claim $passages\n# reask\n$problems\n", "question"),
    ],
)
def test_malformed_prompts_are_rejected(text, error):
    with pytest.raises(PromptError, match=re.escape(error)):
        parse_prompt(text, "p.md")


def test_a_prompt_whose_id_disagrees_with_its_file_name_is_rejected(tmp_path):
    (tmp_path / "extract.md").write_text("---\nid: other\nversion: 1\n---\n# system\nx\n# user\ny\n")
    with pytest.raises(PromptError, match="does not match"):
        load_prompt("extract", str(tmp_path))
