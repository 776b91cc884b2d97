"""Judge rubrics: one cumulative ladder of conditions per IFIR subset and instruction level,
plus a generic ladder for InstructIR and user benchmarks.

A passage's score is the number of ladder steps it meets in a row from the first: 0-3 for
level-3 and single-level rubrics, 0-2 for level 2, 0-1 for level 1; InstFol divides by
:data:`INSTFOL_MAX` = 3 for all of them, as the official code does. The judge answers
``{"score": …, "reason": …}``, score first, so the score token comes before any free text.

The ladders follow the conditions of the IFIR authors' judge prompts (docs/metrics.md, "InstFol@20")
in our own words, and every rubric shows the query, the instruction (in its own labelled field,
where the authors' prompts put both in one "instruction" slot) and the passage. Where this
departs from the release, see ``aila-judge-prompt`` and ``judge-call-settings`` in
:data:`instir.papers.divergences.DIVERGENCES`.
"""

from __future__ import annotations

import difflib
import hashlib
import numbers
from dataclasses import dataclass
from functools import cached_property

from instir.benchmarks import catalog
from instir.errors import UsageError, quoted, unknown

#: The constant InstFol divides by, for every rubric (the official code uses 3 throughout).
INSTFOL_MAX = 3
#: The highest score a judge's answer is taken with, on every rubric, and the highest digit its weighting keeps: the
#: official code (geval.py) skips only ``score > 5``, so a weighted score above a rubric's top step can be its own.
IFIR_MAX_DIGIT = 5

#: The start of the judge's answer, up to the score digit; in-process backends append it to the
#: prompt and read the score distribution from the next token's logits.
ANSWER_PREFIX = '{"score": '


_INTRO = (
    "You are an expert assessor for a search engine. A user searched with a query and added an "
    "instruction that narrows what they need. Judge one retrieved passage ({passage_kind}) "
    "against the query and the instruction together."
)
_LADDER_RULES = (
    "Check these conditions in order. Each one builds on the conditions before it: a condition "
    "counts only if every earlier condition also holds."
)
_SCORE_RULES = (
    "The score is the number of conditions met in a row, starting from condition 1: 0 when "
    "condition 1 fails, {max_score} when all of them hold. The score must be an integer from 0 "
    "to {max_score}."
)
_ANSWER_RULES = (
    'Answer with a single JSON object and nothing else, the score first: {{"score": <integer '
    'from 0 to {max_score}>, "reason": "<one short sentence>"}}'
)
_USER_TEMPLATE = "Query:\n{query}\n\nInstruction:\n{instruction}\n\nPassage:\n{passage}"
_NO_INSTRUCTION = "(none given)"


@dataclass(frozen=True)
class Rubric:
    """A cumulative ladder of conditions and the prompt built from it.

    ``name`` is ``"<subset>/<level>"`` (``"nfcorpus"`` for single-level subsets, ``"generic"``
    for the rest); ``passage_kind`` says what the passages are; ``steps`` are the conditions in
    ladder order. ``version`` is a hash of the rubric's full text, so any wording change gives
    new cache keys.
    """

    name: str
    passage_kind: str
    steps: tuple[str, ...]

    @property
    def max_score(self) -> int:
        """Highest score on this rubric (the number of ladder steps)."""
        return len(self.steps)

    @property
    def scores(self) -> tuple[int, ...]:
        """Every allowed score, 0 to ``max_score``."""
        return tuple(range(self.max_score + 1))

    @property
    def taken_top(self) -> int:
        """The highest score (and weighted score) a judgment on this rubric is taken with, from an answer or from the
        cache: one range for both (:data:`IFIR_MAX_DIGIT`, or the rubric's top step if higher)."""
        return max(self.max_score, IFIR_MAX_DIGIT)

    @cached_property
    def system_text(self) -> str:
        """The instructions the judge gets: task, ladder, scoring rule, answer format."""
        ladder = "\n".join(f"{i}. {step}" for i, step in enumerate(self.steps, start=1))
        return "\n\n".join([
            _INTRO.format(passage_kind=self.passage_kind),
            _LADDER_RULES,
            ladder,
            _SCORE_RULES.format(max_score=self.max_score),
            _ANSWER_RULES.format(max_score=self.max_score),
        ])

    @cached_property
    def version(self) -> str:
        """First 16 hex digits of the SHA-256 of the full rubric text (instructions, request
        template and answer prefix)."""
        full = "\x00".join([self.name, self.system_text, _USER_TEMPLATE, _NO_INSTRUCTION, ANSWER_PREFIX])
        return hashlib.sha256(full.encode("utf-8")).hexdigest()[:16]

    def render(self, query: str, instruction: str, passage: str) -> list[dict[str, str]]:
        """Chat messages for one (query, instruction, passage): the rubric as system message, then
        all three, always, as the user message."""
        user = _USER_TEMPLATE.format(
            query=query.strip(),
            instruction=instruction.strip() or _NO_INSTRUCTION,
            passage=passage.strip(),
        )
        return [{"role": "system", "content": self.system_text}, {"role": "user", "content": user}]


