# SPDX-License-Identifier: BSD-2-Clause
"""docs/protocol.md, docs/metrics.md and docs/toolchain.md stay usable.

- Every citation of the protocol document in the repository's ``.py``, ``.md`` and ``.yaml``
  files (``docs/protocol.md 4.3``, ``docs/protocol.md section 5``, ``docs/protocol.md sections
  1-2``, lists such as ``2.1, 5`` or ``1, 2, 5 and 8``) names a section heading that exists.
- The protocol document has sections 1 to 8 with the profile's sub-sections, in order, plus the
  deviations and open points; every "v1 today" mark names code files that exist.
- docs/metrics.md defines every term the project's figures use.
- docs/toolchain.md names the version of every package pinned in pyproject.toml.
"""

import re
import subprocess
import tomllib

import pytest

from project import ROOT

PROTOCOL = ROOT / "docs" / "protocol.md"
METRICS = ROOT / "docs" / "metrics.md"
TOOLCHAIN = ROOT / "docs" / "toolchain.md"
DOC_NAME = "docs/" + "protocol.md"        # split, so this file holds no citation by accident

# --- The citation parser -------------------------------------------------------------------------

# A section number: "4", "4.3" (a trailing "." as in "4.3)." or "section 5." is not part of it).
_NUM = r"\d+(?:\.\d+)*"
# Space between words, also across a line break into a comment or quote ("#", "//", ">", "*").
_GAP = r"(?:[ \t]+|[ \t]*\n[ \t]*(?:(?:#+|//|>|\*)[ \t]*)?)"
_ITEM = rf"{_NUM}(?:[ \t]*[-\u2013][ \t]*{_NUM})?"
_SEP = rf"(?:[ \t]*,{_GAP}(?:and{_GAP})?|{_GAP}and{_GAP})"
CITATION = re.compile(
    rf"docs/protocol\.md`?,?{_GAP}\(?(?:(?:sections?|§){_GAP})?"
    rf"(?P<items>{_ITEM}(?:{_SEP}{_ITEM})*)")
_SPLIT = re.compile(_SEP)
_RANGE = re.compile(rf"^({_NUM})[ \t]*[-\u2013][ \t]*({_NUM})$")
HEADING = re.compile(r"^#{2,4}[ \t]+(\d+(?:\.\d+)*)\.?[ \t]+\S", re.M)


def _key(number):
    return tuple(int(part) for part in number.split("."))


def expand(item):
    """The section numbers one cited item stands for: ``4.3`` -> [4.3]; a range ``1-5`` or
    ``1.1-1.3`` -> every number from one end to the other when both ends differ only in their
    last part; any other range (``1-4.5``) -> its two ends."""
    match = _RANGE.match(item)
    if not match:
        return [item]
    start, end = match.groups()
    a, b = _key(start), _key(end)
    if len(a) == len(b) and a[:-1] == b[:-1] and a[-1] <= b[-1]:
        prefix = ".".join(str(x) for x in a[:-1])
        return [f"{prefix}.{n}" if prefix else str(n) for n in range(a[-1], b[-1] + 1)]
    return [start, end]


def citations(text):
    """``(line, item, [section numbers])`` of every protocol citation in ``text``."""
    found = []
    for match in CITATION.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        for item in _SPLIT.split(match.group("items")):
            item = item.strip()
            if item:
                found.append((line, item, expand(item)))
    return found


def headings(text):
    """The section numbers of the numbered headings (``## 4. ...``, ``### 4.3 ...``)."""
    return HEADING.findall(text)


def bad_citations(text, sections):
    """``(line, item)`` of every citation in ``text`` naming a section not in ``sections``, or a
    range that runs backwards."""
    bad = []
    for line, item, numbers in citations(text):
        ends = _RANGE.match(item)
        backwards = ends and _key(ends.group(1)) > _key(ends.group(2))
        if backwards or any(n not in sections for n in numbers):
            bad.append((line, item))
    return bad


# --- The parser on small strings -----------------------------------------------------------------

SECTIONS = {"1", "1.1", "1.2", "1.3", "1.4", "1.5", "1.6", "2", "2.1", "2.2", "2.3", "3", "4",
            "4.1", "4.3", "4.5", "5", "5.1", "8"}


