# SPDX-License-Identifier: BSD-2-Clause
"""The conformance vectors of ``docs/protocol.md``, kept in the repository (``models/vectors/``).

:func:`load` returns the parsed JSON of one file; the models' tests and the cocotb benches replay
them. ``$MRC_VECTORS`` points the loader at another folder (to try a new set of vectors).

``python -m models.conformance --check DIR`` (``make vectors-check``) compares the in-repository
copy with an upstream folder of vectors, file by file and case by case, and lists every
difference; it exits 1 when there is one, 0 when both agree, and 2 when ``DIR`` does not exist.
Nothing in ``make test`` reads anything outside the repository.
"""

import argparse
import json
import os
import sys
from pathlib import Path

DIR = Path(os.environ.get("MRC_VECTORS", Path(__file__).resolve().parent / "vectors"))

__all__ = ["load", "DIR", "FILES", "differences", "main"]

# Every vector file the project replays (models/vectors/README.md says what each pins).
FILES = ("packets.json", "usid.json", "spray.json", "spray-v2.json", "sack.json", "sack-v2.json",
         "ecn.json")


def load(name):
    """The parsed JSON of vector file ``name`` (e.g. ``"packets.json"``)."""
    path = DIR / name
    if not path.exists():
        raise FileNotFoundError(f"conformance vector file {name!r} not found in {DIR} "
                                f"(the repository keeps them in models/vectors/; "
                                f"$MRC_VECTORS overrides the folder)")
    return json.loads(path.read_text())


def _diff(a, b, where, out, limit=20):
    """Append to ``out`` the paths where JSON values ``a`` and ``b`` differ (at most ``limit``)."""
    if len(out) >= limit:
        return
    if type(a) is not type(b):
        out.append(f"{where}: {type(a).__name__} here, {type(b).__name__} upstream")
    elif isinstance(a, dict):
        for key in sorted(set(a) | set(b)):
            if key not in b:
                out.append(f"{where}.{key}: only here")
            elif key not in a:
                out.append(f"{where}.{key}: only upstream")
            else:
                _diff(a[key], b[key], f"{where}.{key}", out, limit)
    elif isinstance(a, list):
        if len(a) != len(b):
            out.append(f"{where}: {len(a)} entries here, {len(b)} upstream")
        for i, (x, y) in enumerate(zip(a, b)):
            _diff(x, y, f"{where}[{i}]", out, limit)
    elif a != b:
        out.append(f"{where}: {a!r} here, {b!r} upstream")


def differences(upstream, here=None):
    """Every difference between the vector folder ``here`` (default: the repository's) and
    ``upstream``: a list of lines, empty when they agree."""
    here, upstream = Path(here or DIR), Path(upstream)
    out = []
    names = sorted({p.name for p in here.glob("*.json")} | {p.name for p in upstream.glob("*.json")})
    for name in names:
        mine, theirs = here / name, upstream / name
        if not theirs.exists():
            out.append(f"{name}: only in the repository")
        elif not mine.exists():
            out.append(f"{name}: only upstream (copy it into {here})")
        elif mine.read_bytes() != theirs.read_bytes():
            lines = []
            _diff(json.loads(mine.read_text()), json.loads(theirs.read_text()), name, lines)
            out.extend(lines or [f"{name}: same content, different bytes (formatting)"])
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m models.conformance", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", metavar="DIR", required=True,
                        help="upstream vector folder to compare the repository's copy with")
    args = parser.parse_args(argv)
    upstream = Path(args.check)
    if not upstream.is_dir():
        print(f"vectors-check: no upstream folder {upstream}; nothing to compare")
        return 2
    diffs = differences(upstream)
    for line in diffs:
        print(line)
    print(f"vectors-check: {DIR} against {upstream}: "
          + ("identical" if not diffs else f"{len(diffs)} difference(s)"))
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
