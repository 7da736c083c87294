# SPDX-License-Identifier: BSD-2-Clause
"""Stream-contract harnesses of the transmit-side blocks (issue [verify] item 1), for
:func:`verif.formal.check`: the header inserter, the plane splitter, the fault-injectable link
and path building (``TxPath``).

Each function returns ``(module, ports, depths)`` as in :mod:`verif.formal_tx`: the harness, its
free inputs and the depths of the modes that pass. Every harness leaves the block's configuration
port and ``rst`` free (any write, any reset, at any time, interleaved with the streams), assumes
the stream rules (docs/protocol.md section 8) of the sources that drive the block's inputs,
asserts them of its outputs, states a counting or ordering property (no beat or frame lost,
duplicated or invented) and covers the interesting case of each property. A condition a
block documents (or one the harness needs to get past a known failure) is an ``Assume`` named
in the harness's docstring, with a flag that drops it.
"""

from types import SimpleNamespace
from unittest import mock

from amaranth.hdl import (Array, Assert, Assume, Cat, Const, Cover, Fragment, Module, Mux,
                          Signal, Value)
from amaranth.hdl._ast import Assign, Switch
from amaranth.lib.data import View
from amaranth.utils import bits_for, exact_log2

from .formal import StreamPort, find_signal, past, pipe_properties
from .formal_rx import GhostFifo, _register_fifo_buffered_class

__all__ = ["header_inserter_harness", "plane_splitter_harness", "link_harness", "tx_path_harness",
           "source_of"]


def _covers(m, covers):
    for name, cond in covers.items():
        m.d.comb += Cover(cond, name)


def _assigns(statements):
    for stmt in statements:
        if isinstance(stmt, Assign):
            yield stmt
        elif isinstance(stmt, Switch):
            for _patterns, stmts, _loc in stmt.cases:
                yield from _assigns(stmts)


def source_of(fragment, name):
    """The signal copied into the register called ``name`` (the unique signal ``s`` of
    ``name.eq(s)`` in ``fragment``): the harness names a pipeline register that the block left
    unnamed (``a, b = Signal(), Signal()``) through the named register it feeds. Raises
    ``LookupError`` when there is not exactly one such signal."""
    found = {}
    for statements in fragment.statements.values():
        for stmt in _assigns(statements):
            if isinstance(stmt.lhs, Signal) and stmt.lhs.name == name \
                    and isinstance(stmt.rhs, Signal):
                found[id(stmt.rhs)] = stmt.rhs
    if len(found) != 1:
        raise LookupError(f"source_of: {len(found)} signals copied into {name!r}")
    return next(iter(found.values()))


def _stream_port(iface, role, name, data, count_width=8):
    """A :class:`StreamPort` of an AXI-Stream port, ``tdata`` included only with ``data`` (without
    it no property reads ``tdata`` and yosys drops the data path: the deep, bounded form)."""
    if data:
        return StreamPort(iface, role, name, count_width=count_width)
    p = iface.p
    view = SimpleNamespace(valid=iface.valid, ready=iface.ready,
                           payload=Cat(p.keep, p.last, p.user))
    return StreamPort(view, role, name, count_width=count_width)


def _axis_free(iface, role):
    """The free inputs of AXI-Stream port ``iface`` for ``rtlil.convert``: valid and the whole
    payload of an input (``tdata`` too when the stream rules leave it out: it is still an input
    of the block), the ready of an output."""
    if role == "in":
        return [iface.valid, Value.cast(iface.payload)]
    return [iface.ready]


# -- header inserter -----------------------------------------------------------------------------

