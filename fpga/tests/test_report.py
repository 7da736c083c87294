# SPDX-License-Identifier: BSD-2-Clause
"""fpga.report: ``--collect`` takes only results built from the current Verilog, the options
reach fpga.flow.run (no tool is run), the table names the pin wrapper only where it was
placed, states the median Fmax with its spread and seeds ("1 seed" for rows measured before),
marks the Gowin figures indicative and says when a place and route did not finish; new rows
replace their own in results.json and leave the others; the Gowin part is built where the ECP5
has no room."""

import json
from types import SimpleNamespace

import pytest

from fpga import flow, report

VERILOG = "module blk(clk);\n  input clk;\nendmodule\n"


def _fake_targets(monkeypatch, tmp_path):
    factory = SimpleNamespace(description="Blk()")
    monkeypatch.setattr(report, "REPORT_DIR", tmp_path)
    monkeypatch.setattr(report, "targets", lambda: {"fresh": ("blk", factory),
                                                    "stale": ("blk", factory)})
    monkeypatch.setattr(report, "_verilog", lambda name, top, factory, family: VERILOG)


def test_collect_skips_a_result_of_other_verilog(monkeypatch, tmp_path):
    _fake_targets(monkeypatch, tmp_path)
    for name, text in (("fresh", VERILOG), ("stale", VERILOG + "// older code\n")):
        (tmp_path / f"{name}-ecp5").mkdir()
        (tmp_path / f"{name}-ecp5" / "result.json").write_text(json.dumps(
            {"key": flow.result_key(text, "blk", flow.ECP5), "status": "fits", "lut4": 1}))
    rows = report.collect(["fresh", "stale"], ["ecp5"], [])
    assert [(r["target"], r["status"], r["config"]) for r in rows] == [("fresh", "fits", "Blk()")]
    assert "key" not in rows[0]


def test_pnr_timeout_option_reaches_the_flow(monkeypatch, tmp_path):
    _fake_targets(monkeypatch, tmp_path)
    seen = []

    def fake_run(text, top, device, build_dir, pnr_timeout=None, seeds=None):
        seen.append((pnr_timeout, seeds))
        return {"status": flow.not_finished(pnr_timeout), "lut4": 5, "cached": False}

    monkeypatch.setattr(flow, "run", fake_run)
    rows = report.measure(["fresh"], ["ecp5"], [], jobs=1, pnr_timeout=1800.0)
    assert seen == [(1800.0, flow.SEEDS)] and rows[0]["status"] == "did not finish in 30 min"
    assert "| did not finish in 30 min |" in report.table(rows)
    assert report.PNR_TIMEOUT == 1800 and flow.SEEDS == (1, 2, 3)


def test_table_names_the_pin_wrapper_only_where_it_was_placed():
    base = {"kind": "block", "target": "b", "device": "iCE40UP5K SG48", "lut4": 10, "ff": 5,
            "bram": 0, "wrapper_in_bits": 12, "synth_s": 1.0}
    placed = dict(base, status="fits", logic=[30, 5280], fmax_mhz=50.0, target_mhz=48)
    too_big = dict(base, status="does not fit", message="Yosys: 6000 LUT4 > 5280")
    rows = report.table([placed, too_big]).splitlines()[2:]
    assert "| 50.0 (48) | 1 seed | fits (P&R with the 12-bit pin wrapper) |" in rows[0]
    assert "does not fit: Yosys: 6000 LUT4 > 5280 |" in rows[1]
    assert "wrapper" not in rows[1]


def test_the_router1_blocks_get_their_own_key_and_a_note_in_the_table():
    assert report.device_for("rmw_36x1024", "ecp5").router == "router1"
    assert report.device_for("rmw_36x1024", "ice40") is flow.DEVICES["ice40"]
    assert report.device_for("placement", "ecp5") is flow.ECP5 and flow.ECP5.router == "router2"
    keys = {flow.result_key(VERILOG, "blk", report.device_for(n, "ecp5"))
            for n in ("rmw_36x1024", "placement")}
    assert len(keys) == 2
    row = {"kind": "block", "target": "rmw_36x1024", "status": "fits", "router": "router1"}
    assert "fits (nextpnr router1)" in report.table([row])
    with pytest.raises(ValueError, match="router3"):
        flow.ECP5.with_router("router3")


def test_a_router1_device_counts_ecp5_cells(tmp_path):
    stat = {"modules": {"\\blk": {"num_cells_by_type": {"LUT4": 10, "CCU2C": 3,
                                                       "TRELLIS_FF": 4, "DP16KD": 1}}}}
    for device in (flow.ECP5, report.device_for("rmw_36x1024", "ecp5")):
        summary = flow.yosys_summary(stat, device, "blk")
        assert (summary["lut4"], summary["ff"], summary["bram"]) == (16, 4, 1)


