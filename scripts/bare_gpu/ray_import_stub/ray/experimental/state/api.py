"""``ray.experimental.state.api`` names verl imports (:mod:`ray` stub)."""
from ray import unavailable

get_actor = unavailable("experimental.state.api.get_actor")
