"""``ray.experimental`` (:mod:`ray` stub)."""
