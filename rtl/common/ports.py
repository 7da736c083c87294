# SPDX-License-Identifier: BSD-2-Clause
"""Port conventions at Verilog boundaries (docs/protocol.md section 8).

Frame streams use AXI-Stream names: ``<prefix>_tdata``, ``_tkeep``, ``_tlast``, ``_tvalid``,
``_tready``, ``_tuser`` (``s_axis`` into a block, ``m_axis`` out of it), so cocotbext-axi and
users' tools attach directly. ``tkeep`` is all ones on every beat but the last; on the last beat it
is contiguous from lane 0. ``tuser`` bits are per frame (see :class:`models.records.FrameUser`).

Record streams (header records, control records, events) are ``<prefix>_tdata`` (the record packed
as in :mod:`models.records`, first field at bit 0), ``_tvalid`` and ``_tready``.

Streams follow the ``amaranth.lib.stream`` rules: ``tvalid`` never waits for ``tready``, and the
payload is stable from ``tvalid`` until the beat is accepted.

The configuration port is ``cfg_addr``, ``cfg_wdata``, ``cfg_we`` in and ``cfg_rdata`` out; see
:mod:`rtl.common.config`.
"""

from amaranth.lib.wiring import In, Out

__all__ = ["axis_members", "record_members", "config_members", "check_width"]


def check_width(name, data_width, allowed=(64, 128, 256, 512)):
    if data_width not in allowed:
        raise ValueError(f"{name}: data_width must be one of {allowed}, not {data_width!r}")


def axis_members(prefix, data_width, user_width=1, *, sink, dest_width=0):
    """Members of an AXI-Stream frame port; ``sink=True`` for an input (``s_axis``)."""
    fwd, back = (In, Out) if sink else (Out, In)
    members = {
        f"{prefix}_tdata": fwd(data_width),
        f"{prefix}_tkeep": fwd(data_width // 8),
        f"{prefix}_tlast": fwd(1),
        f"{prefix}_tvalid": fwd(1),
        f"{prefix}_tready": back(1),
    }
    if user_width:
        members[f"{prefix}_tuser"] = fwd(user_width)
    if dest_width:
        members[f"{prefix}_tdest"] = fwd(dest_width)
    return members


def record_members(prefix, shape, *, sink):
    """Members of a record stream carrying ``shape`` (a layout or a width)."""
    fwd, back = (In, Out) if sink else (Out, In)
    return {
        f"{prefix}_tdata": fwd(shape),
        f"{prefix}_tvalid": fwd(1),
        f"{prefix}_tready": back(1),
    }


def config_members(addr_width=16):
    return {
        "cfg_addr": In(addr_width),
        "cfg_wdata": In(32),
        "cfg_we": In(1),
        "cfg_rdata": Out(32),
    }
