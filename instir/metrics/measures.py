"""What the kit can compute, apart from who computes it: the scoring protocols (and, in this
module, the measures as value objects)."""

#: Scoring protocols: ``authors`` (the default: the papers' official code) and ``mteb``
#: (MTEB 2.26's task definitions, :mod:`instir.metrics.mteb`).
PROTOCOLS = ("authors", "mteb")
