"""Tests of the pure-Python golden models (no simulator needed)."""