@pytest.mark.parametrize("text, items", [
    (f"the LFSR ({DOC_NAME} 4.3).", ["4.3"]),
    (f"see {DOC_NAME} section 5.", ["5"]),
    (f"({DOC_NAME} 2.1, 5): dropped", ["2.1", "5"]),
    (f"{DOC_NAME} sections 1-2 per header record", ["1-2"]),
    (f"one configuration port ({DOC_NAME} sections 1, 2, 5 and 8).", ["1", "2", "5", "8"]),
    (f"golden model ({DOC_NAME} 2.1, 2.2, 4.4, 4.6 and 5)", ["2.1", "2.2", "4.4", "4.6", "5"]),
    (f"{DOC_NAME} 1.4's table", ["1.4"]),
    (f"{DOC_NAME} 1-4.5, 8); golden", ["1-4.5", "8"]),
    (f"the order of {DOC_NAME} section 5\n    and emits", ["5"]),
    (f"# checks of {DOC_NAME}\n# section 3 and more", ["3"]),
    (f"`{DOC_NAME}` states it in the project's words", []),
    (f"`{DOC_NAME}`, \"the profile\"", []),
    (f"{DOC_NAME} sections 6 and 7.", ["6", "7"]),
])
def test_parser_reads_citations(text, items):
    assert [item for _, item, _ in citations(text)] == items


def test_parser_expands_ranges():
    assert expand("1-2") == ["1", "2"]
    assert expand("1.1-1.3") == ["1.1", "1.2", "1.3"]
    assert expand("4.1-4.6") == ["4.1", "4.2", "4.3", "4.4", "4.5", "4.6"]
    assert expand("1-4.5") == ["1", "4.5"]
    assert expand("5") == ["5"]


def test_parser_finds_bad_citations():
    assert bad_citations(f"x ({DOC_NAME} 4.3). y {DOC_NAME} sections 1-2.", SECTIONS) == []
    assert bad_citations(f"bad ({DOC_NAME} 4.9).", SECTIONS) == [(1, "4.9")]
    assert bad_citations(f"ok\n{DOC_NAME} 2.1, 9", SECTIONS) == [(2, "9")]
    assert bad_citations(f"{DOC_NAME} sections 1.1-1.7", SECTIONS) == [(1, "1.1-1.7")]
    assert bad_citations(f"{DOC_NAME} sections 5-1", SECTIONS) == [(1, "5-1")]
    assert bad_citations(f"{DOC_NAME} section 4.2", SECTIONS) == [(1, "4.2")]


def test_parser_reads_headings():
    text = "# Title\n\n## 1. Data packet\n\n### 1.1 Outer IPv6\n\n#### 4.3.1 Detail\n## Notes\n"
    assert headings(text) == ["1", "1.1", "4.3.1"]


# --- The repository's citations ------------------------------------------------------------------

def repository_files():
    """The repository's .py, .md and .yaml files: tracked and untracked, not ignored (git), or a
    walk that skips .git, .venv and build when git is not there."""
    suffixes = (".py", ".md", ".yaml", ".yml")
    try:
        out = subprocess.run(
            ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
            cwd=ROOT, capture_output=True, check=True).stdout.decode()
        paths = [ROOT / p for p in out.split("\0") if p.endswith(suffixes)]
    except (OSError, subprocess.CalledProcessError):
        skip = {".git", ".venv", "build", "__pycache__", ".pytest_cache", ".hypothesis"}
        paths = [p for p in ROOT.rglob("*") if p.suffix in suffixes
                 and not skip.intersection(p.relative_to(ROOT).parts)]
    return sorted(p for p in paths if p.is_file())


def test_every_citation_names_a_section():
    sections = set(headings(PROTOCOL.read_text()))
    bad, count = [], 0
    for path in repository_files():
        text = path.read_text(errors="replace")
        count += len(citations(text))
        bad += [f"{path.relative_to(ROOT)}:{line}: {DOC_NAME} {item}"
                for line, item in bad_citations(text, sections)]
    assert count > 50, f"only {count} citations found: is the parser broken?"
    assert not bad, "citations of sections that docs/protocol.md does not have:\n" + "\n".join(bad)


# --- The protocol document -----------------------------------------------------------------------

REQUIRED = ["1", "1.1", "1.2", "1.3", "1.4", "1.5", "1.6", "2", "2.1", "2.2", "2.3", "3", "4",
            "4.1", "4.2", "4.3", "4.4", "4.5", "4.6", "5", "5.1", "6", "7", "8"]


