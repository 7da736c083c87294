# SPDX-License-Identifier: BSD-2-Clause
"""A pipelined CRC-32 over a wide beat stream, with only the 32-bit state in its loop: the one CRC
engine of the project (the header inserter's ICRC, the receive buffers' ICRC check;
docs/protocol.md 1.6 and section 8)."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import bits_for

from .crc import mat_apply, mat_vec, seed_state, update_matrix, zero_matrix

__all__ = ["Crc32Pipeline", "crc_beat_layout"]

_MASK32 = 0xFFFFFFFF


def crc_beat_layout(data_width):
    """The input beat: ``data`` (lane order), ``lead`` (bytes at the start of the ``first`` beat
    that the CRC does not cover), ``trail`` (bytes at the end of the ``last`` beat it does not
    cover), ``first``, ``last``."""
    lanes = data_width // 8
    return data.StructLayout({"data": data_width, "lead": bits_for(lanes - 1),
                              "trail": bits_for(lanes - 1), "first": 1, "last": 1})


class Crc32Pipeline(wiring.Component):
    """CRC-32 (the Ethernet polynomial, reflected, as zlib) of messages carried on a beat stream,
    one beat per cycle, at any width.

    A message is the beats from one with ``first`` to one with ``last`` (the same beat for a
    one-beat message); its CRC covers the ``prefix`` bytes (a constant, e.g. the ICRC's eight
    0xFF bytes), then every byte of its beats except the ``lead`` bytes at the start of its
    first beat and the ``trail`` bytes at the end of its last. Excluded bytes are zeroed and
    accounted for by constants (the seed) and by undoing zero bytes after the loop
    (:mod:`rtl.common.crc`), so the loop holds only the 32-bit state: ``s = M s ^ G d``, with
    ``G d`` computed (and registered) ahead of it.

    Parameters
    ----------
    data_width : multiple of 8 from 8 to 1024
    prefix : bytes (default 8 bytes of 0xFF, the RoCEv2 ICRC's)
    data_stages : 1 or 2 (default 1)
        Register stages in the data term ``G d`` (2 splits its XOR tree for wide beats).

    Ports
    -----
    i : In(stream.Signature(crc_beat_layout(data_width), always_ready=True))
        Beats; never backpressured.
    o : Out(stream.Signature(32, always_ready=True))
        The zlib value of each message (``zlib.crc32(prefix + covered bytes)``), ``valid`` for
        one cycle, in message order.

    Latency and throughput
    ----------------------
    One beat per cycle, back-to-back messages included (a one-beat message per cycle too).
    ``o`` is valid ``2 + data_stages + bits(lanes - 1)`` cycles after the cycle its last beat was
    offered (W = 64: 6 cycles; W = 512 with two data stages: 10): an input register, the data
    stages, the loop, then
    one conditional stage per bit of ``trail``.
    """

    def __init__(self, data_width, prefix=b"\xff" * 8, data_stages=1):
        if not isinstance(data_width, int) or data_width % 8 or not 8 <= data_width <= 1024:
            raise ValueError(f"Crc32Pipeline: data_width must be a multiple of 8 from 8 to 1024, "
                             f"not {data_width!r}")
        if data_stages not in (1, 2):
            raise ValueError(f"Crc32Pipeline: data_stages must be 1 or 2, not {data_stages!r}")
        self.data_width, self.prefix, self.data_stages = data_width, bytes(prefix), data_stages
        self.lanes = data_width // 8
        self.latency = self.latency_of(data_width, data_stages)
        super().__init__({
            "i": In(stream.Signature(crc_beat_layout(data_width), always_ready=True)),
            "o": Out(stream.Signature(32, always_ready=True)),
        })

    @staticmethod
    def latency_of(data_width, data_stages=1):
        """Cycles from a message's last beat offered to its value on ``o``."""
        return 2 + data_stages + bits_for(data_width // 8 - 1)

    def elaborate(self, platform):
        m = Module()
        W, lanes = self.data_width, self.lanes
        rows = update_matrix(lanes)
        state_rows = [row & _MASK32 for row in rows]
        data_rows = [row >> 32 for row in rows]
        beat = self.i.payload
        ctl_layout = data.StructLayout({"valid": 1, "first": 1, "last": 1,
                                        "lead": len(beat.lead), "trail": len(beat.trail)})

        # --- stage 0: the input, registered, with the excluded bytes zeroed -------------------
        z_data, z = Signal(W, name="crc_in"), Signal(ctl_layout, name="crc_in_ctl")
        kept = []
        for k in range(lanes):
            lead_ok = ~beat.first | (beat.lead <= k)
            trail_ok = ~beat.last | (beat.trail < lanes - k)
            kept.append(beat.data[8 * k:8 * k + 8] & (lead_ok & trail_ok).replicate(8))
        m.d.sync += [z_data.eq(Cat(*kept)), z.valid.eq(self.i.valid), z.first.eq(beat.first),
                     z.last.eq(beat.last), z.lead.eq(beat.lead), z.trail.eq(beat.trail)]

        # --- data stages: g = G d ----------------------------------------------------------------
        if self.data_stages == 1:
            g_value, ctl = mat_vec(m, data_rows, z_data, "crc_data"), z
        else:
            half = W // 2
            lo = mat_vec(m, [row & ((1 << half) - 1) for row in data_rows], z_data[:half],
                         "crc_data_lo")
            hi = mat_vec(m, [row >> half for row in data_rows], z_data[half:], "crc_data_hi")
            lo_r, hi_r = Signal(32, name="crc_lo"), Signal(32, name="crc_hi")
            ctl = Signal(ctl_layout, name="crc_mid_ctl")
            m.d.sync += [lo_r.eq(lo), hi_r.eq(hi), ctl.eq(z)]
            g_value = lo_r ^ hi_r
        # The first beat of a message starts from seed(lead) (the prefix folded in, the lead
        # bytes undone): its loop term M seed(lead) is a constant, chosen here.
        seeds = [mat_apply(state_rows, seed_state(self.prefix, lead)) for lead in range(lanes)]
        seed_table = Cat(*(Const(value, 32) for value in seeds))
        g, c = Signal(32, name="crc_g"), Signal(ctl_layout, name="crc_loop_ctl")
        first_term = Signal(32, name="crc_first")
        m.d.sync += [g.eq(g_value), c.eq(ctl),
                     first_term.eq(seed_table.word_select(ctl.lead, 32) if lanes > 1
                                   else seed_table)]

        # --- the loop: s = M s ^ g; the first beat of a message: M seed ^ g ---------------------
        state = Signal(32, name="crc_state")
        from_state = mat_vec(m, state_rows, state, "crc_loop")
        nxt = Signal(32, name="crc_next")
        m.d.comb += nxt.eq(Mux(c.first, first_term, from_state) ^ g)
        with m.If(c.valid):
            m.d.sync += state.eq(nxt)
        current, valid, trail = Signal(32, name="crc_raw"), Signal(), Signal.like(c.trail)
        m.d.sync += [current.eq(nxt), valid.eq(c.valid & c.last), trail.eq(c.trail)]

        # --- undo the trailing zero bytes: one registered stage per bit of trail ---------------
        for bit in range(len(trail)):
            undone = mat_vec(m, zero_matrix(-(1 << bit)), current, f"crc_unzero{bit}")
            n_state, n_valid = Signal(32, name=f"crc_u{bit}"), Signal(name=f"crc_u{bit}_valid")
            n_trail = Signal.like(trail, name=f"crc_u{bit}_trail")
            m.d.sync += [n_state.eq(Mux(trail[bit], undone, current)), n_valid.eq(valid),
                         n_trail.eq(trail)]
            current, valid, trail = n_state, n_valid, n_trail
        m.d.comb += [self.o.payload.eq(~current), self.o.valid.eq(valid)]
        return m
