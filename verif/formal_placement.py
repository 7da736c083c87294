# SPDX-License-Identifier: BSD-2-Clause
"""Unbounded (k-induction) proof of the placement safety properties (issue [verify]: "placement
never issues an AXI write outside the registered region of the frame's R_Key"), for
:func:`verif.formal.check`.

:func:`verif.formal_blocks.placement_harness` states the properties of :class:`rtl.placement.
Placement` and checks them by BMC from reset (depth 6). :func:`placement_inductive_harness`
states the same properties (with the same port-level ghost: the placed packets in command
order) and adds the invariants over the block's registers that make them inductive, so that
``prove`` closes from *any* state: the properties hold after any number of cycles.

The one change to the block as elaborated: its command queue, an ``amaranth.lib.fifo.SyncFIFO``
(a memory whose contents an induction cannot name), is replaced for the proof by a register FIFO
of the same ports and timing (:func:`verif.formal_tx_streams._register_fifo_class`, the trick of
the Link proof); the placement logic itself is the RTL's, unchanged.
"""

from unittest import mock

from amaranth.hdl import Assert, Assume, C, Cat, Cover, Fragment, Module, Mux, Signal
from amaranth.utils import bits_for, exact_log2

from .formal import StreamPort, find_signal
from .formal_blocks import placement_ports
from .formal_rx import GhostFifo
from .formal_tx_streams import _register_fifo_class

__all__ = ["placement_inductive_harness"]


def _covers(m, covers):
    for name, cond in covers.items():
        m.d.comb += Cover(cond, name)


