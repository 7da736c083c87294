"""fpga.report: ``--collect`` takes only results built from the current Verilog, and the
options reach fpga.flow.run (no tool is run)."""

import json
from types import SimpleNamespace

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
