"""Guardrails: verdicts with reasons (rationale, score, category), thresholds per deployment,
checks on the input, the answer (before any of it streams) and tools; after-agent follow-ups.

``Agent(middleware=[Guardrail(RuleClassifier.jailbreaks(), stages=("input",))])`` is the smallest.
"""

from tether.guardrails.classifiers import ModelClassifier, Rule, RuleClassifier
from tether.guardrails.core import Action, Classifier, Guardrail, Stage, Thresholds, Verdict
from tether.guardrails.hooks import FollowUp, recent_talk

__all__ = [
    "Action",
    "Classifier",
    "FollowUp",
    "Guardrail",
    "ModelClassifier",
    "Rule",
    "RuleClassifier",
    "Stage",
    "Thresholds",
    "Verdict",
    "recent_talk",
]
