"""``ray.experimental.state`` (:mod:`ray` stub)."""
