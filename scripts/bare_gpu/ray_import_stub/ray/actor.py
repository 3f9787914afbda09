"""``ray.actor`` names verl imports (:mod:`ray` stub)."""
from ray import stub_class

ActorHandle = stub_class("ActorHandle")
ActorClass = stub_class("ActorClass")
