# SPDX-License-Identifier: BSD-2-Clause
"""docs/architecture.md stays true: record tables equal the records, named files exist, and every
block marked built has its RTL, model and bench."""

import re

import pytest

from docs import records as doc_records
from models import records
from project import ROOT

TEXT = doc_records.DOC.read_text()


def section(record_name):
    """The lines of the document under the heading of one record, up to the next heading."""
    match = re.search(rf"^#### `{record_name}` \((\d+) bits\)\n(.*?)(?=^#)", TEXT, re.M | re.S)
    assert match, f"no section for record {record_name}"
    return int(match.group(1)), match.group(2)


def test_generated_section_is_current():
    assert doc_records.main(["--check"]) == 0, "run: python -m docs.records --write"


@pytest.mark.parametrize("record", records.ALL_RECORDS, ids=lambda r: r.name)
def test_every_field_of_every_record_is_listed(record):
    width, body = section(record.name)
    assert width == record.width
    rows = re.findall(r"^\| `(\w+)` \| (\d+):(\d+) \| (\d+) \|$", body, re.M)
    assert [name for name, *_ in rows] == record.names
    for name, msb, lsb, bits in rows:
        assert int(bits) == record.widths[name]
        assert (int(msb), int(lsb)) == (record.offsets[name] + record.widths[name] - 1,
                                        record.offsets[name])


def test_every_code_and_tuser_bit_is_listed():
    for cls in doc_records.ENUMS:
        for name, value in vars(cls).items():
            if name.isupper():
                assert f"| `{cls.__name__}` | `{name}` | {value} |" in TEXT
    assert f"| {records.FrameUser.BAD} | `BAD` |" in TEXT


def test_named_files_exist():
    paths = set(re.findall(r"`((?:rtl|models|tb|sim|docs)/[\w/]+\.py)", TEXT))
    assert paths
    missing = sorted(p for p in paths if not (ROOT / p).exists())
    assert not missing, f"docs/architecture.md names files that do not exist: {missing}"


BLOCKS_TABLE = TEXT[TEXT.index("## 1. Blocks"):TEXT.index("## 2.")]


def test_every_rtl_file_is_in_the_blocks_table():
    """A new block under rtl/ must be added to the document."""
    files = [p.name for p in (ROOT / "rtl").glob("*.py") if p.name not in ("__init__.py", "gen.py",
                                                                          "regmap.py")]
    missing = sorted(name for name in files if f"`rtl/{name}`" not in BLOCKS_TABLE)
    assert not missing, f"add these blocks to docs/architecture.md section 1: {missing}"


def test_built_blocks_have_rtl_model_and_bench():
    table = BLOCKS_TABLE
    built = 0
    for row in table.splitlines():
        cells = [c.strip() for c in row.strip("|").split("|")]
        if len(cells) == 7 and cells[3] == "built":
            built += 1
            rtl, model, bench = cells[4:]
            assert rtl.startswith("`rtl/") and model.startswith("`models/") and \
                bench.startswith("`tb/test_"), row
        elif len(cells) == 7 and cells[0] not in ("block", "---"):
            assert cells[3].startswith("planned"), row
    assert built >= 3
