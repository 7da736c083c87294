# SPDX-License-Identifier: BSD-2-Clause
"""Header packing and field extraction for the RTL, driven by the tables of :mod:`models.layouts`.

Frames travel in AXI-Stream lane order: wire byte ``i`` of a beat sits in ``tdata[8*i+7:8*i]``.
A header of N bytes is therefore an 8N-bit vector with wire byte 0 in bits 7..0, and a big-endian
field is scattered over byte lanes. :func:`pack` and :func:`field` do that placement from the
layout table, so no block hard-codes an offset.
"""

from amaranth.hdl import Cat, Const, Value

__all__ = ["lane_bit", "pack", "field", "field_lanes"]


def lane_bit(wire_bit):
    """Vector bit index of the header bit ``wire_bit`` (0 = bit 7 of byte 0, as in the tables)."""
    byte, bit = divmod(wire_bit, 8)
    return byte * 8 + (7 - bit)


def pack(header, **values):
    """An 8*header.size-bit Value in lane order from field Values (missing fields are 0).

    Every value is truncated or zero-extended to its field's width.
    """
    for name in values:
        if name not in header:
            raise KeyError(f"{header.name} has no field {name!r}")
    bits = [None] * (header.size * 8)
    for f in header.fields:
        v = Value.cast(values.get(f.name, Const(0, f.width)))
        for k in range(f.width):
            # field bit k (k = 0 is the LSB) is wire bit offset + width - 1 - k
            bits[lane_bit(f.offset + f.width - 1 - k)] = v[k] if k < len(v) else Const(0, 1)
    return Cat(*bits)


def field(header, vector, name, base=0):
    """The Value of field ``name`` of ``header`` found in lane-ordered ``vector`` at byte ``base``."""
    f = header[name]
    first = base * 8 + f.offset
    return Cat(*[vector[lane_bit(first + f.width - 1 - k)] for k in range(f.width)])


def field_lanes(header, name, base=0):
    """Byte lanes (relative to the frame start) that field ``name`` occupies when the header sits
    at frame byte ``base``: useful to know in which beat of a W-bit stream a field arrives."""
    f = header[name]
    return range(base + f.offset // 8, base + (f.offset + f.width - 1) // 8 + 1)
