"""What the openai judge sends: the output models (their field descriptions are
instructions the model sees), and the chat messages of each call, as sent in each
structured-output mode (tasks/judges/output_modes.py). Pure functions.

The prompt texts themselves are versioned files (tasks/judges/prompts/*.md).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field
from ragspan.tasks.core.text import sentence_spans
from ragspan.tasks.judges.output_modes import schema_instruction
from ragspan.tasks.judges.prompts import Prompt

# Bump when the output models below change in a way their JSON schema does not show.
SCHEMA_VERSION = "1"


# -- output schemas: the field descriptions are part of the instructions ---------------------


class _Out(BaseModel):
    model_config = ConfigDict(extra="ignore")


class DecomposedClaim(_Out):
    claim: str = Field(description=(
        "One atomic, independently verifiable statement of fact made by the answer, "
        "self-contained (pronouns replaced by what they refer to), adding nothing the answer "
        "does not say and keeping every number, date, name, condition and negation."))
    answer_text: str = Field(description=(
        "The exact stretch of the answer this claim comes from, copied verbatim character for "
        "character (same spelling, punctuation, capitalisation, whitespace): a substring of "
        "the answer. Never paraphrased, never shortened with '...'."))


class Decomposition(_Out):
    claims: list[DecomposedClaim] = Field(description=(
        "Every checkable claim of the answer, in the order they appear; empty if the answer "
        "states nothing checkable."))


class PassageVerdict(_Out):
    passage: int = Field(description='The number N of the passage this verdict is about (<passage id="N">).')
    verdict: Literal["supported", "partial", "unsupported"] = Field(description=(
        "supported: the passage states or entails the whole claim. partial: the passage is "
        "about the claim but supports only part of it or contradicts it. unsupported: the "
        "passage is not about the claim."))
    quote: str = Field(description=(
        "For supported or partial: the shortest stretch of THIS passage that shows it, copied "
        "verbatim, an exact substring of the passage (no paraphrase, no '...', no joining of "
        "pieces). For unsupported: an empty string."))
    confidence: float = Field(ge=0, le=1, description="Probability between 0 and 1 that the verdict is right.")
    reason: str = Field(description="One short sentence explaining the verdict.")


class Extraction(_Out):
    verdicts: list[PassageVerdict] = Field(description="Exactly one verdict for every passage, by number.")


def schema_fingerprint() -> str:
    """SCHEMA_VERSION + a hash of the JSON schemas sent (descriptions included)."""
    blob = json.dumps([Decomposition.model_json_schema(), Extraction.model_json_schema()], sort_keys=True)
    return f"{SCHEMA_VERSION}-{hashlib.sha256(blob.encode()).hexdigest()[:12]}"


# -- messages ---------------------------------------------------------------------------------


def numbered(passages: Sequence[str]) -> str:
    return "\n\n".join(f'<passage id="{i}">\n{p}\n</passage>' for i, p in enumerate(passages, 1))


def decompose_messages(prompt: Prompt, answer: str, question: str) -> list[dict]:
    return [{"role": "system", "content": prompt.system},
            {"role": "user", "content": prompt.render("user", answer=answer, question=question)}]


def decompose_choices(answer: str) -> dict:
    """The answer's sentences: what a grammar-constrained server may copy (grammar_schema)."""
    return {"answer_texts": [answer[a:b] for a, b in sentence_spans(answer)]}


def extract_messages(prompt: Prompt, claim: str, passages: Sequence[str], question: str) -> list[dict]:
    return [{"role": "system", "content": prompt.system},
            {"role": "user", "content": prompt.render("user", claim=claim, question=question,
                                                        passages=numbered(passages))}]


def extract_choices(passages: Sequence[str]) -> dict:
    """Each passage's sentences: the quotes a grammar-constrained server may copy."""
    return {"passage_quotes": [[p[a:b] for a, b in sentence_spans(p)] for p in passages]}


def reask_messages(prompt: Prompt, messages: list[dict], first: dict, problems: Iterable[str]) -> list[dict]:
    """The conversation so far, the reply given, and one re-ask naming what was wrong."""
    return messages + [
        {"role": "assistant", "content": json.dumps(first, ensure_ascii=False, sort_keys=True)},
        {"role": "user", "content": prompt.render("reask", problems="\n".join(f"- {msg}" for msg in problems))},
    ]


def messages_for(mode: str, messages: list[dict], schema: type[BaseModel]) -> list[dict]:
    """The messages as sent in `mode`. Servers without structured outputs are mostly local
    ones whose chat templates may drop the system role (Gemma's does: measured, the prompt
    tokens counted only the user turn), so there the instructions open the first user
    message; a server not told the schema also reads it there."""
    if mode == "json_schema":
        return messages
    system, user, *rest = messages
    text = system["content"]
    if mode != "json_object_schema":
        text += "\n\n" + schema_instruction(schema.model_json_schema())
    return [{"role": "user", "content": text + "\n\n" + user["content"]}, *rest]
