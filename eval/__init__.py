"""Evaluation of verl-ext runs: metrics (:mod:`eval.metrics`), evaluator, tables and plots."""

from eval.metrics import (
    PASS_RATE_BINS,
    aggregate_curves,
    all_success_rate,
    best_so_far,
    countdown_format_diagnostics,
    degenerate_group_rate,
    degenerate_rate_over_steps,
    degenerate_rate_summary,
    effective_task_ratio,
    etr_over_steps,
    mean_and_std_over_runs,
    mean_at_k,
    mean_se,
    paired_bootstrap_ci,
    paired_wins_losses_ties,
    pass_at_k,
    pass_rate_bin,
    task_pass_rates,
    time_to_baseline,
    transition_matrix,
    zero_success_rate,
)

__all__ = [
    "PASS_RATE_BINS", "aggregate_curves", "all_success_rate", "best_so_far", "countdown_format_diagnostics",
    "degenerate_group_rate", "degenerate_rate_over_steps", "degenerate_rate_summary", "effective_task_ratio",
    "etr_over_steps", "mean_and_std_over_runs", "mean_at_k", "mean_se", "paired_bootstrap_ci",
    "paired_wins_losses_ties", "pass_at_k", "pass_rate_bin", "task_pass_rates", "time_to_baseline",
    "transition_matrix", "zero_success_rate",
]
