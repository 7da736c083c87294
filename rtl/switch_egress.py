# SPDX-License-Identifier: BSD-2-Clause
"""One egress port of the trimming switch: classification, admission, trimming, ECN, the data and
control queues in block RAM, dequeue with anti-starvation, port down (docs/protocol.md sections 6 and 7).

Golden model: ``models/switch_queue.py`` (:class:`EgressPort`), inside ``models/switch.py``;
bench: ``tb/test_switch.py`` (through the switch top).
"""

from amaranth.hdl import Cat, Const, Module, Mux, ResetInserter, Signal
from amaranth.lib import wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out
from amaranth.utils import bits_for, exact_log2

from models.layouts import (INNER_OFFSET, IPV6, OUTER_OFFSET, TRIM_MIN_BYTES, UDP, UDP_OFFSET,
                            Dscp, Ecn)
from models.switch import MIN_FRAME
from models.switch_queue import (CONTROL_BURST, CONTROL_DSCPS, LFSR_SEED_DEFAULT, LFSR_TAPS,
                                 TRIMMABLE_DSCPS)

from .common.headers import field, lane_bit
from .common.ports import axis_members, check_width

__all__ = ["SwitchEgressPort", "HEAD_BYTES", "THRESHOLD_BITS", "queue_beats", "descriptor_depth"]

HEAD_BYTES = OUTER_OFFSET + 6       # bytes 0..19: the outer Traffic Class and Payload Length
THRESHOLD_BITS = 20                 # Kmin, Kmax and queue limits are below 2^20 bytes
_ECN_SHIFT = 16                     # r < (q - Kmin) x 65536 / (Kmax - Kmin)


