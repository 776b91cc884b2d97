"""Helpers of the Ray tests (a module, not a conftest, so test modules can import it)."""


def start_with_retries(start, attempts: int = 4):
    """Run ``start()`` (a Ray start-up) again when Ray gives up starting: its raylet waits a
    fixed ~15 s for its agents, which a heavily shared machine cannot always meet."""
    import ray

    for attempt in range(attempts):
        try:
            return start()
        except Exception as e:  # Ray raises a plain Exception for a node that timed out
            if "timed out during startup" not in str(e) or attempt == attempts - 1:
                raise
            ray.shutdown()
