"""What a run asks, as one typed request checked once: the benchmarks, the systems, the settings
and variants, the depth ``k``, the folders and the judge. A sweep's grid file
(:func:`instir.distributed.grid.parse_grid`) and the notebooks' parameters (``instir run -p``, checked by
:func:`instir.pipeline.validate_parameters` before any kernel starts) both become a :class:`RunRequest`
through :func:`run_request`, each value through the one rule of its kind (:mod:`instir.parameters`);
the stages a notebook calls apply the same rules to what they are given. A mistake is one line that
names where the value came from (``grid.yaml:3: field 'k'``, ``parameter 'k'``), the value, and the
closest known name.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any

from instir.errors import UnknownNameError, UsageError, closest, quoted, unknown
from instir.parameters import (
    MAX_SECONDS,
    MIN_PER_MINUTE,
    benchmark_names,
    choices,
    depth,
    folder,
    names,
    positive_number,
    text,
)
from instir.stages.plan import PlannedRun, every_setting, every_variant, file_part, plan_runs
from instir.systems.specs import SystemSpec, resolve_system

#: Where a value came from, by the request's field name (``judge.model`` for the judge's keys).
Where = Callable[[str], str]


@dataclass(frozen=True)
class JudgeRequest:
    """The judge of a run (:func:`instir.judge.factory.make_judge`): ``backend`` and ``model``, an
    OpenAI-compatible ``base_url`` and the NAME of the environment variable holding its key
    (never a key), seconds per HTTP attempt, requests per minute over a whole sweep (None: no
    limit), instances judged per benchmark, and judgments per passage for the stability check."""

    backend: str
    model: str = ""
    base_url: str = ""
    api_key_env: str = "OPENAI_API_KEY"
    timeout_s: float = 60.0
    requests_per_minute: float | None = None
    max_instances: int = 5
    repeats: int = 2


#: The keys a judge mapping may hold.
JUDGE_KEYS = tuple(f.name for f in fields(JudgeRequest))


@dataclass(frozen=True)
class RunRequest:
    """A checked request: benchmark names (collections expanded), resolved systems, the settings and
    variants to plan (variants None: every variant of each family), the depth ``k`` (None: each family's),
    the data and cache folders (None: the defaults) and the judge
    (None: no judge stage)."""

    benchmarks: tuple[str, ...]
    systems: tuple[SystemSpec, ...]
    settings: tuple[str, ...] = ("instructed",)
    variants: tuple[str, ...] | None = None
    k: int | None = None
    data_root: str | None = None
    cache_dir: str | None = None
    judge: JudgeRequest | None = None

    def cells(self) -> list[PlannedRun]:
        """Every run the request asks for, in the plan's order (:func:`instir.stages.plan.plan_runs`)."""
        return plan_runs(self.benchmarks, self.systems, settings=self.settings, variants=self.variants, k=self.k)


def run_request(values: Mapping[str, Any], where: Where, *,
                required: tuple[str, ...] = ("benchmarks", "systems")) -> RunRequest:
    """A :class:`RunRequest` from a mapping of its fields (those of ``required`` must be there; a
    missing ``benchmarks`` or ``systems`` is otherwise none; ``judge`` a mapping of
    :data:`JUDGE_KEYS`); every value checked by its rule, a mistake one
    :class:`~instir.errors.UsageError` naming ``where(field)``."""
    for field in required:
        if values.get(field) is None:
            raise UsageError(f"{where(field)} is required (a list of names)")
        if isinstance(values[field], (list, tuple)) and not values[field]:  # a grid of no cells runs nothing
            raise UsageError(f"{where(field)} is empty: name at least one, e.g. "
                             f"{quoted('bm25' if field == 'systems' else 'instructir-sample')}")
    judge = values.get("judge")
    if judge is not None and not isinstance(judge, Mapping):
        raise UsageError(f"{where('judge')} takes a mapping with a backend, got {quoted(judge)}")
    given = values.get("benchmarks")
    return RunRequest(
        benchmarks=() if given is None else tuple(benchmark_names(given, where=where("benchmarks"))),
        systems=system_specs(values.get("systems") or [], where("systems")),
        settings=tuple(choices(values.get("settings", ["instructed"]), every_setting(), "setting",
                               where=where("settings"))),
        variants=(None if values.get("variants") is None else
                  tuple(choices(values["variants"], every_variant(), "variant", where=where("variants")))),
        k=None if values.get("k") is None else depth(values["k"], where=where("k")),
        data_root=folder(values.get("data_root"), where=where("data_root")),
        cache_dir=folder(values.get("cache_dir"), where=where("cache_dir")),
        judge=None if judge is None else judge_request(judge, where))


def system_specs(value: Any, where: str) -> tuple[SystemSpec, ...]:
    """Each name resolved (:func:`instir.systems.specs.resolve_system`); none given twice, also not
    under two names of one system (``dense`` and ``dense:<the bundled model>``)."""
    specs: list[SystemSpec] = []
    # the first system of each label and of each file name, by its place: each name is looked up, not compared with
    # every one before it (3,000 systems took 47 s, the 40,000 a 1 MiB grid may name hours)
    by_label: dict[str, int] = {}
    by_part: dict[str, int] = {}
    for name in names(value, where=where, unique=True):
        try:
            system = resolve_system(name)
        except ValueError as err:
            raise UsageError(f"{where}: {err}") from None
        earlier = [i for i in (by_label.get(system.label), by_part.get(file_part(name))) if i is not None]
        if earlier:
            same = specs[min(earlier)]
            raise UsageError(f"{where}: {quoted(same.name)} and {quoted(name)} are one system "
                             f"({quoted(system.label)}); list it once")
        by_label.setdefault(system.label, len(specs))
        by_part.setdefault(file_part(system.name), len(specs))
        specs.append(system)
    return tuple(specs)


def judge_request(values: Mapping[str, Any], where: Where) -> JudgeRequest:
    """A :class:`JudgeRequest` from a mapping of :data:`JUDGE_KEYS`: a known backend (openai with a
    model), strings where strings go, positive counts and numbers, no credentials in ``base_url``
    and a variable name (not a key) in ``api_key_env``."""
    from instir.judge.factory import BACKENDS
    from instir.secrets import refuse_url_credentials, require_env_name

    for key in values:
        if key not in JUDGE_KEYS:
            raise UnknownNameError(f"{where(f'judge.{key}')}: {unknown('key', str(key), JUDGE_KEYS)}")
    backend = values.get("backend")
    if not isinstance(backend, str) or backend not in BACKENDS:
        close = None if backend is None else closest(backend, BACKENDS)
        given = "no backend" if backend is None else f"backend {quoted(backend)}"
        hint = f" (did you mean {close!r}?)" if close else ""
        raise UsageError(f"{where('judge.backend')}: {given}{hint}; use one of {', '.join(BACKENDS)}")
    checked: dict[str, Any] = {"backend": backend}
    for key in ("model", "base_url", "api_key_env"):
        if values.get(key) is not None:
            checked[key] = text(values[key], where=where(f"judge.{key}"))
    from instir.judge.stability import check_repeats
    from instir.judge.validation import check_per_stratum

    def check_instances(value: object) -> int:  # also the judge validation's pairs per stratum
        return check_per_stratum(value, "max_instances")

    for key, check in (("repeats", check_repeats), ("max_instances", check_instances)):  # bounded counts
        try:
            if values.get(key) is not None:
                checked[key] = check(values[key])
        except UsageError as err:
            raise UsageError(f"{where('judge.' + key)}: {err}") from None
    # a timeout of at most a day; at least a request a day (1e-300 a minute paced a wait past what a clock holds)
    for key, at_least, at_most in (("timeout_s", 0.0, MAX_SECONDS),
                                   ("requests_per_minute", MIN_PER_MINUTE, math.inf)):
        if values.get(key) is not None:
            checked[key] = positive_number(values[key], where=where(f"judge.{key}"), at_least=at_least,
                                           at_most=at_most)
    if backend == "baseline" and checked.get("model"):  # notebook 04 would fail on it after the chain ran
        from instir.judge.baseline import BASELINE_METHODS

        if checked["model"] not in BASELINE_METHODS:
            said = unknown("baseline judge method", checked["model"], BASELINE_METHODS)
            raise UsageError(f"{where('judge.model')}: {said}")
    if backend == "openai" and not checked.get("model"):
        raise UsageError(f"{where('judge.model')}: the openai backend needs a model (the name the server serves)")
    refuse_url_credentials(checked.get("base_url"), where("judge.base_url"))
    if checked.get("api_key_env"):
        require_env_name(checked["api_key_env"], where("judge.api_key_env"))
    return JudgeRequest(**checked)


def notebook_request(values: Mapping[str, Any]) -> RunRequest:
    """The run request of the notebooks' parameters (``values``: the chain's defaults with what the
    user gave over them; a chain without a parameter asks nothing of it): ``benchmarks``, ``k`` and
    ``data_root``; ``retrievers`` (each of :data:`instir.retrieval.RETRIEVER_KINDS`) with
    ``dense_model``, and ``systems``, as the systems of :func:`instir.systems.specs.notebook_systems` (none at
    all refused, as a grid's);
    the judge from the ``judge_*`` parameters when the chain has ``judge_backend``."""
    from instir.retrieval import RETRIEVER_KINDS
    from instir.systems.specs import notebook_systems

    kinds = names(values.get("retrievers", []), "retrievers", unique=True)
    for kind in kinds:
        if kind not in RETRIEVER_KINDS:
            raise UnknownNameError(f"parameter 'retrievers': {unknown('retriever', kind, RETRIEVER_KINDS)}")
    fields: dict[str, Any] = {key: values[key] for key in ("benchmarks", "k", "data_root") if key in values}
    fields["systems"] = notebook_systems(kinds, text(values.get("dense_model") or "", where="parameter 'dense_model'"),
                                         values.get("systems", []))
    if "judge_backend" in values:
        fields["judge"] = {key: values[f"judge_{key}"] for key in JUDGE_KEYS if f"judge_{key}" in values}
    runs = "retrievers" in values or "systems" in values  # a chain that retrieves must be given a system
    return run_request(fields, _notebook_parameter, required=("systems",) if runs else ())


def _notebook_parameter(field: str) -> str:
    """Where a request's field comes from among the notebooks' parameters."""
    if field == "systems":
        return "parameter 'retrievers' or 'systems'"
    return f"parameter {'judge_backend' if field == 'judge' else field.replace('.', '_')!r}"


def check_runnable(request: RunRequest, *, where: Callable[[str], str] = _notebook_parameter,
                   knob: str = "-p data_root=FOLDER (instir run)") -> None:
    """Refuse in one line, before any kernel or cell starts, what a stage would fail on hours later: a ``data_root``
    that is no folder, a real benchmark neither in it nor fetched (the fetch command and ``knob``, the way to give a
    data root, named), a system card whose packages are not installed (the extra named) or whose weights cannot be
    had offline, a local model folder that holds no model. ``where(field)`` names a field as its front end takes it.
    ``instir run`` and ``instir sweep`` on this machine call it (a cluster's cells read the cluster's files)."""
    from instir.benchmarks.registry import check_located
    from instir.report.layout import user_path
    from instir.retrieval.model_files import check_model
    from instir.systems.cards import get_card, load_cards
    from instir.systems.registry import check_dependencies, check_weights_reachable

    root = user_path(request.data_root) if request.data_root else None
    if root is not None and not root.is_dir():
        raise UsageError(f"{where('data_root')}: {root} is not a folder (give the folder that holds the benchmarks' "
                         "data, or leave it empty for the instir fetch cache)")
    for name in request.benchmarks:
        check_located(name, root, knob=knob)
    cards = load_cards()
    for system in request.systems:
        if system.card:
            card = get_card(system.card, cards)
            check_dependencies(card)
            check_weights_reachable(card, cards)
        elif system.model:  # dense:MODEL, hybrid:MODEL
            check_model(system.model, "sentence-transformers", what=f"system {system.name!r}: model")
