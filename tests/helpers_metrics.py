"""Hypothesis settings shared by the metric properties: few examples, no deadline."""

from __future__ import annotations

from hypothesis import settings

FAST = settings(max_examples=40, deadline=None)
