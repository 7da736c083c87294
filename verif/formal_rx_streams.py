# SPDX-License-Identifier: BSD-2-Clause
"""Stream-contract harnesses of the receive side and of the switch input, for
:func:`verif.formal.check` (same conventions as :mod:`verif.formal_rx`: each function returns
``(module, ports, depths)``).

- :func:`switch_arbiter_harness`: the switch's round-robin input arbiter (inductive);
- :func:`switch_ingress_harness`: a switch ingress port (inductive, or bounded);
- :func:`rx_plane_buffer_harness`: one plane's receive frame buffer (bounded);
- :func:`plane_merge_harness`: the NIC's plane merge, two planes and their buffers (inductive,
  or bounded);
- :func:`rx_parser_harness`: the NIC's receive parser (bounded).

Each harness assumes the stream rules (docs/protocol.md section 8) of the sources that drive
the block's stream inputs, asserts them of its outputs, counts frames or beats on every port
(no frame lost, duplicated or invented) and covers the interesting case of each property.
``rst`` is free everywhere; configuration inputs are free (any value, changing at any time)
unless the block's docstring states a condition, which the harness then assumes.

Link-facing inputs (``always_ready``: no ``tready``) have no stream rule to assume: any beat
in any cycle. Where a harness follows frame contents it *tags* beats: it assumes that byte 0 of
every beat of a link frame names the frame and the beat (the blocks never look at that byte of
a beat but the first, and then only through checks whose outcome the harness takes from the
block's own report), so that a word read out names where it came from.
"""

from types import SimpleNamespace

from amaranth.hdl import Assert, Assume, Cat, Const, Cover, Fragment, Module, Mux, Signal, Value

from .formal import StreamPort, find_signal, past
from .formal_rx import GhostFifo

__all__ = ["switch_arbiter_harness", "switch_ingress_harness", "rx_plane_buffer_harness",
           "plane_merge_harness", "rx_parser_harness"]


def _covers(m, covers):
    for name, cond in covers.items():
        m.d.comb += Cover(cond, name)


def _counter(m, width, inc, name):
    """A counter of the cycles ``inc``, modulo ``2**width``."""
    reg = Signal(width, name=name)
    m.d.sync += reg.eq(reg + inc)
    return reg


def _popcount(bits):
    return sum(bits[i] for i in range(len(bits)))


def _first_set_from(m, bits, start, n, name):
    """The index of the first set bit of ``bits`` (``n`` wide) from ``start`` on, circularly
    (``start`` itself first); 0 when none is set."""
    out = Signal(range(n), name=name)
    with m.Switch(start):
        for s in range(n):
            with m.Case(s):
                for d in reversed(range(n)):
                    p = (s + d) % n
                    with m.If(bits[p]):
                        m.d.comb += out.eq(p)
    return out


# -- block RAM as registers (for the inductive proofs) ---------------------------------------------

class _RegisterMemoryPlatform(str):
    """The ``"formal"`` platform (a ``str`` equal to it: the FIFOs of ``amaranth.lib.fifo`` keep
    their own formal checks) whose ``get_memory`` builds every :class:`amaranth.lib.memory.Memory`
    of the block as registers with the same ports and timing: a write port writes its row at the
    clock edge; a synchronous read port is not transparent (it gives the row as it was before a
    write in the same cycle), its ``data`` changes only on ``en`` and, like a block RAM's, not on
    reset (its first value is 0 where the RAM's is undefined: a base case the RAM also has); the
    rows start at ``init`` and are not reset. An induction invariant can then name the rows:
    ``memories`` lists ``(memory, rows)`` in the order they were built."""

    def __new__(cls):
        self = super().__new__(cls, "formal")
        self.memories = []
        return self

    def get_memory(self, memory):
        from amaranth.hdl import Elaboratable

        index = len(self.memories)
        rows = [Signal(memory.shape, name=f"ram{index}_row{j}", reset_less=True,
                       init=memory.init[j]) for j in range(memory.depth)]
        self.memories.append((memory, rows))

        class RegisterRam(Elaboratable):
            def elaborate(self, platform):
                m = Module()
                for port in memory.write_ports:
                    assert port.domain == "sync" and len(port.en) == 1, "one enable, sync"
                    for j, row in enumerate(rows):
                        with m.If(port.en & (port.addr == j)):
                            m.d.sync += row.eq(port.data)
                for n, port in enumerate(memory.read_ports):
                    value = _pick(rows, port.addr)
                    if port.domain == "comb":
                        m.d.comb += port.data.eq(value)
                        continue
                    assert port.domain == "sync" and not port.transparent_for, "plain sync read"
                    q = Signal(memory.shape, name=f"ram{index}_rd{n}", reset_less=True)
                    with m.If(port.en):
                        m.d.sync += q.eq(value)
                    m.d.comb += port.data.eq(q)
                return m

        return RegisterRam()


def _pick(values, index):
    """``values[index]`` (a Mux chain; the first value past the end)."""
    index = Value.cast(index)
    out = values[0]
    for j in range(1, len(values)):
        out = Mux(index == j, values[j], out)
    return out


# -- switch arbiter ---------------------------------------------------------------------------

