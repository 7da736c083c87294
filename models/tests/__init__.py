# SPDX-License-Identifier: BSD-2-Clause
"""Tests of the pure-Python golden models (no simulator needed)."""
