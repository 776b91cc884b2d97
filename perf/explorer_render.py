"""Instance explorer speed: building and rendering one query group (``ExplorerData.group`` +
``render_group``) with every system of an out_dir, top 10, on the largest group of a benchmark
(instructir-sample: 10 instances). The out_dir is what notebooks 02-04 leave, e.g. after
``instir run`` or papermill of 02/03/04 (4 systems with the defaults: bm25 and dense, each
instructed and query-only). Reports the first call (reads runs, streams the corpus) and the
median of 3 warm calls (wall and CPU time: on a shared machine the CPU time is the steadier
figure). Target: <= 0.5 s per group on the sample, the first and the warm ones (exit status 1 if missed).

    .venv/bin/python -m perf.explorer_render OUT_DIR [--benchmark instructir-sample]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from instir.report.explorer import ExplorerData, render_group
from perf.common import check_targets


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out_dir")
    p.add_argument("--benchmark", default="instructir-sample")
    p.add_argument("--k", type=int, default=10)
    args = p.parse_args()
    t0 = time.perf_counter()
    data = ExplorerData(args.out_dir)
    groups = data.benchmark(args.benchmark).groups()
    group = max(groups, key=lambda g: len(groups[g]))
    load = time.perf_counter() - t0

    def once() -> tuple[float, float, int]:
        t, cpu = time.perf_counter(), time.process_time()
        html = render_group(data.group(args.benchmark, group, k=args.k))
        return time.perf_counter() - t, time.process_time() - cpu, len(html)

    first, _, size = once()
    runs = [once() for _ in range(3)]
    warm = [wall for wall, _, _ in runs]
    systems = data.systems(args.benchmark)
    print(f"{args.benchmark} group {group}: {len(groups[group])} instances x {len(systems)} systems x top {args.k}, "
          f"{size:,} characters of HTML")
    print(f"open out_dir + load benchmark: {load:.3f} s; first group: {first:.3f} s; "
          f"warm median of 3: {statistics.median(warm):.3f} s ({', '.join(f'{w:.3f}' for w in warm)}), "
          f"CPU {statistics.median(cpu for _, cpu, _ in runs):.3f} s")
    return check_targets({"first group": first, "warm group (median)": statistics.median(warm)},
                         {"first group": "<= 0.5 s", "warm group (median)": "<= 0.5 s"})


if __name__ == "__main__":
    sys.exit(main())