_FULL = ", and it fully satisfies the instruction."


def _levels(subset: str, passage_kind: str, steps: tuple[str, str, str]) -> list[Rubric]:
    """Rubrics for levels 1-3 of a multi-level subset: level n keeps the first n steps, and on
    levels 1 and 2 the last kept step also demands the whole instruction (as the level-3 ladder's
    final step does)."""
    out = []
    for level in (1, 2):
        kept = steps[:level]
        out.append(Rubric(f"{subset}/{level}", passage_kind, (*kept[:-1], kept[-1].rstrip(".") + _FULL)))
    out.append(Rubric(f"{subset}/3", passage_kind, steps))
    return out


RUBRICS: dict[str, Rubric] = {r.name: r for r in [
    *_levels("fiqa", "an answer posted on a personal-finance question-and-answer site", (
        "The answer addresses the financial question asked in the query.",
        "The answer suits the personal financial situation the instruction describes.",
        "The answer also serves the financial goals stated in the instruction and meets all of its requirements.",
    )),
    *_levels("scifact_open", "a scientific abstract; the query is a scientific claim", (
        "The abstract is on the research field and topic of the claim.",
        "The abstract bears on the claim in the way the instruction asks for (for example, it supports or it "
        "contradicts the claim).",
        "The abstract meets every further requirement of the instruction.",
    )),
    *_levels("aila", "a prior court case; the query describes the facts of a current case", (
        "The prior case resembles the current case in its facts and legal issues.",
        "The prior case is favourable to the party the instruction is concerned with (the plaintiff or appellant "
        "side, or the defendant or respondent side).",
        "The prior case meets every detailed requirement of the instruction.",
    )),
    *_levels("pm", "a biomedical document; the query describes a patient", (
        "The document concerns the patient's disease or condition.",
        "The document fits the patient's demographics given in the instruction, above all age and sex.",
        "The document also fits the rest of the instruction: family medical history, treatment history and any "
        "other details.",
    )),
    Rubric("nfcorpus", "a medical research article", (
        "The article is in the research field and on the research topic the query and instruction ask about.",
        "The article pursues the research objective the instruction asks for.",
        "The article fully satisfies the instruction.",
    )),
    Rubric("fire", "a prior court case; the query describes a case and what is sought", (
        "The prior case resembles the case described in the query.",
        "The prior case helps at least partly with what the query and instruction seek.",
        "The prior case fully satisfies the query and the instruction.",
    )),
    Rubric("cds", "a biomedical article; the query describes a patient", (
        "The article concerns the patient's disease, condition or presenting problem.",
        "The article fits the patient's demographics, above all age and sex.",
        "The article fully satisfies the instruction.",
    )),
    Rubric("generic", "a document from the search collection", (
        "The passage is on the topic of the query.",
        "The passage answers, or is directly useful for, the information need of the query.",
        "The passage also meets every requirement, constraint and preference stated in the instruction.",
    )),
]}


def rubric_for(subset: str | None, level: int | None = None) -> Rubric:
    """The rubric for an IFIR subset and instruction level (``Query.subset``, ``Query.level``).

    Multi-level subsets (fiqa, scifact_open, aila, pm) need level 1, 2 or 3; single-level ones
    (nfcorpus, fire, cds) take level 0 or ``None``. Any other subset name (``""`` for
    InstructIR, user benchmarks) gets the generic rubric, except one a character or so from an
    IFIR subset's (``fiqaa``, ``scifact-open``) that no family declares: refused with the closest, as a slip
    would judge on another ladder. A level that is no integer is refused.
    """
    if level is not None and (isinstance(level, bool) or not isinstance(level, numbers.Integral)):
        raise UsageError(f"an instruction level is an integer or None, got {quoted(level)} (a {type(level).__name__})")
    key = (subset or "").strip().lower()
    if f"{key}/1" in RUBRICS:  # a subset with levels 1-3
        if level not in (1, 2, 3):
            raise UsageError(f"IFIR subset {key!r} has instruction levels 1-3, got {level!r}")
        return RUBRICS[f"{key}/{level}"]
    if key in RUBRICS and key != "generic":
        if level not in (0, None):
            raise UsageError(f"IFIR subset {key!r} has a single instruction level (0), got {level!r}")
        return RUBRICS[key]
    subsets = sorted({name.partition("/")[0] for name in RUBRICS} - {"generic"})
    declared = {s.lower() for family in catalog.families() for s in catalog.family(family).subsets}
    if key not in declared and difflib.get_close_matches(key.replace("-", "_"), subsets, n=1, cutoff=0.81):
        raise unknown("IFIR subset", subset, subsets, more=" (any other name gets the generic rubric)")
    return RUBRICS["generic"]
