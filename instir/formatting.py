"""Model input templates: how a query instance (query, instruction, level, subset) and a
document become the text a retriever sees, per benchmark and model family.

A :class:`Template` is declarative (format strings), so ``describe()`` can write exactly what
was fed to the model into a run's metadata. The built-in ones are each family spec's
``[[template]]`` strings, MTEB's (``mteb``, ``mteb-<model>``: MTEB-comparable, not
paper-comparable) and ``query-only``. Queries may use ``{query}``, ``{instruction}``, ``{level}``
(empty without levels), ``{subset}`` and ``{domain}`` (the template's word for the subset's
domain); documents ``{text}`` (title + text, as indexed), ``{title}`` and ``{domain}``; a
2-tuple yields an ``[instruction, text]`` pair (INSTRUCTOR).
"""

from __future__ import annotations

import string
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from instir.benchmarks import catalog
from instir.benchmarks.types import Benchmark, Doc, Query
from instir.errors import UsageError, expect, quoted, unknown

#: A format: one format string, or an (instruction, text) pair of format strings.
Format = str | tuple[str, str]
#: What a template produces for one query or document.
ModelInput = str | list[str]

QUERY_FIELDS = frozenset({"query", "instruction", "level", "subset", "domain"})
DOC_FIELDS = frozenset({"text", "title", "domain"})

#: Model families a retriever can declare; each maps to a default template per benchmark family.
MODEL_FAMILIES = ("bm25", "dense", "instructor", "e5-mistral", "repllama", "gritlm", "promptriever", "nv-embed")


def _fields(fmt: Format) -> set[str]:
    parts = fmt if isinstance(fmt, tuple) else (fmt,)
    return {name for part in parts for _, name, _, _ in string.Formatter().parse(part) if name is not None}


def reads_instruction(described: object) -> bool | None:
    """Whether a template, as :meth:`Template.describe` writes it (a run sidecar's ``template``), puts the
    instruction into the query text: whether its ``query`` format has an ``{instruction}`` field (``query-only``'s
    has none). None when ``described`` is no such description (no sidecar, or one written by another tool)."""
    query = described.get("query") if isinstance(described, Mapping) else None
    query = tuple(query) if isinstance(query, list) else query
    if not isinstance(query, (str, tuple)) or not all(isinstance(part, str) for part in query):
        return None
    try:
        return "instruction" in _fields(query)
    except ValueError:  # not a format string
        return None


def check_format(fmt: Format, allowed: Iterable[str], where: str) -> None:
    """Refuse (``ValueError`` naming ``where``) a format string with a field outside ``allowed``, or with a format
    spec or a conversion: a template fills its fields with text as it is, while ``{query:>999999999}`` would build
    a gigabyte string per query and ``{query!r}`` would quote it."""
    allowed = set(allowed)
    for part in fmt if isinstance(fmt, tuple) else (fmt,):
        try:
            fields = [(name, spec, conversion) for _, name, spec, conversion in string.Formatter().parse(part)
                      if name is not None]
        except ValueError as err:
            raise ValueError(f"{where}: not a format string ({err}): {part!r}") from None
        unknown_fields = sorted({name for name, _, _ in fields} - allowed)
        if unknown_fields:
            raise ValueError(f"{where}: unknown field(s) {unknown_fields} (allowed: {sorted(allowed)})")
        for name, spec, conversion in fields:
            if spec or conversion:
                raise ValueError(f"{where}: field {{{name}}} takes no format spec or conversion, got "
                                 f"{{{name}{'!' + conversion if conversion else ''}{':' + spec if spec else ''}}}")


