# SPDX-License-Identifier: BSD-2-Clause
"""Functional coverage of the regression: which protocol answers and states the benches reached.

Own collector rather than ``cocotb-coverage``: that package is not in the pinned set, its
cross/bin machinery is built for sampling one coroutine's variables, and what is wanted here is
a merge over many simulator processes (each bench, pytest-xdist workers) of a fixed list of named
bins. Each bench calls :func:`hit` (or :func:`hit_counts` with a counter mapping) as it checks
its DUT against the model; the counts are written to ``build/coverage/<bench>-<pid>.json`` when
the process exits; ``python -m verif.coverage`` merges every file and prints the table, with the
bins no bench reached. ``make test`` clears the folder first and prints the table after pytest.

The bins (docs/protocol.md): EV events of 4.4 (each one a state transition of a slot: SKIP
GOOD -> SKIP, BAD -> ASSUMED_BAD, RECOVERED ASSUMED_BAD -> a fresh EV, DENY -> DENIED, ALLOW
DENIED -> GOOD), every NACK reason (2.2), every opcode, every receive drop reason (section 5),
every switch admission outcome (section 7: fits, trimmed, dropped, CE), plane down and up, QP
error.
"""

import atexit
import json
import os
import sys
from collections import Counter
from pathlib import Path

from models.layouts import CONTROL_OPCODES, DATA_OPCODES, NackReason
from models.packets import FRAME_ERROR_REASONS
from project import BUILD

__all__ = ["BINS", "hit", "hit_counts", "flush", "merge", "table", "COVERAGE_DIR"]

COVERAGE_DIR = BUILD / "coverage"

_OPCODE_NAMES = {0xC6: "WRITE_FIRST", 0xC7: "WRITE_MIDDLE", 0xC8: "WRITE_LAST",
                 0xC9: "WRITE_LAST_IMM", 0xCA: "WRITE_ONLY", 0xCB: "WRITE_ONLY_IMM",
                 0xDC: "SACK", 0xDD: "NACK", 0xDE: "PROBE"}
assert set(_OPCODE_NAMES) == set(DATA_OPCODES + CONTROL_OPCODES)

BINS = {
    "EV event (4.4)": ("SKIP", "BAD", "RECOVERED", "DENY", "ALLOW"),
    "NACK reason (2.2)": tuple(name for name in vars(NackReason) if name.isupper()),
    "opcode": tuple(_OPCODE_NAMES.values()),
    "receive drop (5)": FRAME_ERROR_REASONS + (
        "qp_unknown", "no_buffer_data", "no_buffer_control", "icrc", "access_denied",
        "plane_bad", "plane_no_room", "beyond_window", "duplicate"),
    "switch admission (7)": ("fits", "trimmed", "dropped_full", "dropped_port_down", "ce_marked",
                             "malformed"),
    "plane": ("down", "up"),
    "QP": ("error",),
}

_counts = Counter()
_registered = False


def opcode_name(opcode):
    return _OPCODE_NAMES.get(opcode)


def hit(group, name, count=1):
    """Count ``count`` hits of bin ``name`` of ``group`` (both must be in :data:`BINS`)."""
    global _registered
    if group not in BINS or name not in BINS[group]:
        raise KeyError(f"coverage: no bin {name!r} in group {group!r}")
    if count:
        _counts[(group, name)] += count
    if not _registered:
        atexit.register(flush)
        _registered = True


def hit_counts(group, counts, names=None):
    """:func:`hit` for every bin of ``group`` found in mapping ``counts`` (counter name ->
    value); ``names`` maps a counter name to a bin name where they differ."""
    names = names or {}
    for key, value in counts.items():
        name = names.get(key, key)
        if name in BINS[group] and value:
            hit(group, name, value)


def flush():
    """Write this process's counts to ``build/coverage/<bench>-<pid>.json``."""
    if not _counts:
        return
    COVERAGE_DIR.mkdir(parents=True, exist_ok=True)
    bench = os.environ.get("MRC_BENCH", "python")
    path = COVERAGE_DIR / f"{bench}-{os.environ.get('MRC_SIM', 'none')}-{os.getpid()}.json"
    path.write_text(json.dumps({"bench": bench,
                                "hits": [[g, n, c] for (g, n), c in sorted(_counts.items())]}))


def merge(folder=COVERAGE_DIR):
    """``(counts, benches)``: the merged :class:`Counter` of ``(group, bin)`` and, per bin, the
    benches that hit it."""
    counts, benches = Counter(), {}
    for path in sorted(Path(folder).glob("*.json")):
        data = json.loads(path.read_text())
        for group, name, count in data["hits"]:
            counts[(group, name)] += count
            benches.setdefault((group, name), set()).add(data["bench"])
    return counts, benches


def table(counts):
    """The coverage table (markdown) and the list of bins not hit."""
    lines = ["| group | bins hit | of | % | not hit |", "|---|---|---|---|---|"]
    missed = []
    for group, names in BINS.items():
        miss = [n for n in names if not counts.get((group, n))]
        missed += [(group, n) for n in miss]
        hit_n = len(names) - len(miss)
        lines.append(f"| {group} | {hit_n} | {len(names)} | {100 * hit_n / len(names):.0f} | "
                     f"{', '.join(miss) or '-'} |")
    total = sum(len(n) for n in BINS.values())
    lines.append(f"| **all** | {total - len(missed)} | {total} | "
                 f"{100 * (total - len(missed)) / total:.0f} | |")
    return "\n".join(lines), missed


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--clear":
        for path in COVERAGE_DIR.glob("*.json"):
            path.unlink()
        return 0
    counts, _ = merge()
    text, missed = table(counts)
    print("Functional coverage (verif/coverage.py), merged over this run's benches:")
    print(text)
    if missed:
        print(f"{len(missed)} bins not hit: " + "; ".join(f"{g}: {n}" for g, n in missed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
