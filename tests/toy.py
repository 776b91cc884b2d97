"""What the tests' hand-made benchmarks share: the family a toy benchmark stands for, named by
its name's head (``instructir-toy``, ``ifir-toy/fiqa``: the family before ``-toy``)."""

from instir.benchmarks import catalog


def toy_family(name: str) -> str | None:
    """The family whose spec a hand-made benchmark ``name`` takes: a catalog name's own, else the
    family its head names before ``-toy`` / ``-like`` (None for any other name)."""
    found = catalog.family_of(name)
    if found:
        return found
    head = name.partition("/")[0]
    return next((f for f in catalog.families() if head in (f"{f}-toy", f"{f}-like", f)), None)
