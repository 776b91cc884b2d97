"""How far the authors' InstructIR protocol and MTEB's are apart, on the real 9,906 instructed
queries: the bundled all-MiniLM-L6-v2 retrieves the top 100 over the generated 16,072-document
corpus of :mod:`perf.bm25_scale` (the real corpus is only on Hugging Face) once with each
query text, the authors' ``instruction [SEP] query`` (template ``instructir``) and MTEB's
``query instruction`` (template ``mteb``), and each run is scored under both protocols
(``instir.metrics.evaluate_runs(..., protocol=...)``): nDCG@10 and Robustness@10, ×100.

The corner "MTEB's text, MTEB's protocol" minus "the authors' text, the authors' protocol" is
what a user of each tool's defaults sees; the other two cells split it into its text and its
scoring parts. Document vectors are cached under ``$INSTIR_HOME`` between the two runs.

    python -m perf.mteb_protocols [--data DIR]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from perf.bm25_scale import generate_corpus
from perf.common import instructir_data


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=None, help="the authors' InstructIR GitHub files (default: data/)")
    parser.add_argument("--k", type=int, default=100)
    args = parser.parse_args()

    from instir.benchmarks.instructir import load_instructir
    from instir.metrics.scoring import evaluate_runs
    from instir.retrieval.dense import DenseRetriever
    from instir.retrieval.search import retrieve

    data = instructir_data(args.data)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        generate_corpus(data, root)
        benchmark = load_instructir(root)
        retriever = DenseRetriever(progress=False)
        rows = []
        for text in ("instructir", "mteb"):
            start = time.perf_counter()
            run = retrieve(benchmark, retriever, template=text, k=args.k)
            seconds = time.perf_counter() - start
            for protocol, measures in (("authors", ("nDCG@10",)), ("mteb", ("ndcg_at_10", "robustness_at_10"))):
                table = evaluate_runs({text: run}, benchmark, measures, protocol=protocol).table
                value = table.set_index("measure")["value"]
                ndcg = value["nDCG@10" if protocol == "authors" else "ndcg_at_10"]
                robust = value["Robustness@10" if protocol == "authors" else "robustness_at_10"]
                rows.append((text, protocol, 100 * ndcg, 100 * robust, seconds))
    print("| query text | protocol | nDCG@10 | Robustness@10 | retrieval s |")
    print("|---|---|---|---|---|")
    for text, protocol, ndcg, robust, seconds in rows:
        print(f"| {text} | {protocol} | {ndcg:.2f} | {robust:.2f} | {seconds:.0f} |")
    cell = {(t, p): (n, r) for t, p, n, r, _ in rows}
    (n0, r0), (n1, r1) = cell[("instructir", "authors")], cell[("mteb", "mteb")]
    print(f"\neach tool's default: MTEB - authors = nDCG@10 {n1 - n0:+.2f}, Robustness@10 {r1 - r0:+.2f} points")


if __name__ == "__main__":
    main()
