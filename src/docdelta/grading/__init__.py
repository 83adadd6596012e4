"""Grading: turn one run's output into a `Score` (answer scoring now; hidden tests and the judge later)."""

from docdelta.grading.answer import score_answer

__all__ = ["score_answer"]