def switch_arbiter_harness(ports=2, core_width=256, bytes_width=7, *, block=None, prove=3,
                           cover=14, bmc=None):
    """SwitchArbiter (K = ``ports``, C = ``core_width``, frames of 1..``2**bytes_width - 1``
    bytes): the ingress side is a free environment that keeps its promises, asserted of
    :class:`rtl.switch_ingress.SwitchIngress` by :func:`switch_ingress_harness`: each ingress's
    offer (``f_valid[i]``, ``f_bytes[i]``) is held until ``f_take[i]`` (a stream with ready
    ``f_take``), a frame has at least one byte (the ingress offers 54 at least), and
    ``rd_data[i]`` changes only in the cycle after ``rd_en[i]``; the harness tags it (low bits:
    the ingress's number and the count of its reads before the one it answers). Any sink timing.
    Asserted:

    - the stream rules on ``m_axis`` (data, keep and last held until taken);
    - the grant only to a requesting ingress, one at a time: ``f_take`` is exactly
      ``grant`` at ``grant_port``, and that ingress offers a frame; round-robin order (the first
      offering ingress after the last one granted); no idle cycle (a free core stream and an
      offer give a grant);
    - frames not interleaved, none lost or duplicated: a grant only once the frame before has
      left (its last beat taken in that cycle), at most one frame granted and not out; reads
      only of the ingress granted, reads minus beats out = ``m_axis.valid``; every beat out is
      the next word of the granted ingress (its tag), the frame has ``ceil(bytes / (C/8))``
      beats, ``tlast`` on the last, ``tkeep`` all ones before it and the frame's bytes on it.

    Inductive (k = ``prove``) through invariants on the block's registers (``remaining``,
    ``current``, ``out_port``, ``keep_held``, ``first``). ``block`` replaces the block under
    test (a broken one must fail)."""
    from rtl.switch_arbiter import SwitchArbiter

    block = block or SwitchArbiter
    m = Module()
    dut = block(ports, core_width, bytes_width)
    frag = Fragment.get(dut, "formal")
    m.submodules.dut = frag
    wb = core_width // 8
    lb = wb.bit_length() - 1
    max_words = -(-((1 << bytes_width) - 1) // wb)
    pb = max(1, (ports - 1).bit_length())
    sb = 4                                      # bits of the word tags' sequence numbers
    tag_bits = sb + pb

    offers = []
    for i in range(ports):
        iface = SimpleNamespace(valid=dut.f_valid[i], ready=dut.f_take[i],
                                payload=dut.f_bytes[i])
        offers.append(StreamPort(iface, "in", f"f{i}", count_width=4).elaborate(m))
        m.d.comb += Assume(~dut.f_valid[i] | (dut.f_bytes[i] != 0))

    # The ingress read ports: data changes only after a read; its tag names the word.
    reads = []
    for i in range(ports):
        rd = _counter(m, sb, dut.rd_en[i], f"rd{i}_count")
        reads.append(rd)
        was_read = past(m, dut.rd_en[i], f"rd{i}_was_read")
        prev_ok = past(m, 1, f"rd{i}_prev_ok")
        prev = past(m, dut.rd_data[i], f"rd{i}_prev")
        any_read = Signal(name=f"rd{i}_any")
        with m.If(dut.rd_en[i]):
            m.d.sync += any_read.eq(1)
        m.d.comb += Assume(~prev_ok | was_read | (dut.rd_data[i] == prev))
        m.d.comb += Assume(~any_read | (dut.rd_data[i][:tag_bits] ==
                                        Cat((rd - 1)[:sb], Const(i, pb))))

    o = StreamPort(dut.m_axis, "out", "o", count_width=4).elaborate(m)
    beat = dut.m_axis.p
    last_fire = Signal(name="o_last_fire")
    m.d.comb += last_fire.eq(o.fire & beat.last)

    # Ghost of the frame in flight (granted, last beat not yet taken).
    grants = _counter(m, 4, dut.grant, "grants")
    frames_out = _counter(m, 4, last_fire, "frames_out")
    in_flight = Signal(4, name="in_flight")
    m.d.comb += in_flight.eq(grants - frames_out)
    g_port = Signal(range(ports), name="g_port")
    g_words = Signal(range(max_words + 1), name="g_words")
    g_keep = Signal(wb, name="g_keep")
    bi = Signal(range(max_words + 1), name="g_beat")      # beats of the frame taken
    size = Signal(bytes_width, name="grant_bytes")
    m.d.comb += size.eq(dut.f_bytes[dut.grant_port])
    size_words = (size + wb - 1) >> lb
    size_tail = Signal(range(wb + 1), name="grant_tail_bytes")
    m.d.comb += size_tail.eq(((size - 1) & (wb - 1)) + 1)
    size_keep = ((Const(1, wb + 1) << size_tail) - 1)[:wb]
    with m.If(last_fire):
        m.d.sync += bi.eq(0)
    with m.Elif(o.fire):
        m.d.sync += bi.eq(bi + 1)
    with m.If(dut.grant):
        m.d.sync += [g_port.eq(dut.grant_port), g_words.eq(size_words), g_keep.eq(size_keep)]
    last_g = Signal(range(ports), name="last_granted", init=ports - 1)
    with m.If(dut.grant):
        m.d.sync += last_g.eq(dut.grant_port)

    # The grant.
    for i in range(ports):
        m.d.comb += Assert(dut.f_take[i] == (dut.grant & (dut.grant_port == i)),
                           f"f_take[{i}] exactly a grant of ingress {i}")
    m.d.comb += Assert(~dut.grant | dut.f_valid.bit_select(dut.grant_port, 1),
                       "the grant goes to a requesting ingress")
    after = Signal(range(ports), name="rr_start")
    m.d.comb += after.eq(Mux(last_g == ports - 1, 0, last_g + 1))
    expected = _first_set_from(m, dut.f_valid, after, ports, "rr_expected")
    m.d.comb += Assert(~dut.grant | (dut.grant_port == expected), "round-robin order")
    idle = Signal(name="core_idle")              # no frame left, or its last beat leaving now
    m.d.comb += idle.eq((in_flight == 0) | last_fire)
    m.d.comb += Assert(~dut.grant | idle, "no grant while a frame is out (no interleaving)")
    m.d.comb += Assert(~(idle & dut.f_valid.any()) | dut.grant, "no idle cycle")
    m.d.comb += Assert(in_flight <= 1, "at most one frame granted and not out")
    m.d.comb += Assert(dut.m_axis.valid == (in_flight != 0), "valid exactly while in a frame")

    # Reads and beats out.
    outs = []
    for i in range(ports):
        mine = dut.m_axis.valid & (g_port == i)
        out_i = _counter(m, sb, o.fire & (g_port == i), f"out{i}_count")
        outs.append(out_i)
        m.d.comb += Assert(~dut.rd_en[i] | (dut.grant & (dut.grant_port == i)) |
                           mine, f"rd_en[{i}] only of the granted ingress")
        m.d.comb += Assert((reads[i] - out_i)[:sb] == mine, f"ingress {i}: reads - beats out")
    data_tag = beat.data[:tag_bits]
    out_seq = Mux(g_port == 0, outs[0], outs[-1]) if ports <= 2 else None
    if out_seq is None:
        out_seq = Signal(sb, name="out_seq")
        with m.Switch(g_port):
            for i in range(ports):
                with m.Case(i):
                    m.d.comb += out_seq.eq(outs[i])
    all_ones = (1 << wb) - 1
    v = dut.m_axis.valid
    m.d.comb += [
        Assert(~v | (data_tag == Cat(out_seq, g_port)),
               "a beat out is the next word of the granted ingress"),
        Assert(~v | (bi < g_words), "no beat past the frame's words"),
        Assert(~v | (beat.last == (bi == g_words - 1)), "tlast on the frame's last word"),
        Assert(~v | (beat.keep == Mux(beat.last, g_keep, all_ones)), "tkeep: the frame's bytes"),
    ]

    # Invariants of the block's registers (they make the properties inductive).
    remaining = find_signal(frag, "remaining")
    m.d.comb += [
        Assert(remaining == Mux(v, g_words - bi - 1, 0), "inv: remaining words"),
        Assert(~v | (find_signal(frag, "current") == g_port), "inv: current"),
        Assert(~v | (find_signal(frag, "out_port") == g_port), "inv: out_port"),
        Assert(~v | (find_signal(frag, "keep_held") == g_keep), "inv: keep_held"),
        Assert(find_signal(frag, "first") == after, "inv: round-robin start"),
        Assert(v | (bi == 0), "inv: no beat counted outside a frame"),
        Assert(~v | ((g_words != 0) & (g_words <= max_words)), "inv: frame words"),
        Assert(~v | (g_keep != 0), "inv: frame keep"),
        Assert(last_g < ports, "inv: last granted"),
    ]

    stalled = past(m, v & ~dut.m_axis.ready, "o_was_stalled")
    covers = {
        "beat_taken_after_a_stall": o.fire & stalled,
        "whole_longest_frame_out": last_fire & (g_words == max_words),
        "back_to_back_from_the_other_ingress": dut.grant & last_fire &
        (dut.grant_port != g_port),
        "round_robin_passes_a_waiting_ingress": dut.grant & dut.f_valid.all() &
        (dut.grant_port == ports - 1),
        "short_last_word": last_fire & (beat.keep != all_ones) & (g_words > 1),
    }
    _covers(m, covers)
    ports_list = [dut.f_valid, Value.cast(dut.f_bytes), Value.cast(dut.rd_data), dut.m_axis.ready]
    depths = {"prove": prove, "cover": cover} if bmc is None else {"bmc": bmc}
    return m, ports_list, depths


# -- link frames (the always-ready inputs of the switch ingress and of the plane buffers) -------

class _LinkFrames:
    """What the harness knows of the frames on an always-ready link port ``s_axis`` (W bits):
    the beat index in the frame, the frame's number, the bytes so far, and the frame's outer
    Payload Length (bytes 18-19). Assumed of the source: the low ``tag_bits`` (at most 8) of
    byte 0 of every beat are ``Cat(beat index, frame number, ident)`` (``beat_bits`` and
    ``frame_bits`` of them; ``ident``, a ``(value, width)`` constant such as the plane); ``tkeep``
    all ones but on the last beat, contiguous from lane 0 with at least one byte there
    (rtl/common/ports.py; ``empty_last``: or none); with ``zero_data`` every other data bit is 0
    but those of the Payload Length's beat and lanes (no decision these harnesses check reads
    another byte; the plane buffer's ICRC verdict is then a function of the tags; fewer free
    bits make each BMC step cheaper). ``tag(frame, beat)`` is the tag of a word's first beat."""

    def __init__(self, m, s_axis, name, *, beat_bits=4, frame_bits=4, bytes_width=8,
                 zero_data=True, ident=None, empty_last=False):
        self.m = m
        lanes = len(s_axis.p.keep)
        self.fire = s_axis.valid
        self.last = s_axis.p.last
        self.end = Signal(name=f"{name}_end")
        m.d.comb += self.end.eq(self.fire & self.last)
        self.beat = Signal(8, name=f"{name}_beat")            # saturating
        self.frame = Signal(frame_bits, name=f"{name}_frame")
        self.beat_bits, self.frame_bits = beat_bits, frame_bits
        with m.If(self.fire):
            m.d.sync += self.beat.eq(Mux(self.last, 0, Mux(self.beat == 255, 255,
                                                           self.beat + 1)))
            with m.If(self.last):
                m.d.sync += self.frame.eq(self.frame + 1)
        self.ident = Const(0, 0) if ident is None else Const(*ident)
        self.tag_bits = beat_bits + frame_bits + len(self.ident)
        m.d.comb += Assume(~self.fire | (s_axis.p.data[:self.tag_bits] ==
                                         Cat(self.beat[:beat_bits], self.frame, self.ident)))
        # tkeep (rtl/common/ports.py): all ones but on the last beat, contiguous from lane 0 there
        # (at least one lane)
        keep = s_axis.p.keep
        first_j = 0 if empty_last else 1
        m.d.comb += Assume(~self.fire | Mux(self.last, Cat(*(keep == (1 << j) - 1 for j in
                                                             range(first_j, lanes + 1))).any(),
                                            keep == (1 << lanes) - 1))
        # bytes of the frame, this beat included (saturating)
        count = Signal(bytes_width, name=f"{name}_count")
        self.count = count                    # bytes of the frame before this beat
        nbytes = Mux(self.last, _popcount(s_axis.p.keep), lanes)
        wide = Signal(bytes_width + 1, name=f"{name}_total_wide")
        m.d.comb += wide.eq(count + nbytes)
        self.total = Signal(bytes_width, name=f"{name}_total")
        cap = (1 << bytes_width) - 1
        m.d.comb += self.total.eq(Mux(wide > cap, cap, wide))
        with m.If(self.fire):
            m.d.sync += count.eq(Mux(self.last, 0, self.total))
        pl_beat, pl_lane = divmod(18, lanes)
        lane_byte = lambda j: s_axis.p.data[8 * j:8 * j + 8]
        pl_here = Cat(lane_byte(pl_lane + 1), lane_byte(pl_lane))
        pl_held = Signal(16, name=f"{name}_pl_held")
        self.at_pl = Signal(name=f"{name}_at_pl")
        m.d.comb += self.at_pl.eq(self.beat == pl_beat)
        with m.If(self.fire & self.at_pl):
            m.d.sync += pl_held.eq(pl_here)
        self.payload_length = Mux(self.at_pl, pl_here, pl_held)
        self.bad = s_axis.p.user[0]
        if zero_data:
            # Only the tag and the Payload Length steer anything: the other data bits are 0
            # (fewer free bits for the solver; the tag still follows every word).
            mask = ((1 << len(s_axis.p.data)) - 1) ^ ((1 << self.tag_bits) - 1)
            pl_mask = 0xFFFF << (8 * pl_lane)
            m.d.comb += Assume(~self.fire | ((s_axis.p.data & Mux(self.at_pl, mask ^ pl_mask,
                                                                  mask)) == 0))

    def tag(self, frame, beat):
        return Cat(Value.cast(beat)[:self.beat_bits], Value.cast(frame)[:self.frame_bits],
                   self.ident)


# -- switch ingress ---------------------------------------------------------------------------

def switch_ingress_harness(data_width=128, core_width=256, depth_words=4, max_frame=64, *,
                           block=None, bmc=10, cover=12, empty_last=False, prove=None,
                           overflow_cover=True):
    """SwitchIngress (W = ``data_width``, C = ``core_width``, a FIFO of ``depth_words`` words,
    frames of at most ``max_frame`` bytes): any link traffic (any beat in any cycle, any length,
    ``tuser`` and Payload Length; ``tkeep`` all ones but on the last beat, contiguous from lane 0
    with at least one byte there, ``rtl/common/ports.py``; byte 0 of every beat tagged, the
    other data bits 0 but the Payload Length's, see :class:`_LinkFrames`), any reset. The
    reader is the arbiter's contract (asserted of it by :func:`switch_arbiter_harness`):
    ``f_take`` only while ``f_valid``, ``rd_en`` only for a word of a frame taken
    (``ceil(bytes / (C/8))`` words each, the first read in the take's cycle or later), any
    timing. Asserted:

    - never backpressured (no ``tready``: by construction) and every frame reported once: an
      ``ev_end`` exactly at its last beat, at most one drop reason; dropped for overflow only
      when one of its words found the FIFO full (the harness's count: words of kept frames not
      yet read plus the frame's words so far); a frame kept has at most ``max_frame`` bytes.
      (Which frames are malformed is the golden model's question, ``tb/test_switch.py``: the
      harness takes the block's ``ev_overflow``/``ev_malformed`` as the verdict; an exact
      re-derivation of the length checks made each BMC step several times slower.)
    - no frame lost, duplicated, reordered or invented: a ghost queue of the kept frames; the
      frame offered is its head with the frame's byte count; a frame kept is offered within
      two cycles of its last beat (``f_valid`` never low for 3 cycles while one waits);
    - the offer (``f_valid``, ``f_bytes``) held until ``f_take``; ``rd_data`` changed only by a
      ``rd_en``;
    - words read are the kept frames' words in order: after a read, ``rd_data`` is word ``w`` of
      the frame being read (its tag: never a word overwritten, never a dropped frame's word).

    ``prove`` (k): unbounded, by k-induction of that depth, with the block's two block RAMs (the
    word FIFO and the descriptor FIFO's storage, ``SyncFIFOBuffered``'s inner memory) built as
    registers of the same ports and timing (:class:`_RegisterMemoryPlatform`; the block's own
    logic and the FIFO's unchanged), so that the invariants of
    :func:`_switch_ingress_invariants` can name what they hold: the frame being received (bytes,
    slot, the beats of the word being built, words written) against the harness's link
    tracking, the pointers against the kept words, every word of every frame in the FIFO (taken
    and being read, or kept and not yet taken) tagged in the RAM at its place, the descriptor
    FIFO's entries the ghost queue's byte counts. ``prove=None`` (BMC of ``bmc`` cycles from
    reset) checks the block as it is, its RAMs as memories.
    ``empty_last`` also allows a last beat with no byte (``tkeep`` 0), outside the convention:
    it adds no byte and no word (``test_switch_ingress_empty_last_beat``, which found the block
    writing a word for it that its reader never read, the words of the frames after it then
    shifted; fixed). ``overflow_cover`` False leaves out the overflow cover (a larger FIFO
    fills beyond the cover depth)."""
    from rtl.switch_ingress import SwitchIngress

    block = block or SwitchIngress
    m = Module()
    dut = block(data_width, core_width, depth_words, max_frame)
    inductive = prove is not None
    platform = _RegisterMemoryPlatform() if inductive else "formal"
    frag = Fragment.get(dut, platform)
    m.submodules.dut = frag
    assert dut.s_axis.signature.always_ready, "the link port has no tready"
    per_word = core_width // data_width
    wbytes = core_width // 8
    bw = dut.bytes_width
    link = _LinkFrames(m, dut.s_axis, "link", bytes_width=bw + 1, empty_last=empty_last)

    # --- each frame's fate: reported once; an overflow only when the FIFO was full ------------
    word_done = link.fire & (link.last | (link.beat % per_word == per_word - 1))
    kept_words = Signal(8, name="h_kept_words")           # words of kept frames, not yet read
    cur_words = Signal(8, name="h_cur_words")             # this frame's words so far
    saw_full = Signal(name="h_saw_full")
    full_now = word_done & (kept_words + cur_words >= depth_words)
    kept = Signal(name="h_kept")
    m.d.comb += kept.eq(link.end & ~dut.ev_overflow & ~dut.ev_malformed)
    with m.If(link.fire):
        with m.If(link.last):
            m.d.sync += [saw_full.eq(0), cur_words.eq(0)]
        with m.Else():
            m.d.sync += [saw_full.eq(saw_full | full_now), cur_words.eq(cur_words + word_done)]
    m.d.comb += [
        Assert(dut.ev_end == link.end, "ev_end at each frame's last beat"),
        Assert(~dut.ev_overflow | saw_full | full_now,
               "dropped for overflow only when a word found the FIFO full"),
        Assert(~(dut.ev_overflow & dut.ev_malformed), "one reason per frame dropped"),
        Assert(~kept | (link.total <= max_frame), "a frame kept fits max_frame"),
    ]

    # --- the offer: a ghost queue of the kept frames ------------------------------------------
    n_frames = depth_words // (-(-54 // wbytes)) + 1
    ghost = GhostFifo(m, n_frames, bw + link.frame_bits, "kept")
    offer = StreamPort(SimpleNamespace(valid=dut.f_valid, ready=dut.f_take, payload=dut.f_bytes),
                       "out", "f", count_width=4).elaborate(m)
    m.d.comb += Assume(~dut.f_take | dut.f_valid)
    m.d.comb += [ghost.push_en.eq(kept), ghost.push_val.eq(Cat(link.total[:bw], link.frame)),
                 ghost.pop_en.eq(offer.fire)]
    ghost.elaborate()
    head_bytes, head_frame = ghost.head[:bw], ghost.head[bw:]
    m.d.comb += Assert(~dut.f_valid | ((ghost.count != 0) & (dut.f_bytes == head_bytes)),
                       "the frame offered is the oldest kept frame, with its bytes")
    waiting = Signal(2, name="offer_wait")
    with m.If((ghost.count != 0) & ~dut.f_valid):
        m.d.sync += waiting.eq(waiting + 1)
    with m.Else():
        m.d.sync += waiting.eq(0)
    m.d.comb += Assert(waiting <= 2, "a kept frame is offered within two cycles")

    # --- reading: the frames taken, word by word -------------------------------------------------
    words_of = lambda nbytes: (nbytes + wbytes - 1) // wbytes
    frame_read, rd_words = _frame_reader(m, link, offer.fire, dut.rd_en, dut.rd_data,
                                         words_of(head_bytes), head_frame, per_word, "rd",
                                         depth=max(3, n_frames - 1))
    # kept_words: words of kept frames not yet read (the harness's FIFO level)
    m.d.sync += kept_words.eq(kept_words + Mux(kept, cur_words + word_done, 0) - dut.rd_en)

    if inductive:
        _switch_ingress_invariants(m, frag, dut, platform.memories, link, ghost=ghost,
                                   kept_words=kept_words, cur_words=cur_words,
                                   saw_full=saw_full, waiting=waiting, empty_last=empty_last)

    stalled = past(m, dut.f_valid & ~dut.f_take, "f_was_stalled")
    covers = {
        "frame_taken_after_a_stall": offer.fire & stalled,
        "two_frames_kept": kept & (ghost.count == 1),
        "whole_frame_read": frame_read & (rd_words == words_of(max_frame)),
        "malformed_drop": dut.ev_malformed & ~link.bad,
        "oversize_drop": dut.ev_malformed & (link.total > max_frame),
    }
    if overflow_cover:     # a full FIFO: depth_words words kept, then one more
        covers["overflow_drop"] = dut.ev_overflow
    _covers(m, covers)
    s = dut.s_axis
    ports = [s.valid, Value.cast(s.payload), dut.f_take, dut.rd_en]
    depths = {"prove": prove} if inductive else {"bmc": bmc}
    depths["cover"] = cover
    return m, ports, depths


def _switch_ingress_invariants(m, frag, dut, memories, link, *, ghost, kept_words, cur_words,
                               saw_full, waiting, empty_last):
    """The invariants that make :func:`switch_ingress_harness`'s properties inductive: what the
    block's registers (the frame being received, the pointers, the word RAM and the descriptor
    FIFO, both as registers) hold against the harness's ghosts (the link frame's beats and bytes,
    the kept frames not yet taken, the frames taken and not yet read)."""
    from amaranth.utils import exact_log2

    from .formal_tx_streams import _harness_signal

    assert not empty_last, "the proof follows the port convention (tkeep[0] on a last beat)"
    W, C, D = dut.data_width, dut.core_width, dut.depth_words
    per_word, wbytes, lanes = C // W, C // 8, W // 8
    bw, ab = dut.bytes_width, exact_log2(D)
    pb = exact_log2(per_word)
    max_frame = dut.max_frame
    min_words = -(-54 // wbytes)
    max_words = -(-max_frame // wbytes)
    sig = lambda name: find_signal(frag, name)
    wp, cwp, rp = sig("wp"), sig("cwp"), sig("rp")
    slot, count, oversize, overflow = sig("slot"), sig("count"), sig("oversize"), sig("overflow")
    held = [sig(f"held{i}") for i in range(per_word - 1)]
    (_, rows), = [(mem, r) for mem, r in memories if len(r) == D and len(r[0]) == C]
    (_, fifo_rows), = [(mem, r) for mem, r in memories if r is not rows]   # the descriptors
    inner_level, consume = sig("inner_level"), sig("consume")
    inv = []

    def ring(value):                  # a pointer difference, modulo the pointers' wrap
        return Value.cast(value)[:ab + 1]

    # The frame being received. Its beats before this one are all full (tkeep all ones but on
    # the last beat), so the bytes so far are the beats times the lanes (saturating).
    beat = link.beat
    cap = (1 << len(link.count)) - 1
    full_bytes = Signal(16, name="inv_beat_bytes")
    m.d.comb += full_bytes.eq(beat * lanes)
    inv += [
        (link.count == Mux(full_bytes > cap, cap, full_bytes), "the frame's bytes: its beats"),
        # the block stops counting bytes (and writing) once the frame is longer than max_frame
        (oversize == (link.count > max_frame), "oversize: more than max_frame bytes so far"),
        (oversize | (count == link.count), "the block's byte count is the harness's"),
        # a frame not oversize has fewer than 256 beats: the beat index modulo R is the slot
        (oversize | (slot == beat[:pb]) if pb else Const(1), "the beat's slot in its word"),
        # words written of the frame so far: all of them until it overflowed or grew too long
        (overflow | oversize | (ring(wp - cwp) == cur_words), "the frame's words written"),
        (oversize | (ring(wp - cwp) <= cur_words), "the frame's words written (at most)"),
        (oversize | (cur_words == (beat >> pb)), "the harness's words of the frame so far"),
        (~overflow | saw_full, "an overflow found the FIFO full"),
    ]
    # the beats of the word being built: beat j of it is beat (beat - slot + j) of the frame
    for i, reg in enumerate(held):
        inv.append((oversize | (slot <= i) |
                    (reg[:8] == link.tag(link.frame, beat - slot + i)),
                    f"held{i}: beat {i} of the word being built"))

    # The pointers: the words of the kept frames not yet read, then the frame's words written.
    inv += [
        (ring(cwp - rp) == kept_words, "the kept words: end of the last kept frame - read"),
        (ring(wp - rp) <= D, "the words held fit the FIFO"),
        (ring(cwp - rp) <= ring(wp - rp), "the frame being written after the kept words"),
    ]

    # The frames in the FIFO, oldest first: those taken and not yet read whole (the reader's
    # ghost: words, frame; the oldest read up to rd_word), then those kept and not yet taken.
    t_count = _harness_signal(m, "rd_taken_count")
    t_entries = [_harness_signal(m, f"rd_taken{j}") for j in range(max(3, D // min_words))]
    r_word = _harness_signal(m, "rd_word")
    chain = []                                   # (valid, words, frame, first unread word)
    for j, e in enumerate(t_entries):
        chain.append((t_count > j, e[:8], e[8:8 + link.frame_bits], r_word if j == 0 else 0))
    for j, e in enumerate(ghost.entries):
        g_bytes = e[:bw]
        chain.append((ghost.count > j, (g_bytes + wbytes - 1) >> exact_log2(wbytes),
                      e[bw:bw + link.frame_bits], 0))
    inv += [
        ((t_count != 0) | (r_word == 0), "no word of a frame read before it is taken"),
        ((t_count == 0) | (r_word < t_entries[0][:8]), "the oldest frame taken not read whole"),
        (t_count + ghost.count <= D // min_words, "the frames in the FIFO: at least their "
                                                  "shortest words each"),
    ]
    for j, e in enumerate(ghost.entries):
        inv.append(((ghost.count <= j) | ((e[:bw] >= 54) & (e[:bw] <= max_frame)),
                    f"kept frame {j}: 54..max_frame bytes"))
    for j, e in enumerate(t_entries):
        inv.append(((t_count <= j) | ((e[:8] >= min_words) & (e[:8] <= max_words)),
                    f"taken frame {j}: its words"))
    # each frame's words lie from its first word on, one after the other, up to cwp; each word
    # in the RAM carries its tag (frame, first beat) in byte 0
    # (offsets from the oldest frame's first word, not modulo the RAM: they add up to the
    # kept words, at most D)
    start = Signal(ab + 1, name="inv_start")
    m.d.comb += start.eq(rp - r_word)
    offset = Const(0, 12)
    for n, (valid, words, frame, first) in enumerate(chain):
        for w in range(max_words):
            here = valid & (w < words) & (w >= first)
            addr = (start + offset + w)[:ab]
            inv.append((~here | (_pick(rows, addr)[:8] ==
                                 link.tag(frame, Const(w * per_word, 8))),
                        f"frame {n} in the FIFO: word {w} in the RAM"))
        nxt = Signal(12, name=f"inv_offset{n + 1}")
        m.d.comb += nxt.eq(offset + Mux(valid, words, 0))
        offset = nxt
    inv += [(offset - r_word == kept_words, "the frames in the FIFO: the kept words"),
            (kept_words <= D, "the kept words fit the FIFO")]
    # the words of the frame being received
    for w in range(D):
        addr = (cwp + w)[:ab]
        inv.append((~(w < ring(wp - cwp)) |
                    (_pick(rows, addr)[:8] == link.tag(link.frame, Const(w * per_word, 8))),
                    f"the frame being written: word {w} in the RAM"))

    # The descriptor FIFO (SyncFIFOBuffered: an inner FIFO and the output register r_data): the
    # byte counts of the kept frames not yet taken, oldest first.
    inv += [
        (inner_level + dut.f_valid == ghost.count, "descriptor FIFO level = kept frames"),
        (~dut.f_valid | (dut.f_bytes == ghost.entries[0][:bw]), "the descriptor offered"),
    ]
    inner_depth = len(fifo_rows)
    for j in range(inner_depth):
        at = Mux(dut.f_valid, j + 1, j)
        entry = _pick([e[:bw] for e in ghost.entries], at)
        addr = (consume + j) % inner_depth if inner_depth & (inner_depth - 1) else None
        if addr is None:
            idx = Signal(range(inner_depth), name=f"inv_fifo_idx{j}")
            m.d.comb += idx.eq(Mux(consume + j >= inner_depth, consume + j - inner_depth,
                                   consume + j))
            addr = idx
        inv.append((~(j < inner_level) | (_pick(fifo_rows, addr) == entry[:len(fifo_rows[0])]),
                    f"descriptor FIFO entry {j}"))
    # a kept frame waits for the offer one cycle at most (the output register is refilled
    # from the inner FIFO in the cycle after it empties)
    inv += [
        (waiting <= 1, "a kept frame waits one cycle at most"),
        ((waiting == 0) | dut.f_valid, "after a cycle of waiting it is offered"),
    ]
    _assert_invariants(m, inv, "inv_si")


def _assert_invariants(m, inv, prefix):
    """Assert each ``(condition, text)`` of ``inv``, through a signal ``<prefix><n>`` that a
    counterexample of the induction shows (0 where the invariant broke)."""
    for n, (cond, text) in enumerate(inv):
        ok = Signal(name=f"{prefix}{n}")
        m.d.comb += [ok.eq(cond), Assert(ok, f"inv: {text}")]


# -- the reader of a frame store (plane buffer, switch ingress) --------------------------------

def _frame_reader(m, link, f_fire, rd_en, rd_data, words_new, frame_new, per_word, name, *,
                  in_turn=False, depth=3):
    """The reader's promise and the words it reads: frames are taken in the order offered
    (``f_fire``, with ``words_new`` words, link frame number ``frame_new``); ``rd_en`` (assumed)
    only for a word of a frame taken, the first in the take's cycle at the earliest. Asserted:
    ``rd_data`` changes only after a ``rd_en``, and after a read it is word ``w`` of its frame
    (tag). ``in_turn``: a frame is taken only once the words of the frames taken before are
    all read (assumed; the plane merge's order). Returns ``(frame_read, words)``: a frame's
    last word read this cycle, and the words of
    the frame being read."""
    taken = GhostFifo(m, depth, 8 + link.frame_bits, f"{name}_taken")  # (words, frame) taken
    r_word = Signal(8, name=f"{name}_word")                          # words of the head read
    rd_frame = Mux(taken.count != 0, taken.head[8:], frame_new)
    rd_word = Mux(taken.count != 0, r_word, 0)
    rd_words = Mux(taken.count != 0, taken.head[:8], words_new)
    m.d.comb += Assume(~rd_en | (taken.count != 0) | (f_fire & (words_new != 0)))
    frame_read = Signal(name=f"{name}_frame_read")
    m.d.comb += frame_read.eq(rd_en & (rd_word + 1 == rd_words))
    # a frame of no word (none stored) is read at once
    empty = f_fire & (words_new == 0)
    if in_turn:
        m.d.comb += Assume(~f_fire | (taken.count == 0))
    at_once = frame_read & (taken.count == 0)      # taken and read whole in one cycle
    m.d.comb += [taken.push_en.eq(f_fire & ~empty & ~at_once),
                 taken.push_val.eq(Cat(words_new[:8], frame_new)),
                 taken.pop_en.eq(frame_read & ~at_once)]
    taken.elaborate()
    with m.If(rd_en):
        m.d.sync += r_word.eq(Mux(frame_read, 0, rd_word + 1))
    expect = Signal(8, name=f"{name}_expect")
    any_read = Signal(name=f"{name}_any")
    with m.If(rd_en):
        m.d.sync += [expect.eq(link.tag(rd_frame, rd_word * per_word)), any_read.eq(1)]
    m.d.comb += Assert(~any_read | (rd_data[:8] == expect),
                       "a word read is the next word of the frame taken")
    was_read = past(m, rd_en, f"{name}_was_read")
    prev_ok = past(m, 1, f"{name}_prev_ok")
    prev = past(m, rd_data, f"{name}_prev")
    m.d.comb += Assert(~prev_ok | was_read | (rd_data == prev), "rd_data held between reads")
    return frame_read, rd_words


# -- NIC receive plane buffer -------------------------------------------------------------------

def rx_plane_buffer_harness(data_width=128, core_width=128, body_words=2, header_slots=2, *,
                            block=None, bmc=8, cover=8, body_covers=False):
    """RxPlaneBuffer (W = ``data_width``, C = ``core_width``, ``header_slots`` slots of ``Hw``
    words, a body ring of ``body_words`` words): any link traffic (any beat in any cycle, any
    length, ``tuser``, Payload Length; ``tkeep`` contiguous on the last beat; byte 0 of every
    beat tagged), any reset. The reader (the plane merge's contract, asserted of it by
    :func:`plane_merge_harness`): ``f_take`` only while ``f_valid`` and once the words of the
    frames taken before are all read (the merge's order: the docstring's "its words are then
    read"; the read pointer of the header slots is set at ``f_take``), ``rd_en`` only for the
    ``f_words`` words of the frames taken (the first possibly in the cycle of ``f_take``), any
    timing. Asserted:

    - never backpressured (no ``tready``: by construction) and every frame reported once, at its
      last beat; ``NO_ROOM`` only when every header slot held an unread frame at its first beat
      (the harness's count); ``BAD`` exactly for a frame with ``tuser[0]`` that had a slot;
    - never a write over a word not yet read (the block's pointers: a header word only into a
      slot not in use, ``slot_w - slot_r < header_slots``; a body word only with a free body
      word, ``body_wp - body_rp < body_words``);
    - no frame lost, duplicated, reordered or invented: a ghost queue of the frames kept
      (``STORED``, ``NO_BUFFER``); the frame offered is its head, with its byte count,
      ``no_buffer`` exactly for ``NO_BUFFER``, at most the frame's words (``Hw`` at most when
      ``NO_BUFFER``), all of them unless cut (``truncated``); offered within
      ``ICRC_LATENCY + 1`` cycles of its last beat (``f_valid`` never low longer while one
      waits); the descriptor held until ``f_take``;
    - the words read are the frames' words in order (tags), ``rd_data`` changes only after
      ``rd_en``.

    Bounded (block RAM and a descriptor FIFO an induction would have to name). With
    ``header_slots`` = 2 the block loses the descriptor of a frame kept one cycle after
    another (see :func:`plane_merge_harness`); the lost frame shows here only once the frame
    before it has been taken and ``ICRC_LATENCY + 2`` cycles passed (step 11 or later), past
    the default depth. Covers: a
    descriptor taken after a stall, a NO_BUFFER frame offered, both drops (NO_ROOM, BAD), two
    frames held; with ``body_covers`` also a frame with body words read whole and a truncated
    frame offered, which need a frame longer than a header slot (``Hw`` words: 9 at C = 128,
    3 at C = 512, where a frame has a body from its 4th beat)."""
    from models.rx_front import BAD, NO_BUFFER, NO_ROOM, STORED
    from rtl.rx_plane_buffer import ICRC_LATENCY, RxPlaneBuffer

    block = block or RxPlaneBuffer
    m = Module()
    dut = block(data_width, core_width, body_words, header_slots)
    frag = Fragment.get(dut, "formal")
    m.submodules.dut = frag
    assert dut.s_axis.signature.always_ready, "the link port has no tready"
    per_word = core_width // data_width
    wbytes = core_width // 8
    hw = dut.slot_words
    link = _LinkFrames(m, dut.s_axis, "link", bytes_width=12)

    # --- each frame's fate ---------------------------------------------------------------------
    outcome = dut.ev_outcome
    keep = Signal(name="h_keep")
    m.d.comb += keep.eq(link.end & ((outcome == STORED) | (outcome == NO_BUFFER)))
    kept_frames = Signal(4, name="h_slots")         # frames kept whose header is not yet read
    first_beat = Signal(name="h_first_beat")
    m.d.comb += first_beat.eq(link.fire & (link.beat == 0))
    slots_full = Signal(name="h_slots_full")        # at the frame's first beat
    with m.If(first_beat):
        m.d.sync += slots_full.eq(kept_frames >= header_slots)
    full_at_first = Mux(link.beat == 0, kept_frames >= header_slots, slots_full)
    m.d.comb += [
        Assert(dut.ev_end == link.end, "ev_end at each frame's last beat"),
        Assert(~(link.end & (outcome == NO_ROOM)) | full_at_first,
               "NO_ROOM only with every header slot in use"),
        Assert(~(link.end & (outcome != NO_ROOM)) | ((outcome == BAD) == link.bad),
               "BAD exactly for a frame flagged bad"),
    ]

    # --- never a write over a word not yet read --------------------------------------------------
    sig = {n: find_signal(frag, n) for n in ("write", "wj", "body_wp", "body_rp", "slot_w",
                                             "slot_r")}
    sig["in_head"] = sig["wj"] < hw                   # the block's word index: a header word
    bb = (body_words - 1).bit_length()
    sb = (header_slots - 1).bit_length()
    m.d.comb += [
        Assert(~(sig["write"] & sig["in_head"]) |
               ((sig["slot_w"] - sig["slot_r"])[:sb + 1] < header_slots),
               "a header word only into a free slot"),
        Assert(~(sig["write"] & ~sig["in_head"]) |
               ((sig["body_wp"] - sig["body_rp"])[:bb + 1] < body_words),
               "a body word only into a free body word"),
    ]

    # --- the offer -------------------------------------------------------------------------
    frame_words = (link.total + wbytes - 1) // wbytes
    ghost = GhostFifo(m, header_slots + 1, 12 + 1 + 8 + link.frame_bits, "kept")
    desc = Cat(dut.f_length, dut.f_words, dut.f_no_buffer, dut.f_truncated, dut.f_icrc_ok)
    offer = StreamPort(SimpleNamespace(valid=dut.f_valid, ready=dut.f_take, payload=desc),
                       "out", "f", count_width=4).elaborate(m)
    m.d.comb += Assume(~dut.f_take | dut.f_valid)
    m.d.comb += [ghost.push_en.eq(keep),
                 ghost.push_val.eq(Cat(link.total, outcome == NO_BUFFER, frame_words[:8],
                                       link.frame)),
                 ghost.pop_en.eq(offer.fire)]
    ghost.elaborate()
    g = ghost.head
    g_bytes, g_nobuf, g_words, g_frame = g[:12], g[12], g[13:21], g[21:]
    v = dut.f_valid
    m.d.comb += [
        Assert(~v | (ghost.count != 0), "an offer is of a frame kept"),
        Assert(~v | (dut.f_length == g_bytes), "the frame offered is the oldest, its bytes"),
        Assert(~v | (dut.f_no_buffer == g_nobuf), "no_buffer exactly for NO_BUFFER"),
        Assert(~v | (dut.f_words <= g_words), "at most the frame's words"),
        Assert(~v | ~g_nobuf | (dut.f_words <= hw), "NO_BUFFER: the header words at most"),
        Assert(~v | g_nobuf | dut.f_truncated | (dut.f_words == g_words),
               "all the frame's words unless cut"),
    ]
    waiting = Signal(3, name="offer_wait")
    with m.If((ghost.count != 0) & ~v):
        m.d.sync += waiting.eq(waiting + 1)
    with m.Else():
        m.d.sync += waiting.eq(0)
    m.d.comb += Assert(waiting <= ICRC_LATENCY + 1, "a kept frame is offered in time")

    # --- reading ---------------------------------------------------------------------------------
    frame_read, rd_words = _frame_reader(m, link, offer.fire, dut.rd_en, dut.rd_data,
                                         dut.f_words, g_frame, per_word, "rd", in_turn=True)
    heads_read = Signal(name="h_head_read")           # a frame's header slot freed this cycle
    # the slot of a frame is free once its header words are read: its word min(words, Hw) - 1
    words_read = Signal(8, name="h_words_read")       # words of the head frame read
    with m.If(dut.rd_en):
        m.d.sync += words_read.eq(Mux(frame_read, 0, words_read + 1))
    head_words = Mux(rd_words > hw, hw, rd_words)
    m.d.comb += heads_read.eq(dut.rd_en & (words_read + 1 == head_words))
    empty = offer.fire & (dut.f_words == 0)
    m.d.sync += kept_frames.eq(kept_frames + keep - heads_read - empty)

    stalled = past(m, v & ~dut.f_take, "f_was_stalled")
    covers = {
        "frame_taken_after_a_stall": offer.fire & stalled,
        "no_buffer_frame_offered": v & dut.f_no_buffer,
        "dropped_no_room": link.end & (outcome == NO_ROOM),
        "dropped_bad": link.end & (outcome == BAD) & (ghost.count != 0),
        "two_frames_held": ghost.count == 2,
    }
    if body_covers:
        covers["frame_with_body_read"] = frame_read & (rd_words > hw)
        covers["truncated_frame_offered"] = v & dut.f_truncated
    _covers(m, covers)
    s = dut.s_axis
    ports = [s.valid, Value.cast(s.payload), dut.f_take, dut.rd_en]
    return m, ports, {"bmc": bmc, "cover": cover}


# -- NIC plane merge ----------------------------------------------------------------------------

def plane_merge_harness(n_planes=2, data_width=64, body_words=2, header_slots=2, *, block=None,
                        bmc=8, cover=8, deep_covers=False, prove=None):
    """PlaneMerge (N = ``n_planes``, W = ``data_width``, C = N x W, each plane's
    :class:`rtl.rx_plane_buffer.RxPlaneBuffer` with ``header_slots`` slots and ``body_words``
    body words): any traffic on every plane port (any beat in any cycle; ``tkeep`` contiguous on
    the last beat; byte 0 of every beat tagged with the beat, the frame and the plane), any
    reset, any core sink timing. Asserted:

    - the stream rules on the core stream: ``m_valid`` and the word, ``m_last`` and the
      descriptor (``m_length``, ``m_no_buffer``, ``m_truncated``, ``m_icrc_ok``, ``m_plane``)
      held until ``m_ready``;
    - no frame lost, duplicated, reordered or mixed: a ghost queue per plane of the frames its
      buffer kept (``plane_end`` with outcome STORED or NO_BUFFER); a grant only of a plane with
      a frame kept, at most one frame granted and not out (not interleaved); every word out is
      word ``w`` of the head frame of its plane (tags: plane, frame, word), the frame's byte
      count and ``no_buffer`` with it, ``m_plane`` its plane; at most the frame's words, all of
      them when neither NO_BUFFER nor cut; each plane's frames leave in their order.

    ``prove`` (k): unbounded, by k-induction of that depth, with every block RAM of the two
    plane buffers (the frame RAM and the descriptor FIFO's inner memory) built as registers of
    the same ports and timing (:class:`_RegisterMemoryPlatform`; the merge's, the buffers' and
    the FIFOs' logic unchanged), and the ghosts' byte and word counts as wide as the block's
    (17 bits of bytes, saturating like the block's: a frame of any length is reachable there).
    The invariants (:func:`_plane_merge_invariants`, :func:`_plane_buffer_invariants`) tie the
    merge's output registers (``remaining``, ``current``, ``out_plane``, ``m_last``, the words
    of the frame granted) to the frame out, and in each buffer the frame being received (beat,
    byte count, slot, word index, decision, body words, stored words, cut), the slot and body
    pointers, the read registers, the descriptors (delay line, FIFO, output register: one per
    ghost entry, in order) and every unread word of every kept frame in the RAM (its tag, at
    the slot and body position the pointers give it) to the plane's ghost queue.
    ``prove=None``: bounded, the block as it is (its RAMs as memories). With 2 header slots a
    frame was lost (a bug of
    :class:`rtl.rx_plane_buffer.RxPlaneBuffer`, now fixed: its descriptor FIFO,
    ``SyncFIFOBuffered`` of depth 2, refused a write in the cycle after a write into it while
    empty, so the descriptor of a frame kept one cycle after another was dropped and its slot
    never freed); BMC 14 found it at step 12 (``test_plane_merge_stream_bounded_deep``), and
    passes since the FIFO has at least 3 entries.
    Covers: a word taken after a stall, a frame of
    plane 1 out, frames of the two planes back to back (step 7); with ``deep_covers`` also a
    two-word frame and a NO_BUFFER frame out (step 9)."""
    from models.rx_front import NO_BUFFER, STORED
    from rtl.plane_merge import PlaneMerge
    from rtl.rx_plane_buffer import LENGTH_BITS

    block = block or PlaneMerge
    m = Module()
    dut = block(n_planes, data_width, body_words, header_slots)
    inductive = prove is not None
    platform = _RegisterMemoryPlatform() if inductive else "formal"
    frag = Fragment.get(dut, platform)
    m.submodules.dut = frag
    # the ghosts' byte and word counts: as wide as the block's (saturating at 2^17 - 1 bytes)
    # for the proof, where any frame length is reachable; 12 and 8 bits suffice for the BMC
    lb, wdb = (LENGTH_BITS, dut.words_bits) if inductive else (12, 8)
    planes = []
    C = dut.core_width
    per_word = C // data_width
    wbytes = C // 8
    pb = max(1, (n_planes - 1).bit_length())
    m_data0 = dut.m_data[:8]
    o = StreamPort(SimpleNamespace(valid=dut.m_valid, ready=dut.m_ready, payload=Cat(
        dut.m_data, dut.m_last, dut.m_length, dut.m_no_buffer, dut.m_truncated, dut.m_icrc_ok,
        dut.m_plane)), "out", "m", count_width=4).elaborate(m)
    last_fire = Signal(name="m_last_fire")
    m.d.comb += last_fire.eq(o.fire & dut.m_last)
    # the frame being sent: its plane (m_plane) and the words taken so far
    in_frame = Signal(name="m_in_frame")           # a word of a frame taken, its last not yet
    word = Signal(8, name="m_word")
    with m.If(o.fire):
        m.d.sync += [in_frame.eq(~dut.m_last), word.eq(Mux(dut.m_last, 0, word + 1))]
    cur_plane = Signal(pb, name="m_cur_plane")
    with m.If(o.fire):
        m.d.sync += cur_plane.eq(dut.m_plane)
    m.d.comb += Assert(~(dut.m_valid & in_frame) | (dut.m_plane == cur_plane),
                       "a frame's words from one plane")
    for p in range(n_planes):
        s = getattr(dut, f"s{p}_axis")
        link = _LinkFrames(m, s, f"l{p}", beat_bits=3, frame_bits=4, bytes_width=lb,
                           ident=(p, pb))
        outcome = dut.plane_outcome[p]
        kept = link.end & ((outcome == STORED) | (outcome == NO_BUFFER))
        m.d.comb += Assert(dut.plane_end[p] == link.end, f"plane {p}: an end per frame")
        ghost = GhostFifo(m, header_slots + 1, lb + 1 + wdb + 4, f"p{p}_kept")
        words = (link.total + wbytes - 1) // wbytes
        mine = dut.m_plane == p
        m.d.comb += [ghost.push_en.eq(kept),
                     ghost.push_val.eq(Cat(link.total, outcome == NO_BUFFER, words[:wdb],
                                           link.frame)),
                     ghost.pop_en.eq(last_fire & mine)]
        ghost.elaborate()
        planes.append((link, ghost))
        g = ghost.head
        g_bytes, g_nobuf = g[:lb], g[lb]
        g_words, g_frame = g[lb + 1:lb + 1 + wdb], g[lb + 1 + wdb:lb + 5 + wdb]
        v = dut.m_valid & mine
        m.d.comb += [
            Assert(~v | (ghost.count != 0), f"plane {p}: a frame out was kept"),
            Assert(~v | (dut.m_length == g_bytes), f"plane {p}: the oldest frame, its bytes"),
            Assert(~v | (dut.m_no_buffer == g_nobuf), f"plane {p}: no_buffer"),
            Assert(~v | (m_data0 == link.tag(g_frame, word * per_word)),
                   f"plane {p}: word w of the frame"),
            Assert(~v | (word < g_words), f"plane {p}: at most the frame's words"),
            Assert(~(v & dut.m_last) | g_nobuf | dut.m_truncated | (word == g_words - 1),
                   f"plane {p}: all the words"),
            Assert(~(dut.decision_trace.grant & (dut.decision_trace.grant_plane == p)) |
                   (ghost.count != 0), f"plane {p}: granted with a frame kept"),
        ]
    grant = dut.decision_trace.grant
    m.d.comb += Assert(~grant | (~dut.m_valid & ~in_frame) | last_fire,
                       "no grant while a frame is out (not interleaved)")
    if inductive:
        _plane_merge_invariants(m, frag, dut, platform.memories, planes, lb=lb, wdb=wdb,
                                in_frame=in_frame, word=word, cur_plane=cur_plane)

    stalled = past(m, dut.m_valid & ~dut.m_ready, "m_was_stalled")
    covers = {
        "word_taken_after_a_stall": o.fire & stalled,
        "frame_from_plane_1_out": last_fire & (dut.m_plane == 1),
        "two_planes_back_to_back": grant & last_fire & (dut.decision_trace.grant_plane !=
                                                        dut.m_plane),
    }
    if deep_covers:     # reached at step 9
        covers["two_word_frame_out"] = last_fire & (word == 1)
        covers["no_buffer_frame_out"] = last_fire & dut.m_no_buffer
    _covers(m, covers)
    ports = []
    for p in range(n_planes):
        s = getattr(dut, f"s{p}_axis")
        ports += [s.valid, Value.cast(s.payload)]
    ports.append(dut.m_ready)
    depths = {"prove": prove} if inductive else {"bmc": bmc}
    depths["cover"] = cover
    return m, ports, depths


def _plane_merge_invariants(m, frag, dut, memories, planes, *, lb, wdb, in_frame, word,
                            cur_plane):
    """The invariants that make :func:`plane_merge_harness`'s properties inductive: the merge's
    output state against the frame out (its plane's ghost head), and in each plane buffer the
    frame being received, the pointers, the descriptors (delay line, FIFO) and the words in the
    RAM (as registers) against the plane's ghost queue of kept frames."""
    N, C = dut.n_planes, dut.core_width
    hw, S, B = dut.slot_words, dut.header_slots, dut.body_words
    head_region = S * hw
    inv = []
    sigm = lambda name: find_signal(frag, name)
    remaining, current, out_plane = sigm("remaining"), sigm("current"), sigm("out_plane")
    v = dut.m_valid

    # --- the merge: the frame out ---------------------------------------------------------------
    # the words of the frame granted (its descriptor's f_words, taken at the grant)
    g_stored = Signal(dut.words_bits, name="h_out_words")
    chosen = dut.decision_trace.grant_plane
    f_words = [find_signal(frag.find_subfragment(f"plane{p}"), "f_words") for p in range(N)]
    with m.If(dut.decision_trace.grant):
        m.d.sync += g_stored.eq(_pick(f_words, chosen))
    inv += [
        ((current == dut.m_plane) & (out_plane == dut.m_plane), "current, out_plane: m_plane"),
        (in_frame == (word != 0), "inside a frame: a word of it taken"),
        (~in_frame | v, "inside a frame the next word is offered"),
        (~in_frame | (cur_plane == dut.m_plane), "inside a frame: its plane"),
        ((remaining == 0) | v, "words left: the frame is out"),
        (~v | (word < g_stored), "the word offered within the frame's words"),
        (~v | (remaining == g_stored - word - 1), "the words left of the frame out"),
        (~v | (dut.m_last == (remaining == 0)), "m_last on the frame's last word"),
    ]
    for p, (link, ghost) in enumerate(planes):
        sub = frag.find_subfragment(f"plane{p}")
        (_, rows), (_, fifo_rows) = memories[2 * p], memories[2 * p + 1]
        assert len(rows) == head_region + B and len(rows[0]) == C
        inv += _plane_buffer_invariants(m, sub, p, dut, rows, fifo_rows, link, ghost, lb=lb,
                                        wdb=wdb, g_stored=g_stored, word=word,
                                        f_words=f_words[p])
    _assert_invariants(m, inv, "inv_pm")


def _plane_buffer_invariants(m, sub, p, dut, rows, fifo_rows, link, ghost, *, lb, wdb, g_stored,
                             word, f_words):
    """The invariants of plane ``p``'s buffer (fragment ``sub``, RAM ``rows``, descriptor FIFO
    storage ``fifo_rows``) against its ghost queue ``ghost`` of kept frames (oldest first: the
    frame out at the merge, if it is this plane's, then the descriptors in the FIFO's output
    register, in the FIFO, in the delay line) and its link tracking ``link``."""
    from amaranth.utils import exact_log2

    from rtl.rx_plane_buffer import ICRC_LATENCY, LENGTH_BITS

    W, C = dut.data_width, dut.core_width
    per_word, lanes = C // W, W // 8
    hw, S, B = dut.slot_words, dut.header_slots, dut.body_words
    head_region = S * hw
    pbits, sbits, bbits = exact_log2(per_word), exact_log2(S), exact_log2(B)
    wbits = dut.words_bits
    pl_beat = 18 // lanes
    sig = lambda name: find_signal(sub, name)
    n = {name: sig(name) for name in (
        "slot_w", "slot_r", "slot_wbase", "slot_rbase", "body_wp", "body_cwp", "body_rp",
        "slot_i", "count", "in_frame", "has_slot", "beat", "decided", "room", "needed", "wj",
        "body_written", "stored", "truncated", "inner_level", "consume", "head_left",
        "body_left", "head_index", "f_valid", "f_length", "f_no_buffer", "f_truncated")}
    held = [sig(f"held{i}") for i in range(per_word - 1)]
    dvalid = [sig(f"desc{i}_valid") for i in range(ICRC_LATENCY)]
    ddata = [sig(f"desc{i}_data") for i in range(ICRC_LATENCY)]
    inv = []
    T = f"plane {p}: "

    def entry(e):                                   # a ghost entry's fields
        return SimpleNamespace(bytes=e[:lb], nobuf=e[lb], words=e[lb + 1:lb + 1 + wdb],
                               frame=e[lb + 1 + wdb:lb + 5 + wdb])

    def desc(d):                                    # a descriptor's fields (the block's order)
        return SimpleNamespace(length=d[:LENGTH_BITS], words=d[LENGTH_BITS:LENGTH_BITS + wbits],
                               nobuf=d[LENGTH_BITS + wbits], trunc=d[LENGTH_BITS + wbits + 1])

    def body_of(words):
        return Mux(words > hw, words - hw, 0)

    def ring(value, bits):
        return Value.cast(value)[:bits + 1]

    out = Signal(name=f"inv_p{p}_out")              # this plane's frame is out at the merge
    m.d.comb += out.eq(dut.m_valid & (dut.m_plane == p))
    e0 = entry(ghost.entries[0])

    # --- the frame out: its descriptor at the merge, the buffer's read registers -----------------
    n_read = Signal(wbits, name=f"inv_p{p}_read")   # words of it read
    m.d.comb += n_read.eq(word + 1)
    th = Signal(wbits, name=f"inv_p{p}_take_head")
    m.d.comb += th.eq(Mux(g_stored > hw, hw, g_stored))
    inv += [
        (~out | ((g_stored != 0) & (g_stored <= e0.words) & (g_stored <= hw + B)),
         T + "the frame out: its words stored"),
        (~out | dut.m_no_buffer | dut.m_truncated | (g_stored == e0.words),
         T + "the frame out: all its words unless cut"),
        (~out | ~dut.m_no_buffer | (g_stored <= hw), T + "the frame out: NO_BUFFER, header only"),
        (~out | ((dut.m_length == e0.bytes) & (dut.m_no_buffer == e0.nobuf)),
         T + "the frame out: its descriptor"),
        (Mux(out, n["head_left"] == th - Mux(n_read > th, th, n_read), n["head_left"] == 0),
         T + "header words left to read"),
        (Mux(out, n["body_left"] == g_stored - Mux(n_read > th, n_read, th),
             n["body_left"] == 0), T + "body words left to read"),
        (~out | (n["head_left"] == 0) | (n["head_index"] == n_read), T + "the header word next"),
    ]

    # --- the descriptors, oldest first: FIFO output register, FIFO, delay line --------------------
    inner_level, consume = n["inner_level"], n["consume"]
    inner_depth = len(fifo_rows)
    slots_d = [(n["f_valid"], SimpleNamespace(length=n["f_length"], words=f_words,
                                              nobuf=n["f_no_buffer"], trunc=n["f_truncated"]),
                "the descriptor offered")]
    for j in range(inner_depth):
        idx = Signal(range(inner_depth), name=f"inv_p{p}_fifo_idx{j}")
        m.d.comb += idx.eq((consume + j) % inner_depth if inner_depth & (inner_depth - 1) == 0
                           else Mux(consume + j >= inner_depth, consume + j - inner_depth,
                                    consume + j))
        slots_d.append((inner_level > j, desc(_pick(fifo_rows, idx)), f"FIFO entry {j}"))
    for i in reversed(range(ICRC_LATENCY)):
        slots_d.append((dvalid[i], desc(ddata[i]), f"delay stage {i}"))
    inv.append((ghost.count == out + sum(vd for vd, _, _ in slots_d), T + "kept frames: "
                "the frame out, the descriptors"))
    # walk them: ghost index, header slot, body position
    hdr_out = Signal(name=f"inv_p{p}_hdr_out")
    m.d.comb += hdr_out.eq(out & (n["head_left"] != 0))
    index = out
    slot_k = n["slot_r"] + hdr_out
    body_at = Signal(bbits + 2, name=f"inv_p{p}_body0")
    m.d.comb += body_at.eq(n["body_rp"] + Mux(out, n["body_left"], 0))
    body_total = Signal(8, name=f"inv_p{p}_body_sum0")
    m.d.comb += body_total.eq(Mux(out, n["body_left"], 0))
    walked = []                                 # (valid, descriptor, ghost index, slot, body)
    for k, (vd, d, text) in enumerate(slots_d):
        gi = Signal(range(len(ghost.entries) + 8), name=f"inv_p{p}_gidx{k}")
        m.d.comb += gi.eq(index)
        walked.append((vd, d, gi, slot_k, body_at))
        nxt_index = Signal(range(len(ghost.entries) + 8), name=f"inv_p{p}_gidx_next{k}")
        m.d.comb += nxt_index.eq(index + vd)
        index = nxt_index
        nxt_slot = Signal(sbits + 1, name=f"inv_p{p}_slot{k + 1}")
        m.d.comb += nxt_slot.eq(slot_k + vd)
        slot_k = nxt_slot
        nxt_body = Signal(bbits + 2, name=f"inv_p{p}_body{k + 1}")
        m.d.comb += nxt_body.eq(body_at + Mux(vd, body_of(d.words), 0))
        body_at = nxt_body
        nxt_total = Signal(8, name=f"inv_p{p}_body_sum{k + 1}")
        m.d.comb += nxt_total.eq(body_total + Mux(vd, body_of(d.words), 0))
        body_total = nxt_total
    # each ghost entry j (kept frame j, oldest first) and its descriptor: the frame out's for
    # entry 0 while this plane's frame is out, else the j-th valid descriptor
    entries = []                    # (valid, frame, words stored, first unread, slot, body)
    for j, g in enumerate(ghost.entries):
        e = entry(g)
        out_here = out if j == 0 else Const(0)

        def field(get, default, name):
            value = default
            for vd, d, gi, slot, body in walked:
                value = Mux(vd & (gi == j), get(d, slot, body), value)
            sig_ = Signal(len(Value.cast(default)), name=f"inv_p{p}_e{j}_{name}")
            m.d.comb += sig_.eq(value)
            return sig_

        length = field(lambda d, sl, bo: d.length, Const(0, LENGTH_BITS), "length")
        words = field(lambda d, sl, bo: d.words, Const(0, wbits), "words")
        nobuf = field(lambda d, sl, bo: d.nobuf, Const(0, 1), "nobuf")
        trunc = field(lambda d, sl, bo: d.trunc, Const(0, 1), "trunc")
        slot = field(lambda d, sl, bo: sl, Const(0, sbits + 1), "slot")
        body = field(lambda d, sl, bo: bo, Const(0, bbits + 2), "body")
        here = (ghost.count > j) & ~out_here
        text = f"kept frame {j}'s descriptor"
        inv += [
            (~here | (length == e.bytes), T + text + ": the frame's bytes"),
            (~here | (nobuf == e.nobuf), T + text + ": no_buffer"),
            (~here | ((words != 0) & (words <= e.words) & (words <= hw + B)),
             T + text + ": its words stored"),
            (~here | nobuf | trunc | (words == e.words), T + text + ": all words unless cut"),
            (~here | ~nobuf | (words <= hw), T + text + ": NO_BUFFER, header only"),
        ]
        if j == 0:
            words = Mux(out, g_stored, words)
            slot = Mux(out, n["slot_r"], slot)
            body = Mux(out, n["body_rp"], body)
        first = Mux(out_here, n_read, 0) if j == 0 else Const(0, wbits)
        entries.append((ghost.count > j, e.frame, words, first, slot, body, f"kept frame {j}"))

    # --- pointers -------------------------------------------------------------------------------
    used = ring(n["slot_w"] - n["slot_r"], sbits)
    inv += [
        (used == hdr_out + (ghost.count - out), T + "slots in use: frames with a header unread"),
        (used <= S, T + "slots in use at most the slots"),
        (n["slot_rbase"] == (n["slot_r"] % S) * hw, T + "slot_rbase"),
        (n["slot_wbase"] == (n["slot_w"] % S) * hw, T + "slot_wbase"),
        (ring(n["body_cwp"] - n["body_rp"], bbits) == body_total,
         T + "body words kept: the frames' unread body words"),
        (ring(n["body_wp"] - n["body_cwp"], bbits) == n["body_written"],
         T + "body words of the frame being received"),
        (ring(n["body_wp"] - n["body_rp"], bbits) <= B, T + "body words within the ring"),
        (body_total + n["body_written"] <= B, T + "body words kept and written fit the ring"),
        (n["needed"] <= B, T + "the body words a frame may write fit the ring"),
    ]

    # --- the frame being received --------------------------------------------------------------
    beat = link.beat
    lim = hw + B + 1
    in_f, has_slot, decided, room = n["in_frame"], n["has_slot"], n["decided"], n["room"]
    wj, bwr, stored = n["wj"], n["body_written"], n["stored"]
    free = B - ring(n["body_wp"] - n["body_rp"], bbits)
    full_bytes = Signal(16, name=f"inv_p{p}_beat_bytes")
    m.d.comb += full_bytes.eq(beat * lanes)
    inv += [
        (in_f == (beat != 0), T + "in a frame: a beat of it seen"),
        (n["beat"] == Mux(beat > pl_beat + 1, pl_beat + 1, beat), T + "the block's beat index"),
        (Mux(beat == 255, link.count >= full_bytes, link.count == full_bytes),
         T + "bytes so far: full beats (the beat index saturates at 255)"),
        (n["count"] == link.count, T + "the block's byte count"),
        ((beat == 255) | (n["slot_i"] == beat[:pbits]) if pbits else Const(1),
         T + "the beat's slot in its word"),
        (wj == Mux((beat >> pbits) > lim, lim, beat >> pbits), T + "the word index"),
        (decided == (beat > pl_beat), T + "decided after the Payload Length"),
        (in_f | ((stored == 0) & ~n["truncated"]), T + "nothing stored between frames"),
        (~in_f | (stored == Mux(has_slot, Mux(wj > hw, hw, wj) + bwr, 0)),
         T + "the words stored of the frame"),
        ((in_f & has_slot & decided & room) | (bwr == 0), T + "body words only with room"),
        (~decided | ~room | ((bwr <= n["needed"]) & (n["needed"] - bwr <= free)),
         T + "the body words it may still write are free"),
        (~(in_f & has_slot & decided & room) | n["truncated"] |
         (bwr == Mux(wj > hw, wj - hw, 0)), T + "every body word so far written unless cut"),
        # cut: a body word found every body word it may write written (and none since)
        (~n["truncated"] | (in_f & has_slot & decided & room & (bwr == n["needed"]) &
                            (wj > hw)),
         T + "cut only at a body word, once the body words it may write are written"),
        (bwr <= Mux(wj > hw, wj - hw, 0), T + "body words written: words past the header"),
        (~(in_f & has_slot) | (used < S), T + "the frame's slot is not in use"),
    ]
    for i, reg in enumerate(held):
        inv.append(((beat == 255) | (n["slot_i"] <= i) |
                    (reg[:8] == link.tag(link.frame, beat - n["slot_i"] + i)),
                    T + f"held{i}: beat {i} of the word being built"))

    # --- the words in the RAM: each word of a kept frame not yet read, and each word of the frame
    # being received, written, carries its tag (frame, first beat) in byte 0 --------------------
    def head_row(slot, w):
        return _pick([rows[s * hw + w] for s in range(S)], Value.cast(slot)[:sbits] if sbits
                     else 0)

    def body_row(pos):
        return _pick([rows[head_region + b] for b in range(B)], Value.cast(pos)[:bbits])

    for k, (valid, frame, words, first, slot, body_pos, text) in enumerate(entries):
        body_first = Mux(first > hw, first, hw)          # its first unread body word
        for w in range(hw + B):
            tag = link.tag(frame, Const(w * per_word, 8))
            here = valid & (w < words) & (w >= first)
            if w < hw:
                row = head_row(slot, w)
            else:
                row = body_row(body_pos + (w - body_first))
            inv.append((~here | (row[:8] == tag), T + text + f": word {w} in the RAM"))
    for w in range(hw):
        inv.append((~(in_f & has_slot & (w < wj)) |
                    (head_row(n["slot_w"], w)[:8] == link.tag(link.frame, Const(w * per_word, 8))),
                    T + f"the frame being received: header word {w} in the RAM"))
    for i in range(B):
        inv.append((~(i < bwr) | (body_row(n["body_cwp"] + i)[:8] ==
                                  link.tag(link.frame, Const((hw + i) * per_word, 8))),
                    T + f"the frame being received: body word {i} in the RAM"))
    return inv


# -- NIC receive parser --------------------------------------------------------------------------

def rx_parser_harness(core_width=256, n_qps=1, n_regions=1, words_bits=8, *, block=None, bmc=6,
                      cover=10, payload_covers=False, in_flight=4):
    """RxParser (C = ``core_width``, ``n_qps`` QPs, ``n_regions`` regions): any core stream the
    plane merge gives (the stream rules assumed on ``s_*``: valid, the word, ``s_last`` and the
    descriptor held until ``s_ready``; the descriptor held over a frame's words; a frame of
    ``s_length >= 1`` bytes has ``ceil(s_length / (C/8))`` words, fewer when ``s_no_buffer`` or
    ``s_truncated``; any header contents), any configuration (``qp_enable``, ``inner_dst``,
    ``regions`` free, changing at any time: the parser reads them once per frame), any sink
    timing on the four outputs, any reset. Asserted:

    - the stream rules on ``m_meta``, ``m_fb``, ``m_ctrl`` and ``m_axis`` (payload held until
      taken);
    - one judgement per frame (``ev_valid``), never ahead of the frames started, at most 4
      frames started and not yet judged (3 stages and one being received);
    - records out = frames judged: per output, the records taken never exceed the frames judged
      to give one (``ev_code``: RX_META for data, trimmed and probe; FEEDBACK for SACK and NACK;
      CONTROL for a data frame without buffer room), at most 8 waiting (the FIFO), and a
      record waiting is offered within two cycles (none lost in a full FIFO);
    - payloads: a ghost queue of the frames whose payload passes (code ``data``, a payload
      candidate: the block's stage-B3 ``candidate`` and ``payload_length``); every ``m_axis``
      frame is the oldest one's, with exactly its payload bytes (``tkeep`` all ones before the
      last beat, contiguous on it), none out without a frame passed.

    Bounded. Covers: each record taken after a stall (a 134-byte probe, SACK or NACK, or a
    data frame without room, judged at step 7 at C = 256), a frame judged; with
    ``payload_covers`` also a payload frame out and a payload beat taken after a stall (steps
    11 and 13). ``in_flight`` (default 4) is the bound the harness claims: 2 must fail (three
    one-word frames back to back are inside at once; a test of the harness)."""
    from rtl.rx_parser import EVENT_CODES, RxParser

    block = block or RxParser
    m = Module()
    dut = block(core_width, n_qps, n_regions, words_bits)
    frag = Fragment.get(dut, "formal")
    m.submodules.dut = frag
    wbytes = core_width // 8
    lb = wbytes.bit_length() - 1
    desc = Cat(dut.s_length, dut.s_no_buffer, dut.s_truncated, dut.s_icrc_ok)
    s = StreamPort(SimpleNamespace(valid=dut.s_valid, ready=dut.s_ready,
                                   payload=Cat(dut.s_data, dut.s_last, desc)),
                   "in", "s", count_width=4).elaborate(m)
    # the frame's framing: the descriptor held over its words, ceil(n / C) words
    in_frame = Signal(name="s_in_frame")
    s_word = Signal(8, name="s_word")
    held_desc = Signal(len(desc), name="s_desc")
    with m.If(s.fire):
        m.d.sync += [in_frame.eq(~dut.s_last), s_word.eq(Mux(dut.s_last, 0, s_word + 1)),
                     held_desc.eq(desc)]
    m.d.comb += Assume(~(dut.s_valid & in_frame) | (desc == held_desc))
    n_words = Signal(dut.s_length.shape(), name="s_words")
    m.d.comb += n_words.eq((dut.s_length + wbytes - 1) >> lb)
    m.d.comb += Assume(~dut.s_valid | (dut.s_length != 0))
    m.d.comb += Assume(~dut.s_valid | (s_word < n_words))
    m.d.comb += Assume(~dut.s_valid | dut.s_no_buffer | dut.s_truncated |
                       (dut.s_last == (s_word == n_words - 1)))
    started = _counter(m, 4, s.fire & ~in_frame, "frames_started")
    judged = _counter(m, 4, dut.ev_valid, "frames_judged")
    m.d.comb += Assert((started - judged)[:4] <= in_flight,
                       "one judgement per frame, at most in_flight frames started, not judged")

    def is_code(*names):
        return Cat(*(dut.ev_code == EVENT_CODES[n] for n in names)).any()

    covers = {}
    kinds = (("meta", dut.m_meta, ("data", "trimmed", "probe")),
             ("fb", dut.m_fb, ("sack", "nack")),
             ("ctrl", dut.m_ctrl, ("no_buffer_data",)))
    for name, iface, codes in kinds:
        port = StreamPort(iface, "out", name, count_width=5).elaborate(m)
        made = _counter(m, 5, dut.ev_valid & is_code(*codes), f"{name}_judged")
        pending = Signal(5, name=f"{name}_pending")
        m.d.comb += pending.eq(made - port.taken)
        m.d.comb += [
            Assert(pending <= 8, f"{name}: records out never exceed frames judged, <= 8 wait"),
            Assert(~iface.valid | (pending != 0), f"{name}: a record out of a frame judged"),
        ]
        waiting = Signal(2, name=f"{name}_wait")
        with m.If((pending != 0) & ~iface.valid):
            m.d.sync += waiting.eq(Mux(waiting == 3, 3, waiting + 1))
        with m.Else():
            m.d.sync += waiting.eq(0)
        m.d.comb += Assert(waiting <= 2, f"{name}: a record waiting is offered")
        stalled = past(m, iface.valid & ~iface.ready, f"{name}_was_stalled")
        covers[f"{name}_record_taken_after_a_stall"] = port.fire & stalled

    # payloads
    cand = find_signal(frag, "b3_candidate")
    plen = find_signal(frag, "b3_m_payload_length")
    ghost = GhostFifo(m, 4, 16, "payloads")
    o = StreamPort(dut.m_axis, "out", "o", count_width=4).elaborate(m)
    beat = dut.m_axis.p
    last_fire = o.fire & beat.last
    m.d.comb += [ghost.push_en.eq(dut.ev_valid & is_code("data") & cand),
                 ghost.push_val.eq(plen), ghost.pop_en.eq(last_fire)]
    ghost.elaborate()
    sent = Signal(16, name="o_bytes")                 # bytes of the frame before this beat
    with m.If(o.fire):
        m.d.sync += sent.eq(Mux(beat.last, 0, sent + wbytes))
    all_ones = (1 << wbytes) - 1
    contiguous = Cat(*(beat.keep == (1 << j) - 1 for j in range(1, wbytes + 1))).any()
    v = dut.m_axis.valid
    m.d.comb += [
        Assert(~v | (ghost.count != 0), "a payload out of a frame passed"),
        Assert(~v | beat.last | ((beat.keep == all_ones) & (sent + wbytes < ghost.head)),
               "tkeep all ones before the last beat, no beat past the payload"),
        Assert(~v | ~beat.last | (contiguous & (sent + _popcount(beat.keep) == ghost.head)),
               "the payload's bytes exactly"),
    ]
    o_stalled = past(m, v & ~dut.m_axis.ready, "o_was_stalled")
    covers["frame_judged"] = dut.ev_valid
    if payload_covers:      # steps 11 and 13
        covers["payload_beat_after_a_stall"] = o.fire & o_stalled
        covers["payload_frame_out"] = last_fire
    _covers(m, covers)
    ports = [dut.s_valid, dut.s_data, dut.s_last, dut.s_length, dut.s_no_buffer,
             dut.s_truncated, dut.s_icrc_ok, dut.qp_enable, dut.inner_dst,
             Value.cast(dut.regions), dut.m_meta.ready, dut.m_fb.ready, dut.m_ctrl.ready,
             dut.m_axis.ready]
    return m, ports, {"bmc": bmc, "cover": cover}
