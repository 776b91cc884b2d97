"""The Trio test family's group measure, Swing@k: per topic, how far each other form's top k moved away
from the reference form's, ``1 - |top_k(reference) & top_k(form)| / k`` averaged over the other forms."""

import re
from dataclasses import dataclass
from typing import ClassVar

import pandas as pd

from instir.metrics.measures import GroupMeasure

_NAME = re.compile(r"swing@(\d+)$", re.IGNORECASE)


@dataclass(frozen=True)
class Swing(GroupMeasure):
    k: int = 10
    source: ClassVar[str] = "tests/families/trio/trio_measures.py"
    requires: ClassVar[str] = "Swing compares a topic's instances in every form"

    @property
    def name(self):
        return f"Swing@{self.k}"

    @classmethod
    def parse(cls, text):
        found = _NAME.match(text)
        return cls(int(found[1])) if found else None

    def per_group(self, run, scope):
        forms = scope.forms
        ranked = run.sort_values(["qid", "score", "docid"], ascending=[True, False, False], kind="mergesort")
        top = {qid: set(part["docid"][: self.k]) for qid, part in ranked.groupby("qid", sort=False)}
        rows = []
        for topic in dict.fromkeys(forms.split(q)[0] for q in top):
            ids = [forms.instance(topic, f) for f in (forms.reference, *forms.others)]
            if all(i in top for i in ids):
                reference = top[ids[0]]
                swings = [1 - len(reference & top[i]) / self.k for i in ids[1:]]
                rows.append((topic, sum(swings) / len(swings), len(ids)))
        return pd.DataFrame(rows, columns=["group", "value", "n_queries"])