def test_the_table_states_the_median_the_spread_and_the_seeds():
    row = {"kind": "block", "target": "rmw", "device": "LFE5U-85F-6 CABGA381",
           "device_key": "ecp5", "status": "fits", "target_mhz": 125, "fmax_mhz": 201.73,
           "fmax_min": 200.4, "fmax_max": 201.78, "seeds": [1, 2, 3]}
    assert report.fmax_cells(row) == ("201.7 (125)", "200.4-201.8, seeds 1-3")
    assert "| 201.7 (125) | 200.4-201.8, seeds 1-3 | fits |" in report.table([row])
    assert report.fmax_cells(dict(row, seeds=[1, 3])) == ("201.7 (125)",
                                                           "200.4-201.8, seeds 1, 3")
    assert report.fmax_cells(dict(row, seeds=[2])) == ("201.7 (125)", "1 seed (seed 2)")
    legacy = {k: v for k, v in row.items() if k not in ("seeds", "fmax_min", "fmax_max")}
    assert report.fmax_cells(legacy) == ("201.7 (125)", "1 seed")
    board = {"kind": "board", "target": "ulx3s", "fmax_mhz": 25.11, "target_mhz": 15.0}
    assert report.fmax_cells(board) == ("25.1 (15.0)", "1 seed (board build)")
    assert report.fmax_cells({"kind": "block", "status": "does not fit"}) == ("", "")
    gowin = dict(row, device_key="gowin", fmax_mhz=382.7)
    assert report.fmax_cells(gowin)[0] == "382.7 (125), indicative"
    late = dict(row, unfinished_seeds=[3], message="seed 3 did not finish in 30 min")
    assert "| fits (seed 3 did not finish in 30 min) |" in report.table([late])


def test_new_rows_replace_their_own_and_keep_the_others():
    old = [{"kind": "block", "target": "tick_generator", "device_key": "ecp5", "fmax_mhz": 1},
           {"kind": "block", "target": "placement", "device_key": "ecp5", "fmax_mhz": 2},
           {"kind": "board", "target": "ulx3s", "fmax_mhz": 3}]
    new = [{"kind": "block", "target": "placement", "device_key": "ecp5", "fmax_mhz": 4},
           {"kind": "block", "target": "tick_generator", "device_key": "gowin", "fmax_mhz": 5},
           {"kind": "block", "target": "rmw_36x1024", "device_key": "ecp5", "fmax_mhz": 6}]
    rows = report.merge(old, new)
    assert [(r["target"], r.get("device_key"), r["fmax_mhz"]) for r in rows] == [
        ("tick_generator", "ecp5", 1), ("tick_generator", "gowin", 5), ("placement", "ecp5", 4),
        ("rmw_36x1024", "ecp5", 6), ("ulx3s", None, 3)]


def test_the_gowin_part_is_for_blocks_the_ecp5_cannot_hold(monkeypatch, tmp_path):
    assert report.gowin_wanted("nic_engine", {"status": "does not fit"})
    assert not report.gowin_wanted("placement", {"status": "fits"})
    assert report.gowin_wanted("tick_generator", {"status": "fits"})     # the flow's check
    assert report.gowin_wanted("placement", None)           # the ECP5 is not in this run
    _fake_targets(monkeypatch, tmp_path)
    built = []

    def fake_run(text, top, device, build_dir, pnr_timeout=None, seeds=None):
        built.append(device.key)
        return {"status": "fits", "lut4": 5, "cached": False}

    monkeypatch.setattr(flow, "run", fake_run)
    report.measure(["fresh"], ["ecp5", "gowin"], [], jobs=1)
    assert built == ["ecp5"]
    built.clear()
    report.measure(["fresh"], ["gowin"], [], jobs=1)
    assert built == ["gowin"]


def test_each_family_gets_its_own_verilog(monkeypatch, tmp_path):
    """The report writes a block's Verilog for the device's family: the block RAM is DP16KD on
    ECP5 and Amaranth's inferred memory elsewhere; a block without one is the same text."""
    monkeypatch.setattr(report, "REPORT_DIR", tmp_path)
    name, (top_name, factory) = "block_ram_36x1024", report.targets()["block_ram_36x1024"]
    ecp5 = report._verilog(name, top_name, factory, "ecp5")
    gowin = report._verilog(name, top_name, factory, "gowin")
    assert ecp5.count("DP16KD #(") == 2 and "REGMODE_B(\"OUTREG\")" in ecp5
    assert "DP16KD" not in gowin
    tick = report.targets()["tick_generator"]
    assert report._verilog("tick_generator", *tick, "ecp5") == \
        report._verilog("tick_generator", *tick, "ice40")