def test_protocol_has_the_profile_sections_in_order():
    found = headings(PROTOCOL.read_text())
    missing = [n for n in REQUIRED if n not in found]
    assert not missing, f"docs/protocol.md lacks sections {missing}"
    assert len(found) == len(set(found)), "a section number is used twice"
    assert found == sorted(found, key=_key), "sections are out of order"
    top = [n for n in found if "." not in n]
    assert top[:8] == [str(n) for n in range(1, 9)], "sections 1 to 8 must come first"


def test_protocol_sections_have_the_profile_titles():
    text = PROTOCOL.read_text()
    for number, words in [("1", "Data packet"), ("1.6", "ICRC"), ("2.1", "SACK"), ("2.2", "NACK"),
                          ("2.3", "probe"), ("3", "uSID"), ("4.3", "Choice"), ("5", "Reliability"),
                          ("5.1", "NSCC"), ("6", "DSCP"), ("7", "Trimming switch"),
                          ("8", "Hardware conventions"), ("9", "Deviations"),
                          ("10", "Open points")]:
        pattern = rf"^#{{2,3}}[ \t]+{re.escape(number)}\.?[ \t]+.*{re.escape(words)}"
        assert re.search(pattern, text, re.M | re.I), f"section {number} should be about {words}"


def v1_marks(text):
    """The "v1 today" marks: each a quoted block starting with **v1 today:** or **v1 today in the
    RTL:**."""
    marks = []
    for match in re.finditer(r"^> \*\*v1 today(?: in the RTL)?:\*\*.*(?:\n>.*)*", text, re.M):
        marks.append(re.sub(r"\n>\s?", " ", match.group(0)))
    return marks


def test_v1_today_marks_name_existing_code():
    marks = v1_marks(PROTOCOL.read_text())
    assert marks, "no v1 today marks: remove this test once the code implements profile 2"
    for mark in marks:
        paths = re.findall(r"`((?:models|rtl|tb|sim|verif|fpga|bench)/[\w/]+\.(?:py|json|md))`",
                           mark)
        assert paths, f"a v1 today mark names no code file: {mark[:80]}"
        missing = [p for p in paths if not (ROOT / p).exists()]
        assert not missing, f"a v1 today mark names files that do not exist: {missing}"


def test_protocol_marks_version_2_rules():
    text = PROTOCOL.read_text()
    assert text.count("(v2)") >= 20
    assert "Changes from version 1" in text or "changed from version 1" in text


# --- docs/metrics.md -----------------------------------------------------------------------------

TERMS = ["throughput", "bubble", "latency", "resources", "fmax", "median of three seeds",
         "line rate", "goodput of a flow", "aggregate goodput", "lone-flow goodput",
         "lone-flow floor", "capacity share", "loss caused by a failure",
         "time to route around a fault", "bottleneck goodput", "time 0", "goodput series",
         "pre-fault level", "fairness", "jain"]


def test_metrics_defines_every_term():
    text = METRICS.read_text()
    bold = [b.lower() for b in re.findall(r"\*\*(.+?)\*\*", text, re.S)]
    missing = [t for t in TERMS if not any(t in b for b in bold)]
    assert not missing, f"docs/metrics.md does not define (in bold) {missing}"
    for formula in ("2 / (P x S x T)", "(x_1 + ... + x_n)^2 / (n (x_1^2 + ... + x_n^2))",
                    "0.9", "5%", "2 us", "5 us"):
        assert formula in text, f"docs/metrics.md lacks {formula!r}"


# --- docs/toolchain.md ---------------------------------------------------------------------------

def test_toolchain_names_every_pin():
    text = TOOLCHAIN.read_text()
    with open(ROOT / "pyproject.toml", "rb") as f:
        pins = tomllib.load(f)["project"]["optional-dependencies"]["dev"]
    missing = [pin for pin in pins if pin.split("==")[1] not in text]
    assert not missing, f"docs/toolchain.md does not give the versions of {missing}"
    for word in ("AMARANTH_USE_YOSYS=builtin", "OPENFPGALOADER=true", "ccache", "liblz4-dev",
                 "cocotb_tools.runner", "5.006", "Icarus", "tshark", "yices", "3.11"):
        assert word in text, f"docs/toolchain.md lacks {word!r}"
