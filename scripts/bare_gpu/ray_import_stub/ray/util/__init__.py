"""``ray.util`` names verl imports (:mod:`ray` stub)."""
from ray import unavailable

list_named_actors = unavailable("util.list_named_actors")