@dataclass(frozen=True)
class Template:
    """A named pair of query/document formats for one model family.

    ``query`` is used when the instance has an instruction, ``bare_query`` when its
    instruction is empty (defaults to ``query``). ``domains`` maps IFIR subset names to the
    domain word a ``{domain}`` field takes. ``source`` says where the strings come from.
    """

    name: str
    family: str
    description: str
    query: Format
    doc: Format = "{text}"
    bare_query: Format | None = None
    domains: Mapping[str, str] = field(default_factory=dict, hash=False)
    source: str = ""

    def __post_init__(self) -> None:
        for label, fmt, allowed in (("query", self.query, QUERY_FIELDS), ("bare_query", self.bare_query, QUERY_FIELDS),
                                    ("doc", self.doc, DOC_FIELDS)):
            if fmt is None:
                continue
            if isinstance(fmt, tuple) and len(fmt) != 2:
                raise ValueError(f"template {self.name!r}: {label} pair must have 2 parts, got {len(fmt)}")
            check_format(fmt, allowed, f"template {self.name!r}, {label}")
        object.__setattr__(self, "domains", MappingProxyType(dict(self.domains)))

    def _domain(self, subset: str) -> str:
        if not self.domains:
            return ""
        if subset not in self.domains:
            mixed = ("; a benchmark whose queries span several subsets (or name none) has no one domain word for "
                     "its documents: retrieve each subset apart, as IFIR's authors do") if not subset else ""
            raise UsageError(f"template {self.name!r} has no domain word for subset {subset!r} "
                             f"(known: {sorted(self.domains)}){mixed}")
        return self.domains[subset]

    @staticmethod
    def _render(fmt: Format, values: dict[str, str]) -> ModelInput:
        if isinstance(fmt, tuple):
            return [part.format(**values) for part in fmt]
        return fmt.format(**values)

    def format_query(self, query: Query) -> ModelInput:
        """The model input for one query instance."""
        instruction = query.instruction.strip()
        fmt = self.query if instruction or self.bare_query is None else self.bare_query
        needs_domain = "domain" in _fields(fmt)
        values = {
            "query": query.query.strip(),
            "instruction": instruction,
            "level": "" if query.level is None else str(query.level),
            "subset": query.subset,
            "domain": self._domain(query.subset) if needs_domain else "",
        }
        return self._render(fmt, values)

    def format_doc(self, doc: Doc, subset: str = "") -> ModelInput:
        """The model input for one document (``subset`` fills ``{domain}`` where used)."""
        needs_domain = "domain" in _fields(self.doc)
        values = {"text": doc.indexed_text, "title": doc.title,
                  "domain": self._domain(subset) if needs_domain else ""}
        return self._render(self.doc, values)

    def format_queries(self, queries: Iterable[Query]) -> list[ModelInput]:
        """Model inputs for many query instances, in order."""
        return [self.format_query(q) for q in queries]

    def describe(self) -> dict:
        """JSON-ready description written into run metadata."""
        def show(fmt: Format | None):
            return list(fmt) if isinstance(fmt, tuple) else fmt

        return {
            "name": self.name,
            "family": self.family,
            "description": self.description,
            "query": show(self.query),
            "bare_query": show(self.bare_query if self.bare_query is not None else self.query),
            "doc": show(self.doc),
            "domains": dict(self.domains),
            "source": self.source,
        }


_MTEB_SRC = "embeddings-benchmark/mteb 2.26"
# MTEB's prompt for instruction models on retrieval tasks without a prompt of their own
# (mteb/abstasks/retrieval.py AbsTaskRetrieval.abstask_prompt, via AbsEncoder.get_instruction):
# InstructIR's and IFIR's task metadata define none.
_MTEB_RETRIEVAL_PROMPT = "Retrieve text based on user query."


def _format(value: str | list[str] | None) -> Format | None:
    """A spec's format: a string, or a list of two strings (an [instruction, text] pair)."""
    return tuple(value) if isinstance(value, list) else value


