"""``ray.util`` of the Ray import stub: every name a stub (:mod:`ray`)."""
from ray import stub_names

__getattr__ = stub_names(__name__)
