"""The bundled families as their spec files and sample folders say, read here with tomllib and the file system
(not through the catalog), so the catalog's tests compare with the files themselves and no test lists the families:
a family added to ``instir/benchmarks/families/`` is checked without a test edit."""

import tomllib
from pathlib import Path

import instir.benchmarks

PACKAGE = Path(instir.benchmarks.__file__).parent
SPECS = {path.stem: tomllib.loads(path.read_text(encoding="utf-8"))
         for path in sorted((PACKAGE / "families").glob("*.toml"))}
#: the families in the specs' ``order`` (then by name)
ORDER = tuple(sorted(SPECS, key=lambda name: (SPECS[name].get("order", 99), name)))


def subsets(name: str) -> list[str]:
    """A family's subset ids in its spec's order (none for a family of one collection)."""
    return [s["id"] for s in SPECS[name].get("subsets", [])]


def sample_names(name: str) -> list[str]:
    """The sample benchmarks a family's bundled folder holds: one per subset folder present, or the folder itself."""
    sample = SPECS[name].get("sample")
    folder = PACKAGE / "sample" / str(sample)
    if not sample or not folder.is_dir():
        return []
    ids = subsets(name)
    return [f"{sample}/{s}" for s in ids if (folder / s).is_dir()] if ids else [sample]


def real_names(name: str) -> list[str]:
    """The real benchmarks of a family: one per subset, or the family's own name."""
    return [f"{name}/{s}" for s in subsets(name)] or [name]


SAMPLES = [n for fam in ORDER for n in sample_names(fam)]
REAL = [n for fam in ORDER for n in real_names(fam)]
