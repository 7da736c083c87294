# SPDX-License-Identifier: BSD-2-Clause
"""verif.coverage: bins hit in several processes merge into one table; unknown bins refused."""

import pytest

from verif import coverage


def test_merge_and_table(tmp_path, monkeypatch):
    monkeypatch.setattr(coverage, "COVERAGE_DIR", tmp_path)
    monkeypatch.setattr(coverage, "_counts", coverage.Counter())
    monkeypatch.setenv("MRC_BENCH", "a")
    coverage.hit("plane", "down")
    coverage.hit_counts("receive drop (5)", {"icrc": 2, "not a bin": 5, "short": 0})
    coverage.flush()
    (tmp_path / "b.json").write_text('{"bench": "b", "hits": [["plane", "down", 3], '
                                     '["QP", "error", 1]]}')
    counts, benches = coverage.merge(tmp_path)
    assert counts[("plane", "down")] == 4 and benches[("plane", "down")] == {"a", "b"}
    assert counts[("receive drop (5)", "icrc")] == 2
    assert ("receive drop (5)", "short") not in counts
    text, missed = coverage.table(counts)
    assert "| plane | 1 | 2 | 50 | up |" in text and "| QP | 1 | 1 | 100 | - |" in text
    assert ("plane", "up") in missed and ("QP", "error") not in missed


def test_unknown_bin_refused():
    with pytest.raises(KeyError):
        coverage.hit("plane", "sideways")
