"""Tests use the layers directly (evaluator, transforms, generators), so they
load every transform and extension first, as the API and the CLI do."""

from chad import features

features.load()