@catalog.remembered  # every template lookup asks for them
def _family_templates() -> dict[str, Template]:
    """The templates of every benchmark family's spec, each with the spec's ``template_source`` (a family registered
    later, from outside the package, brings its templates); shared, so read only."""
    out, defined = {}, dict.fromkeys((t.name for t in _KIT), "the kit's templates (instir/formatting.py)")
    for fam in (catalog.family(name) for name in catalog.families()):
        for i, spec in enumerate(fam.template_formats):
            if spec["name"] in defined:  # one would silently replace the other, for every family
                raise UsageError(f"{fam.at('template', i, 'name')}: field 'template': a template "
                                 f"{quoted(spec['name'])} is already defined by {defined[spec['name']]}")
            defined[spec["name"]] = fam.spec_file
            try:
                out[spec["name"]] = Template(spec["name"], spec["family"], spec["description"],
                                             _format(spec["query"]), doc=_format(spec.get("doc", "{text}")),
                                             bare_query=_format(spec.get("bare_query")),
                                             domains=spec.get("domains", {}), source=fam.template_source)
            except ValueError as err:  # a field no instance fills, in a spec from outside the package
                raise UsageError(f"{fam.at('template', i)}: field 'template': {err}") from None
    return out


def check_spec_templates(family: str) -> None:
    """Refuse in one line, at the spec's line, a template name a family's spec gives (``[variants]``,
    ``[templates]``, ``[setting_templates]``) that no template has (the families', the kit's, or one registered by
    now): what a plan checks before any run, not when the variant or the model family first runs."""
    fam = catalog.family(family)
    known = {*_templates(), catalog.FAMILY_TEMPLATE}
    named = [(("variants", v), t) for v, t in fam.variant_templates.items()]
    named += [(("templates", m), t) for m, t in fam.templates.items()]
    named += [(("setting_templates", s, m), t) for s, ts in fam.setting_templates.items() for m, t in ts.items()]
    for keys, template in named:
        if template not in known:
            raise unknown("template", template, sorted(known - {catalog.FAMILY_TEMPLATE}),
                          where=f"in {fam.at(*keys)}, field {keys[0]!r}")


#: The kit's own templates (MTEB's inputs, the bare query); the families' come from their specs.
_KIT = (
    Template("mteb", "raw",
             "MTEB's instruction-retrieval input 'query instruction' (query first, one space; "
             "mteb/_create_dataloaders.py), also FollowIR's own join: MTEB numbers on InstructIR are not "
             "comparable with the paper's.",
             "{query} {instruction}", bare_query="{query}", source="embeddings-benchmark/mteb"),
    Template("mteb-repllama", "repllama",
             "MTEB's RepLLaMA and Promptriever wrappers: model prompts 'query:  ' / 'passage:  ' (two spaces) "
             "before MTEB's 'query instruction' text; MTEB-comparable, not paper-comparable.",
             "query:  {query} {instruction}", doc="passage:  {text}", bare_query="query:  {query}",
             source=_MTEB_SRC + " models/model_implementations/repllama_models.py (model_prompts, encode)"),
    Template("mteb-e5-mistral", "e5-mistral",
             "MTEB's E5-mistral wrapper: 'Instruct: <MTEB's generic retrieval prompt>\nQuery: ' before 'query "
             "instruction'; documents bare (apply_instruction_to_passages=False); MTEB-comparable, not "
             "paper-comparable.",
             f"Instruct: {_MTEB_RETRIEVAL_PROMPT}\nQuery: {{query}} {{instruction}}",
             bare_query=f"Instruct: {_MTEB_RETRIEVAL_PROMPT}\nQuery: {{query}}",
             source=_MTEB_SRC + " models/model_implementations/e5_instruct.py (E5_INSTRUCTION, e5_mistral)"),
    Template("mteb-gritlm", "gritlm",
             "MTEB's GritLM wrapper: '<|user|>\n<MTEB's generic retrieval prompt>\n<|embed|>\n' before the query "
             "text and before every document (apply_instruction_to_passages defaults to True); MTEB-comparable, "
             "not paper-comparable.",
             f"<|user|>\n{_MTEB_RETRIEVAL_PROMPT}\n<|embed|>\n{{query}} {{instruction}}",
             doc=f"<|user|>\n{_MTEB_RETRIEVAL_PROMPT}\n<|embed|>\n{{text}}",
             bare_query=f"<|user|>\n{_MTEB_RETRIEVAL_PROMPT}\n<|embed|>\n{{query}}",
             source=_MTEB_SRC + " models/model_implementations/gritlm_models.py (gritlm_instruction, gritlm7b)"),
    Template("query-only", "raw", "The bare query; the instruction is ignored.", "{query}"),
)

