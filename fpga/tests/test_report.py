# SPDX-License-Identifier: BSD-2-Clause
"""fpga.report: ``--collect`` takes only results built from the current Verilog, the options
reach fpga.flow.run (no tool is run), and the table names the pin wrapper only where it was
placed."""

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
    monkeypatch.setattr(report, "_verilog", lambda name, top, factory: VERILOG)


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

    def fake_run(text, top, device, build_dir, pnr_timeout=None):
        seen.append(pnr_timeout)
        return {"status": f"P&R not finished in {pnr_timeout:g} s", "lut4": 5, "cached": False}

    monkeypatch.setattr(flow, "run", fake_run)
    rows = report.measure(["fresh"], ["ecp5"], [], jobs=1, pnr_timeout=1500.0)
    assert seen == [1500.0] and rows[0]["status"] == "P&R not finished in 1500 s"
    assert "P&R not finished in 1500 s" in report.table(rows)


def test_table_names_the_pin_wrapper_only_where_it_was_placed():
    base = {"kind": "block", "target": "b", "device": "iCE40UP5K SG48", "lut4": 10, "ff": 5,
            "bram": 0, "wrapper_in_bits": 12, "synth_s": 1.0}
    placed = dict(base, status="fits", logic=[30, 5280], fmax_mhz=50.0, target_mhz=48)
    too_big = dict(base, status="does not fit", message="Yosys: 6000 LUT4 > 5280")
    rows = report.table([placed, too_big]).splitlines()[2:]
    assert "| 50.0 (48) | fits (P&R with the 12-bit pin wrapper) |" in rows[0]
    assert "does not fit: Yosys: 6000 LUT4 > 5280 |" in rows[1]
    assert "wrapper" not in rows[1]


def test_the_router1_blocks_get_their_own_key_and_a_note_in_the_table():
    assert report.device_for("un_stage", "ecp5").router == "router1"
    assert report.device_for("un_stage", "ice40") is flow.DEVICES["ice40"]
    assert report.device_for("placement", "ecp5") is flow.ECP5 and flow.ECP5.router == "router2"
    keys = {flow.result_key(VERILOG, "blk", report.device_for(n, "ecp5"))
            for n in ("un_stage", "placement")}
    assert len(keys) == 2
    row = {"kind": "block", "target": "un_stage", "status": "fits", "router": "router1"}
    assert "fits (nextpnr router1)" in report.table([row])
    with pytest.raises(ValueError, match="router3"):
        flow.ECP5.with_router("router3")


def test_a_router1_device_counts_ecp5_cells(tmp_path):
    stat = {"modules": {"\\blk": {"num_cells_by_type": {"LUT4": 10, "CCU2C": 3,
                                                       "TRELLIS_FF": 4, "DP16KD": 1}}}}
    for device in (flow.ECP5, report.device_for("un_stage", "ecp5")):
        summary = flow.yosys_summary(stat, device, "blk")
        assert (summary["lut4"], summary["ff"], summary["bram"]) == (16, 4, 1)
