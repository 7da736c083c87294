# SPDX-License-Identifier: BSD-2-Clause
"""Stream signatures every block uses at its ports (docs/protocol.md section 8), on
``amaranth.lib.stream``.

- :class:`Beat`: the payload of a frame stream, one beat: ``data`` (W bits), ``keep`` (W/8 bits),
  ``last`` (1) and, when asked for, ``user`` and ``dest``. ``keep`` is all ones on every beat but
  the last, and contiguous from lane 0 on the last; ``user`` bits are per frame
  (:class:`models.records.FrameUser`).
- :func:`axis`: ``stream.Signature(Beat(...))``, a frame stream.
- :func:`record_stream`: ``stream.Signature(layout)`` of a record of :mod:`models.records`
  (header records, control records, events; first field at bit 0).

A block declares ``"s_axis": In(axis(64, 1))`` or ``"m_hdr": Out(record_stream(TX_HEADER))`` and
composes its parts with ``wiring.connect``. At a Verilog top, :class:`rtl.common.flat_top.FlatTop`
(applied by :func:`rtl.gen.write_verilog`) renames them to the AXI-Stream names users and
cocotbext-axi expect: ``s_axis_tdata``, ``_tkeep``, ``_tlast``, ``_tuser``, ``_tdest``,
``_tvalid``, ``_tready``; a record stream gives ``<name>_tdata`` (the packed record),
``_tvalid`` and ``_tready``.

The rules are ``amaranth.lib.stream``'s: ``valid`` never waits for ``ready``, and the payload is
stable from ``valid`` until the beat is taken (``valid`` and ``ready`` high in one cycle).
"""

from amaranth.hdl import Const, Shape
from amaranth.lib import data, stream

from models.records import Record

from .records import layout

__all__ = ["Beat", "axis", "record_stream", "is_stream", "payload_shape", "check_data_width",
           "connect_beats", "DATA_WIDTHS"]

DATA_WIDTHS = (64, 128, 256, 512)


def check_data_width(owner, data_width, allowed=DATA_WIDTHS):
    """Raise a ``ValueError`` naming ``owner`` unless ``data_width`` is one of ``allowed``."""
    if data_width not in allowed:
        raise ValueError(f"{owner}: data_width must be one of {allowed}, not {data_width!r}")


class Beat(data.StructLayout):
    """The layout of one frame-stream beat: ``data`` (``data_width`` bits), ``keep``
    (``data_width // 8``), ``last`` (1), then ``user`` (``user_width``, if non-zero) and ``dest``
    (``dest_width``, if non-zero), from bit 0 up.

    Parameters
    ----------
    data_width : positive multiple of 8
    user_width, dest_width : int, at least 0 (default 0)
    """

    def __init__(self, data_width, user_width=0, dest_width=0):
        for name, value, low in (("data_width", data_width, 8), ("user_width", user_width, 0),
                                 ("dest_width", dest_width, 0)):
            if not isinstance(value, int) or value < low:
                raise ValueError(f"Beat: {name} must be an integer of at least {low}, "
                                 f"not {value!r}")
        if data_width % 8:
            raise ValueError(f"Beat: data_width must be a multiple of 8, not {data_width}")
        fields = {"data": data_width, "keep": data_width // 8, "last": 1}
        if user_width:
            fields["user"] = user_width
        if dest_width:
            fields["dest"] = dest_width
        super().__init__(fields)
        self.data_width, self.user_width, self.dest_width = data_width, user_width, dest_width

    def __repr__(self):
        return f"Beat({self.data_width}, user_width={self.user_width}, " \
               f"dest_width={self.dest_width})"


def axis(data_width, user_width=0, dest_width=0, *, always_ready=False):
    """The signature of a frame stream of :class:`Beat` payloads (seen from its source);
    ``always_ready`` for a stream that is never backpressured (an input facing a link)."""
    return stream.Signature(Beat(data_width, user_width, dest_width), always_ready=always_ready)


def record_stream(record):
    """The signature of a stream of ``record`` (a :class:`models.records.Record`, a layout, or a
    width in bits), seen from its source."""
    shape = layout(record) if isinstance(record, Record) else record
    Shape.cast(shape)
    return stream.Signature(shape)


def is_stream(member):
    """Whether a signature member is a stream (either direction); returns the source-side
    ``stream.Signature`` or ``None``."""
    if not member.is_signature:
        return None
    signature = member.signature
    if not isinstance(signature, stream.Signature):
        signature = signature.flip()
    return signature if isinstance(signature, stream.Signature) else None


def payload_shape(signature):
    """The payload shape of a ``stream.Signature``."""
    return signature.members["payload"].shape


def connect_beats(m, source, sink):
    """Join two frame streams whose :class:`Beat` layouts may differ in ``user`` (and ``dest``)
    and whose readiness may differ (an ``always_ready`` sink, such as an input facing a link):
    ``data``, ``keep``, ``last`` and ``valid`` go forward; a ``user`` or ``dest`` field the
    source lacks reaches the sink as 0, one the sink lacks is dropped; ``ready`` comes back (1
    for an ``always_ready`` sink). ``wiring.connect`` does the same for identical signatures
    and is preferred there. ``source`` and ``sink`` are the interfaces as the parent sees them
    (a part's output, a part's input, or ``wiring.flipped`` ports of the parent itself)."""
    src_fields, dst_fields = source.p.shape().members, sink.p.shape().members
    if src_fields["data"] != dst_fields["data"]:
        raise ValueError(f"connect_beats: data widths differ ({src_fields['data']} and "
                         f"{dst_fields['data']} bits)")
    for name in dst_fields:
        value = getattr(source.p, name) if name in src_fields else 0
        m.d.comb += getattr(sink.p, name).eq(value)
    m.d.comb += sink.valid.eq(source.valid)
    if not isinstance(source.ready, Const):
        m.d.comb += source.ready.eq(sink.ready)
