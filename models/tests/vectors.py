"""The conformance vectors of ``../shared/spec/vectors/`` (beside the repository), for tests.

The folder is found relative to the repository root, so a clone anywhere with ``shared/`` beside
it works; ``$MRC_VECTORS`` overrides it. A missing folder fails the test with a clear message.
"""

import json
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DIR = Path(os.environ.get("MRC_VECTORS", ROOT.parent / "shared" / "spec" / "vectors"))

__all__ = ["load", "DIR"]


def load(name):
    """The parsed JSON of vector file ``name`` (e.g. ``"packets.json"``)."""
    path = DIR / name
    if not path.exists():
        raise FileNotFoundError(f"conformance vectors not found at {path} "
                                f"(the spec's shared/ folder must sit beside the repository, "
                                f"or set MRC_VECTORS)")
    return json.loads(path.read_text())