def placement_inductive_harness(data_width=64, addr_width=12, queue_depth=2, max_length=24, *,
                                block=None, invariants=True, prove=1, cover=10):
    """Placement (W = ``data_width``, AXI address ``addr_width`` bits, ``queue_depth`` queued
    packets, command lengths ``1..max_length`` or 0; docs/protocol.md section 5: a frame writes
    only its own bytes), on any command and payload sequence (short, long or missing ``tlast``,
    any ``tkeep``, discarded and empty commands), any AW/W ready and B timing, ``rst`` free,
    asserted:

    - the stream rules on AW (``awaddr``, ``awlen``) and W (``wdata``, ``wstrb``, ``wlast``),
      assumed of ``s_cmd`` and ``s_axis``;
    - every strobed byte of every W beat is a byte of ``[va, va + length)`` of the packet that
      beat belongs to (a ghost queue of the placed packets, ``place`` 1 and ``length`` > 0, in
      command order, ``ceil((va % (W/8) + length) / (W/8))`` beats each, ``wlast`` on the last;
      no W beat without a placed packet): no write leaves its packet's range, a discarded or
      empty packet writes nothing;
    - every AW burst continues where the packet's previous one ended (the beat-aligned ``va``
      first), stays inside the packet's beats and never crosses 4 KB (a second ghost queue of
      the placed packets, for AW); no burst without a placed packet;
    - beyond :func:`verif.formal_blocks.placement_harness`: each burst ends exactly at the
      packet's end or at the ``min(4096, 256 W/8)``-byte block boundary (never crossing it), and
      ``wlast`` is set exactly on the beat that ends a burst so computed (the packet's last
      beat or the last beat of a block), so W's bursts are AW's.

    Environment assumptions (as :func:`verif.formal_blocks.placement_harness`): ``length <=
    max_length``, ``va`` below ``2**addr_width`` (the block drops the bits above), payload
    ``tdata`` 0 (no write decision reads it); ``cfg_we`` 0.

    Invariants (asserted, they make the properties inductive): with F the W ghost (count c, wb
    beats of its head taken) and A the AW ghost (ab beats of its head taken),

    - W register: a valid beat is beat wb of F[0], wb below its beats, its strobes inside the
      packet's range and its ``wlast`` right (the properties, stated on the register);
    - data stage (``active``, ``out_left``, ``d_align``, ``ge_mask``, ``end_mask``,
      ``rot_prev_keep``): emitting (``active`` and ``out_left`` != 0) exactly while a placed
      packet has beats to come; that packet is F[k] (k = 1 if the W register holds the last
      beat of F[0], else 0) with ``out_left`` = its beats - the beats it emitted (wb + 1 when
      the W register holds one of its beats, wb when empty, 0 when the register holds F[0]'s
      last), lane masks of its ``va``/``length``, ``d_boff`` the block offset of its next beat,
      and ``rot_prev_keep`` 0 before its first beat (``in_left``, ``drain`` and the data
      registers need none: no strobe, beat count or ``wlast`` depends on them);
    - command queue (register slots, ``level``): each placed entry is the next F entry in order,
      with the ``align``, ``last_out_lane``, ``out_beats`` and ``boff`` of its ``va``/``length``
      (a discarded entry needs none: the data stage loads no beats for it);
      c = (W register holds a last beat) + (emitting) + (placed entries queued);
    - AW (``awvalid``/``awaddr``/``awlen``, ``g_addr``, ``g_left``): a valid burst is A[0]'s at
      beat ab and satisfies the AW properties (stated on the register); the packet being issued
      (``g_left`` != 0) is A[1] if the register holds A[0]'s last burst, else A[0];
      ``g_addr`` is its beat-aligned ``va`` + the beats issued, ``g_left`` the rest; count =
      (register holds a last burst) + (issuing);
    - every ghost entry held has ``1 <= length <= max_length``.

    ``block`` (default :class:`rtl.placement.Placement`) lets a test prove a broken block fails;
    ``invariants`` False leaves the invariants out (the properties alone, for a BMC whose
    counterexample then fails a property at the ports, not an invariant). k-induction closes at
    depth ``prove`` = 1 (every property and invariant at step k follows from all of them at step
    k - 1). Measured on this machine (2 cores): the defaults (W = 64, ``addr_width`` 12,
    ``queue_depth`` 2, ``max_length`` 24) prove in about 4 s and cover in about 3 s; W = 64 with
    64-bit addresses, queue of 4 and any 16-bit length (the block as the NIC builds it) proves
    in about 60 s; W = 512, 16-bit addresses, queue of 3, ``max_length`` 200 in about 30 s.
    Covers: two packets written, an unaligned first beat with a partial strobe, a burst split at
    the block boundary, the excess of a long payload drained, a W beat stalled by the memory.
    """
    from rtl import placement as placement_mod
    from rtl.placement import _MAX_LENGTH

    block = block or placement_mod.Placement
    m = Module()
    dut = block(data_width, addr_width, queue_depth)
    made = []
    with mock.patch.object(placement_mod, "SyncFIFO", _register_fifo_class(made)):
        frag = Fragment.get(dut, "formal")
    m.submodules.dut = frag
    (queue,) = made
    n = data_width // 8
    lb = exact_log2(n)
    boundary_beats = placement_mod.burst_boundary(data_width) // n
    bb = exact_log2(boundary_beats)
    dut_beat_bits = bits_for((n - 1 + _MAX_LENGTH + n - 1) // n)
    max_beats = (n - 1 + max_length + n - 1) // n
    bw = bits_for(max_beats) + 1             # harness beat counters
    lw = bits_for(max_length)                # harness lengths
    axi = dut.m_axi

    cmd, pay, aw, w = placement_ports(m, dut)
    m.d.comb += [
        Assume(~dut.s_cmd.valid | (dut.s_cmd.p.length <= max_length)),
        Assume(dut.s_axis.p.data == 0),
        Assume(dut.s_cmd.p.va[addr_width:] == 0),
    ]

    # -- helpers on a packet (va, length) ---------------------------------------------------
    def va_of(e):
        return e[:addr_width]

    def len_of(e):
        return e[addr_width:addr_width + lw]

    def align_of(e):
        return e[:lb]

    def beats_of(e):
        return (align_of(e) + len_of(e) + (n - 1)) >> lb

    def last_lane_of(e):
        return (align_of(e) + len_of(e) - 1)[:lb]

    def addr_at(e, beat):
        """The byte address of beat ``beat`` of packet ``e`` (modulo 2**addr_width)."""
        return Cat(C(0, lb), ((va_of(e) >> lb) + beat)[:addr_width - lb])

    def strobe_ok(e, beat, strobe):
        """Every lane strobed of beat ``beat`` of packet ``e`` holds a byte of [va, va+len)."""
        ok = []
        for lane in range(n):
            off = (beat << lb) + lane                 # byte offset from the beat-aligned base
            ok.append(~strobe[lane] | ((off >= align_of(e)) &
                                       (off < align_of(e) + len_of(e))))
        return Cat(*ok).all()

    def pick(entries, index, name):
        out = Signal(len(entries[0]), name=name)
        with m.Switch(index):
            for j, e in enumerate(entries):
                with m.Case(j):
                    m.d.comb += out.eq(e)
        return out

    ew = addr_width + lw
    placing = Signal(name="h_placing")
    m.d.comb += placing.eq(cmd.fire & (dut.s_cmd.p.length != 0) & dut.s_cmd.p.place)
    new_entry = Cat(dut.s_cmd.p.va[:addr_width], dut.s_cmd.p.length[:lw])

    # -- W side: the ghost F of the placed packets not fully written --------------------------
    wf = GhostFifo(m, queue_depth + 2, ew, "wf")
    wb = Signal(bw, name="w_beat")
    f0 = wf.entries[0]
    w_end = Signal(name="w_end")
    m.d.comb += w_end.eq(w.fire & (wb + 1 == beats_of(f0)))
    m.d.comb += [wf.push_en.eq(placing), wf.push_val.eq(new_entry), wf.pop_en.eq(w_end)]
    wf.elaborate()
    with m.If(w.fire):
        m.d.sync += wb.eq(Mux(w_end, 0, wb + 1))
    def block_end(e, beat):
        """Beat ``beat`` of packet ``e`` is the last of its ``boundary``-byte block."""
        return ((va_of(e) >> lb) + beat)[:bb] == boundary_beats - 1

    w_last_ok = axi.wlast == ((wb + 1 == beats_of(f0)) | block_end(f0, wb))
    m.d.comb += [
        Assert(~w.fire | w_last_ok, "wlast exactly on a burst's last beat"),
        Assert(~w.fire | (wf.count != 0), "W beat without a placed packet"),
        Assert(~w.fire | strobe_ok(f0, wb, axi.wstrb), "W strobe outside [va, va + length)"),
        Assert(~w_end | axi.wlast, "wlast on the packet's last beat"),
    ]

    # -- AW side: the ghost A of the placed packets with bursts not all taken ------------------
    af = GhostFifo(m, 3, ew, "af")
    ab = Signal(bw, name="aw_beats_done")
    a0 = af.entries[0]
    burst = Signal(9, name="aw_burst")
    m.d.comb += burst.eq(axi.awlen + 1)
    a_end = Signal(name="aw_end")
    m.d.comb += a_end.eq(aw.fire & (ab + burst == beats_of(a0)))
    m.d.comb += [af.push_en.eq(placing), af.push_val.eq(new_entry), af.pop_en.eq(a_end)]
    af.elaborate()
    with m.If(aw.fire):
        m.d.sync += ab.eq(Mux(a_end, 0, ab + burst))
    aw_in_packet = (ab + burst) <= beats_of(a0)
    aw_in_4k = (axi.awaddr[:12] + (burst << lb)) <= 4096
    aw_addr_ok = axi.awaddr == addr_at(a0, ab)
    aw_in_block = (axi.awaddr[lb:lb + bb] + burst) <= boundary_beats
    aw_ends_ok = (ab + burst == beats_of(a0)) | ((axi.awaddr[lb:lb + bb] + burst) ==
                                                 boundary_beats)
    m.d.comb += [
        Assert(~aw.fire | (af.count != 0), "AW burst without a placed packet"),
        Assert(~aw.fire | aw_addr_ok, "AW address continues"),
        Assert(~aw.fire | aw_in_packet, "AW burst inside the packet"),
        Assert(~aw.fire | aw_in_4k, "AW burst crosses 4 KB"),
        Assert(~aw.fire | aw_in_block, "AW burst crosses the block boundary"),
        Assert(~aw.fire | aw_ends_ok, "AW burst ends at the packet's end or the boundary"),
    ]

    # -- invariants ------------------------------------------------------------------------------
    def inv_assert(cond, message):
        return [Assert(cond, message)] if invariants else []
    for ghost in (wf, af):
        for j, e in enumerate(ghost.entries):
            m.d.comb += inv_assert(~(j < ghost.count) | ((len_of(e) != 0) &
                                                     (len_of(e) <= max_length)),
                               f"inv: {ghost.name}{j} length in 1..max_length")

    # W register.
    wvalid = axi.wvalid
    reg_last = Signal(name="inv_w_reg_last")
    m.d.comb += reg_last.eq(wvalid & (wb + 1 == beats_of(f0)))
    m.d.comb += [
        inv_assert(~wvalid | ((wf.count != 0) & (wb < beats_of(f0))), "inv: W beat is F[0]'s"),
        inv_assert(~wvalid | strobe_ok(f0, wb, axi.wstrb), "inv: W register strobe in range"),
        inv_assert(~wvalid | w_last_ok, "inv: W register wlast on a burst's last beat"),
        inv_assert((wf.count != 0) | (wb == 0), "inv: no beat counted without a packet"),
    ]
    # Data stage.
    s = {name: find_signal(frag, name) for name in
         ("active", "out_left", "d_align", "ge_mask", "end_mask", "rot_prev_keep", "d_boff",
          "g_addr", "g_left", "g_busy", "g_last", "g_bursts", "out_nz", "out_one",
          "need_in", "in_one", "drain", "d_emit", "d_fin_drain", "d_fin_a", "d_fin_b",
          "d_fin_c", "q_nz", "ld_idle", "ld_a", "ld_b", "ld_c", "ld_drain")}
    # out_nz and out_one are registers loaded with out_left (!= 0 and == 1).
    m.d.comb += [
        inv_assert(s["out_nz"] == (s["out_left"] != 0), "inv: out_nz"),
        inv_assert(s["out_one"] == (s["out_left"] == 1), "inv: out_one"),
    ]
    # The control's product registers, loaded from the next values of their factors: each is
    # its product (the copies of wvalid are wvalid, q_nz is the queue's level != 0).
    fin = s["active"] & s["out_one"] & ~s["drain"]
    products = {
        "d_emit": s["active"] & s["out_nz"],
        "d_fin_drain": s["active"] & ~s["out_nz"] & s["drain"],
        "d_fin_a": fin & ~s["need_in"],
        "d_fin_b": fin & s["need_in"] & ~s["in_one"],
        "d_fin_c": fin & s["need_in"] & s["in_one"],
        "q_nz": queue.level != 0,
    }
    products.update({
        "ld_idle": products["q_nz"] & ~s["active"],
        **{f"ld_{x}": products["q_nz"] & products[f"d_fin_{x}"] for x in ("a", "b", "c")},
        "ld_drain": products["q_nz"] & products["d_fin_drain"],
    })
    for name, value in products.items():
        m.d.comb += inv_assert(s[name] == value, f"inv: {name}")
    for k in range(5):
        m.d.comb += inv_assert(find_signal(frag, f"d_wvalid_copy{k}") == axi.wvalid,
                               f"inv: wvalid copy {k}")
    emitting = Signal(name="inv_emitting")
    m.d.comb += emitting.eq(s["active"] & (s["out_left"] != 0))
    kd = Signal(range(queue_depth + 2), name="inv_d_index")
    m.d.comb += kd.eq(reg_last)
    ed = Signal(bw, name="inv_d_emitted")
    m.d.comb += ed.eq(Mux(wvalid, Mux(reg_last, 0, wb + 1), wb))
    fd = pick(wf.entries, kd, "inv_d_packet")
    m.d.comb += [
        inv_assert(~(wvalid & ~reg_last) | emitting,
                   "inv: a packet's next beat is in the data stage"),
        inv_assert(emitting | (ed == 0), "inv: beats counted only of a packet in the data stage"),
        inv_assert(~emitting | (kd < wf.count), "inv: the data stage's packet is in F"),
        inv_assert(~emitting | (s["out_left"] == beats_of(fd) - ed), "inv: out_left"),
        inv_assert(~emitting | (s["d_align"] == align_of(fd)), "inv: d_align"),
        inv_assert(~emitting | (s["ge_mask"] == Cat(*(align_of(fd) <= i for i in range(n)))),
               "inv: ge_mask"),
        inv_assert(~emitting | (s["end_mask"] == Cat(*(i <= last_lane_of(fd) for i in range(n)))),
               "inv: end_mask"),
        inv_assert(~emitting | (s["d_boff"] == ((va_of(fd) >> lb) + ed)[:bb]), "inv: d_boff"),
        inv_assert(~(emitting & (ed == 0)) | (s["rot_prev_keep"] == 0),
               "inv: no carried lanes before the first beat"),
    ]
    # Command queue (register slots), entry = Cat(place, align, last_out, last_in, in_beats,
    # out_beats, boff, out_beats != 0, out_beats == 1, in_beats == 1).
    widths = (1, lb, lb, lb, dut_beat_bits, dut_beat_bits, bb, 1, 1, 1)
    starts = [sum(widths[:i]) for i in range(len(widths))]

    def field(slot, i):
        return slot[starts[i]:starts[i] + widths[i]]

    level = queue.level
    m.d.comb += inv_assert(level <= queue_depth, "inv: queue level within depth")
    pos = Signal(range(queue_depth + 3), name="inv_q_pos0")
    m.d.comb += pos.eq(kd + emitting)
    for j, slot in enumerate(queue.slots):
        fj = pick(wf.entries, pos, f"inv_q_packet{j}")
        placed = field(slot, 0)
        here = (j < level) & placed
        m.d.comb += [
            inv_assert(~here | (pos < wf.count), f"inv: queue slot {j} in F"),
            inv_assert(~here | (field(slot, 1) == align_of(fj)), f"inv: queue slot {j} align"),
            inv_assert(~here | (field(slot, 2) == last_lane_of(fj)),
                       f"inv: queue slot {j} last lane"),
            inv_assert(~here | (field(slot, 5) == beats_of(fj)), f"inv: queue slot {j} beats"),
            inv_assert(~here | (field(slot, 7) == (beats_of(fj) != 0)),
                       f"inv: queue slot {j} beats != 0"),
            inv_assert(~here | (field(slot, 8) == (beats_of(fj) == 1)),
                       f"inv: queue slot {j} beats == 1"),
            inv_assert(~here | (field(slot, 6) == va_of(fj)[lb:lb + bb]),
                       f"inv: queue slot {j} block offset"),
        ]
        nxt = Signal(range(queue_depth + 3), name=f"inv_q_pos{j + 1}")
        m.d.comb += nxt.eq(pos + here)
        pos = nxt
    m.d.comb += inv_assert(wf.count == pos, "inv: F = W register last + data stage + queue")

    # AW register and the packet being issued.
    awvalid = axi.awvalid
    a_reg_last = Signal(name="inv_aw_reg_last")
    m.d.comb += a_reg_last.eq(awvalid & (ab + burst == beats_of(a0)))
    issuing = Signal(name="inv_issuing")
    m.d.comb += issuing.eq(s["g_left"] != 0)
    a1 = af.entries[1]
    ga = Signal(ew, name="inv_g_packet")
    m.d.comb += ga.eq(Mux(a_reg_last, a1, a0))
    g_done = Signal(bw, name="inv_g_done")
    m.d.comb += g_done.eq(Mux(awvalid, Mux(a_reg_last, 0, ab + burst), ab))
    m.d.comb += [
        inv_assert(~awvalid | ((af.count != 0) & aw_addr_ok & aw_in_packet & aw_in_4k &
                               aw_in_block & aw_ends_ok),
               "inv: AW register is A[0]'s next burst"),
        inv_assert(~(awvalid & ~a_reg_last) | issuing, "inv: the rest of A[0] being issued"),
        inv_assert(issuing | (g_done == 0), "inv: beats issued only of a packet being issued"),
        inv_assert(af.count == a_reg_last + issuing, "inv: A = AW register last + issuing"),
        inv_assert(~issuing | (s["g_addr"] == addr_at(ga, g_done)), "inv: g_addr"),
        inv_assert(~issuing | (s["g_left"] == beats_of(ga) - g_done), "inv: g_left"),
        # g_busy and g_last are registers loaded with g_left and g_addr: g_busy is
        # g_left != 0, and while busy g_last is g_left + the block offset <= boundary.
        inv_assert(s["g_busy"] == issuing, "inv: g_busy"),
        inv_assert(~issuing | (s["g_last"] == (s["g_left"] + s["g_addr"][lb:lb + bb] <=
                                               boundary_beats)), "inv: g_last"),
        # g_bursts: the bursts still to issue, ceil((g_left + block offset) / block).
        inv_assert(~issuing | (s["g_bursts"] == ((s["g_left"] + s["g_addr"][lb:lb + bb] +
                                                  boundary_beats - 1) >> bb)), "inv: g_bursts"),
    ]

    # -- covers ----------------------------------------------------------------------------------
    written = Signal(2, name="h_written")
    with m.If(w_end & (written != 3)):
        m.d.sync += written.eq(written + 1)
    d_placed = Signal(name="h_d_placed")      # the data stage's packet was a placed one
    with m.If(find_signal(frag, "d_load")):
        m.d.sync += d_placed.eq(field(queue.slots[0], 0))
    draining = find_signal(frag, "d_draining")
    covers = {
        "two_packets_written": w_end & (written == 1),
        "unaligned_partial_strobe": w.fire & (align_of(f0) != 0) & (wb == 0) & axi.wstrb[n - 1],
        "burst_split_at_boundary": aw.fire & ~a_end & (ab == 0),
        "long_payload_drained": pay.fire & draining & d_placed,
        "w_beat_stalled": wvalid & ~axi.wready & (written != 0),
    }
    _covers(m, covers)
    ports = cmd.free_ports() + pay.free_ports() + aw.free_ports() + w.free_ports() + \
        [axi.bvalid, axi.bresp, axi.bid, dut.cfg_addr, dut.cfg_wdata]
    return m, ports, {"prove": prove, "cover": cover}
