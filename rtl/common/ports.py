# SPDX-License-Identifier: BSD-2-Clause
"""Port conventions at block boundaries (docs/protocol.md section 8).

Frame streams and record streams are ``amaranth.lib.stream`` interfaces (:mod:`rtl.common.stream`):
a block declares ``**axis_members("s_axis", W, U, sink=True)`` (a member ``s_axis`` of
``axis(W, U)``) or ``**record_members("m_hdr", TX_HEADER, sink=False)`` and uses
``self.s_axis.p.data``, ``self.s_axis.valid``, ``self.m_hdr.p``, ``self.m_hdr.ready``; composite
blocks join their parts with ``wiring.connect``. At the Verilog top,
:class:`rtl.common.flat_top.FlatTop` gives them AXI-Stream names: ``<prefix>_tdata``, ``_tkeep``,
``_tlast``, ``_tvalid``, ``_tready``, ``_tuser`` (``s_axis`` into a block, ``m_axis`` out of it),
so cocotbext-axi and users' tools attach directly; a record stream is ``<prefix>_tdata`` (the
record packed as in :mod:`models.records`, first field at bit 0), ``_tvalid`` and ``_tready``.
``tkeep`` is all ones on every beat but the last; on the last beat it is contiguous from lane 0.
``tuser`` bits are per frame (see :class:`models.records.FrameUser`). An input that faces a link
and never backpressures is ``always_ready`` (no ``tready``).

Streams follow the ``amaranth.lib.stream`` rules: ``valid`` never waits for ``ready``, and the
payload is stable from ``valid`` until the beat is accepted.

The configuration port is ``cfg_addr``, ``cfg_wdata``, ``cfg_we`` in and ``cfg_rdata`` out; see
:mod:`rtl.common.config`.
"""

from amaranth.lib import stream
from amaranth.lib.wiring import In, Out

from .stream import Beat, check_data_width, record_stream

__all__ = ["axis_members", "record_members", "config_members", "check_width"]


def check_width(name, data_width, allowed=(64, 128, 256, 512)):
    check_data_width(name, data_width, allowed)


def axis_members(prefix, data_width, user_width=1, *, sink, dest_width=0, always_ready=False):
    """``{prefix: In/Out(axis)}``: a frame stream port; ``sink=True`` for an input
    (``s_axis``). ``always_ready`` for an input that never backpressures (no ``tready``)."""
    signature = stream.Signature(Beat(data_width, user_width, dest_width),
                                 always_ready=always_ready)
    return {prefix: (In if sink else Out)(signature)}


def record_members(prefix, shape, *, sink):
    """``{prefix: In/Out(record_stream(shape))}``: a record stream carrying ``shape`` (a record,
    a layout or a width)."""
    return {prefix: (In if sink else Out)(record_stream(shape))}


def config_members(addr_width=16):
    return {
        "cfg_addr": In(addr_width),
        "cfg_wdata": In(32),
        "cfg_we": In(1),
        "cfg_rdata": Out(32),
    }
