"""``ray.util.placement_group`` names verl imports (:mod:`ray` stub)."""
from ray import stub_class, unavailable

PlacementGroup = stub_class("PlacementGroup")
placement_group = unavailable("util.placement_group.placement_group")
remove_placement_group = unavailable("util.placement_group.remove_placement_group")
