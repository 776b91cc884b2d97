"""Instance forms: a family whose every query comes in several forms in one run (FollowIR: under its
original instruction and under the altered one) names them in its spec (``forms``, ``reference_form``);
what a form's id is and which documents two forms grade otherwise are decided here, once."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from instir.errors import UsageError, quoted


@dataclass(frozen=True)
class Forms:
    """The forms every query of a family comes in, each one instance with the id ``<query>-<form>`` in
    the same run (FollowIR's and MTEB's ids: ``<topic>-og`` under the original instruction,
    ``<topic>-changed`` under the altered one), and the ``reference`` form the others are compared
    with. An id of none of the forms is refused, never pooled with another form."""

    names: tuple[str, ...]
    reference: str

    def __post_init__(self) -> None:
        if len(self.names) < 2 or len(set(self.names)) != len(self.names) or self.reference not in self.names:
            raise UsageError(f"forms are two or more distinct names with the reference among them, got "
                             f"{list(self.names)} (reference {quoted(self.reference)})")

    @property
    def others(self) -> tuple[str, ...]:
        """The forms compared with the reference, in the spec's order."""
        return tuple(f for f in self.names if f != self.reference)

    @staticmethod
    def instance(query: str, form: str) -> str:
        """The id of ``query``'s instance in ``form``."""
        return f"{query}-{form}"

    def split(self, qid: str) -> tuple[str, str]:
        """``(query, form)`` of an instance id (the longest form name that ends it); an id of no
        form is a :class:`~instir.errors.UsageError` naming it and the forms."""
        found = max((f for f in self.names if qid.endswith(f"-{f}") and len(qid) > len(f) + 1), key=len, default=None)
        if found is None:
            raise UsageError(f"query id {quoted(qid)} is of none of the forms {', '.join(self.names)} (an instance "
                             "id is <query>-<form>)")
        return qid[: -len(found) - 1], found

    def form_of(self, qid: str) -> str:
        """The form of an instance id (:meth:`split`)."""
        return self.split(qid)[1]

    def regraded(self, qrels: Mapping[str, Mapping[str, int]], form: str | None = None) -> dict[str, list[str]]:
        """``{query: [doc ids]}``: the documents judged on each query's reference instance whose grade
        on its ``form`` instance (the first other form by default) differs, unjudged counting as 0:
        FollowIR's changed documents, as mteb 1.x derived them (``AbsTaskInstructionRetrieval.
        create_qrel_diff``; MTEB's copies ship them as ``qrel_diff``)."""
        form = form or self.others[0]
        suffix = f"-{self.reference}"
        out: dict[str, list[str]] = {}
        for qid, judged in qrels.items():
            if qid.endswith(suffix):
                query = qid.removesuffix(suffix)
                after = qrels.get(self.instance(query, form), {})
                out[query] = [d for d, g in judged.items() if after.get(d, 0) != g]
        return out
