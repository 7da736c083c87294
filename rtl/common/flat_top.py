# SPDX-License-Identifier: BSD-2-Clause
"""The Verilog face of a block: its stream ports under AXI-Stream names."""

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .stream import Beat, is_stream, payload_shape

__all__ = ["FlatTop", "flat_stream_members", "flat_group_members", "has_streams", "forward"]

# Beat field -> AXI-Stream suffix.
AXIS_FIELDS = {"data": "tdata", "keep": "tkeep", "last": "tlast", "user": "tuser", "dest": "tdest"}


def flat_stream_members(name, member):
    """``{flat name: (member, beat field or None, 'payload'|'valid'|'ready')}`` of stream member
    ``name``: a :class:`~rtl.common.stream.Beat` stream becomes ``<name>_tdata``, ``_tkeep``,
    ``_tlast`` (and ``_tuser``, ``_tdest`` when the beat has them), a record stream
    ``<name>_tdata`` (the packed record); both get ``_tvalid`` and, unless the stream is
    ``always_ready``, ``_tready``."""
    signature = is_stream(member)
    fwd, back = (In, Out) if member.flow == In else (Out, In)
    shape = payload_shape(signature)
    out = {}
    if isinstance(shape, Beat):
        for field, suffix in AXIS_FIELDS.items():
            if field in shape.members:
                out[f"{name}_{suffix}"] = (fwd(shape.members[field]), field, "payload")
    else:
        out[f"{name}_tdata"] = (fwd(shape), None, "payload")
    out[f"{name}_tvalid"] = (fwd(1), None, "valid")
    if not signature.always_ready:
        out[f"{name}_tready"] = (back(1), None, "ready")
    return out


def flat_group_members(name, member):
    """``{<name>_<sub>: member}`` of a non-stream interface member whose own members are ports
    (an AXI4 master: ``m_axi_araddr``, ...), with the directions seen from outside."""
    signature = member.signature
    out = {}
    for sub, inner in signature.members.items():
        if not inner.is_port:
            raise TypeError(f"FlatTop: member {name}.{sub} is itself an interface; only one level "
                            f"of nesting is flattened")
        out[f"{name}_{sub}"] = inner
    return out


def forward(m, outer, inner, member):
    """Wire ``inner`` (a part's member, as the parent sees it) to ``outer`` (the parent's own
    member of the same signature ``member``, as the parent sees itself): a port by one
    assignment in its direction, an interface (stream, AXI4 master, ...) by ``wiring.connect``,
    which also handles an ``always_ready`` stream's constant ``ready``."""
    if member.is_signature:
        if member.flow == In:
            wiring.connect(m, wiring.flipped(outer), inner)
        else:
            wiring.connect(m, inner, wiring.flipped(outer))
    elif member.flow == In:
        m.d.comb += inner.eq(outer)
    else:
        m.d.comb += outer.eq(inner)


def has_streams(component):
    """Whether ``component`` has a stream or another interface port (so its Verilog top needs
    :class:`FlatTop`)."""
    return any(is_stream(member) or member.is_signature
               for member in component.signature.members.values())


class FlatTop(wiring.Component):
    """``inner`` with every stream port renamed for Verilog: ``s_axis: In(axis(64, 1))`` becomes
    ``s_axis_tdata``, ``s_axis_tkeep``, ``s_axis_tlast``, ``s_axis_tuser``, ``s_axis_tvalid``
    and ``s_axis_tready``; a record stream ``m_hdr`` becomes ``m_hdr_tdata`` (the packed record),
    ``m_hdr_tvalid`` and ``m_hdr_tready``; another interface (an AXI4 master ``m_axi``) becomes
    ``m_axi_arid``, ``m_axi_araddr``, .... Every other member is kept as it is (same name,
    direction and shape) and wired straight through. Pure wiring: no logic, no latency.

    Parameters
    ----------
    inner : wiring.Component

    Ports
    -----
    The flat members described above, ``inner``'s other members, and ``clk``, ``rst``.
    """

    def __init__(self, inner):
        if not isinstance(inner, wiring.Component):
            raise TypeError(f"FlatTop: inner must be a wiring.Component, not "
                            f"{type(inner).__name__}")
        self.inner = inner
        self._streams = {}
        self._groups = {}
        members = {}

        def add(key, member):
            if key in members:
                raise ValueError(f"FlatTop: {type(inner).__name__} has two members named "
                                 f"{key!r} once its streams are flattened")
            members[key] = member

        for name, member in inner.signature.members.items():
            if is_stream(member):
                flat = flat_stream_members(name, member)
                self._streams[name] = flat
                for key, value in flat.items():
                    add(key, value[0])
            elif member.is_signature:
                # Another interface (an AXI4 master, ...): one level flat, ``<name>_<member>``.
                flat = flat_group_members(name, member)
                self._groups[name] = flat
                for key, value in flat.items():
                    add(key, value)
            else:
                add(name, member)
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        inner = self.inner
        m.submodules.inner = inner
        for name, flat in self._streams.items():
            port = getattr(inner, name)
            for key, (member, field, part) in flat.items():
                ours = getattr(self, key)
                theirs = getattr(port.payload, field) if field else getattr(port, part)
                m.d.comb += theirs.eq(ours) if member.flow == In else ours.eq(theirs)
        for name, flat in self._groups.items():
            port = getattr(inner, name)
            for key, member in flat.items():
                ours, theirs = getattr(self, key), getattr(port, key[len(name) + 1:])
                m.d.comb += theirs.eq(ours) if member.flow == In else ours.eq(theirs)
        outer = {path: value for path, _, value in self.signature.flatten(self)}
        for path, member, value in inner.signature.flatten(inner):
            if path[0] in self._streams or path[0] in self._groups:
                continue
            if member.flow == In:
                m.d.comb += value.eq(outer[path])
            else:
                m.d.comb += outer[path].eq(value)
        return m
