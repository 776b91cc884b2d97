"""Known reasons why a reproduced number can differ from a reported one, kept as data.

Each :class:`Divergence` says which numbers it affects (paper, benchmark, measure, subset,
level, model, source kind, the reproduced run's long-text windowing), so
:func:`instir.papers.compare_to_papers` can attach the applicable reasons to every aligned row and
a notebook can list them next to the numbers.
Sources: the project's docs/metrics.md and docs/formats.md notes on the official code.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import pandas as pd

from instir.benchmarks import catalog

#: IFIR's subsets with instruction levels 1-3
_MULTI_LEVEL_SUBSETS = tuple(s.id for s in catalog.family("ifir").subsets.values() if s.multi_level)


@dataclass(frozen=True)
class Divergence:
    """One known reason for divergence and the rows it applies to.

    Each filter is a tuple of accepted values (empty: any). ``measures`` match by prefix
    (``"nDCG"`` covers ``nDCG@20``); ``levels`` use 0 for "pooled over levels";
    ``models`` match by model-key prefix; ``secondary_only`` limits it to numbers that
    do not come from the paper itself; ``windowing`` lists the windowing modes of the
    reproduced run it applies to (:func:`instir.retrieval.run_windowing`: ``ifir``,
    ``clean``, ``none``, ``n/a``; ``unknown`` when the row does not say, ``mixed`` when the
    runs behind an average differ); ``engines`` the BM25 engines of the run it applies to
    (:func:`instir.retrieval.run_engine`: ``anserini``, ``elasticsearch``, ``rank_bm25``, ``bm25s``, ``n/a``;
    ``unknown``, ``mixed``);
    ``variants`` the reported row's ``variant`` (:func:`instir.papers.load_reported`: the setup a table reports,
    such as IFIR Table 9's prompts); ``beside_paper_row`` limits it to a secondary source's number that the paper
    itself prints a row for (the aligned row's ``paper_row_too``, set by :func:`instir.papers.compare_to_papers`);
    ``sources`` to rows whose ``source`` holds one of these texts (a store's rows, not a file of one's own).
    ``voids``: the reported number measures something the kit does not rerun (another task, other data, another
    setup, a mislabelled file) or repeats a number another row judges, so a row it applies to earns no verdict
    (:func:`voiding`), only the reason. ``withholds``: the run was made otherwise than the paper's in a way the kit
    can make it as the paper did (long texts windowed otherwise than IFIR's code): a row it applies to earns no
    verdict until rerun so (:func:`withholding`), as a BM25 run by another engine or a number in another protocol.
    """

    key: str
    title: str
    explanation: str
    papers: tuple[str, ...] = ()
    benchmarks: tuple[str, ...] = ()
    measures: tuple[str, ...] = ()
    subsets: tuple[str, ...] = ()
    levels: tuple[int, ...] = ()
    models: tuple[str, ...] = ()
    secondary_only: bool = False
    windowing: tuple[str, ...] = ()
    engines: tuple[str, ...] = ()
    variants: tuple[str, ...] = ()
    beside_paper_row: bool = False
    sources: tuple[str, ...] = ()
    voids: bool = False
    withholds: bool = False

    def applies(self, row: Mapping) -> bool:
        """Whether this reason concerns a row with ``paper``, ``benchmark``, ``measure``,
        ``subset_id``, ``level``, ``model_key``, ``secondary``, ``windowing``, ``engine``, ``variant``,
        ``paper_row_too`` and ``source`` fields."""
        level = row.get("level")
        level = 0 if level is None or pd.isna(level) else int(level)
        windowing = row.get("windowing")
        windowing = "unknown" if windowing is None or pd.isna(windowing) or windowing == "" else str(windowing)
        engine = row.get("engine")
        engine = "unknown" if engine is None or pd.isna(engine) or engine == "" else str(engine)
        checks = (
            not self.papers or row.get("paper") in self.papers,
            not self.benchmarks or row.get("benchmark") in self.benchmarks,
            not self.measures or str(row.get("measure", "")).startswith(self.measures),
            not self.subsets or row.get("subset_id") in self.subsets,
            not self.levels or level in self.levels,
            not self.models or str(row.get("model_key", "")).startswith(self.models),
            not self.secondary_only or bool(row.get("secondary")),
            not self.windowing or windowing in self.windowing,
            not self.engines or engine in self.engines,
            not self.variants or row.get("variant") in self.variants,
            not self.beside_paper_row or bool(row.get("paper_row_too")),
            not self.sources or any(text in str(row.get("source") or "") for text in self.sources),
        )
        return all(checks)


#: Model keys of the IFIR models whose official classes encode texts as window means
#: (SighingSnow/IFIR src/utils/embeddings.py: Contriever, ColBERT, GTR, Instructor, OpenAIEmbedding),
#: alone and as the dense part of a hybrid.
_IFIR_WINDOWED_MODELS = ("facebook/contriever", "colbert-ir/", "sentence-transformers/gtr-t5", "hkunlp/instructor",
                         "openai:text-embedding")

DIVERGENCES: tuple[Divergence, ...] = (
    Divergence(
        "ifir-native-ndcg", "IFIR-native vs standard nDCG",
        "IFIR's Table 3 nDCG@20 most likely comes from the authors' Elasticsearch path, whose ideal "
        "DCG is the retrieved top-20 re-sorted (not the full relevant set); it is never lower than "
        "standard trec_eval nDCG. Compare the paper with the [ifir-native] row, MTEB with the standard one.",
        papers=("ifir",), measures=("nDCG",)),
    Divergence(
        "aila-judge-prompt", "AILA judge-prompt defect",
        "The official AILA level-2 and level-3 judge prompts never insert the passage (level 3 not the "
        "instruction either), so the paper's AILA InstFol judged text the judge never saw; the kit "
        "does not copy the defect.",
        papers=("ifir",), measures=("InstFol",), subsets=("aila",), levels=(0, 2, 3)),
    Divergence(
        "query-only-overwrite", "Released multi-level judging keeps no scores",
        "For the multi-level subsets the released per-level pipeline (src/llm_eval_pre.py, evaluate) judges "
        "each level's query-only list with that level's prompt, but writes those judgments into the "
        "instructed list's slots, where the instructed judgments overwrite them, and it exports copies of "
        "the lists taken before any judging; src/llm_eval.py then stops with KeyError: 'score'. So the "
        "paper's multi-level InstFol cannot come from the released code as it stands. The kit keeps each "
        "list's own judgments.",
        papers=("ifir",), measures=("InstFol",), subsets=_MULTI_LEVEL_SUBSETS),
    Divergence(
        "judge-fallbacks", "Unreadable judge answers score 0 in the release",
        "The release scores 0 every answer it cannot read or weight (invalid JSON or no score: taken as "
        "score 0 and weighted at the first '0' token, if any; no log-probabilities, or no token exactly "
        "equal to the score such as ' 2': 0.0; NaN when no alternative of that token is a digit) and never "
        "drops a rank: its filter for negative scores (get_problem_ids) cannot fire, "
        "as no score is negative. The kit fails an unreadable answer and one whose log-probabilities are not "
        "the logs of probabilities (NaN, above 0, or of the wrong shape; the release's rule has no such check): "
        "that rank leaves both lists, counted as 'failed'. It scores an answer without usable "
        "log-probabilities by its parsed integer (counted as 'parsed'). Expected effect: where such answers "
        "occur the release's S values are pulled towards "
        "0; the failed and parsed counts beside each kit value bound how many positions are affected.",
        papers=("ifir",), measures=("InstFol",)),
    Divergence(
        "judge-call-settings", "Judge call settings and score-token rule",
        "The kit calls the judge as the authors do (temperature 0, top_p 0.7, max_tokens 512, "
        "top_logprobs 10, no JSON mode) and reads the score token by their rule (the first token equal to "
        "the parsed score; its alternatives that are decimal numbers with probability >= 0.01; digits 0-5 "
        "kept on every level, so a score can exceed its rubric's maximum of 1, 2 or 3). The judge's model "
        "string names the settings used ('[ifir]'). The prompts are the kit's own wording, sent as a system "
        "and a user message where the authors send one user message.",
        papers=("ifir",), measures=("InstFol",)),
    Divergence(
        "same-level-instructions", "Two instructions at one level",
        "Where a query has two instructions of the same level, the release keeps only the last (export_qa_ids "
        "stores one retrieved list per level key, a later instruction replacing an earlier one); the kit "
        "judges every instruction as its own instance, so such level means average over more instances.",
        papers=("ifir",), measures=("InstFol",)),
    Divergence(
        "judge-model", "Different judge",
        "InstFol depends on the judge: the paper used gpt-4o-mini with token probabilities; another "
        "model, a lexical baseline or a backend without log-probabilities gives other numbers.",
        papers=("ifir",), measures=("InstFol",)),
    Divergence(
        "bm25-engine", "BM25 engine and parameters",
        "InstructIR used Pyserini/Anserini (k1=0.9, b=0.4, Lucene analyzer); IFIR used Elasticsearch "
        "8.11 defaults (k1=1.2, b=0.75, standard analyzer). The row's run used bm25s (or does not say which "
        "engine), whose tokenisation, stemming and stopwords differ from both (docs/bm25-vs-lucene.md measures "
        "by how much); the 'BM25 (InstructIR)' and 'BM25 (IFIR)' cards run the authors' engines.",
        models=("bm25", "hybrid:"), engines=("bm25s", "unknown", "mixed")),
    Divergence(
        "long-doc-windows", "Long texts not cut as IFIR's code cuts them",
        "IFIR's official code encodes every document and query of Contriever, ColBERT, GTR, Instructor "
        "and the OpenAI models as the mean of its windows: 512 tokens (Instructor: minus the "
        "instruction's tokens) starting at every multiple of 384 tokens, detokenised, then truncated by "
        "the model. The kit does the same with windowing 'ifir'; this run used another mode (see its "
        "windowing): 'none' lets the model truncate long texts, 'clean' cuts documents only, only until "
        "the text is covered and at most the model's input long. Either changes the scores on "
        "long-document subsets, so such a run earns no verdict on these models' rows.",
        papers=("ifir",), models=_IFIR_WINDOWED_MODELS + tuple(f"hybrid:{m}" for m in _IFIR_WINDOWED_MODELS),
        windowing=("none", "clean", "mixed", "unknown"), withholds=True),
    Divergence(
        "own-task-prompt", "IFIR Table 9, the model's own task prompt: another prompt than this run's",
        "Table 9 reruns Instructor, E5-mistral and GritLM with each model's own task prompt in place of the prompts "
        "of the authors' code (Table 3's runs), which the kit's IFIR templates copy (ifir-instructor, ifir-e5-mistral, "
        "ifir-gritlm): another setup, shown beside the run's number but not judged.",
        papers=("ifir",), variants=("model's own task prompt",), voids=True),
    Divergence(
        "no-model-prompt", "IFIR Table 9, no model prompt: Table 3's runs to three decimals, judged by Table 3's row",
        "Table 9's other half, without a model's own task prompt, is the setup of Table 3's runs printed one decimal "
        "longer: 38 of its 40 numbers round to Table 3's, the other two are half-way (0.345 and 0.575 print as 0.34 "
        "and 0.57 there). A reproduced number is judged once, against Table 3's row; this one is shown beside it.",
        papers=("ifir",), variants=("no model prompt",), voids=True),
    Divergence(
        "query-order", "Query text order (MTEB vs official)",
        "MTEB sends '<query> <instruction>' for InstructIR (mteb/_create_dataloaders.py "
        "_combine_queries_with_instruction_text), the official code '<instruction> [SEP] <query>'; MTEB's own "
        "numbers therefore measure a different input. Measured size (issue 23: all-MiniLM-L6-v2 on the real "
        "9,906 InstructIR queries with a generated corpus, MTEB 2.26 against the kit, each with its default): "
        "MTEB's input scores nDCG@10 +0.30 and Robustness@10 +1.07 points higher; given the same text the two "
        "agree exactly (top 10 identical on 9,906/9,906 queries). On perf/mteb_protocols.py's bag-of-words "
        "corpus the same model scores MTEB's input -1.34 and -0.20 points lower: the size, even the sign, "
        "depends on the corpus. `instir mteb-export --dataset` writes an MTEB copy with the authors' text "
        "(docs/mteb.md).",
        papers=("mteb",), benchmarks=("instructir",)),
    Divergence(
        "mteb-instruction-hook", "MTEB's combine_query_and_instruction hook is never called",
        "MTEB's InstructIR task says its scores differ 'unless you include instruction first, then [SEP] and "
        "then the query via redefining combine_query_and_instruction in your model', but no code of MTEB 2.26 "
        "calls that method (it is only defined, in repllama_models.py, and named in that description): "
        "overriding it changes nothing, so numbers obtained that way still come from '<query> <instruction>'.",
        papers=("mteb",), benchmarks=("instructir",)),
    Divergence(
        "mteb-averaging", "MTEB's averaging, rounding and self-hit rule",
        "MTEB averages over the queries present in the run (pytrec_eval's evaluate; a missing query is not "
        "counted, where the authors' protocol scores it 0) and counts a qrels query whose judgments are all 0 "
        "(scored 0, where the kit leaves it out); it rounds its pytrec_eval means to 5 decimals (mrr, "
        "robustness and level scores unrounded; result files round to 6); it drops documents whose id is the "
        "query id only on IFIRFiQA (ignore_identical_ids), so InstructIR's self-hits count. `instir evaluate "
        "--protocol mteb` scores a run this way.",
        papers=("mteb",)),
    Divergence(
        "mair-legacy-task", "MAIR legacy task, not InstructIR's setup",
        "These MTEB results come from a legacy MAIR InstructIR task (its own instruction, dataset "
        "revision 7d24eac) that was later removed from MTEB's results store.",
        papers=("mteb",), benchmarks=("instructir",), voids=True),
    Divergence(
        "mteb-data-revision", "MTEB copy has fewer queries",
        "MTEB's copies of IFIR hold 135 SciFact-open, 167 FIRE and 42 TREC-CDS queries where the paper "
        "has 152, 168 and 43.",
        papers=("mteb",), subsets=("scifact_open", "fire", "cds")),
    Divergence(
        "mteb-mislabelled-file", "Identical MTEB result files",
        "MTEB's GritLM-7B and e5-mistral-7b-instruct IFIR result files are byte-identical, so one is "
        "mislabelled; neither is a reliable per-model reference.",
        papers=("mteb",), benchmarks=("ifir",), models=("gritlm/gritlm-7b", "intfloat/e5-mistral-7b-instruct"),
        voids=True),
    Divergence(
        "mteb-removed-results", "MTEB removed these results: no MTEB implementation behind them",
        "MTEB's results store held these IFIR results of the INSTRUCTOR models from PR #228 (commit 2a4630579, "
        "by IFIR's authors) until commit 198c98f4c removed them as results of models with missing implementations "
        "in MTEB: no MTEB wrapper (its prompts, its cut of long texts) stands behind them, so the setup they measure "
        "is not known.",
        papers=("mteb",), benchmarks=("ifir",), sources=("deleted from repo in commit 198c98f4c",), voids=True),
    Divergence(
        "colbert-plaid", "ColBERTv2: exact MaxSim instead of a PLAID index",
        "InstructIR searched colbertv2.0 with colbert-ai's PLAID index (nbits=2, kmeans_niters=4, "
        "doc_maxlen=300, k=100): candidates from the nearest centroids (ncells 2, centroid score threshold "
        "0.45, 1024 candidates for k <= 100), scored from 2-bit compressed residuals, documents encoded "
        "in float16 on GPU. The kit encodes exactly as colbert-ai does (checked against colbert-ai 0.2.22 on a "
        "tiny checkpoint: identical query vectors, document vectors within 1.2e-7; it now encodes through "
        "sentence-transformers' MultiVectorEncoder, checked against the same steps in the tests) but in float32 "
        "and scores every document exactly, so its ranks follow the model at least as closely and its scores differ "
        "in low digits. The authors' script also drops documents with empty text and maps each hit back "
        "to an id through its text, so documents with identical text share one id in their results. "
        "The query_maxlen-32 cut of 'instruction [SEP] query' is reproduced, not a divergence (the "
        "q128 variant lifts it on purpose).",
        papers=("instructir",), models=("colbert-ir/colbertv2.0",)),
    Divergence(
        "pmrr-ties", "p-MRR: the tie rule",
        "mteb 2.26 ranks a changed document among equal scores by document id descending (get_rank_from_dict, "
        "PR #5241, Aug 2026); the original FollowIR code and mteb before 2.19.5 ranked ties in insertion order, "
        "i.e. the candidate list's order. The paper's numbers were computed with the old rule (mteb 1.7.32). The "
        "kit computes both, p-MRR and p-MRR[insertion-ties], on every run; their difference is this divergence's "
        "size on that run (0 when no changed document ties with another).",
        papers=("followir", "mteb"), benchmarks=("followir",), measures=("p-MRR",)),
    Divergence(
        "followir-bm25", "FollowIR BM25: one index over the corpus",
        "orionw/FollowIR models/bm25/evaluate_bm25.py builds rank_bm25's BM25Okapi over each query's candidates "
        "only (IDF from those 1000 passages, IDF floor epsilon 0.25), with NLTK's English stopwords, Porter "
        "stemming and punctuation stripped after stemming; the kit scores the candidates with one bm25s index over "
        "the whole corpus (method robertson, k1 1.5, b 0.75, bm25s's English stopwords, PyStemmer's Porter), "
        "so IDF and tokens differ.",
        papers=("followir",), benchmarks=("followir",), models=("bm25",), engines=("bm25s", "unknown", "mixed")),
    Divergence(
        "followir-data-revision", "FollowIR data: the release, or MTEB's copy",
        "The paper's numbers come from the jhu-clsp release as corrected on 2024-04-24 (mteb 1.7.32 read it); "
        "MTEB 2.26 scores its own copies (mteb/<Task>), whose changed documents ship as qrel_diff. Numbers "
        "computed on data before the correction are not comparable (the FollowIR README).",
        papers=("followir", "mteb"), benchmarks=("followir",)),
    Divergence(
        "secondary-beside-paper", "A secondary source's rerun of a number the paper prints: judged by the paper's row",
        "The benchmark's own paper prints this number (same benchmark, setting, model and measure), and a secondary "
        "source reran the model in its own setup and printed another value (InstructIR's RepLLaMA: 87.62 nDCG@10 in "
        "the InstructIR paper, 85.7 in the Promptriever paper's Table 2). A reproduced number is judged once, against "
        "the paper's own row; the secondary source's is shown beside it.",
        secondary_only=True, beside_paper_row=True, voids=True),
    Divergence(
        "secondary-source", "Secondary source: its own rerun",
        "The number is not printed in the benchmark's own paper but by another source that ran the model in its own "
        "setup (e.g. InstructIR scores from the Promptriever paper's Table 2, or MTEB's results store): a verdict "
        "on it measures the reproduction against that source's own rerun, not the benchmark's paper, whose setup "
        "may differ.",
        secondary_only=True),
)


def known_divergences(measure: str | None = None) -> pd.DataFrame:
    """The known reasons as a table (``key``, ``title``, ``explanation``) for a notebook to list;
    with ``measure`` (``InstFol``, ``nDCG`` …), only the reasons whose ``measures`` name it."""
    chosen = [d for d in DIVERGENCES if measure is None or measure in d.measures]
    return pd.DataFrame([(d.key, d.title, d.explanation) for d in chosen], columns=["key", "title", "explanation"])


def reasons_for(row: Mapping) -> list[str]:
    """Keys of the known reasons that apply to one aligned (or reported) row."""
    return [d.key for d in DIVERGENCES if d.applies(row)]


def voiding(row: Mapping) -> Divergence | None:
    """The first known reason that applies to ``row`` and leaves its reported number nothing to verify a rerun
    against (``voids``), None when there is none."""
    return next((d for d in DIVERGENCES if d.voids and d.applies(row)), None)


def withholding(row: Mapping) -> Divergence | None:
    """The first known reason that applies to ``row`` and says its run was made otherwise than the paper's where the
    kit can make it as the paper did (``withholds``), None when there is none."""
    return next((d for d in DIVERGENCES if d.withholds and d.applies(row)), None)
