# SPDX-License-Identifier: BSD-2-Clause
"""rtl.gen: every registered top converts to Verilog, the filelist compiles as a whole, and a
failing entry is reported without stopping the others."""

import re
import shutil
import subprocess

import pytest

from rtl import gen

REQUIRED = ("tick_generator", "header_inserter", "un_stage")


@pytest.mark.full
def test_every_top_converts_and_the_filelist_compiles(tmp_path, capsys):
    """Every top (about 13 minutes on a loaded 2-core machine: the NIC tops are large; each
    block's own bench converts it anyway, so ``make test`` runs the small set below)."""
    converts_and_compiles(tmp_path, capsys, list(gen.TOPS))


def test_small_tops_convert_and_the_filelist_compiles(tmp_path, capsys):
    converts_and_compiles(tmp_path, capsys, list(REQUIRED))


def converts_and_compiles(tmp_path, capsys, names):
    assert set(REQUIRED) <= set(gen.TOPS)
    args = [] if names == list(gen.TOPS) else names
    assert gen.main(["--out", str(tmp_path), *args]) == 0, capsys.readouterr().err
    files = (tmp_path / gen.FILELIST).read_text().split()
    assert files == [str((tmp_path / f"{name}.v").resolve()) for name in names]
    for name in names:
        text = (tmp_path / f"{name}.v").read_text()
        assert re.search(rf"^module {name}\(", text, re.M), f"no top module {name}"
        assert text.startswith(gen.LICENCE_NOTICE), f"{name}.v lacks the licence notice"
    if shutil.which("iverilog"):
        # All tops together: no module name is defined twice, and every file parses.
        result = subprocess.run(["iverilog", "-o", str(tmp_path / "all.vvp"), "-c",
                                 str(tmp_path / gen.FILELIST)], capture_output=True, text=True)
        assert result.returncode == 0, result.stderr


def test_a_failing_entry_is_reported_and_the_others_written(tmp_path, capsys):
    tops = {
        "tick_generator": gen.TOPS["tick_generator"],
        "missing": gen.top("rtl.no_such_block", "NoSuchBlock"),
        "bad_params": gen.top("rtl.tick_generator", "TickGenerator", clk_hz=0),
    }
    assert gen.main(["--out", str(tmp_path)], tops=tops) == 1
    err = capsys.readouterr().err
    assert "FAILED missing (rtl.no_such_block.NoSuchBlock()): ModuleNotFoundError" in err
    assert "FAILED bad_params" in err and "ValueError" in err and "clk_hz" in err
    assert (tmp_path / gen.FILELIST).read_text().split() == [
        str((tmp_path / "tick_generator.v").resolve())]


def test_selected_names_and_list(tmp_path, capsys):
    assert gen.main(["--out", str(tmp_path), "tick_generator"]) == 0
    assert [p.name for p in tmp_path.glob("*.v")] == ["tick_generator.v"]
    assert gen.main(["--list"]) == 0
    listing = capsys.readouterr().out
    assert "TickGenerator(clk_hz=250000000)" in listing
    assert "HeaderInserter(data_width=64)" in listing
    with pytest.raises(SystemExit):
        gen.main(["--out", str(tmp_path), "no_such_top"])