def queue_beats(limit, max_frame, beat_bytes):
    """Beats of block RAM a queue of byte limit ``limit`` needs: the frames it may hold (each
    rounded up to whole beats, at least 54 bytes each) and one frame being sent while they wait."""
    return -(-max_frame // beat_bytes) + -(-limit // beat_bytes) + limit // MIN_FRAME + 2


def descriptor_depth(limit):
    """Frames a queue of byte limit ``limit`` may hold, plus one."""
    return limit // MIN_FRAME + 2


def _lfsr_step(state):
    """The Galois LFSR step of docs/protocol.md 4.3 on a 16-bit Value."""
    shifted = state >> 1
    return Mux(state[0], shifted ^ LFSR_TAPS, shifted)


class SwitchEgressPort(wiring.Component):
    """One egress port: admission of frames from the core, two queues, the W-bit link out.

    Admission (the rule of :class:`models.switch_queue.EgressPort`, decided in the cycle the
    frame's first core word is on ``c_*``, from bytes 14..19 of the frame): frame bytes
    ``n = 54 + outer Payload Length`` (checked at the ingress). Classification by the outer DSCP:
    CONTROL, TRIMMED, TRIMMED_LASTHOP go to the control queue; the others to the data queue,
    TRIMMABLE and TRIMMABLE_RETX trimmable. With ``q`` the bytes already in a queue, a frame fits
    when ``q + n`` is within the queue's limit. A trimmable frame of at least 134 bytes that does
    not fit in the data queue is trimmed to ``min(trim_size, n)`` bytes (the outer and inner
    Payload Length and the UDP length rewritten, the outer DSCP set to TRIMMED on a fabric-facing
    port, TRIMMED_LASTHOP on a host-facing one) into the control queue. Anything else that does
    not fit is dropped (``ev_full``), as is every frame while the port is down (``ev_down``).
    ECN on fabric-facing ports: every frame enqueued whole into the data queue steps the LFSR
    (``r`` its new value) and is marked when ``q >= Kmax``, or ``q > Kmin`` and
    ``(r + 1) x (Kmax - Kmin) <= (q - Kmin) x 65536`` (the same as ``r < (q - Kmin) x 65536 //
    (Kmax - Kmin)``); a marked frame that is ECN-capable gets CE and counts (``ev_marked``).

    Queues: frames are stored beat by beat (W bits) in ``C / W`` block RAM banks, the data queue and
    the control queue in two regions of them, each a ring of beats sized by
    :func:`queue_beats` so that it never runs out before its byte limit does. A frame's
    length goes into a descriptor FIFO per queue (block RAM). Dequeue (when the link has sent
    the previous frame's last beat to its output register): the control queue first, except
    that after ``control_burst`` control frames in a row while data waits, one data frame. The
    dequeue updates ``q`` in its cycle; an admission in the same cycle sees the updated ``q``
    (order within a cycle: configuration, dequeue, admission, as the golden model replays it).
    The link reads a frame while it is still being written (the core writes C bits per cycle).

    Port down: in the cycle ``up`` falls, both queues are flushed (their frames counted on
    ``ev_down``); while down, every frame routed here is dropped. A frame already dequeued is
    sent whole.

    Parameters
    ----------
    port : int
        This port's number (frames with ``c_dest == port`` are its own).
    data_width, core_width : int
        W (link) and C (core) bits; C a multiple of W, at least 2 W.
    data_limit, control_limit : int
        Queue byte limits, below 2^20.
    trim_size : int
        Bytes kept of a trimmed frame (at least 134).
    max_frame : int
        The longest frame the switch accepts (bytes).
    lfsr_seed : int
        The LFSR's value out of reset (non-zero, 16 bits).
    control_burst : int
        Control frames in a row before one waiting data frame goes (16).
    port_width : int
        Bits of ``c_dest``.

    Ports
    -----
    ``clk``, ``rst``: clock, synchronous active-high reset.
    ``c_valid``, ``c_first``, ``c_dest``, ``c_head``: the core stream where decisions are made:
    a word is valid, it is a frame's first, its egress port, and its bytes 0..19 (lane order).
    ``w_valid``, ``w_data``, ``w_last``: the same stream one cycle later, written into the queues.
    ``up``, ``fabric_facing``, ``kmin``, ``kmax``: configuration as it applies in this cycle.
    ``seed_we``, ``seed``: load the LFSR with ``seed`` (a value of 0 is ignored).
    ``m_axis_tdata/tkeep/tlast/tvalid/tready``: the link out.
    ``admit``: a frame of this port is decided this cycle (any verdict). ``dequeue``: a frame is
    dequeued this cycle (``forwarded``). Counter events: ``ev_trimmed``, ``ev_marked``,
    ``ev_full`` (one frame each), ``ev_down`` (frames dropped or flushed by port down).
    ``q_data``, ``q_control``: bytes queued; ``lfsr``: the LFSR state.

    Latency and throughput: a frame is admitted in the cycle its first core word arrives; its
    first beat can be read two cycles later (descriptor FIFO latency); the link sends one beat
    per cycle with no bubble between frames while frames are queued.
    """

    def __init__(self, port=0, data_width=64, core_width=256, data_limit=32768,
                 control_limit=65536, trim_size=256, max_frame=4352,
                 lfsr_seed=LFSR_SEED_DEFAULT, control_burst=CONTROL_BURST, port_width=2):
        check_width("SwitchEgressPort", data_width)
        if core_width not in (256, 512) or core_width % data_width or core_width == data_width:
            raise ValueError(f"SwitchEgressPort: core_width must be 256 or 512 and at least twice "
                             f"data_width {data_width}, not {core_width!r}")
        for name, value in (("data_limit", data_limit), ("control_limit", control_limit)):
            if isinstance(value, bool) or not isinstance(value, int) or \
                    not 1 <= value < 1 << THRESHOLD_BITS:
                raise ValueError(f"SwitchEgressPort: {name} must be 1..{(1 << THRESHOLD_BITS) - 1}"
                                 f", not {value!r}")
        if not isinstance(trim_size, int) or not TRIM_MIN_BYTES <= trim_size <= control_limit:
            raise ValueError(f"SwitchEgressPort: trim_size must be {TRIM_MIN_BYTES}.."
                             f"control_limit ({control_limit}), not {trim_size!r}")
        if not isinstance(max_frame, int) or not MIN_FRAME <= max_frame <= 65535 + MIN_FRAME:
            raise ValueError(f"SwitchEgressPort: max_frame must be {MIN_FRAME}.."
                             f"{65535 + MIN_FRAME}, not {max_frame!r}")
        if not isinstance(lfsr_seed, int) or not 0 < lfsr_seed < 1 << 16:
            raise ValueError(f"SwitchEgressPort: lfsr_seed must be a non-zero 16-bit value, "
                             f"not {lfsr_seed!r}")
        if not isinstance(control_burst, int) or control_burst < 1:
            raise ValueError(f"SwitchEgressPort: control_burst must be positive, "
                             f"not {control_burst!r}")
        if not isinstance(port, int) or not 0 <= port < 1 << port_width:
            raise ValueError(f"SwitchEgressPort: port {port!r} does not fit {port_width} bits")
        self.port = port
        self.data_width = data_width
        self.core_width = core_width
        self.limits = (data_limit, control_limit)
        self.trim_size = trim_size
        self.max_frame = max_frame
        self.lfsr_seed = lfsr_seed
        self.control_burst = control_burst
        beat_bytes = data_width // 8
        self.banks = core_width // data_width
        self.rows = [-(-queue_beats(limit, max_frame, beat_bytes) // self.banks)
                     for limit in self.limits]
        self.bank_depth = sum(self.rows)
        self.descriptor_depths = [descriptor_depth(limit) for limit in self.limits]
        self.frames_width = bits_for(sum(self.descriptor_depths))
        q_width = bits_for(max(self.limits))
        super().__init__({
            "c_valid": In(1), "c_first": In(1), "c_dest": In(port_width),
            "c_head": In(HEAD_BYTES * 8),
            "w_valid": In(1), "w_data": In(core_width), "w_last": In(1),
            "up": In(1), "fabric_facing": In(1),
            "kmin": In(THRESHOLD_BITS), "kmax": In(THRESHOLD_BITS),
            "seed_we": In(1), "seed": In(16),
            **axis_members("m_axis", data_width, 0, sink=False),
            "admit": Out(1), "dequeue": Out(1),
            "ev_trimmed": Out(1), "ev_marked": Out(1), "ev_full": Out(1),
            "ev_down": Out(self.frames_width + 1),
            "q_data": Out(q_width), "q_control": Out(q_width), "lfsr": Out(16, init=lfsr_seed),
        })

    def elaborate(self, platform):
        m = Module()
        beat_bytes = self.data_width // 8
        beat_shift = exact_log2(beat_bytes)
        banks = self.banks
        bank_bits = exact_log2(banks)
        caps = [rows * banks for rows in self.rows]
        bases = [0, self.rows[0]]
        len_width = bits_for(self.max_frame)
        max_beats = -(-self.max_frame // beat_bytes)

        def beats_of(length):
            return (length + beat_bytes - 1) >> beat_shift

        def keep_of(length):
            """tkeep of a frame's last beat."""
            used = (length - 1)[:beat_shift] + 1
            return ((Const(1, beat_bytes + 1) << used) - 1)[:beat_bytes]

        def advance(pos, n, cap):
            total = pos + n
            return Mux(total >= cap, total - cap, total)

        # --- queue state (index 0: data, 1: control) -------------------------------------------
        q = [self.q_data, self.q_control]
        frames = [Signal(range(d + 1), name=f"frames_{k}")
                  for k, d in zip("dc", self.descriptor_depths)]
        alloc = [Signal(range(cap), name=f"alloc_{k}") for k, cap in zip("dc", caps)]
        written = [Signal(range(cap), name=f"written_{k}") for k, cap in zip("dc", caps)]
        head = [Signal(range(cap), name=f"head_{k}") for k, cap in zip("dc", caps)]
        run = Signal(range(self.control_burst + 1))
        was_up = Signal(init=1)
        flush = Signal()
        m.d.sync += was_up.eq(self.up)
        m.d.comb += flush.eq(was_up & ~self.up)

        descriptors = []
        for k, depth in zip("dc", self.descriptor_depths):
            fifo = ResetInserter(flush)(SyncFIFOBuffered(width=len_width, depth=depth))
            m.submodules[f"descriptors_{k}"] = fifo
            descriptors.append(fifo)

        # --- dequeue choice (from the state before this cycle's admission) ---------------------
        reading = Signal(range(max_beats + 1))           # beats of the current frame to issue
        data_waits = frames[0] != 0
        control_first = (frames[1] != 0) & ~(data_waits & (run >= self.control_burst))
        pick = Signal()                                  # queue chosen: 0 data, 1 control
        m.d.comb += pick.eq(control_first)
        wanted = Mux(control_first, 1, data_waits)
        visible = Mux(pick, descriptors[1].r_rdy, descriptors[0].r_rdy)
        deq = Signal()
        m.d.comb += deq.eq((reading == 0) & self.up & wanted & visible)
        deq_len = Signal(len_width)
        m.d.comb += deq_len.eq(Mux(pick, descriptors[1].r_data, descriptors[0].r_data))
        for k in range(2):
            m.d.comb += descriptors[k].r_en.eq(deq & (pick == k))
        m.d.comb += self.dequeue.eq(deq)

        with m.If(deq):
            with m.If(pick):
                m.d.sync += run.eq(Mux(data_waits, run + 1, 0))
            with m.Else():
                m.d.sync += run.eq(0)
        with m.If(flush):
            m.d.sync += run.eq(0)

        # --- admission -------------------------------------------------------------------------
        hd = self.c_head
        dscp = field(IPV6, hd, "dscp", base=OUTER_OFFSET)
        ecn = field(IPV6, hd, "ecn", base=OUTER_OFFSET)
        length = Signal(17)
        m.d.comb += length.eq(MIN_FRAME + field(IPV6, hd, "payload_length", base=OUTER_OFFSET))
        hit = Signal()
        m.d.comb += hit.eq(self.c_valid & self.c_first & (self.c_dest == self.port))
        is_control = Signal()
        trimmable = Signal()
        m.d.comb += [
            is_control.eq(Cat(dscp == d for d in CONTROL_DSCPS).any()),
            trimmable.eq(Cat(dscp == d for d in TRIMMABLE_DSCPS).any() &
                         (length >= TRIM_MIN_BYTES)),
        ]
        kept = Signal(len_width)
        m.d.comb += kept.eq(Mux(length > self.trim_size, self.trim_size, length))

        q_seen = [Signal(len(q[k]), name=f"q_seen_{k}") for k in range(2)]
        for k in range(2):
            m.d.comb += q_seen[k].eq(q[k] - Mux(deq & (pick == k), deq_len, 0))
        fits_data = q_seen[0] + length <= self.limits[0]
        fits_control = q_seen[1] + length <= self.limits[1]
        fits_trimmed = q_seen[1] + kept <= self.limits[1]
        to_data, to_control, to_trim, full = (Signal(name=n) for n in (
            "to_data", "to_control", "to_trim", "full"))
        m.d.comb += [
            to_data.eq(hit & self.up & ~is_control & fits_data),
            to_control.eq(hit & self.up & is_control & fits_control),
            to_trim.eq(hit & self.up & ~is_control & ~fits_data & trimmable & fits_trimmed),
            full.eq(hit & self.up & ~to_data & ~to_control & ~to_trim),
        ]

        lfsr_now = Signal(16)
        r = Signal(16)
        m.d.comb += [lfsr_now.eq(Mux(self.seed_we & self.seed.any(), self.seed, self.lfsr)),
                     r.eq(_lfsr_step(lfsr_now))]
        step = to_data & self.fabric_facing
        qd = q_seen[0]
        span = (self.kmax - self.kmin)[:THRESHOLD_BITS]
        above = (qd - self.kmin)[:len(qd)]
        mark = Signal()
        m.d.comb += mark.eq(step & ((qd >= self.kmax) |
                                    ((qd > self.kmin) & ((r + 1) * span <= above << _ECN_SHIFT))))
        set_ce = mark & (ecn != Ecn.NOT_ECT)
        m.d.sync += self.lfsr.eq(Mux(step, r, lfsr_now))

        stored = Signal(len_width)
        stored_beats = Signal(range(max_beats + 1))
        m.d.comb += [stored.eq(Mux(to_trim, kept, length)), stored_beats.eq(beats_of(stored))]
        queue = to_control | to_trim                     # 1: control
        enqueue = to_data | to_control | to_trim
        for k in range(2):
            m.d.comb += [
                descriptors[k].w_en.eq(enqueue & (queue == k)),
                descriptors[k].w_data.eq(stored),
            ]
            mine = enqueue & (queue == k)
            with m.If(flush):
                m.d.sync += [q[k].eq(0), frames[k].eq(0)]
            with m.Else():
                m.d.sync += [
                    q[k].eq(q_seen[k] + Mux(mine, stored, 0)),
                    frames[k].eq(frames[k] - (deq & (pick == k)) + mine),
                ]
        m.d.comb += [
            self.admit.eq(hit),
            self.ev_trimmed.eq(to_trim),
            self.ev_marked.eq(set_ce),
            self.ev_full.eq(full),
            self.ev_down.eq((hit & ~self.up) + Mux(flush, frames[0] + frames[1], 0)),
        ]

        # --- writer: the frame's words into the banks, rewritten ------------------------------
        rewrite_words = (UDP_OFFSET + UDP.size) * 8 // self.core_width + 1
        w_active = Signal()
        w_queue = Signal()
        w_pos = Signal(range(max(caps)))
        w_left = Signal(range(max_beats + 1))
        w_word = Signal(range(rewrite_words + 1))
        w_ce = Signal()
        w_trim = Signal()
        w_dscp = Signal(6)
        w_kept = Signal(len_width)

        # Fields rewritten, each (header, name, frame byte of the header, value, enable).
        outer_length = Signal(16)
        inner_length = Signal(16)
        m.d.comb += [outer_length.eq(w_kept - INNER_OFFSET), inner_length.eq(w_kept - UDP_OFFSET)]
        rewrites = [
            (IPV6, "ecn", OUTER_OFFSET, Const(Ecn.CE, 2), w_ce),
            (IPV6, "dscp", OUTER_OFFSET, w_dscp, w_trim),
            (IPV6, "payload_length", OUTER_OFFSET, outer_length, w_trim),
            (IPV6, "payload_length", INNER_OFFSET, inner_length, w_trim),
            (UDP, "length", UDP_OFFSET, inner_length, w_trim),
        ]
        word_bytes = self.core_width // 8
        lanes = [self.w_data[8 * i:8 * i + 8] for i in range(word_bytes)]
        touched = {}                    # frame byte -> [(byte bit, value bit, enable)]
        for header, name, base, value, enable in rewrites:
            f = header[name]
            for k in range(f.width):
                where = lane_bit(base * 8 + f.offset + f.width - 1 - k)
                touched.setdefault(where // 8, []).append((where % 8, value[k], enable))
        for byte, changes in sorted(touched.items()):
            word, lane = divmod(byte, word_bytes)
            new = lanes[lane]
            here = w_word == word
            enables = []                # each distinct enable once, in order (by identity)
            for _, _, e in changes:
                if not any(e is seen for seen in enables):
                    enables.append(e)
            for stage, enable in enumerate(enables):
                bits = [new[i] for i in range(8)]
                for bit, value_bit, e in changes:
                    if e is enable:
                        bits[bit] = value_bit
                changed = Signal(8, name=f"byte{byte}_{stage}")
                m.d.comb += changed.eq(Mux(enable & here, Cat(*bits), new))
                new = changed
            lanes[lane] = new
        beats_in = [Cat(*lanes[j * beat_bytes:(j + 1) * beat_bytes]) for j in range(banks)]

        writing = self.w_valid & w_active
        n_write = Signal(range(banks + 1))
        m.d.comb += n_write.eq(Mux(w_left >= banks, banks, w_left))
        w_rows = Mux(w_queue, self.rows[1], self.rows[0])
        w_base = Mux(w_queue, bases[1], bases[0])
        slot = w_pos[:bank_bits]
        row = Signal(range(max(self.rows)), name="w_row")
        next_row = Signal(range(max(self.rows)), name="w_next_row")
        w_next = Signal(range(max(caps)))
        m.d.comb += [
            row.eq(w_pos >> bank_bits),
            next_row.eq(Mux(row + 1 == w_rows, 0, row + 1)),
            w_next.eq(advance(w_pos, n_write, Mux(w_queue, caps[1], caps[0]))),
        ]

        memories = []
        for b in range(banks):
            mem = Memory(shape=self.data_width, depth=self.bank_depth, init=[])
            m.submodules[f"bank{b}"] = mem
            memories.append(mem)
            wp = mem.write_port()
            j = Signal(range(banks), name=f"beat_for_bank{b}")      # the word's beat for it
            m.d.comb += [
                j.eq((b - slot)[:bank_bits]),
                wp.en.eq(writing & (j < n_write)),
                wp.addr.eq(w_base + Mux(b < slot, next_row, row)),
                wp.data.eq(Cat(*beats_in).word_select(j, self.data_width)),
            ]

        with m.If(writing):
            m.d.sync += [
                w_pos.eq(w_next),
                w_left.eq(w_left - n_write),
                w_word.eq(Mux(w_word == rewrite_words, w_word, w_word + 1)),
            ]
            for k in range(2):
                with m.If(w_queue == k):
                    m.d.sync += written[k].eq(w_next)
            with m.If((w_left == n_write) | self.w_last):
                m.d.sync += w_active.eq(0)

        # A new frame's admission wins over the end of the previous one.
        with m.If(enqueue):
            m.d.sync += [
                w_active.eq(1),
                w_queue.eq(queue),
                w_pos.eq(Mux(queue, alloc[1], alloc[0])),
                w_left.eq(stored_beats),
                w_word.eq(0),
                w_ce.eq(set_ce),
                w_trim.eq(to_trim),
                w_dscp.eq(Mux(self.fabric_facing, Dscp.TRIMMED, Dscp.TRIMMED_LASTHOP)),
                w_kept.eq(kept),
            ]
            for k in range(2):
                with m.If(queue == k):
                    m.d.sync += alloc[k].eq(advance(alloc[k], stored_beats, caps[k]))

        # --- port down: flush ------------------------------------------------------------------
        with m.If(flush):
            for k in range(2):
                writer_here = w_active & (w_queue == k)
                m.d.sync += alloc[k].eq(head[k])
                # The frame being written stays only if it is already dequeued (no frame of
                # this queue waits): the link is reading it.
                with m.If(~writer_here | (frames[k] != 0)):
                    m.d.sync += written[k].eq(head[k])
                with m.If(writer_here & (frames[k] != 0)):
                    m.d.sync += w_active.eq(0)

        # --- reader: the link ------------------------------------------------------------------
        r_pos = Signal(range(max(caps)))
        r_queue = Signal()
        r_keep = Signal(beat_bytes)
        out_bank = Signal(range(banks))
        pos = Signal(range(max(caps)), name="r_pos_now")
        queue_now = Signal(name="r_queue_now")
        left = Signal(range(max_beats + 1), name="r_left")
        last_keep = Signal(beat_bytes, name="r_last_keep")
        m.d.comb += [
            pos.eq(Mux(deq, Mux(pick, head[1], head[0]), r_pos)),
            queue_now.eq(Mux(deq, pick, r_queue)),
            left.eq(Mux(deq, beats_of(deq_len), reading)),
            last_keep.eq(Mux(deq, keep_of(deq_len), r_keep)),
        ]
        written_now = Mux(queue_now, written[1], written[0])
        free = ~self.m_axis.valid | self.m_axis.ready
        issue = Signal()
        m.d.comb += issue.eq(free & (left != 0) & (pos != written_now))
        r_cap = Mux(queue_now, caps[1], caps[0])
        r_base = Mux(queue_now, bases[1], bases[0])
        r_slot = pos[:bank_bits]
        reads = []
        for b, mem in enumerate(memories):
            rp = mem.read_port(domain="sync")
            m.d.comb += [rp.en.eq(issue & (r_slot == b)), rp.addr.eq(r_base + (pos >> bank_bits))]
            reads.append(rp.data)

        with m.If(deq):
            m.d.sync += [r_queue.eq(pick), r_keep.eq(keep_of(deq_len))]
            for k in range(2):
                with m.If(pick == k):
                    m.d.sync += head[k].eq(advance(head[k], beats_of(deq_len), caps[k]))
        m.d.sync += [
            r_pos.eq(Mux(issue, advance(pos, 1, r_cap), pos)),
            reading.eq(left - issue),
        ]
        with m.If(issue):
            m.d.sync += [
                self.m_axis.valid.eq(1),
                out_bank.eq(r_slot),
                self.m_axis.p.last.eq(left == 1),
                self.m_axis.p.keep.eq(Mux(left == 1, last_keep, (1 << beat_bytes) - 1)),
            ]
        with m.Elif(self.m_axis.ready):
            m.d.sync += self.m_axis.valid.eq(0)
        m.d.comb += self.m_axis.p.data.eq(Cat(*reads).word_select(out_bank, self.data_width))
        return m
