# SPDX-License-Identifier: BSD-2-Clause
"""pytest set-up shared by every test folder.

Hypothesis runs without its per-example deadline: CI and the 2-core development machines run
two pytest workers beside simulators, so wall time per example says nothing about the code, and
a deadline only turns load into flaky failures (a slow example is still reported by
``--durations``). Each test keeps its own ``max_examples``.
"""

from hypothesis import settings

settings.register_profile("mrc", deadline=None)
settings.load_profile("mrc")
