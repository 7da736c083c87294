# amaranth: UnusedElaboratable=no
# SPDX-License-Identifier: BSD-2-Clause
"""fpga.boards: every board's platform exists, its PLL can make its core clock from its
oscillator, and its self-test configuration is accepted (the builds themselves run in
``make fpga``)."""

import pytest
from amaranth.hdl import Elaboratable

from fpga import boards
from fpga.pll import ecp5_pll, ice40_pll


def _silence(obj, seen=None):
    """Mark ``obj`` and every elaboratable it holds as used: the test builds the cores but does
    not elaborate them (the NIC's blocks make their sub-blocks in their constructors)."""
    seen = set() if seen is None else seen
    if id(obj) in seen or not isinstance(obj, Elaboratable):
        return
    seen.add(id(obj))
    obj._MustUse__silence = True
    for value in vars(obj).values():
        for item in value if isinstance(value, (list, tuple)) else (value,):
            _silence(item, seen)


@pytest.mark.parametrize("name", sorted(boards.BOARDS))
def test_board_is_buildable_in_principle(name):
    board = boards.BOARDS[name]
    platform = boards._platform(board)
    f_in = platform.lookup(platform.default_clk).clock.frequency / 1e6
    pll = ecp5_pll if board.family == "ecp5" else ice40_pll
    assert abs(pll(f_in, board.clk_mhz)["f_out"] - board.clk_mhz) < 0.01 * board.clk_mhz
    top = boards.BoardTop(board)
    _silence(top.core)
    if board.nic:
        assert top.core.params["n_planes"] == 1 and top.core.params["n_qps"] == 1
    else:
        assert top.core.config.data_width == board.core["data_width"]
    assert platform.lookup(*board.button) is not None
    if board.uart:
        assert platform.lookup("uart", 0) is not None


def test_the_ice40_board_has_no_switch_and_the_ecp5_ones_do():
    """The UP5K cannot hold a switch; every ECP5 switch-loop board has one, except
    ``ulx3s_frame``, the iCEBreaker's frame loop on ECP5 (the quick ECP5 build of ``make test``)."""
    for name, board in boards.BOARDS.items():
        if board.family == "ice40":
            assert board.core["ports"] == 0
        elif name == "ulx3s_frame":
            assert board.core == boards.BOARDS["icebreaker"].core
        elif not board.nic:
            assert board.core["ports"] >= 2


def test_the_nic_core_is_offered_on_the_large_ecp5_boards_only():
    """A NIC engine cannot fit the UP5K (5,280 LUTs) nor, with the switch, the LFE5U-25F."""
    nic_boards = {name for name, board in boards.BOARDS.items() if board.nic}
    assert nic_boards == {"ulx3s", "orangecrab"}
    assert all(boards.BOARDS[name].family == "ecp5" for name in nic_boards)


def test_cli_lists_the_boards(capsys):
    assert boards.main(["--list"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in boards.BOARDS)
    with pytest.raises(SystemExit):
        boards.main(["no_such_board"])
