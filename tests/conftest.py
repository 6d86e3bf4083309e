"""Tests use the layers directly (evaluator, transforms, generators), so they
load every transform and extension first, as the API and the CLI do.

Hypothesis runs without its per-example deadline: a deadline is a timing test,
and the machines the suite runs on are shared and noisy."""

from hypothesis import settings

from chad import features

settings.register_profile("chad", deadline=None)
settings.load_profile("chad")
features.load()
