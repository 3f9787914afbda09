"""Benchmarks (``make bench``): speed targets as ratios measured side by side in one run."""