def header_inserter_harness(data_width=64, max_payload=16, *, data=True, block=None,
                            out_depth=2, prove=None, bmc=None, cover=None):
    """HeaderInserter (W = ``data_width``, ``max_payload`` bytes): under any header records (any
    opcode and length, known or not: the dropped records too), any payload packets (any
    lengths, ``tkeep``, ``tuser``: short, long and upstream-bad packets), any sink timing and
    any configuration writes (the counters), with ``rst`` free, asserted:

    - the stream rules on ``m_axis`` (``tdata`` with ``data``; ``tkeep``, ``tlast``, ``tuser``
      and ``tvalid`` always), those of ``s_hdr`` and ``s_axis`` assumed;
    - one frame per accepted record, none for a dropped one: the records taken that the block
      must keep (known opcode, no payload on a control opcode, ``length <= max_payload``, judged
      by the harness from the record alone) minus the frames out (``tlast`` beats taken) never
      go negative (no frame invented or duplicated) and equal the frames the block holds (the
      one stage 1 emits and those with a last beat in the pipeline: none forgotten, so none
      lost);
    - each frame has exactly its record's beats: a ghost queue holds, per record kept, the
      beats ``ceil(frame bytes / (W/8))`` of its frame (frame bytes = header of its opcode +
      payload padded to 4 + ICRC, as :func:`models.packets.frame_length`); each frame out ends
      (``tlast``) exactly on its last beat, in record order; ``tkeep`` is all ones before the
      last beat and, on the last, the frame's bytes in that beat (contiguous from lane 0).

    The harness reads the block's record register (``n_full``, ``n_good`` and the frame
    fields and flags decoded into it), its stage-1 state (``active``, ``beat``, ``last_beat``,
    ``last_keep``, the registered flags ``beat_flags`` and ``rem_flags``), the credits
    (``credit``, ``room``) and every register a beat passes (the commands ``cmd`` and
    ``cmd2``, ``r1``, the delay line ``d0``...
    beside the CRC, the output buffer, the output register) and states what they hold (which
    frame each beat belongs to, the beats each frame has inside, the beats left of the frame in
    stage 1, a credit per beat not inside, each flag the comparison it stands for), which makes
    every property inductive: k-induction closes at depth ``prove`` (default 2), from any state,
    with the whole data path (the CRC stages included). The output buffer (``SyncFIFO``) is
    swapped for a register FIFO of the same ports and timing (:func:`_register_fifo_class`),
    ``out_depth`` beats deep (default 2: correct at a lower rate, and small for the solver).
    Measured: W = 64 in about 8 s, W = 512 in about 70 s. ``data`` False leaves ``tdata`` out of
    the stream rules, so that yosys drops the data path (the W = 64 cover run).

    Covers: a whole frame out; an output beat taken after the sink stalled it; two frames back
    to back (a frame's first beat taken right after the previous frame's last: an output buffer
    that holds two frames, ``out_depth`` 6 at W = 512, 16 at W = 64); a frame flagged bad
    (``tuser``); a record dropped while a frame is inside. At W = 512 (3 beats) every cover is
    reached by step 20; at W = 64 a frame is at least 17 beats and the record waits
    ``5 + crc_latency`` cycles for its first beat out.
    """
    from models import layouts
    from rtl.header_inserter import HeaderInserter

    import rtl.header_inserter as inserter_mod

    block = block or HeaderInserter
    m = Module()
    dut = block(data_width, max_payload, out_depth=out_depth)
    fifos = []
    with mock.patch.object(inserter_mod, "SyncFIFO", _register_fifo_class(fifos)):
        frag = Fragment.get(dut, "formal")
    m.submodules.dut = frag
    lanes = data_width // 8
    hdr = StreamPort(dut.s_hdr, "in", "hdr").elaborate(m)
    pay = _stream_port(dut.s_axis, "in", "pay", data).elaborate(m)
    out = _stream_port(dut.m_axis, "out", "o", data).elaborate(m)
    beat_o = dut.m_axis.p

    # The record's frame, from the record alone (docs/protocol.md 1-2).
    rec = dut.s_hdr.p
    h_len = Signal(8, name="rec_header_bytes")
    known = Signal(name="rec_known")
    control = Signal(name="rec_control")
    with m.Switch(rec.opcode):
        for op in layouts.KNOWN_OPCODES:
            with m.Case(op):
                m.d.comb += [h_len.eq(layouts.header_length(op)), known.eq(1),
                             control.eq(op in layouts.CONTROL_OPCODES)]
    keeps = Signal(name="rec_kept")
    m.d.comb += keeps.eq(known & ~(control & (rec.length != 0)) & (rec.length <= max_payload))
    t_len = Signal(18, name="rec_frame_bytes")
    m.d.comb += t_len.eq(h_len + ((rec.length + 3) & ~3) + layouts.ICRC_BYTES)
    beat_bits = 6 if max_payload <= 96 else 16
    n_beats = Signal(beat_bits, name="rec_beats")
    m.d.comb += n_beats.eq((t_len + lanes - 1) // lanes)
    tail = Signal(range(lanes + 1), name="rec_last_bytes")     # bytes in the last beat
    m.d.comb += tail.eq((t_len - 1) % lanes + 1)
    min_beats = (min(layouts.header_length(op) for op in layouts.KNOWN_OPCODES)
                 + layouts.ICRC_BYTES + lanes - 1) // lanes

    kept = Signal(name="record_kept")
    m.d.comb += kept.eq(hdr.fire & keeps)
    records = Signal(8, name="records_kept")
    with m.If(kept):
        m.d.sync += records.eq(records + 1)
    frame_out = Signal(name="frame_out")
    m.d.comb += frame_out.eq(out.fire & beat_o.last)
    frames = Signal(8, name="frames_out")
    with m.If(frame_out):
        m.d.sync += frames.eq(frames + 1)

    # Ghost: per record kept, the beats of its frame and the bytes of its last beat.
    # Beat registers: the output one, the buffer's, the delay line's, stage 1c's and the two
    # command registers.
    n_beat_regs = 1 + out_depth + dut.crc_latency + 3
    frames_max = (n_beat_regs - 1) // min_beats + 1
    ghost = GhostFifo(m, frames_max + 2, beat_bits + len(tail), "ghost")
    m.d.comb += [ghost.push_en.eq(kept), ghost.push_val.eq(Cat(n_beats, tail)),
                 ghost.pop_en.eq(frame_out)]
    ghost.elaborate()

    def beats_of(entry):
        return entry[:beat_bits]

    def tail_of(entry):
        return entry[beat_bits:]

    def keep_of(nbytes):
        return Cat(*(nbytes > lane for lane in range(lanes)))

    ob = Signal(beat_bits, name="beats_out_of_frame")   # beats of the frame at m_axis taken
    with m.If(out.fire):
        m.d.sync += ob.eq(Mux(beat_o.last, 0, ob + 1))
    head_beats = beats_of(ghost.head)
    full = (1 << lanes) - 1
    m.d.comb += [
        Assert((records - frames)[:8] == ghost.count, "frames inside = records kept - frames out"),
        Assert(~out.fire | beat_o.last | (ob + 1 < head_beats),
               "no frame ends early"),
        Assert(~frame_out | (ob + 1 == head_beats), "a frame ends on its record's last beat"),
        Assert(~dut.m_axis.valid | beat_o.last | (beat_o.keep == full),
               "tkeep all ones before the last beat"),
        Assert(~(dut.m_axis.valid & beat_o.last) | (beat_o.keep == keep_of(tail_of(ghost.head))),
               "the last beat keeps the frame's last bytes"),
    ]

    # Invariants (they make the properties inductive): the beats inside, from the output on.
    # Register j holds a beat of frame f_j = the last beats in the registers nearer the output
    # (0: the head frame, that of ob); stage 1 emits frame f = all last beats in the registers,
    # and the next-record register holds frame f + active.
    s = {n: find_signal(frag, n) for n in ("active", "beat", "last_beat", "last_keep", "credit",
                                           "n_full", "n_good", "n_last_beat", "n_last_keep",
                                           "r1")}

    def beat_reg(sig):          # (valid, last, keep) of a beat register
        beat = View(dut.beat_layout, sig)
        return beat.valid, beat.last, beat.keep

    regs = [(dut.m_axis.valid, beat_o.last, beat_o.keep)]
    for j, slot in enumerate(fifos[0].slots):      # the output buffer, head first
        entry = View(dut.out_layout, slot)
        regs.append((fifos[0].level > j, entry.last, entry.keep))
    for k in reversed(range(dut.crc_latency)):     # the delay line beside the CRC
        regs.append(beat_reg(find_signal(frag, f"d{k}")))
    regs.append(beat_reg(s["r1"]))
    for name in ("cmd2", "cmd"):
        cmd = View(dut.cmd_layout, find_signal(frag, name))
        regs.append((cmd.valid, cmd.last, cmd.keep))
    n_regs = len(regs)
    assert n_regs == n_beat_regs
    lasts = Signal(range(n_regs + 1), name="inv_lasts_in_regs")
    m.d.comb += lasts.eq(sum(v & last for v, last, _ in regs))
    held = Signal(range(n_regs + 1), name="inv_beats_in_regs")
    m.d.comb += held.eq(sum(v for v, _, _ in regs))
    active, beat, last_beat = s["active"], s["beat"], s["last_beat"]
    next_kept = s["n_full"] & s["n_good"]
    m.d.comb += [
        Assert(ghost.count == lasts + active + next_kept,
               "inv: frames inside = last beats inside + stage 1 + the next record"),
        Assert(lasts <= frames_max, f"inv: at most {frames_max} last beats in the pipeline"),
        Assert(~active | (beat <= last_beat), "inv: stage 1 inside its frame"),
        Assert(s["credit"] + held == dut.out_depth + 1, "inv: a credit per beat not inside"),
        Assert(~find_signal(frag, "room") | (s["credit"] != 0), "inv: room only with a credit"),
        Assert(fifos[0].level <= dut.out_depth, "inv: the output buffer within its depth"),
    ]
    for j in range(ghost.depth):
        m.d.comb += Assert((j >= ghost.count) | (beats_of(ghost.entries[j]) >= min_beats),
                           f"inv: ghost entry {j} is a frame of at least {min_beats} beats")

    def entry_at(index):
        entry = ghost.entries[-1]
        for f in reversed(range(ghost.depth - 1)):
            entry = Mux(index == f, ghost.entries[f], entry)
        return entry

    count_w = n_regs.bit_length() + 1
    before = Const(0, count_w)
    in_regs = [Const(0, count_w) for _ in range(frames_max + 1)]   # beats of frame f inside
    for j, (valid, last, keep) in enumerate(regs):
        m.d.comb += [
            Assert(~valid | last | (keep == full), f"inv: register {j} keeps all but a last"),
            Assert(~(valid & last) | (keep == keep_of(tail_of(entry_at(before)))),
                   f"inv: register {j}'s last beat keeps its frame's bytes"),
        ]
        for f in range(frames_max + 1):
            in_regs[f] = in_regs[f] + (valid & (before == f))
        before = before + (valid & last)
    counts = [Signal(count_w, name=f"inv_frame{f}_beats_in_regs") for f in range(frames_max + 1)]
    m.d.comb += [c.eq(v) for c, v in zip(counts, in_regs)]
    for f in range(frames_max):
        done = ob if f == 0 else 0            # beats of frame f already out
        m.d.comb += Assert(~(lasts > f) | (done + counts[f] == beats_of(ghost.entries[f])),
                           f"inv: frame {f}, its last beat inside, has its beats")
    stage1_entry = entry_at(lasts)
    next_entry = entry_at(lasts + active)
    stage1_beats = Signal(beat_bits + 3, name="inv_stage1_beats_emitted")
    m.d.comb += stage1_beats.eq(Mux(lasts == 0, ob, 0))
    for f in range(frames_max + 1):
        with m.If(lasts == f):
            m.d.comb += stage1_beats.eq(Mux(lasts == 0, ob, 0) + counts[f])
    m.d.comb += [
        Assert(~active | (last_beat + 1 == beats_of(stage1_entry)),
               "inv: stage 1's frame has its record's beats"),
        Assert(~active | (beat == stage1_beats),
               "inv: the beats stage 1 emitted are out or in the registers"),
        Assert(~active | (s["last_keep"] == keep_of(tail_of(stage1_entry))),
               "inv: stage 1's last keep is its frame's"),
        Assert(active | (stage1_beats == 0), "inv: no beat after the last, idle: none out"),
        Assert(~next_kept | (s["n_last_beat"] + 1 == beats_of(next_entry)),
               "inv: the next record's frame has its beats"),
        Assert(~next_kept | (s["n_last_keep"] == keep_of(tail_of(next_entry))),
               "inv: the next record's last keep is its frame's"),
    ]
    # The block's registered flags are the comparisons they stand for.
    fl, rf, n_first = (find_signal(frag, n) for n in ("beat_flags", "rem_flags", "n_first"))
    first_pay, rem, crc_end = (find_signal(frag, n) for n in ("first_pay", "rem", "crc_end_beat"))
    m.d.comb += [
        Assert(find_signal(frag, "beat_next") == (beat + 1)[:len(beat)],
               "inv: beat_next = beat + 1"),
        Assert(find_signal(frag, "active_copy") == active, "inv: active's copy"),
        Assert(~active | (fl[0] == (beat < first_pay)), "inv: flag before = beat < q"),
        Assert(~active | (fl[1] == (beat == first_pay)), "inv: flag at = beat == q"),
        Assert(~active | (fl[2] == (beat == last_beat)), "inv: flag last = beat == last"),
        Assert(~active | (fl[3] == (beat == crc_end)), "inv: flag crc_end"),
        Assert(~active | (rf[0] == (rem != 0)), "inv: flag rem != 0"),
        Assert(~active | (rf[1] == (rem > lanes)), "inv: flag rem > W/8"),
        Assert(find_signal(frag, "need_payload") == (~fl[0] & rf[0]),
               "inv: flag need = not before the payload and bytes expected"),
        Assert(find_signal(frag, "discarding") == (find_signal(frag, "discard") != 0),
               "inv: flag discarding = discard != 0"),
        Assert(~next_kept | (n_first[2] == (s["n_last_beat"] == 0)),
               "inv: next record's flag last"),
    ]
    n_rem, n_len, n_q, n_end = (find_signal(frag, n) for n in ("n_rem", "n_length",
                                                              "n_first_pay", "n_crc_end_beat"))
    m.d.comb += [
        Assert(~next_kept | (n_first[0] == (n_q != 0)), "inv: next record's flag before"),
        Assert(~next_kept | (n_first[1] == (n_q == 0)), "inv: next record's flag at"),
        Assert(~next_kept | (n_first[3] == (n_end == 0)), "inv: next record's flag crc_end"),
        Assert(~next_kept | (n_rem[0] == (n_len != 0)), "inv: next record's rem != 0"),
        Assert(~next_kept | (n_rem[1] == (n_len > lanes)), "inv: next record's rem > W/8"),
    ]
    for lane in range(lanes):
        m.d.comb += [
            Assert(~active | (rf[2 + lane] == (rem > lane)), f"inv: expect lane {lane}"),
            Assert(~next_kept | (n_rem[2 + lane] == (n_len > lane)),
                   f"inv: next record's expect lane {lane}"),
        ]
    stalled = past(m, dut.m_axis.valid & ~dut.m_axis.ready, "o_was_stalled")
    _covers(m, {
        "frame_out_whole": frame_out,
        "beat_out_after_stall": out.fire & stalled,
        "frames_back_to_back": out.fire & (ob == 0) & past(m, frame_out, "was_frame_out"),
        "frame_flagged_bad": frame_out & beat_o.user[0],
        "record_dropped_while_busy": hdr.fire & ~keeps & (ghost.count != 0),
    })
    ports = hdr.free_ports() + _axis_free(dut.s_axis, "in") + out.free_ports() + \
        [dut.cfg_addr, dut.cfg_wdata, dut.cfg_we]
    depths = {"prove": prove if prove is not None else 2}
    if bmc is not None:
        depths = {"bmc": bmc}
    if cover is not None:
        depths["cover"] = cover
    return m, ports, depths


# -- link ---------------------------------------------------------------------------------------

class _Passed:
    """The beats of ``s_axis`` that a link passes, as :func:`verif.formal.pipe_properties` reads
    an input port (``fire``, ``taken``, ``iface.payload``), without stream rules of its own."""

    def __init__(self, m, fire, payload, name, count_width=8):
        self.fire = fire
        self.iface = SimpleNamespace(payload=payload)
        self.taken = Signal(count_width, name=f"{name}_taken")
        with m.If(fire):
            m.d.sync += self.taken.eq(self.taken + 1)


def _harness_signal(m, name):
    """The signal called ``name`` in the statements of harness module ``m`` so far (one that a
    helper such as :func:`verif.formal.pipe_properties` made and did not return)."""
    found = {}
    for statements in m._statements.values():
        for stmt in statements:
            for sig in stmt._lhs_signals() | stmt._rhs_signals():
                if sig.name == name:
                    found[id(sig)] = sig
    if len(found) != 1:
        raise LookupError(f"_harness_signal: {len(found)} signals named {name!r}")
    return next(iter(found.values()))


class KeptBits:
    """Which bits of a ``width``-bit word a register stand-in for a FIFO or memory stores:
    ``ranges``, a list of ``(lo, hi)`` (bits ``lo..hi-1``, ascending, not overlapping; None: all).
    A stored word is those bits side by side (``stored_width``); the others, read back, are free
    inputs of ``free_width`` bits. That over-approximates the storage (any value the real one
    would read is among those possible), so a property that holds holds of the block; it is for
    bits the block only carries (payload, a record it hands on) and no property reads."""

    def __init__(self, width, ranges=None):
        ranges = [(0, width)] if ranges is None else list(ranges)
        edge = 0
        for lo, hi in ranges:
            if not edge <= lo < hi <= width:
                raise ValueError(f"KeptBits: ranges {ranges!r} not ascending within {width}")
            edge = hi
        self.width, self.ranges = width, ranges
        self.stored_width = sum(hi - lo for lo, hi in ranges)
        self.free_width = width - self.stored_width

    def pack(self, value):
        """The stored bits of full word ``value``."""
        return Cat(*(value[lo:hi] for lo, hi in self.ranges))

    def unpack(self, stored, free):
        """The full word of stored word ``stored``, its other bits from ``free``."""
        parts, edge, at, used = [], 0, 0, 0
        for lo, hi in self.ranges:
            if lo > edge:
                parts.append(free[used:used + lo - edge])
                used += lo - edge
            parts.append(stored[at:at + hi - lo])
            at += hi - lo
            edge = hi
        if edge < self.width:
            parts.append(free[used:])
        return Cat(*parts)

    def field(self, stored, lo, hi):
        """Bits ``lo..hi-1`` (of the full word's numbering) of stored word ``stored``."""
        at = 0
        for r_lo, r_hi in self.ranges:
            if r_lo <= lo and hi <= r_hi:
                return stored[at + lo - r_lo:at + hi - r_lo]
            at += r_hi - r_lo
        raise ValueError(f"KeptBits: bits {lo}..{hi - 1} are not stored ({self.ranges!r})")


def _register_fifo_class(made, ghost_width=None):
    """A :class:`amaranth.lib.fifo.SyncFIFO` with its storage in registers (``slots``, slot 0 the
    head, shifted on a read): the same ports and timing (``r_data`` combinational from the head,
    ``w_rdy``/``r_rdy``/``level`` as there), contents an induction invariant can name. With
    ``ghost_width``, a *ghost* word beside each slot (``ghosts``, written from ``ghost_w``, which
    the harness drives; the block never reads it) moves with its slot, so that a harness can tag
    what it stores. Each instance made is appended to ``made``."""
    from amaranth.lib.fifo import SyncFIFO

    class RegisterFifo(SyncFIFO):
        def __init__(self, *, width, depth):
            super().__init__(width=width, depth=depth)
            n = len(made)
            self.slots = [Signal(width, name=f"fifo{n}_slot{j}") for j in range(depth)]
            self.ghosts = [] if ghost_width is None else \
                [Signal(ghost_width, name=f"fifo{n}_ghost{j}") for j in range(depth)]
            self.ghost_w = None if ghost_width is None else \
                Signal(ghost_width, name=f"fifo{n}_ghost_w")
            made.append(self)

        def elaborate(self, platform):
            m = Module()
            slots, level = self.slots, self.level
            m.d.comb += [
                self.w_rdy.eq(level != self.depth), self.r_rdy.eq(level != 0),
                self.w_level.eq(level), self.r_level.eq(level), self.r_data.eq(slots[0]),
            ]
            do_read = self.r_rdy & self.r_en
            do_write = self.w_rdy & self.w_en
            at = level - do_read
            stores = [(slots, self.w_data)]
            if self.ghosts:
                stores.append((self.ghosts, self.ghost_w))
            for store, new in stores:
                for j in range(self.depth):
                    shifted = Mux(do_read, store[j + 1] if j + 1 < self.depth else store[j],
                                  store[j])
                    m.d.sync += store[j].eq(Mux(do_write & (at == j), new, shifted))
            m.d.sync += level.eq(level + do_write - do_read)
            return m

    return RegisterFifo


def link_harness(data_width=64, delay_max=0, rate_max=1, user_width=1, *, block=None,
                 bmc=36, cover=None, data=True, inductive=False, prove=2):
    """Link (W = ``data_width``, ``delay_max``, ``rate_max``): under any frames in (any lengths,
    ``tkeep``, ``tuser``), any sink timing and any configuration writes (cut, loss, seed, delay
    and rate at any time, so frames pass and drop in any pattern), with ``rst`` free, asserted:

    - the stream rules on ``m_axis`` (``tdata`` too with ``data``), those of ``s_axis`` assumed;
    - whole frames pass unchanged and in order: the harness follows the frames at ``s_axis``
      and, at each frame's first beat, takes the link's decision (its ``start_drop``: cut or
      LFSR loss) for the whole frame; the beats of the frames that pass form a stream that
      :func:`verif.formal.pipe_properties` compares with ``m_axis``: at most ``delay_max + 3``
      beats inside (FIFO and output register), never fewer than 0 (no beat invented or
      duplicated), and for a free beat number k the k-th beat out is the k-th passed beat in
      (``tdata``, ``tkeep``, ``tlast``, ``tuser``), so no beat of a passed frame is lost,
      duplicated, reordered or changed, and a dropped frame leaves nothing (a frame is never
      truncated or merged with another);
    - ``s_axis_tready`` is high inside a frame being dropped (the docstring's promise).

    Bounded (the default): BMC of ``bmc`` cycles from reset of the block as it is (its FIFOs are
    memories whose contents an induction cannot name); each step past 10 about doubles the time
    (with ``tdata``), so the 36 cycles the issue asks for (the latency, 2, plus two 17-beat
    frames) are out of reach. ``inductive`` instead proves the same properties by k-induction
    (depth ``prove``) of the link with its two ``SyncFIFO`` s replaced by a register FIFO of the
    same ports and timing (:func:`_register_fifo_class`; the link's own logic unchanged): the
    harness then states what the output register and the FIFO slots hold (the passed beats
    inside, oldest first) and that its frame tracking is the link's (``in_frame``, ``f_drop``).
    Covers: a beat k out that was taken while the link was full, an output stall, a frame
    dropped, a frame passed whole after a dropped one.
    """
    from rtl import link as link_mod
    from rtl.link import Link

    block = block or Link
    m = Module()
    dut = block(data_width, delay_max, rate_max, user_width)
    made = []
    if inductive:
        original = link_mod.SyncFIFO
        link_mod.SyncFIFO = _register_fifo_class(made)
        try:
            frag = Fragment.get(dut, "formal")
        finally:
            link_mod.SyncFIFO = original
    else:
        frag = Fragment.get(dut, "formal")
    m.submodules.dut = frag
    i = _stream_port(dut.s_axis, "in", "i", data).elaborate(m)
    o = _stream_port(dut.m_axis, "out", "o", data).elaborate(m)
    beat_i, beat_o = dut.s_axis.p, dut.m_axis.p

    # The frames at s_axis and the link's decision for each, taken at its first beat.
    inside = Signal(name="h_in_frame")
    f_drop = Signal(name="h_frame_dropped")
    start_drop = find_signal(frag, "start_drop")
    drop = Signal(name="h_drop")
    m.d.comb += drop.eq(Mux(inside, f_drop, start_drop))
    with m.If(i.fire):
        m.d.sync += inside.eq(~beat_i.last)
        with m.If(~inside):
            m.d.sync += f_drop.eq(start_drop)
    m.d.comb += Assert(~(inside & f_drop) | dut.s_axis.ready,
                       "s_axis ready inside a frame being dropped")

    def content(beat):
        fields = [beat.keep, beat.last] + ([beat.user] if user_width else [])
        return Cat(beat.data, *fields) if data else Cat(*fields)

    passed = Signal(name="h_passed_beat")
    m.d.comb += passed.eq(i.fire & ~drop)
    inp = _Passed(m, passed, content(beat_i), "passed")
    out_view = SimpleNamespace(taken=o.taken, fire=o.fire,
                               iface=SimpleNamespace(payload=content(beat_o),
                                                     valid=dut.m_axis.valid,
                                                     ready=dut.m_axis.ready))
    capacity = dut.depth + 1
    k_ports, covers = pipe_properties(m, inp, out_view, capacity=capacity, name="link")

    if inductive:
        data_fifo = made[0]
        m.d.comb += [
            Assert(inside == find_signal(frag, "in_frame"), "inv: the link's frame tracking"),
            Assert(~inside | (f_drop == find_signal(frag, "f_drop")), "inv: the frame's decision"),
            Assert(data_fifo.level <= data_fifo.depth, "inv: FIFO level within its depth"),
        ]
        held = Signal(8, name="inv_held")
        m.d.comb += held.eq(inp.taken - o.taken)
        m.d.comb += Assert(held == data_fifo.level + dut.m_axis.valid,
                           "inv: beats held = FIFO level + output register")
        # The FIFO slot's beat as the link stores it (data, keep, last, user, rate).
        lanes = data_width // 8
        width = data_width + lanes + 1 + user_width

        def stored(slot):
            word = slot[:width]
            return word if data else word[data_width:]

        # pipe_properties' free beat number, the tag of beat k and whether it was seen.
        k, tag, seen = (_harness_signal(m, f"link_{n}") for n in ("k", "tag", "tag_seen"))
        dist = Signal(8, name="inv_k_dist")
        m.d.comb += dist.eq(k - o.taken)
        m.d.comb += Assert((dist >= held) | seen, "inv: beat k inside was seen")
        in_reg = dut.m_axis.valid
        m.d.comb += Assert(~(in_reg & (dist == 0)) | (content(beat_o) == tag),
                           "inv: beat k in the output register")
        for j, slot in enumerate(data_fifo.slots):
            pos = Mux(in_reg, j + 1, j)
            m.d.comb += Assert(~((dist == pos) & (dist < held)) | (stored(slot) == tag),
                               f"inv: beat k in FIFO slot {j}")

    frame_out = o.fire & beat_o.last
    dropped_before = Signal(name="h_dropped_before")
    with m.If(i.fire & ~inside & start_drop):
        m.d.sync += dropped_before.eq(1)
    out_first = Signal(name="h_out_first", init=1)
    with m.If(o.fire):
        m.d.sync += out_first.eq(beat_o.last)
    whole = Signal(name="h_frame_out_of_several_beats")
    m.d.comb += whole.eq(frame_out & ~out_first)
    covers = {
        "beat_k_after_full": covers["beat_k_after_full"],
        "output_stalled": covers["out_stalled"],
        "frame_dropped": i.fire & ~inside & start_drop,
        "frame_passed_after_a_drop": whole & dropped_before,
    }
    _covers(m, covers)
    ports = _axis_free(dut.s_axis, "in") + o.free_ports() + k_ports + \
        [dut.cfg_addr, dut.cfg_wdata, dut.cfg_we]
    depths = {"prove": prove} if inductive else {"bmc": bmc}
    if cover is not None:
        depths["cover"] = cover
    return m, ports, depths


def _register_memory_class(made, kept=None, ghost=None):
    """An :class:`amaranth.lib.memory.Memory` with its rows in registers (``rows``): the same
    ports and timing (a write port of the whole row, enable ``en``; read ports synchronous,
    ``data`` the row at ``addr`` of the cycle before, not transparent to a write of that cycle,
    held while ``en`` is low), contents an induction invariant can name. Each instance made is
    appended to ``made``.

    ``kept`` (a function of the memory's index in ``made`` and its row width, giving the bit
    ranges of :class:`KeptBits`) stores only those bits of each row (``rows`` are
    ``bits.stored_width`` wide); the other bits of every read port's ``data`` are free inputs
    (``free``, to be listed among the harness's ports), new each cycle. ``field(row, lo, hi)``
    is bits ``lo..hi-1`` of a full row's numbering in a stored row; a read port's ``kept`` is its
    stored part.

    ``ghost`` (a function of the memory's index and row width, giving a width or 0) adds a *ghost*
    word beside each row (``ghosts``; the block never reads them) that takes ``ghost_w`` (driven
    by the harness) at each write of its row, so that a harness can tag what it stores."""
    from amaranth.hdl import Array, Elaboratable, Shape

    class _Port(SimpleNamespace):
        pass

    class RegisterMemory(Elaboratable):
        def __init__(self, *, shape, depth, init=(), **_kwargs):
            self.width = Shape.cast(shape).width
            self.depth = depth
            index = len(made)
            self.bits = KeptBits(self.width, None if kept is None else kept(index, self.width))
            self.rows = [Signal(self.bits.stored_width, name=f"mem{index}_row{j}")
                         for j in range(depth)]
            g = 0 if ghost is None else ghost(index, self.width)
            self.ghosts = [Signal(g, name=f"mem{index}_ghost{j}") for j in range(depth)] \
                if g else []
            self.ghost_w = Signal(g, name=f"mem{index}_ghost_w") if g else None
            self.write_ports, self.read_ports = [], []
            self.free = []
            self.index = index
            made.append(self)

        def field(self, value, lo, hi):
            return self.bits.field(value, lo, hi)

        def write_port(self, *, domain="sync", granularity=None, **_kwargs):
            assert granularity is None and domain == "sync"
            n = len(self.write_ports)
            port = _Port(addr=Signal(range(self.depth), name=f"mem{self.index}_w{n}_addr"),
                         data=Signal(self.width, name=f"mem{self.index}_w{n}_data"),
                         en=Signal(name=f"mem{self.index}_w{n}_en"))
            self.write_ports.append(port)
            return port

        def read_port(self, *, domain="sync", transparent_for=(), **_kwargs):
            assert domain == "sync" and not transparent_for
            n, bits = len(self.read_ports), self.bits
            port = _Port(addr=Signal(range(self.depth), name=f"mem{self.index}_r{n}_addr"),
                         data=Signal(self.width, name=f"mem{self.index}_r{n}_data"),
                         en=Signal(init=1, name=f"mem{self.index}_r{n}_en"),
                         kept=Signal(bits.stored_width, name=f"mem{self.index}_r{n}_kept"),
                         free=Signal(bits.free_width, name=f"mem{self.index}_r{n}_free"))
            if bits.free_width:
                self.free.append(port.free)
            self.read_ports.append(port)
            return port

        def elaborate(self, platform):
            m = Module()
            rows = Array(self.rows)
            for port in self.read_ports:
                with m.If(port.en):
                    m.d.sync += port.kept.eq(rows[port.addr])
                m.d.comb += port.data.eq(self.bits.unpack(port.kept, port.free))
            for port in self.write_ports:
                for j, row in enumerate(self.rows):
                    with m.If(port.en & (port.addr == j)):
                        m.d.sync += row.eq(self.bits.pack(port.data))
                        if self.ghosts:
                            m.d.sync += self.ghosts[j].eq(self.ghost_w)
            return m

    return RegisterMemory


# -- plane splitter -------------------------------------------------------------------------------

# The stages of the plane splitter's k-induction (verif.formal.check_staged), by assertion
# message: the route queue and the records, the reservations, pointers and entries, the words'
# invariants one kind at a time, then every other property.
PLANE_SPLITTER_STAGES = [
    r"route|record|beat in without|saturating|committed exactly|core beat|ghost",
    r"reserved|within|write pointer|idle|sending|sub-beat|read is|at most|entry|entries|"
    r"visible|commit is",
    r"coming in", r"newest: the last frame", r"at the read pointer: the head",
    r"follows word", r"is its frame's",
    r".",
]


def plane_splitter_harness(n_planes=2, data_width=64, core_width=None, max_payload=16, *,
                           block=None, bmc=14, cover=None, data=False, empty_last=False,
                           prove=None, invariants=True, long_records=False, route_queue=None):
    """PlaneSplitter (N = ``n_planes``, W = ``data_width``, C = ``core_width``, FIFOs for
    ``max_payload``): under any PLANE_FRAME records (any plane, below N or not, any length,
    data or control), any core frames (any lengths: matching their record or not; any
    ``tkeep``, ``tuser``), planes going down and up at any time (``plane_down`` free and the
    plane-up mask written at any time through the free configuration port), any sink timing on
    every plane port and on ``m_flush``, with ``rst`` free, asserted:

    - the stream rules on every ``m_axis<p>`` (``tdata`` too with ``data``) and on ``m_flush``
      (the whole send record), those of ``s_frame`` and ``s_axis`` assumed;
    - every frame goes to exactly one plane, whole, in order: a ghost queue of the records
      taken (plane, frame bytes) pairs each core frame with its record; a frame whose record
      names a plane below N and whose length (beats x C/8 less the unused lanes of its last
      beat) is its record's is committed to that plane (the block's ``frames_in`` strobe
      agrees), any other is not; a ghost queue per plane of its committed frames is popped as
      a frame leaves that plane's port or is flushed (the block's ``flushed_data`` and
      ``flushed_control`` strobes, in commit order); each frame out of port p is the head of
      plane p's ghost and has exactly its bytes: ``ceil(bytes / (W/8))`` beats with ``tlast``
      on the last only, ``tkeep`` all ones before it and the frame's last bytes on it. So no
      frame is lost (every committed frame leaves or is flushed, in order), duplicated, sent on
      a second plane, truncated or merged, and no frame is invented;
    - a flush record per data frame flushed: the send records out on ``m_flush`` trail the data
      frames flushed by at most the one in its register.

    With ``empty_last`` False (the default) the harness assumes that a core frame's last beat
    holds at least one byte (``tkeep[0]`` = 1 on ``tlast``); with it True an empty last beat
    (outside the stream convention) may come, and such a frame must not be committed
    (:class:`models.plane_splitter.PlaneSplitterModel` discards it as ``bad_length``). The
    block once failed that: it counted a frame's bytes with a beat index that saturates at its
    record's words, so a frame longer than its record by whole words whose last beat is empty
    was committed, truncated to the record's words, none of them written with the last bit,
    and the plane port then sent on through the FIFO memory without a ``tlast``.

    Bounded (``prove`` None): the block as it is, its plane FIFOs and record queue memories
    (block RAM). ``prove`` = k swaps them for register versions of the same ports and timing
    (:func:`_register_memory_class`, :func:`_register_fifo_buffered_class`; without ``data``
    the words keep only their byte count, last and user bits and the entries their word count
    and data bit, the rest free inputs: :class:`KeptBits`) and adds the invariants of
    :func:`_plane_splitter_invariants` (route queue = record ghost, ``beat`` = the frame's
    beats saturating at its words, entry pointers = per-plane ghost frames, reservations =
    frames and words held plus records queued, write pointer, head frame's beats out, each
    entry its frame's, and each memory word by a ghost tag beside it: its frame's sequence
    number and its index in the frame, every word followed by the next of its frame or the
    first of the next). The induction closes in stages (:func:`verif.formal.check_staged`
    with :data:`PLANE_SPLITTER_STAGES`: route queue, reservations and entries, then the words'
    invariants one kind at a time, then the properties), each in seconds to minutes; all at
    once, it ran past 10 minutes without an answer. ``route_queue`` (the block's parameter)
    shortens the record queue for the proof. It also needs the assumption ``long_records``
    False drops: a
    record's frame is shorter than ``(2**bits_for(fifo_depth) - 1) * C/8`` bytes (1008 at the
    default). A longer record wraps the block's word count (2049 bytes at C = 128: 129 words,
    counted as 1), is taken with too little room reserved, and its frame, however right its
    length, is dropped as bad_length (a k-induction counterexample; from reset it needs a
    frame of more than 64 beats, beyond every BMC depth here). Measured on this machine (shared, 2 cores): BMC 7 with
    ``tdata`` in about 15 s, 8 without in about 30 s, 10 without in about 6 minutes (each step
    past 7 about triples the time), so the depth the issue asks for (latency 2 plus two 17-beat
    frames: 36 cycles) is out of reach; the record lengths are free, so frames of 1 to 3 beats
    (and every cover) fit in these depths, a 17-beat frame does not. Covers: a frame out whole
    on plane 0 and on plane 1, the two planes sending in the same cycle, a data frame flushed
    (its record out on ``m_flush``), a frame of the wrong length dropped, a port beat taken
    after its sink stalled it.
    """
    import rtl.plane_splitter as splitter_mod
    from rtl.plane_splitter import ROUTE_QUEUE, PlaneSplitter

    block = block or PlaneSplitter
    m = Module()
    dut = block(n_planes, data_width, core_width, max_payload,
                route_queue=route_queue or ROUTE_QUEUE)
    mems, fifos = [], []
    if prove is None:
        frag = Fragment.get(dut, "formal")
    else:
        kept = None
        if not data:
            # Without tdata, the words keep their byte count, last and user bits (above the C
            # data bits) and the entries their word count and data bit (below the send record,
            # which the block only hands to m_flush): the rest are free inputs.
            entry_kept = bits_for(dut.fifo_depth) + 1
            c_bits = dut.core_width

            def kept(index, width):
                return [(c_bits, width)] if index % 2 == 0 else [(0, entry_kept)]

        def ghost(index, width):        # words: (frame sequence number, index in the frame)
            return sum(_splitter_tag_bits(dut)) if index % 2 == 0 else 0
        with mock.patch.object(splitter_mod, "Memory",
                               _register_memory_class(mems, kept, ghost)), \
                mock.patch.object(splitter_mod, "SyncFIFOBuffered",
                                  _register_fifo_buffered_class(fifos)):
            frag = Fragment.get(dut, "formal")
    m.submodules.dut = frag
    C, W = dut.core_width, dut.data_width
    lanes, port_lanes = C // 8, W // 8
    rec_in = StreamPort(dut.s_frame, "in", "rec").elaborate(m)
    core = _stream_port(dut.s_axis, "in", "core", data).elaborate(m)
    ports_o = [_stream_port(dut.port(p), "out", f"o{p}", data).elaborate(m)
               for p in range(n_planes)]
    flush = StreamPort(dut.m_flush, "out", "flush").elaborate(m)

    # Records taken, in order: (plane, frame bytes).
    rec = dut.s_frame.p
    records = GhostFifo(m, dut.route_queue + 1, 4 + 16, "ghost_rec")
    beat_c = dut.s_axis.p
    in_last = core.fire & beat_c.last
    if not empty_last:
        m.d.comb += Assume(~(dut.s_axis.valid & beat_c.last) | beat_c.keep[0])
    if prove is not None and not long_records:
        # A record's frame takes fewer than 2**bits_for(fifo_depth) words (1008 bytes at the
        # default): the block counts a record's words in that many bits, so a longer one wraps
        # (2049 bytes at C = 128: 129 words, counted as 1), is taken with too little room
        # reserved, and its frame, however right its length, is dropped as bad_length.
        most = ((1 << bits_for(dut.fifo_depth)) - 1) * lanes
        m.d.comb += Assume(~dut.s_frame.valid | (rec.frame_bytes <= most))
        if prove is not None and invariants:
            for j, entry in enumerate(records.entries):
                m.d.comb += Assert(~(j < records.count) | (entry[4:] <= most),
                                   f"inv: record {j} within the record length assumed")
    m.d.comb += [records.push_en.eq(rec_in.fire), records.push_val.eq(Cat(rec.plane,
                                                                          rec.frame_bytes)),
                 records.pop_en.eq(in_last)]
    records.elaborate()
    m.d.comb += Assert(~core.fire | (records.count != 0), "a core beat only of a record taken")
    r_plane, r_bytes = records.head[:4], records.head[4:]

    # The core frame's length: its beats and the lanes kept on its last.
    # Beats of the frame so far, saturating at in_max: a frame of in_max beats or more is
    # longer than any record (frame_bytes < 2**16), so its count never wraps into a match.
    in_max = -(-(1 << 16) // lanes)
    in_beats = Signal(range(in_max + 1), name="core_beats_in_frame")
    with m.If(core.fire):
        m.d.sync += in_beats.eq(Mux(beat_c.last, 0, Mux(in_beats < in_max, in_beats + 1,
                                                        in_beats)))
    kept = Signal(range(lanes + 1), name="core_last_lanes")
    m.d.comb += kept.eq(lanes)
    for lane in reversed(range(lanes)):
        with m.If(~beat_c.keep[lane]):
            m.d.comb += kept.eq(lane)
    got = Signal(18, name="core_frame_bytes")
    m.d.comb += got.eq((in_beats << exact_log2(lanes)) + kept)
    commit = Signal(name="h_commit")
    m.d.comb += commit.eq(in_last & (r_plane < n_planes) & (got == r_bytes) & (kept != 0))
    m.d.comb += Assert(commit == find_signal(frag, "count_frames_in"),
                       "a frame is committed exactly when its record's plane and length fit")

    full = (1 << port_lanes) - 1
    covers = {}
    flushed_data = Signal(4, name="data_frames_flushed")
    flushed_now = Signal(range(n_planes + 1), name="data_frames_flushed_now")
    m.d.comb += flushed_now.eq(sum(find_signal(frag, f"count_flushed_data_{p}")
                                   for p in range(n_planes)))
    m.d.sync += flushed_data.eq(flushed_data + flushed_now - flush.fire)
    m.d.comb += [Assert(flushed_data <= 1, "a flush record per data frame flushed, no more"),
                 Assert(flushed_data == dut.m_flush.valid, "the flush register holds the record"
                        " of the data frame flushed")]
    planes = []
    for p in range(n_planes):
        port = dut.port(p)
        o = ports_o[p]
        beat = port.p
        q = GhostFifo(m, dut.route_depth + 1, 16, f"ghost_p{p}")
        out_last = o.fire & beat.last
        flushed = find_signal(frag, f"count_flushed_data_{p}") | \
            find_signal(frag, f"count_flushed_control_{p}")
        m.d.comb += [q.push_en.eq(commit & (r_plane == p)), q.push_val.eq(r_bytes),
                     q.pop_en.eq(out_last | flushed)]
        q.elaborate()
        m.d.comb += Assert(~(out_last & flushed), f"plane {p}: a frame leaves or is flushed")
        expected = Signal(16, name=f"p{p}_expected_beats")
        m.d.comb += expected.eq((q.head + port_lanes - 1) >> exact_log2(port_lanes))
        tail = Signal(range(port_lanes + 1), name=f"p{p}_last_bytes")
        m.d.comb += tail.eq(((q.head - 1) & (port_lanes - 1)) + 1)
        ob = Signal(16, name=f"p{p}_beats_out")
        with m.If(o.fire):
            m.d.sync += ob.eq(Mux(beat.last, 0, ob + 1))
        m.d.comb += [
            Assert(~port.valid | (q.count != 0), f"plane {p}: a beat only of a committed frame"),
            Assert(~o.fire | beat.last | (ob + 1 < expected), f"plane {p}: no frame ends early"),
            Assert(~out_last | (ob + 1 == expected),
                   f"plane {p}: a frame ends on its last beat"),
            Assert(~port.valid | beat.last | (beat.keep == full),
                   f"plane {p}: tkeep all ones before the last beat"),
            Assert(~(port.valid & beat.last) |
                   (beat.keep == Cat(*(tail > lane for lane in range(port_lanes)))),
                   f"plane {p}: the last beat keeps the frame's last bytes"),
            Assert(~(flushed & (ob != 0)), f"plane {p}: a frame being sent is never flushed"),
        ]
        planes.append(SimpleNamespace(q=q, ob=ob, expected=expected, push=q.push_en))
        stalled = past(m, port.valid & ~port.ready, f"o{p}_was_stalled")
        covers[f"frame_out_plane{p}"] = out_last & (ob != 0)
        covers[f"beat_after_stall_plane{p}"] = o.fire & stalled
    covers["planes_send_together"] = Cat(*(o.fire for o in ports_o)).all()
    covers["data_frame_flushed_record_out"] = flush.fire
    covers["wrong_length_frame_dropped"] = in_last & (r_plane < n_planes) & (got != r_bytes)
    if empty_last:
        covers["empty_last_beat_dropped"] = in_last & (r_plane < n_planes) & (got == r_bytes) & \
            (kept == 0)
    _covers(m, covers)
    ports = rec_in.free_ports() + _axis_free(dut.s_axis, "in") + \
        [x for o in ports_o for x in o.free_ports()] + flush.free_ports() + \
        [dut.plane_down, dut.cfg_addr, dut.cfg_wdata, dut.cfg_we] + \
        [free for mem in mems for free in mem.free]
    if prove is not None and invariants:
        _plane_splitter_invariants(m, frag, dut, records, in_beats, planes, mems, fifos)
    depths = {"bmc": bmc} if prove is None else {"prove": prove}
    if cover is not None:
        depths["cover"] = cover
    return m, ports, depths


def _splitter_tag_bits(dut):
    """The widths of a plane splitter word's ghost tag: its frame's sequence number (modulo a
    power of two above the frames a plane holds) and its index in the frame (the block's word
    count width)."""
    return bits_for(dut.route_depth) + 1, bits_for(dut.fifo_depth)


def _plane_splitter_invariants(m, frag, dut, records, in_beats, planes, mems, fifos):
    """The invariants that make :func:`plane_splitter_harness`'s properties inductive, over the
    block's registers, its route queue (``fifos[0]``, a register FIFO) and its memories
    (``mems``: plane p's words then its entries, register rows)."""
    from rtl.common import records as rec_layouts

    npl, C, W = dut.n_planes, dut.core_width, dut.data_width
    D, M = dut.fifo_depth, dut.route_depth
    lanes, port_lanes = C // 8, W // 8
    ratio = C // W
    log_lanes, log_ratio = exact_log2(lanes), exact_log2(ratio)
    db, mb = exact_log2(D), exact_log2(M)
    word_bits, nbytes_bits = bits_for(D), bits_for(lanes)
    wide = 16

    def words_of(nbytes):               # the block's (truncated to its word_bits)
        return ((nbytes + lanes - 1) >> log_lanes)[:word_bits]

    def tail_of(nbytes):                # bytes in a frame's last word
        return ((nbytes - 1) & (lanes - 1)) + 1

    # The route queue is the ghost of the records taken (plane and length of each).
    routes = fifos[0]
    head = View(rec_layouts.PLANE_FRAME, routes.r_data)

    def rec_of(value):
        rec = View(rec_layouts.PLANE_FRAME, value)
        return Cat(rec.plane, rec.frame_bytes)

    r_rdy, inner = routes.r_rdy, routes.inner_level
    m.d.comb += [
        Assert(records.count == inner + r_rdy, "inv: the route queue holds the records taken"),
        Assert(inner <= routes.inner_depth, "inv: route queue within its depth"),
        Assert(~r_rdy | (rec_of(routes.r_data) == records.entries[0]),
               "inv: the route queue's head is the oldest record"),
    ]
    for j, slot in enumerate(routes.slots):
        g = Mux(r_rdy, records.entries[j + 1] if j + 1 < records.depth else 0,
                records.entries[j])
        m.d.comb += Assert(~(j < inner) | (rec_of(slot) == g), f"inv: route queue slot {j}")

    # The frame coming in: its beats (saturating at its record's words), written non-last.
    beat = find_signal(frag, "beat")
    head_words = words_of(head.frame_bytes)
    m.d.comb += [
        Assert(r_rdy | ((beat == 0) & (in_beats == 0)), "inv: no beat in without a record"),
        Assert(~r_rdy | (beat == Mux(in_beats < head_words, in_beats, head_words)),
               "inv: beat is the frame's beats so far, saturating at its words"),
    ]

    for p, pl in enumerate(planes):
        q, ob = pl.q, pl.ob
        sig = {n: find_signal(frag, f"{n}_{p}") for n in (
            "wr_ptr", "rd_ptr", "entry_wr", "entry_visible", "entry_rd", "in_frame", "sub",
            "used_words", "used_frames")}
        wr_ptr, rd_ptr, in_frame, sub = (sig[n] for n in ("wr_ptr", "rd_ptr", "in_frame", "sub"))
        e_wr, e_vis, e_rd = sig["entry_wr"], sig["entry_visible"], sig["entry_rd"]
        words, entries = mems[2 * p], mems[2 * p + 1]
        n = q.count
        # Frame f of the ghost (committed, not yet sent or flushed): its words and where it
        # ends (cum[f + 1]) counted from the head frame's first word.
        w = [Signal(word_bits + 1, name=f"inv_p{p}_frame{f}_words") for f in range(q.depth)]
        cum = [Const(0, wide)]
        for f in range(q.depth):
            m.d.comb += w[f].eq((q.entries[f] + lanes - 1) >> log_lanes)
            end = Signal(wide, name=f"inv_p{p}_frame{f}_end")
            m.d.comb += end.eq(Mux(f < n, cum[f] + w[f], cum[f]))
            cum.append(end)
        total = Signal(wide, name=f"inv_p{p}_committed_words")
        m.d.comb += total.eq(cum[q.depth])
        hw = Signal(wide, name=f"inv_p{p}_head_words_out")         # head frame's words out
        m.d.comb += hw.eq(ob >> log_ratio)
        committed = Signal(wide, name=f"inv_p{p}_words_held")
        m.d.comb += committed.eq(total - hw)
        mine = [Signal(name=f"inv_p{p}_record{j}_mine") for j in range(records.depth)]
        rec_frames = 0
        rec_words = 0
        for j in range(records.depth):
            m.d.comb += mine[j].eq((j < records.count) & (records.entries[j][:4] == p))
            rec_frames = rec_frames + mine[j]
            rec_words = rec_words + Mux(mine[j], words_of(records.entries[j][4:]), 0)
        prev_commit = past(m, pl.push, f"inv_p{p}_committed_before")
        avail = e_rd != e_vis
        m.d.comb += [
            # The entry pointers count the committed frames; the visible one lags a commit.
            Assert(n == (e_wr - e_rd)[:mb + 1], f"inv: plane {p} entries = ghost frames"),
            Assert(n <= M, f"inv: plane {p} at most {M} frames"),
            Assert(e_vis == (e_wr - prev_commit)[:mb + 1],
                   f"inv: plane {p} entries visible a cycle after their commit"),
            Assert(~prev_commit | (n != 0), f"inv: plane {p} a commit is a frame held"),
            # Room: reserved per record taken, words and a frame, given back as they leave.
            Assert(sig["used_frames"] == n + rec_frames, f"inv: plane {p} frames reserved"),
            Assert(sig["used_words"] == committed + rec_words, f"inv: plane {p} words reserved"),
            Assert(sig["used_words"] <= D, f"inv: plane {p} words within the FIFO"),
            Assert(sig["used_frames"] <= M, f"inv: plane {p} frames within the entries"),
            Assert(wr_ptr == (rd_ptr + committed)[:db], f"inv: plane {p} write pointer"),
            # The head frame being sent: its beats out, word by word.
            Assert(in_frame | ((ob == 0) & (sub == 0)), f"inv: plane {p} idle: no beat out"),
            Assert(~in_frame | ((n != 0) & (ob < pl.expected)),
                   f"inv: plane {p} sending the head frame, inside it"),
            Assert(sub == ob[:max(1, log_ratio)] if ratio > 1 else sub == 0,
                   f"inv: plane {p} sub-beat"),
        ]
        for f in range(q.depth):
            m.d.comb += Assert(~(f < n) | ((q.entries[f] != 0) & (q.entries[f] <= D * lanes)),
                               f"inv: plane {p} frame {f} length")
        # The entries memory: entry meta_rd + j is ghost frame j's (its words).
        for e, row in enumerate(entries.rows):
            j = Signal(mb, name=f"inv_p{p}_entry{e}_index")
            m.d.comb += j.eq(e - e_rd[:mb])
            wj = w[-1]
            for f in reversed(range(q.depth - 1)):
                wj = Mux(j == f, w[f], wj)
            m.d.comb += Assert(~(j < n) | (entries.field(row, 0, word_bits) == wj),
                               f"inv: plane {p} entry {e} holds its frame's words")
        # The words memory, by the ghost tag the harness writes beside each word: its frame's
        # sequence number on the plane (frames committed before it, modulo 2**sb) and its index
        # in the frame. Every invariant is local (no word's place is computed from the frames'
        # lengths): the word at the read pointer is the head frame's word hw, each held word
        # is followed by the next of its frame or the first of the next frame, the newest held
        # word is the last frame's last, and each word's last bit and bytes are its frame's.
        sb, _ = _splitter_tag_bits(dut)
        popped = Signal(sb, name=f"inv_p{p}_frames_gone")
        with m.If(q.pop_en):
            m.d.sync += popped.eq(popped + 1)
        next_seq = Signal(sb, name=f"inv_p{p}_next_frame_seq")
        m.d.comb += [next_seq.eq(popped + n), words.ghost_w.eq(Cat(next_seq, beat))]
        coming = r_rdy & (head.plane == p)
        tags = [(g[:sb], g[sb:]) for g in words.ghosts]
        for a, row in enumerate(words.rows):
            seq, k = tags[a]
            nseq, nk = tags[(a + 1) % D]
            off = Signal(db, name=f"inv_p{p}_word{a}_offset")
            m.d.comb += off.eq(a - rd_ptr)
            f = Signal(sb, name=f"inv_p{p}_word{a}_frame")
            m.d.comb += f.eq(seq - popped)
            wf, bf = w[-1], q.entries[-1]
            for j in reversed(range(q.depth - 1)):
                wf, bf = Mux(f == j, w[j], wf), Mux(f == j, q.entries[j], bf)
            w_nbytes = words.field(row, C, C + nbytes_bits)
            w_last = words.field(row, C + nbytes_bits, C + nbytes_bits + 1)
            held = off < committed
            off_in = Signal(db, name=f"inv_p{p}_word{a}_offset_in")
            m.d.comb += off_in.eq(a - wr_ptr)
            m.d.comb += [
                Assert(~held | ((f < n) & (k < wf) & (w_last == (k == wf - 1)) &
                                (w_nbytes == Mux(w_last, tail_of(bf), lanes))),
                       f"inv: plane {p} word {a} is its frame's"),
                Assert(~(off + 1 < committed) |
                       Mux(w_last, (nseq == (seq + 1)[:sb]) & (nk == 0),
                           (nseq == seq) & (nk == k + 1)),
                       f"inv: plane {p} word {(a + 1) % D} follows word {a}"),
                Assert(~(held & (off == 0)) | ((seq == popped) & (k == hw)),
                       f"inv: plane {p} word {a} at the read pointer: the head frame's"),
                Assert(~(held & (off + 1 == committed)) | ((f == n - 1) & w_last),
                       f"inv: plane {p} word {a} newest: the last frame's last"),
                Assert(~(coming & (off_in < beat)) |
                       (~w_last & (w_nbytes == lanes) & (seq == next_seq) & (k == off_in)),
                       f"inv: plane {p} word {a} of the frame coming in"),
            ]
        rp, mrp = words.read_ports[0], entries.read_ports[0]
        m.d.comb += [
            Assert(~(in_frame | avail) | (rp.kept == Array(words.rows)[rd_ptr]),
                   f"inv: plane {p} the word read is the word at the read pointer"),
            Assert(~avail | (mrp.kept == Array(entries.rows)[e_rd[:mb]]),
                   f"inv: plane {p} the entry read is the entry at the read pointer"),
        ]


# -- path building (tx_path) ----------------------------------------------------------------------

def tx_path_harness(n_qps=1, n_planes=2, max_payload=16, *, bmc=8, cover=None,
                    quiet_config=True, prove=None, invariants=True, block=None):
    """TxPath (``n_qps`` QPs, N = ``n_planes``): under any data packets and control records
    (any opcode, QP, plane, length), any spray answers (the scheduler's promise assumed: an
    answer only while a request is in flight), any ``plane_ok``, ``plane_up`` and
    ``tick_count``, any sink timing on ``m_req``, ``m_hdr``, ``m_send`` and ``m_frame``, and any
    configuration writes, with ``rst`` free, asserted:

    - the stream rules on ``m_req``, ``m_hdr``, ``m_send`` and ``m_frame`` (valid and the whole
      record held until taken), those of ``s_pkt``, ``s_ctrl`` and ``s_ans`` assumed;
    - one header record per plane frame record, one send record per data frame: the
      ``m_frame`` records taken minus the frame headers taken on ``m_hdr`` (opcode not 0; a bad
      packet leaves as a drop header of opcode 0 and no frame) equal the header register's
      frame header (0 or 1), the data frames taken minus the send records taken equal the send
      register's valid; frames never exceed the packets and control records taken.

    Assumed besides: with ``quiet_config`` (default) configuration writes only while no packet
    or control record is offered or inside (``c_valid``, ``held``, ``presenting``,
    ``inflight``): the docstring's "change a context only while the QP is quiet", extended to
    the enable bits. The sinks of ``m_hdr``, ``m_send`` and ``m_frame`` are free: they may
    drop ready at any cycle. (Before the rebuild of [tx-speed], ``m_frame_tvalid`` followed the
    header register's room combinationally, and a sink of ``m_hdr`` dropping ready withdrew a
    plane frame record presented: a stream-rule failure at step 3, found here. ``m_frame`` is
    a register now, its header and send record follow it a cycle after it is taken.)

    Bounded (``prove`` None: BMC ``bmc`` cycles from reset) the third property is "frames never
    exceed the packets and control records taken", ``(taken - frames) mod 2**8 <= 128``, which
    only holds for traces shorter than 128 drops. With ``prove`` = k the harness proves by
    k-induction (from any state, so for every trace length) the exact form that implies it:
    the packets and control records taken, less the frames taken and the inputs dropped (drop
    headers written, bad control records dropped), equal the inputs inside (input register,
    held packet, control register, plane frame record), modulo ``2**8``: no input lost, none
    left twice, no frame invented. The invariants that make the properties inductive (with
    ``invariants``; k = 2 closes, in about 15 s at the default configuration) read TxPath's
    registers by name (:func:`verif.formal.find_signal`): one answer per request in flight
    (``req.taken - ans.taken == inflight``, which the answer assumption relies on), the request
    channel's states (``presenting``, ``pres_new``, ``inflight``, ``need_req``, ``held``) and
    the drop step (``drop_go``) exclusive as the RTL builds them, a plane frame record before its
    header and send record with the header register holding its frame header (opcode not 0),
    the opcodes judged at the input (a good packet's a data opcode, a good control record's a
    control opcode), a control record wanting to go (``ctrl_wants``) held and good, one armed
    (``ctrl_armed``) held with the request channel idle, and each fan-out copy
    (``ctrl_armed_copy*``, ``inflight_copy*``, ``held_copy*``, ``d_lock_copy*`` (set only
    while held; held and not locked, the held packet is the input register's),
    ``drop_copy*``, ``empty_copy*``, ``hdr_open_copy*``, ``open_copy*``) equal to the register
    it stands for (the header pieces shut while ``m_hdr`` is valid). The block is unchanged
    (its one memory, the QP contexts, feeds no property).

    A packet's decision follows its request by 3 cycles and its plane frame record is out one
    cycle later (covers need depth 5); there is no frame here (records only), so the 17-beat
    rule does not apply. Covers: a data frame out, a control frame out, a request sent again
    after an answer with ``found`` = 0, a plane frame record taken after it waited, a drop
    header out.
    """
    from rtl.tx_path import TxPath

    m = Module()
    dut = (block or TxPath)(n_qps, n_planes, max_payload)
    frag = Fragment.get(dut, "formal")
    m.submodules.dut = frag
    pkt = StreamPort(dut.s_pkt, "in", "pkt").elaborate(m)
    ctl = StreamPort(dut.s_ctrl, "in", "ctl").elaborate(m)
    ans = StreamPort(dut.s_ans, "in", "ans").elaborate(m)
    req = StreamPort(dut.m_req, "out", "req").elaborate(m)
    hdr = StreamPort(dut.m_hdr, "out", "hdr").elaborate(m)
    send = StreamPort(dut.m_send, "out", "send").elaborate(m)
    frame = StreamPort(dut.m_frame, "out", "frame").elaborate(m)
    m.d.comb += Assume(~dut.s_ans.valid | (req.taken != ans.taken))
    if quiet_config:
        # The QP contexts and enables change only while the QPs are quiet (TxPath docstring):
        # no packet or control record offered, held, requested or answered.
        busy = Cat(*(find_signal(frag, n) for n in ("c_valid", "held", "presenting",
                                                    "inflight"))).any()
        m.d.comb += Assume(~dut.cfg_we | ~(busy | dut.s_pkt.valid | dut.s_ctrl.valid))
    data_frames = Signal(8, name="data_frames_out")
    with m.If(frame.fire & dut.m_frame.p.data):
        m.d.sync += data_frames.eq(data_frames + 1)
    # A bad packet leaves as a drop header (opcode 0, no frame) for the header inserter.
    frame_hdr = Signal(name="hdr_is_frame")
    m.d.comb += frame_hdr.eq(dut.m_hdr.p.opcode != 0)
    frame_hdrs = Signal(8, name="frame_headers_out")
    with m.If(hdr.fire & frame_hdr):
        m.d.sync += frame_hdrs.eq(frame_hdrs + 1)
    m.d.comb += [
        Assert((frame.taken - frame_hdrs)[:8] == (dut.m_hdr.valid & frame_hdr),
               "one header record per plane frame record"),
        Assert((data_frames - send.taken)[:8] == dut.m_send.valid,
               "one send record per data frame"),
    ]
    if prove is None:
        m.d.comb += Assert((pkt.taken + ctl.taken - frame.taken)[:8] <= 128,
                           "frames never exceed the packets and control records taken")
    else:
        _tx_path_invariants(m, frag, dut, locals(), exact=True, invariants=invariants)
    waited = past(m, dut.m_frame.valid & ~dut.m_frame.ready, "frame_waited")
    _covers(m, {
        "data_frame_out": frame.fire & dut.m_frame.p.data,
        "control_frame_out": frame.fire & ~dut.m_frame.p.data,
        "request_again_after_not_found": req.fire & past(m, ans.fire & ~dut.s_ans.p.found,
                                                         "was_not_found"),
        "frame_taken_after_wait": frame.fire & waited,
        "drop_header_out": hdr.fire & ~frame_hdr,
    })
    ports = pkt.free_ports() + ctl.free_ports() + ans.free_ports() + req.free_ports() + \
        hdr.free_ports() + send.free_ports() + frame.free_ports() + \
        [dut.plane_ok, dut.plane_up, dut.tick_count, dut.cfg_addr, dut.cfg_wdata, dut.cfg_we]
    depths = {"bmc": bmc} if prove is None else {"prove": prove}
    if cover is not None:
        depths["cover"] = cover
    return m, ports, depths


def _tx_path_invariants(m, frag, dut, h, *, exact, invariants):
    """The k-induction form of :func:`tx_path_harness`: the exact accounting that replaces the
    bounded "frames never exceed" property and the invariants over TxPath's registers."""
    from models.layouts import CONTROL_OPCODES, DATA_OPCODES

    pkt, ctl, ans, req, frame = h["pkt"], h["ctl"], h["ans"], h["req"], h["frame"]
    sig = {n: find_signal(frag, n) for n in (
        "p_valid", "p_good", "held", "inflight", "need_req", "presenting", "pres_new",
        "c_valid", "c_good", "drop_go", "ctrl_wants", "ctrl_armed")}
    p_valid, p_good, held, inflight = sig["p_valid"], sig["p_good"], sig["held"], sig["inflight"]
    presenting, pres_new, c_valid, drop_go = (sig["presenting"], sig["pres_new"], sig["c_valid"],
                                              sig["drop_go"])
    frame_valid, hdr_valid, send_valid = dut.m_frame.valid, dut.m_hdr.valid, dut.m_send.valid
    outputs_empty = ~frame_valid & ~hdr_valid & ~send_valid

    # Every packet or control record taken is inside (input register, held packet, control
    # register, plane frame record), was dropped (a drop header, or a bad control record) or
    # left as a frame: exact modulo 2**8, so frames never exceed the records taken.
    dropped = Signal(8, name="inputs_dropped")
    c_drop = c_valid & ~sig["c_good"]
    m.d.sync += dropped.eq(dropped + drop_go + c_drop)
    inside = Signal(3, name="inputs_inside")
    m.d.comb += inside.eq(p_valid + held + c_valid + frame_valid)
    m.d.comb += Assert((pkt.taken + ctl.taken - frame.taken - dropped)[:8] == inside,
                       "every packet and control record taken is inside, dropped or a frame")
    if not invariants:
        return

    def one_of(value, codes):
        return Cat(*(value == code for code in codes)).any()

    from rtl.common import records
    p, d, c = (View(rec, find_signal(frag, n)) for rec, n in (
        (records.TX_PACKET, "p"), (records.TX_PACKET, "d"), (records.CONTROL_RECORD, "c")))
    m.d.comb += [
        # A request is taken only from presenting/start; its answer is the one in flight.
        Assert((req.taken - ans.taken)[:8] == inflight, "inv: one answer per request in flight"),
        # inflight and a presented request are the held packet's, one at a time.
        Assert(~inflight | held, "inv: a request in flight is the held packet's"),
        Assert(~(presenting & inflight), "inv: a request is presented or in flight, not both"),
        Assert(~(sig["need_req"] & inflight), "inv: a retry is owed only with nothing in flight"),
        Assert(~sig["need_req"] | held, "inv: a retry is owed only for a held packet"),
        Assert(~presenting | Mux(pres_new, p_valid & p_good & ~held, held),
               "inv: a request presented is the waiting or the held packet's"),
        # The drop header is written one cycle after it was armed with everything idle.
        Assert(~drop_go | (p_valid & ~p_good & ~held & ~presenting & ~inflight &
                           ~frame_valid & ~hdr_valid), "inv: a drop with nothing held"),
        # A plane frame record is loaded only with every output empty; its header and send
        # record become valid when it is taken.
        Assert(~frame_valid | (~hdr_valid & ~send_valid), "inv: record before its header"),
        Assert(~frame_valid | (dut.m_hdr.p.opcode != 0),
               "inv: the header register holds the record's frame header"),
        Assert(~send_valid | dut.m_frame.p.data, "inv: a send record is a data frame's"),
        # Opcodes, judged when taken: a good packet's is a data opcode, a good control
        # record's a control opcode (neither is 0, the drop header's).
        Assert(~(p_valid & p_good) | one_of(p.opcode, DATA_OPCODES), "inv: good packet opcode"),
        Assert(~held | one_of(d.opcode, DATA_OPCODES), "inv: held packet opcode"),
        Assert(~(c_valid & sig["c_good"]) | one_of(c.opcode, CONTROL_OPCODES),
               "inv: good control record opcode"),
        # A control record wants to go only held and good; it is armed (it goes when it wants
        # to and the outputs are empty) only held, with no request presented or in flight and
        # no drop header written.
        Assert(~sig["ctrl_wants"] | (c_valid & sig["c_good"]), "inv: a record wanting is good"),
        Assert(~sig["ctrl_armed"] | (c_valid & ~presenting & ~inflight & ~drop_go),
               "inv: a control record armed with the request channel idle"),
    ]
    # The copies of a register (fan-out) equal it (TxPath's path building comments).
    names = {}
    for frag_sig in _all_signals(frag):
        names.setdefault(frag_sig.name, []).append(frag_sig)
    hdr_open = ~frame_valid & ~hdr_valid
    for name, group in names.items():
        for s in group:
            if name.startswith("sel_copy") or name.startswith("inflight_copy"):
                m.d.comb += Assert(s == inflight, f"inv: {name} is inflight")
            elif name.startswith("ctrl_armed_copy"):
                m.d.comb += Assert(s == sig["ctrl_armed"], f"inv: {name} is ctrl_armed")
            elif name.startswith("d_lock_copy"):
                # the held packet's lock (held in the cycle before and not decided then): set
                # only while held; a packet held but not locked (its request taken in the cycle
                # before) is still the input register's
                m.d.comb += [
                    Assert(s == names["d_lock_copy0"][0], f"inv: {name} is d_lock_copy0"),
                    Assert(~s | held, f"inv: {name} only while held"),
                    Assert(~held | s | (Cat(d.as_value(), find_signal(frag, "d_bytes")) ==
                                        Cat(p.as_value(), find_signal(frag, "p_bytes"))),
                           f"inv: {name}: a packet held, not locked, is the input register's"),
                ]
            elif name.startswith("drop_copy"):
                m.d.comb += Assert(s == drop_go, f"inv: {name} is drop_go")
            elif name.startswith("held_copy"):
                m.d.comb += Assert(s == held, f"inv: {name} is held")
            elif name.startswith("empty_copy"):
                m.d.comb += Assert(s == outputs_empty, f"inv: {name} is every output empty")
            elif name.startswith("hdr_open_copy"):
                m.d.comb += Assert(s == hdr_open, f"inv: {name} is the header register open")
            elif name.startswith("open_copy"):
                if "hdr_" + name in names:
                    # a header piece: written in the decision cycle (step 1) or the next (the
                    # path fields, step 2), never while the header is valid
                    m.d.comb += Assert(~(s & hdr_valid), f"inv: {name} shut while m_hdr valid")
                else:
                    # a piece of m_frame's record: open while it and the send record are empty
                    m.d.comb += Assert(s == (~frame_valid & ~send_valid),
                                       f"inv: {name} is the record register open")


def _all_signals(fragment):
    """Every signal the statements of ``fragment`` and its subfragments read or write, once."""
    found = {}

    def walk(frag):
        for statements in frag.statements.values():
            for stmt in statements:
                for sig in stmt._lhs_signals() | stmt._rhs_signals():
                    found[id(sig)] = sig
        for sub, *_ in frag.subfragments:
            if hasattr(sub, "statements"):
                walk(sub)
    walk(fragment)
    return list(found.values())
