# SPDX-License-Identifier: BSD-2-Clause
"""Project-wide paths and the README table patcher: the one module every layer above the RTL
(verification library, benches, fabric flows, FPGA flow, bench, docs tests) takes them from.

It imports nothing of the project, so any layer may use it (``pyproject.toml`` states the layers).
"""

from pathlib import Path

__all__ = ["ROOT", "BUILD", "RESULTS", "replace_between_markers"]

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "build"
RESULTS = BUILD / "results"


def replace_between_markers(path, begin, end, text):
    """Replace what stands between the lines ``begin`` and ``end`` of file ``path`` (the README's
    generated tables) with ``text``; a file without both markers is left alone."""
    path = Path(path)
    if not path.exists():
        return
    content = path.read_text()
    if begin in content and end in content:
        pre, rest = content.split(begin, 1)
        _, post = rest.split(end, 1)
        path.write_text(pre + begin + "\n" + text + end + post)
