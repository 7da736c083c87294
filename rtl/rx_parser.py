# SPDX-License-Identifier: BSD-2-Clause
"""The NIC receive parser: checks of docs/protocol.md section 5 on the merged core stream, one ``rx_meta``
record per frame that passes, payloads realigned, received SACKs and NACKs as feedback records,
NACK NO_PKT_BUFFER for data frames without buffer room.

Golden model: ``models/rx_front.py`` (:meth:`RxFrontModel.judge`); bench: ``tb/test_rx_front.py``
(through ``rtl/rx_front.py``).
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value
from amaranth.lib import data, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out
from amaranth.utils import bits_for, exact_log2

from models import layouts
from models.layouts import (BTH, ETH, IMMDT, IPV6, METH, NETH, PETH, RETH, UDP, NackReason,
                            Opcode)
from models.rx_front import MAX_QPS, MAX_REGIONS, PARSER_COUNTERS

from .common import records
from .common.headers import field, pack
from .common.logic import wire
from .common.ports import axis_members, record_members
from .rx_plane_buffer import LENGTH_BITS

__all__ = ["RxParser", "REGION", "HEADER_BYTES", "EVENT_CODES"]

HEADER_BYTES = layouts.EXT_OFFSET + layouts.MAX_EXT_BYTES     # 150: every header any opcode has
REGION = data.StructLayout({"rkey": 32, "base": 64, "length": 64, "valid": 1})
# ``ev_code``: the index in PARSER_COUNTERS of the counter each frame goes to.
EVENT_CODES = {name: i for i, name in enumerate(PARSER_COUNTERS) if name != "access_denied"}
_CREDIT = 4                 # jobs a launch may find in flight (itself and three stages)
_RECORD_DEPTH = 8           # output record FIFOs
_PAYLOAD_DEPTH = 16         # payload words waiting for their frame's decision
_DATA_FIRST, _DATA_LAST = min(layouts.DATA_OPCODES), max(layouts.DATA_OPCODES)
assert list(layouts.DATA_OPCODES) == list(range(_DATA_FIRST, _DATA_LAST + 1))


class RxParser(wiring.Component):
    """Parser and receive checks of the merged core stream (docs/protocol.md section 5).

    Every frame is judged in the order of docs/protocol.md 5 (:meth:`models.rx_front.RxFrontModel.judge`):
    the shape checks of :func:`models.packets.parse_frame` (``short``, ``ethertype``,
    ``next_header``, ``length``, ``inner_dst``, ``udp_port``, ``tver``, ``pkey``, ``opcode``,
    ``trimmed_short``), QP known (``qp_enable``), buffer room (a ``no_buffer`` data frame gives a
    NACK NO_PKT_BUFFER on ``m_ctrl``, a control frame is dropped), the ICRC verdict of the plane
    buffer (not for trimmed data frames), then the memory-region check (``access_ok``). Data
    frames (trimmed too) and probes that pass give one RX_META record on ``m_meta``; untrimmed data
    frames with a payload give it on ``m_axis`` (pad removed, byte 0 in lane 0), in the order of
    their records; SACKs and NACKs give a FEEDBACK_RECORD on ``m_fb``. Each frame reports its
    counter on ``ev_valid``/``ev_code`` (:data:`EVENT_CODES`).

    Structure. Stage A takes one word per cycle: the first 150 bytes go to a header register,
    and the words holding payload bytes of a frame that may pass with a payload (a data frame,
    untrimmed, with room, not cut, with a positive payload length) go, unaligned, into a payload
    FIFO. When a frame's headers are in (its word holding byte 149, or its last word), its job
    is launched: the 150 header bytes and the descriptor are registered (stage B1); then the
    fields and the shape checks (B2); then the QP lookup and the region compares (B3, every
    region in parallel against R_Key, VA and VA + payload length); then the first matching region
    decides ``access_ok`` and the outputs are written into record FIFOs, with a pass/drop
    decision for the payload. (Each stage after A is fed by registers that change once per
    frame: an event-driven simulator evaluates its logic once per frame, not every word.)
    Stage C pops decisions and payload
    words: a passed payload is realigned (the header ends at 134 or 138 bytes: a two-way byte
    shift) and sent, a dropped one discarded. A launch waits until every record FIFO has room for
    it and the jobs in flight, so nothing is lost when a sink stalls.

    Parameters
    ----------
    core_width : power of two, 64..4096
        C, bits per word of the core stream and of ``m_axis``.
    n_qps : power of two, 1..64
        Local QPs (QPN q < n_qps).
    n_regions : 1..16
        Memory regions.
    words_bits : int
        Bits of a word count (the plane buffers').

    Ports
    -----
    ``clk``, ``rst``: clock, synchronous active-high reset.
    ``s_data/s_last/s_valid/s_ready``: the core stream (whole frames, each from a new word);
    ``s_length``, ``s_no_buffer``, ``s_truncated``, ``s_icrc_ok``: the frame's descriptor, held
    over its words (``rtl/plane_merge.py``). A frame's words are those the plane stored.
    ``qp_enable`` (bit q: QP q enabled), ``inner_dst`` (the NIC's inner address), ``regions``
    (array of :data:`REGION`): configuration.
    ``m_meta_tdata/tvalid/tready``: RX_META records. ``m_axis_tdata/tkeep/tlast/tvalid/tready``:
    payloads. ``m_fb_*``: FEEDBACK_RECORD. ``m_ctrl_*``: CONTROL_RECORD (NACK NO_PKT_BUFFER).
    ``ev_valid``, ``ev_code``, ``ev_access_denied``: one pulse per frame judged: its counter's
    index in ``models.rx_front.PARSER_COUNTERS``, and whether it is a data frame passed with
    ``access_ok`` = 0.

    Latency and throughput: one word per cycle, no bubble between frames, while the sinks take
    what they are given. A frame's records are written 3 cycles after its headers are in (its
    launch) and leave the FIFOs one cycle later; its payload follows its decision.
    """

    def __init__(self, core_width=512, n_qps=4, n_regions=4, words_bits=16):
        self.check(core_width, n_qps, n_regions)
        self.core_width = core_width
        self.n_qps = n_qps
        self.n_regions = n_regions
        self.words_bits = words_bits
        super().__init__({
            "s_data": In(core_width), "s_last": In(1), "s_valid": In(1), "s_ready": Out(1),
            "s_length": In(LENGTH_BITS), "s_no_buffer": In(1), "s_truncated": In(1),
            "s_icrc_ok": In(1),
            "qp_enable": In(n_qps), "inner_dst": In(128),
            "regions": In(data.ArrayLayout(REGION, n_regions)),
            **record_members("m_meta", records.RX_META, sink=False),
            **axis_members("m_axis", core_width, 0, sink=False),
            **record_members("m_fb", records.FEEDBACK_RECORD, sink=False),
            **record_members("m_ctrl", records.CONTROL_RECORD, sink=False),
            "ev_valid": Out(1), "ev_code": Out(bits_for(len(PARSER_COUNTERS))),
            "ev_access_denied": Out(1),
        })

    @staticmethod
    def check(core_width, n_qps, n_regions):
        """Check the parameters (ValueError)."""
        if not isinstance(core_width, int) or not 64 <= core_width <= 4096 or \
                core_width & (core_width - 1):
            raise ValueError(f"RxParser: core_width must be a power of two 64..4096, "
                             f"not {core_width!r}")
        if not isinstance(n_qps, int) or not 1 <= n_qps <= MAX_QPS or n_qps & (n_qps - 1):
            raise ValueError(f"RxParser: n_qps must be a power of two 1..{MAX_QPS}, "
                             f"not {n_qps!r}")
        if not isinstance(n_regions, int) or not 1 <= n_regions <= MAX_REGIONS:
            raise ValueError(f"RxParser: n_regions must be 1..{MAX_REGIONS}, not {n_regions!r}")

    def elaborate(self, platform):
        m = Module()
        C = self.core_width
        word_bytes = C // 8
        log_wb = exact_log2(word_bytes)
        cap_words = -(-HEADER_BYTES // word_bytes)
        n = self.s_length

        # --- output FIFOs ------------------------------------------------------------------------
        def fifo(name, width, depth):
            f = SyncFIFOBuffered(width=width, depth=depth)
            m.submodules[name] = f
            return f

        meta_f = fifo("meta_fifo", records.RX_META.size, _RECORD_DEPTH)
        fb_f = fifo("fb_fifo", records.FEEDBACK_RECORD.size, _RECORD_DEPTH)
        ctrl_f = fifo("ctrl_fifo", records.CONTROL_RECORD.size, _RECORD_DEPTH)
        dec_f = fifo("dec_fifo", 2 + 16, _RECORD_DEPTH)
        pay_f = fifo("payload_fifo", C + 1, _PAYLOAD_DEPTH)
        credits = Cat(f.level <= _RECORD_DEPTH - _CREDIT for f in (meta_f, fb_f, ctrl_f, dec_f))
        for f, prefix in ((meta_f, "m_meta"), (fb_f, "m_fb"), (ctrl_f, "m_ctrl")):
            m.d.comb += [
                getattr(self, prefix).p.eq(f.r_data),
                getattr(self, prefix).valid.eq(f.r_rdy),
                f.r_en.eq(getattr(self, prefix).ready),
            ]

        # --- stage A: header capture, payload words ----------------------------------------------
        accept = Signal()
        m.d.comb += [self.s_ready.eq(pay_f.w_rdy & credits.all()),
                     accept.eq(self.s_valid & self.s_ready)]
        j = Signal(range(cap_words + 1))           # word index, saturating past the headers
        wj = Signal(self.words_bits + 1)           # word index
        launched = Signal()
        hdr = Signal(8 * HEADER_BYTES)
        parts = []
        for k in range(cap_words):
            lo, hi = k * word_bytes, min((k + 1) * word_bytes, HEADER_BYTES)
            here = self.s_data[:8 * (hi - lo)]
            parts.append(Mux(j == k, here, hdr[8 * lo:8 * hi]))
            with m.If(accept & (j == k)):
                m.d.sync += hdr[8 * lo:8 * hi].eq(here)
        view = wire(m, Cat(*parts), 8 * HEADER_BYTES, "hdr_view")

        # what stage A needs to know per word: the frame's kind and payload length
        a = self._kind(m, view, n, "a")
        candidate = wire(m, a["is_data"] & ~a["trimmed"] & ~self.s_no_buffer &
                         ~self.s_truncated & a["plen_pos"], 1, "candidate")
        j_first = Mux(a["is_imm"], layouts.header_length(Opcode.WRITE_ONLY_IMM) >> log_wb,
                      layouts.header_length(Opcode.WRITE_ONLY) >> log_wb)
        j_last = wire(m, (n - a["padcnt"] - (layouts.ICRC_BYTES + 1)) >> log_wb, LENGTH_BITS,
                      "j_last")
        push = accept & candidate & (wj >= j_first) & (wj <= j_last)
        m.d.comb += [
            pay_f.w_en.eq(push),
            pay_f.w_data.eq(Cat(self.s_data, (wj == j_last) | self.s_last)),
        ]
        launch = wire(m, accept & ~launched & (self.s_last | (j == cap_words - 1)), 1, "launch")
        with m.If(accept):
            with m.If(self.s_last):
                m.d.sync += [j.eq(0), wj.eq(0), launched.eq(0)]
            with m.Else():
                m.d.sync += [j.eq(Mux(j == cap_words, j, j + 1)), wj.eq(wj + 1),
                             launched.eq(launched | launch)]

        # --- stage B1: the headers and the descriptor, registered at the launch --------------
        # (every later stage is fed by registers that change once per frame: cheap to simulate)
        b1_valid = Signal()
        b1_hdr = Signal(8 * HEADER_BYTES)
        b1_n = Signal(LENGTH_BITS)
        b1_no_buffer, b1_icrc_ok, b1_candidate = Signal(), Signal(), Signal()
        m.d.sync += b1_valid.eq(launch)
        with m.If(launch):
            m.d.sync += [b1_hdr.eq(view), b1_n.eq(n), b1_no_buffer.eq(self.s_no_buffer),
                         b1_icrc_ok.eq(self.s_icrc_ok), b1_candidate.eq(candidate)]
        k = self._kind(m, b1_hdr, b1_n, "b1")
        n = b1_n
        view = b1_hdr

        def get(header, name, base):
            """A big-endian header field: whole bytes gathered byte by byte (a simulator then
            moves bytes, not bits), other fields bit by bit (``rtl/common/headers.py``)."""
            f = header[name]
            if f.offset % 8 or f.width % 8:
                return field(header, view, name, base)
            first = base + f.offset // 8
            return Cat(*(view.word_select(b, 8) for b in reversed(range(first,
                                                                          first + f.width // 8))))

        opcode, padcnt, dscp = k["opcode"], k["padcnt"], k["dscp"]
        is_data, is_imm, trimmed = k["is_data"], k["is_imm"], k["trimmed"]
        ethertype = get(ETH, "ethertype", 0)
        o = {name: get(IPV6, name, layouts.OUTER_OFFSET)
             for name in ("ecn", "payload_length", "next_header", "src", "dst")}
        flow_low = view.word_select(layouts.OUTER_OFFSET + 3, 8), \
            view.word_select(layouts.OUTER_OFFSET + 2, 8)           # Flow Label[15:0]
        i_len = get(IPV6, "payload_length", layouts.INNER_OFFSET)
        i_dst = get(IPV6, "dst", layouts.INNER_OFFSET)
        udp = {name: get(UDP, name, layouts.UDP_OFFSET) for name in ("sport", "dport", "length")}
        bth = {name: get(BTH, name, layouts.BTH_OFFSET)
               for name in ("tver", "pkey", "dest_qpn", "ackreq", "rtx", "psn")}
        ext_all = view[8 * layouts.EXT_OFFSET:]

        n_ext = Signal(range(layouts.MAX_EXT_BYTES + 1))    # extension bytes of the opcode
        known = Signal()
        control = Signal()
        with m.Switch(opcode):
            for op in layouts.KNOWN_OPCODES:
                with m.Case(op):
                    m.d.comb += [n_ext.eq(layouts.ext_length(op)), known.eq(1),
                                 control.eq(op in layouts.CONTROL_OPCODES)]
        body = wire(m, n - (layouts.EXT_OFFSET + layouts.ICRC_BYTES), LENGTH_BITS + 1, "body")
        spare = wire(m, body - n_ext - padcnt, LENGTH_BITS + 2, "spare")
        min_frame = layouts.EXT_OFFSET + layouts.ICRC_BYTES
        checks = [
            ("short", n < min_frame),
            ("ethertype", ethertype != layouts.ETHERTYPE_IPV6),
            ("next_header", o["next_header"] != layouts.NEXT_HEADER_IPV6),
            ("length", (o["payload_length"] + layouts.INNER_OFFSET != n) |
                       (i_len + layouts.UDP_OFFSET != n) |
                       (udp["length"] + layouts.UDP_OFFSET != n)),
            ("inner_dst", i_dst != self.inner_dst),
            ("udp_port", udp["dport"] != layouts.ROCE_UDP_PORT),
            ("tver", bth["tver"] != 0),
            ("pkey", bth["pkey"] != layouts.PKEY_DEFAULT),
            ("opcode", ~known),
            ("trimmed_short", trimmed & (n < layouts.TRIM_MIN_BYTES)),
            ("length", ~trimmed & (spare[-1] | (control & (body != n_ext)))),
        ]
        reason = Signal(range(len(PARSER_COUNTERS)))
        shape_bad = Signal()
        for index, (name, cond) in enumerate(checks):
            with (m.If if index == 0 else m.Elif)(cond):
                m.d.comb += [reason.eq(PARSER_COUNTERS.index(name)), shape_bad.eq(1)]

        # extension bytes present: ImmDt of a trimmed frame only when it was kept
        imm_kept = is_imm & (~trimmed | (n >= layouts.header_length(Opcode.WRITE_ONLY_IMM)))
        ext_len = Mux(is_data, Mux(imm_kept, 24, 20), n_ext)
        ext_mask = Cat(*(Mux(ext_len > b, 0xFF, 0) for b in range(layouts.MAX_EXT_BYTES)))
        # The RX_META fields, each its own register in the next stages (the record is assembled
        # at the output only: a wide record built from many parts is costly to simulate).
        data_only = lambda v: Mux(is_data, v, 0)
        ext_base = layouts.EXT_OFFSET
        meta = {
            "opcode": opcode, "qpn": bth["dest_qpn"], "psn": bth["psn"],
            "ev": Cat(*flow_low, udp["sport"]), "outer_src": o["src"], "outer_dst": o["dst"],
            "dscp": dscp, "ecn": o["ecn"], "ackreq": bth["ackreq"], "rtx": bth["rtx"],
            "padcnt": padcnt,
            "rqmsn": data_only(get(METH, "rqmsn", ext_base)),
            "msn": data_only(get(METH, "msn", ext_base)),
            "va": data_only(get(RETH, "va", ext_base + METH.size)),
            "rkey": data_only(get(RETH, "rkey", ext_base + METH.size)),
            "dma_length": data_only(get(RETH, "dma_length", ext_base + METH.size)),
            "imm": Mux(imm_kept, get(IMMDT, "imm", ext_base + METH.size + RETH.size), 0),
            "payload_length": Mux(is_data & ~trimmed & k["plen_pos"], k["plen"][:16], 0),
            "ext": ext_all & ext_mask,
            "trimmed": trimmed,
            "probe_id": Mux(opcode == Opcode.PROBE, get(PETH, "probe_id", ext_base), 0),
        }

        def stage(name, values, advance):
            """Registers loaded from ``values`` (name -> Value) when ``advance`` is high."""
            regs = {}
            for key, value in values.items():
                value = Value.cast(value)
                regs[key] = Signal(len(value), name=f"{name}_{key}")
                with m.If(advance):
                    m.d.sync += regs[key].eq(value)
            return regs

        # --- stage B2: fields, shape checks ------------------------------------------------------
        b2_valid = Signal()
        m.d.sync += b2_valid.eq(b1_valid)
        b2 = stage("b2", {
            **{f"m_{name}": value for name, value in meta.items()},
            "reason": reason, "shape_bad": shape_bad, "is_data": is_data,
            "is_imm": is_imm, "trimmed": trimmed, "candidate": b1_candidate,
            "no_buffer": b1_no_buffer, "icrc_ok": b1_icrc_ok,
            "sack": opcode == Opcode.SACK, "nack": opcode == Opcode.NACK,
            "probe": opcode == Opcode.PROBE,
        }, b1_valid)

        # --- stage B3: QP lookup, region compares ------------------------------------------------
        qpn = b2["m_qpn"]
        qb = exact_log2(self.n_qps)
        qp_ok = (qpn < self.n_qps) & self.qp_enable.bit_select(qpn[:qb], 1) if qb else \
            (qpn == 0) & self.qp_enable[0]
        va_end = Signal(65)
        m.d.comb += va_end.eq(b2["m_va"] + b2["m_payload_length"])
        region_match, region_ok = [], []
        for r in range(self.n_regions):
            reg = self.regions[r]
            region_match.append(reg.valid & (reg.rkey == b2["m_rkey"]))
            region_ok.append((b2["m_va"] >= reg.base) & (va_end <= reg.base + reg.length))
        b3_valid = Signal()
        m.d.sync += b3_valid.eq(b2_valid)
        b3 = stage("b3", dict(b2, qp_ok=qp_ok, match=Cat(*region_match),
                              inside=Cat(*region_ok)), b2_valid)
        field_of = lambda name: b3[f"m_{name}"]

        # --- the verdict and the outputs, from the stage-B3 registers ----------------------------
        access = Signal()
        for r in reversed(range(self.n_regions)):
            with m.If(b3["match"][r]):
                m.d.comb += access.eq(b3["inside"][r])
        code = Signal.like(self.ev_code)
        with m.If(b3["shape_bad"]):
            m.d.comb += code.eq(b3["reason"])
        with m.Elif(~b3["qp_ok"]):
            m.d.comb += code.eq(EVENT_CODES["qp_unknown"])
        with m.Elif(b3["no_buffer"]):
            m.d.comb += code.eq(Mux(b3["is_data"], EVENT_CODES["no_buffer_data"],
                                    EVENT_CODES["no_buffer_control"]))
        with m.Elif(~b3["trimmed"] & ~b3["icrc_ok"]):
            m.d.comb += code.eq(EVENT_CODES["icrc"])
        with m.Elif(b3["is_data"]):
            m.d.comb += code.eq(Mux(b3["trimmed"], EVENT_CODES["trimmed"], EVENT_CODES["data"]))
        with m.Elif(b3["probe"]):
            m.d.comb += code.eq(EVENT_CODES["probe"])
        with m.Elif(b3["sack"]):
            m.d.comb += code.eq(EVENT_CODES["sack"])
        with m.Else():
            m.d.comb += code.eq(EVENT_CODES["nack"])
        is_code = lambda *names: Cat(code == EVENT_CODES[nm] for nm in names).any()
        passed_data = is_code("data", "trimmed")
        out_meta = Signal(records.RX_META)
        m.d.comb += [getattr(out_meta, name).eq(field_of(name)) for name in meta]
        m.d.comb += out_meta.access_ok.eq(b3["is_data"] & access)
        fb = Signal(records.FEEDBACK_RECORD)
        m.d.comb += [fb.qpn.eq(field_of("qpn")), fb.opcode.eq(field_of("opcode")),
                     fb.ecn.eq(field_of("ecn")), fb.ext.eq(field_of("ext"))]
        ctrl = Signal(records.CONTROL_RECORD)
        m.d.comb += [ctrl.qpn.eq(field_of("qpn")), ctrl.opcode.eq(Opcode.NACK),
                     ctrl.ev.eq(field_of("ev")),
                     ctrl.ext.eq(pack(NETH, nack_reason=NackReason.NO_PKT_BUFFER,
                                      entropy=field_of("ev"), nack_psn=field_of("psn")))]
        m.d.comb += [
            meta_f.w_en.eq(b3_valid & (passed_data | is_code("probe"))),
            meta_f.w_data.eq(out_meta),
            fb_f.w_en.eq(b3_valid & is_code("sack", "nack")),
            fb_f.w_data.eq(fb),
            ctrl_f.w_en.eq(b3_valid & is_code("no_buffer_data")),
            ctrl_f.w_data.eq(ctrl),
            dec_f.w_en.eq(b3_valid & b3["candidate"]),
            dec_f.w_data.eq(Cat(is_code("data"), b3["is_imm"], field_of("payload_length"))),
            self.ev_valid.eq(b3_valid),
            self.ev_code.eq(code),
            self.ev_access_denied.eq(b3_valid & passed_data & ~access),
        ]

        # --- stage C: payload words out ----------------------------------------------------------
        shifts = (layouts.header_length(Opcode.WRITE_ONLY) % word_bytes,
                  layouts.header_length(Opcode.WRITE_ONLY_IMM) % word_bytes)
        d_pass, d_imm, d_len = dec_f.r_data[0], dec_f.r_data[1], dec_f.r_data[2:18]
        w_data, w_last = pay_f.r_data[:C], pay_f.r_data[C]
        in_frame = Signal()                 # popping the words of a frame after its first
        spill = Signal()                    # one more output word, from ``prev`` alone
        pass_r, imm_r = Signal(), Signal()
        left_r = Signal(16 - log_wb + 1)    # output words still to send
        last_keep_r = Signal(word_bytes)
        prev = Signal(C)
        eff_pass = Mux(in_frame, pass_r, d_pass)
        eff_left = Mux(in_frame, left_r, (d_len + word_bytes - 1) >> log_wb)
        tail = d_len[:log_wb]
        keep_of_tail = Mux(tail == 0, (1 << word_bytes) - 1,
                           (Const(1, word_bytes + 1) << tail) - 1)
        out_free = ~self.m_axis.valid | self.m_axis.ready
        spill_go = spill & out_free
        emit_pop = in_frame & pass_r
        pop = wire(m, pay_f.r_rdy & (in_frame | dec_f.r_rdy) & (~spill | spill_go) &
                   (~emit_pop | out_free), 1, "pop")
        left_after = Mux(pop & emit_pop, eff_left - 1, eff_left)

        def realign(cur):
            options = [Cat(prev[8 * s:], cur[:8 * s]) if s else prev for s in shifts]
            return Mux(imm_r, options[1], options[0])

        m.d.comb += [pay_f.r_en.eq(pop), dec_f.r_en.eq(pop & ~in_frame)]
        with m.If(pop):
            m.d.sync += prev.eq(w_data)
            with m.If(~in_frame):
                m.d.sync += [pass_r.eq(d_pass), imm_r.eq(d_imm),
                             last_keep_r.eq(keep_of_tail[:word_bytes])]
            m.d.sync += [left_r.eq(left_after), in_frame.eq(~w_last),
                         spill.eq(w_last & eff_pass & (left_after != 0))]
        with m.Elif(spill_go):
            m.d.sync += [spill.eq(0), left_r.eq(0)]
        emit = (pop & emit_pop) | spill_go
        with m.If(out_free):
            m.d.sync += self.m_axis.valid.eq(emit)
            with m.If(emit):
                final = Mux(spill, 1, left_r == 1)
                m.d.sync += [
                    self.m_axis.p.data.eq(realign(Mux(spill, 0, w_data))),
                    self.m_axis.p.last.eq(final),
                    self.m_axis.p.keep.eq(Mux(final, last_keep_r, (1 << word_bytes) - 1)),
                ]
        return m

    @staticmethod
    def _kind(m, view, length, name):
        """What the BTH and the outer DSCP in ``view`` (the first 150 bytes) say of a frame of
        ``length`` bytes: opcode, PadCnt, DSCP, data / ImmDt / trimmed, and the payload length of
        a data frame (``length`` - header - PadCnt - ICRC, signed) with whether it is positive."""
        opcode = field(BTH, view, "opcode", layouts.BTH_OFFSET)
        padcnt = field(BTH, view, "padcnt", layouts.BTH_OFFSET)
        dscp = field(IPV6, view, "dscp", layouts.OUTER_OFFSET)
        is_data = wire(m, (opcode >= _DATA_FIRST) & (opcode <= _DATA_LAST), 1, f"{name}_is_data")
        is_imm = wire(m, (opcode == Opcode.WRITE_LAST_IMM) | (opcode == Opcode.WRITE_ONLY_IMM), 1,
                      f"{name}_is_imm")
        trimmed = wire(m, is_data & ((dscp == layouts.Dscp.TRIMMED) |
                                     (dscp == layouts.Dscp.TRIMMED_LASTHOP)), 1, f"{name}_trimmed")
        header = Mux(is_imm, layouts.header_length(Opcode.WRITE_ONLY_IMM),
                     layouts.header_length(Opcode.WRITE_ONLY))
        plen = wire(m, length - header - padcnt - layouts.ICRC_BYTES, LENGTH_BITS + 1,
                    f"{name}_plen")
        return {"opcode": opcode, "padcnt": padcnt, "dscp": dscp, "is_data": is_data,
                "is_imm": is_imm, "trimmed": trimmed, "plen": plen,
                "plen_pos": ~plen[-1] & (plen != 0)}