#: Templates users registered (:func:`register_template`).
_REGISTRY: dict[str, Template] = {}


def _templates() -> dict[str, Template]:
    """Every template by name: the families', the kit's, then the users'."""
    return {**_family_templates(), **{t.name: t for t in _KIT}, **_REGISTRY}


def require_text(template: Template, taker: str, *, documents: bool = True) -> None:
    """Refuse, before any work, a template whose query formats (and, with ``documents``, its document
    format) make [instruction, text] pairs: ``taker`` (BM25, ColBERT, an embeddings API …) takes one text
    per input. The one refusal of every retriever and export that cannot take INSTRUCTOR's pairs."""
    formats = (template.query, template.bare_query, *((template.doc,) if documents else ()))
    if any(isinstance(fmt, tuple) for fmt in formats):
        raise UsageError(f"template {template.name!r} makes [instruction, text] pairs, which {taker} cannot take "
                         "(one text per input); use a text template (e.g. instructir, ifir, mteb)")


def get_template(name: str) -> Template:
    """A registered template by name."""
    expect(name, str, "get_template(name)")
    found = _REGISTRY.get(name) or _templates().get(name)
    if found is None:
        settings = {setting for family in catalog.families() for setting in catalog.family(family).settings}
        raise unknown("template", name, list_templates(), more=(
            f" ({name!r} is a benchmark setting: load_benchmark(name, {name!r}); a run takes its family's template "
            "when none is named)" if name in settings else ""))
    return found


def list_templates() -> list[str]:
    """Names of all registered templates (built-in and user-defined)."""
    return sorted(_templates())


def register_template(name: str, query: Format, *, doc: Format = "{text}", bare_query: Format | None = None,
                      family: str = "custom", description: str = "", domains: Mapping[str, str] | None = None,
                      replace: bool = False) -> Template:
    """Register a user-defined template from format strings, e.g.
    ``register_template("mine", "{instruction}: {query}")``; fields are checked at once.

    ``bare_query`` is used for instances without an instruction; without it the ``query``
    format is used verbatim for them too. Built-in templates can never be replaced; a user
    template only with ``replace=True``.
    """
    if name in _templates() and (not replace or name not in _REGISTRY):
        raise ValueError(f"template {name!r} already exists")
    template = Template(name, family, description or f"user-defined: {query!r}", query, doc=doc,
                        bare_query=bare_query, domains=domains or {}, source="user")
    _REGISTRY[name] = template
    return template


def family_of_model(model: str) -> str:
    """Guess a model family from a model id or path (``hkunlp/instructor-xl`` → ``instructor``);
    anything unrecognised is a plain ``dense`` encoder."""
    low = model.lower()
    for family in MODEL_FAMILIES[2:]:  # each named in its models' ids; bm25 and dense are not
        if family in low:
            return family
    return "dense"


def default_template(model_family: str, benchmark: Benchmark | str, setting: str | None = None) -> Template:
    """The template the benchmark family's authors used for ``model_family`` (the spec's
    ``templates``; a setting with templates of its own, such as InstructIR's order-sensitivity
    query-first text, has only those). ``benchmark`` is a Benchmark (its family and setting
    apply) or a benchmark name of the catalog (``setting`` defaults to ``instructed``)."""
    if model_family not in MODEL_FAMILIES:
        raise unknown("model family", model_family, MODEL_FAMILIES)
    if isinstance(benchmark, Benchmark):
        name, family, setting = benchmark.name, benchmark.family, setting or benchmark.setting
    else:
        name, family, setting = benchmark, catalog.family_of(benchmark), setting or "instructed"
    if family is None:
        raise UsageError(f"no default template for benchmark {name!r} (of no benchmark family); pass a template name")
    spec = catalog.family(family)
    template = spec.template_for(model_family, setting)
    if template is None:
        where = f" in the {setting!r} setting" if setting in spec.setting_templates else ""
        raise UsageError(f"the {spec.printed} authors did not evaluate the {model_family} family{where}, so there is "
                         f"no official template; pass one (known: {', '.join(list_templates())})")
    return get_template(template)
