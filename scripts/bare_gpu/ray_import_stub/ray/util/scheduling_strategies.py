"""``ray.util.scheduling_strategies`` names verl imports (:mod:`ray` stub)."""
from ray import stub_class

NodeAffinitySchedulingStrategy = stub_class("NodeAffinitySchedulingStrategy")
PlacementGroupSchedulingStrategy = stub_class("PlacementGroupSchedulingStrategy")
