# amaranth: UnusedElaboratable=no
# SPDX-License-Identifier: BSD-2-Clause
"""CI builds one ECP5 and the iCE40 bitstream (issue 7): the frame loop of the self-test core on
the iCEBreaker (iCE40 UP5K) and on the ULX3S (ECP5 LFE5U-85F), through amaranth-boards and the
YoWASP tools that ``make setup`` installs, a few minutes on one core. The large builds (the NIC
loop on ULX3S and OrangeCrab, about 20 minutes each) are ``make fpga BOARD=...`` and ``.ci/fpga``.

A build is cached in ``build/fpga/<board>/`` by the digest of everything Amaranth writes for the
tools, so a second run in the same tree only reads the result back; a fresh clone builds.
"""

import pytest

from fpga import boards


# The rebuilt header inserter ([tx-speed]) holds the next record's header beside the one it
# emits (2 x 1,200 flip-flops where the old one shifted a single register), and on the UP5K a
# flip-flop without its own LUT takes a logic cell: the iCEBreaker's frame loop needs 5,447 of
# 5,280 (it used 4,777). A reduced inserter for that board is [nic-fit]'s (item 4).
ICEBREAKER_DOES_NOT_FIT = pytest.mark.xfail(
    strict=True, reason="the frame loop needs 5,447 of the UP5K's 5,280 logic cells since the "
                        "header inserter's rebuild")


@pytest.mark.parametrize("name", [pytest.param("icebreaker", marks=ICEBREAKER_DOES_NOT_FIT),
                                  "ulx3s_frame"])
def test_bitstream_builds_and_meets_its_clock(name):
    res = boards.build(name)
    assert res["status"] == "built", res.get("message")
    assert res["bitstream_bytes"] > 50_000, res
    board = boards.BOARDS[name]
    assert res["device"].startswith("iCE40" if board.family == "ice40" else "LFE5U"), res
    # every count came back from the tools, and the core fits with room to spare
    used, available = res["logic"]
    assert 0 < res["lut4"] <= used <= available, res
    assert res["ff"] > 0, res
    # the board's clock is one its core closes timing at (nextpnr's Fmax, the same seed each run)
    assert res["timing_met"], f"{name}: Fmax {res['fmax_mhz']} MHz < {res['target_mhz']} MHz"
