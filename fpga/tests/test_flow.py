"""fpga.flow: port discovery, the pin wrapper and the parsing of Yosys and nextpnr output (the
tools themselves run in ``make report``)."""

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
