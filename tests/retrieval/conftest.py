"""A hand-made InstructIR-shaped benchmark for the BM25, fusion and retrieve tests: two
query groups whose instances share a bare query and differ by instruction, so only the
instruction tells their targets apart."""

import pytest
from toy import toy_family

from instir.benchmarks.types import Benchmark, Corpus, Doc, Query

TOY_DOCS = [
    Doc("10_1", "A chef adds saffron threads to paella and risotto for golden colour and a floral aroma."),
    Doc("10_2", "Farmers harvest saffron by hand from crocus flowers each autumn; yields per hectare are low."),
    Doc("20_1", "Homeowners should keep a wine cabinet away from the oven and direct sunlight."),
    Doc("20_2", "A sommelier stores wine at 55 degrees Fahrenheit with 70 percent humidity to protect corks."),
    Doc("900", "Saffron is a spice."),
    Doc("901", "A wine cabinet is furniture for storing bottles."),
    Doc("902", "The stock market closed higher on Friday after strong earnings reports."),
    Doc("903", "Volcanoes erupt when magma rises through the crust."),
]
TOY_QUERIES = {
    "1_1": Query("1_1", "what is saffron", "I am a chef cooking paella and risotto", group="1"),
    "1_2": Query("1_2", "what is saffron", "I am a farmer who wants to harvest crocus flowers", group="1"),
    "2_1": Query("2_1", "wine cabinet", "I am a homeowner; where should it stand, away from the oven?", group="2"),
    "2_2": Query("2_2", "wine cabinet", "I am a sommelier asking about humidity and temperature for corks", group="2"),
}
TOY_QRELS = {"1_1": {"10_1": 1}, "1_2": {"10_2": 1}, "2_1": {"20_1": 1}, "2_2": {"20_2": 1}}


@pytest.fixture
def toy_benchmark():
    """Factory: the toy benchmark under any name/setting/meta, with optional extra docs."""

    def make(name: str = "instructir-toy", setting: str = "instructed", meta: dict | None = None,
             extra_docs: tuple[Doc, ...] = ()) -> Benchmark:
        return Benchmark(name, "hand-made", "local", setting, Corpus.from_docs([*TOY_DOCS, *extra_docs]),
                         dict(TOY_QUERIES), {q: dict(r) for q, r in TOY_QRELS.items()}, meta=dict(meta or {}),
                         family=toy_family(name))

    return make
