# SPDX-License-Identifier: BSD-2-Clause
"""project: the paths and the README table patcher."""

from project import BUILD, RESULTS, ROOT, replace_between_markers


def test_paths():
    assert (ROOT / "pyproject.toml").exists()
    assert BUILD == ROOT / "build" and RESULTS == BUILD / "results"


def test_replace_between_markers(tmp_path):
    f = tmp_path / "README.md"
    f.write_text("a\n<!-- b -->\nold\n<!-- e -->\nz\n")
    replace_between_markers(f, "<!-- b -->", "<!-- e -->", "new\n")
    assert f.read_text() == "a\n<!-- b -->\nnew\n<!-- e -->\nz\n"
    g = tmp_path / "other.md"
    g.write_text("no markers\n")
    replace_between_markers(g, "<!-- b -->", "<!-- e -->", "new\n")
    assert g.read_text() == "no markers\n"


SOURCE_GLOBS = ("*/**/*.py", "scripts/*.sh", "sim/scenarios/*.yaml", ".ci/*", "Makefile")


def sources():
    for pattern in SOURCE_GLOBS:
        for path in sorted(ROOT.glob(pattern)):
            if path.is_file() and not any(part.startswith(".venv") or part == "build"
                                          for part in path.relative_to(ROOT).parts):
                yield path


def test_every_source_file_carries_the_licence():
    """An SPDX identifier in the first lines of every source file, and the LICENSE it names."""
    assert "BSD 2-Clause License" in (ROOT / "LICENSE").read_text()
    missing = [str(p.relative_to(ROOT)) for p in sources()
               if "SPDX-License-Identifier: BSD-2-Clause" not in p.read_text()[:300]]
    assert not missing, missing


def test_nothing_reads_outside_the_repository():
    """No code, test or script names a path beside the repository (the spec's ``shared/``
    folder); only ``make vectors-check`` compares the in-repository vectors with it, by an
    argument the Makefile passes."""
    beside = ("../" + "shared", "shared/" + "spec")     # split, so this file does not match
    offenders = []
    for path in sources():
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if any(text in line for text in beside) and not (
                    path.name == "Makefile" and line.startswith("SPEC_VECTORS ?=")):
                offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not offenders, "\n".join(offenders)
