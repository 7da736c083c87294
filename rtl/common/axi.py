# SPDX-License-Identifier: BSD-2-Clause
"""AXI4 memory-mapped interface signatures (docs/protocol.md section 8: payload read from host
memory by an AXI4 read master, placed by an AXI4 write master), seen from the master.

Member names are the AXI4 signal names (``arid``, ``araddr``, ..., ``bready``); a block declares
``"m_axi": Out(axi4_read(C))`` and uses ``self.m_axi.araddr``; composite blocks join them with
``wiring.connect`` (or :func:`connect_halves` for a full master made of a read and a write half).
At a Verilog top, :class:`rtl.common.flat_top.FlatTop` names them ``m_axi_arid`` etc., as
cocotbext-axi's ``AxiBus.from_prefix(dut, "m_axi")`` expects. Every burst is INCR; no QoS,
region or user signals.
"""

from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["axi4_read", "axi4_write", "axi4", "connect_halves", "READ_NAMES", "WRITE_NAMES"]


def _read_members(data_width, addr_width, id_width):
    return {
        "arid": Out(id_width), "araddr": Out(addr_width), "arlen": Out(8), "arsize": Out(3),
        "arburst": Out(2), "arlock": Out(1), "arcache": Out(4), "arprot": Out(3),
        "arvalid": Out(1), "arready": In(1),
        "rid": In(id_width), "rdata": In(data_width), "rresp": In(2), "rlast": In(1),
        "rvalid": In(1), "rready": Out(1),
    }


def _write_members(data_width, addr_width, id_width):
    return {
        "awid": Out(id_width), "awaddr": Out(addr_width), "awlen": Out(8), "awsize": Out(3),
        "awburst": Out(2), "awlock": Out(1), "awcache": Out(4), "awprot": Out(3),
        "awvalid": Out(1), "awready": In(1),
        "wdata": Out(data_width), "wstrb": Out(data_width // 8), "wlast": Out(1),
        "wvalid": Out(1), "wready": In(1),
        "bid": In(id_width), "bresp": In(2), "bvalid": In(1), "bready": Out(1),
    }


def _check(owner, data_width, addr_width, id_width):
    if not isinstance(data_width, int) or data_width < 8 or data_width & (data_width - 1):
        raise ValueError(f"{owner}: data_width must be a power of two of at least 8, "
                         f"not {data_width!r}")
    for name, value in (("addr_width", addr_width), ("id_width", id_width)):
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"{owner}: {name} must be a positive integer, not {value!r}")


def axi4_read(data_width, addr_width=64, id_width=1):
    """An AXI4 read master (AR and R channels)."""
    _check("axi4_read", data_width, addr_width, id_width)
    return wiring.Signature(_read_members(data_width, addr_width, id_width))


def axi4_write(data_width, addr_width=64, id_width=1):
    """An AXI4 write master (AW, W and B channels)."""
    _check("axi4_write", data_width, addr_width, id_width)
    return wiring.Signature(_write_members(data_width, addr_width, id_width))


def axi4(data_width, addr_width=64, id_width=1):
    """A full AXI4 master (read and write channels)."""
    _check("axi4", data_width, addr_width, id_width)
    return wiring.Signature({**_read_members(data_width, addr_width, id_width),
                             **_write_members(data_width, addr_width, id_width)})


READ_NAMES = tuple(_read_members(8, 1, 1))
WRITE_NAMES = tuple(_write_members(8, 1, 1))


def connect_halves(m, full, read=None, write=None):
    """Join a full AXI4 master port ``full`` (an ``Out(axi4(...))`` member seen from outside, the
    way a composite block sees its own port) with the ``read`` half of one part and the
    ``write`` half of another. Widths must agree member by member (checked)."""
    for half, names in ((read, READ_NAMES), (write, WRITE_NAMES)):
        if half is None:
            continue
        members = half.signature.members
        for name in names:
            ours, theirs = getattr(full, name), getattr(half, name)
            if len(ours) != len(theirs):
                raise ValueError(f"connect_halves: {name} is {len(ours)} bits wide on the full "
                                 f"port and {len(theirs)} on the half")
            if members[name].flow == Out:
                m.d.comb += ours.eq(theirs)
            else:
                m.d.comb += theirs.eq(ours)
