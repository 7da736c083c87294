# SPDX-License-Identifier: BSD-2-Clause
"""The receive front model: every check of docs/protocol.md section 5 in its order, the outputs of each
frame kind (RX_META fields, payload, feedback and NACK NO_PKT_BUFFER records), the plane
outcomes and the room rule, the memory-region rule, and the bench traffic's labels."""

from collections import deque
import random

import pytest
from hypothesis import given, settings, strategies as st

from models.layouts import (BTH_OFFSET, DATA_OPCODES, EXT_OFFSET, IMMDT, METH, NETH, PETH, RETH,
                            SETH, Dscp, Ecn, NackReason, Opcode, header_length, ip6)
from models.packets import FRAME_ERROR_REASONS, build_frame, data_packet, parse_frame
from models.records import CONTROL_RECORD, FEEDBACK_RECORD, RX_META, int_to_ext
from models.rx_front import (BAD, HEADER_KEEP, NO_BUFFER, NO_ROOM, PARSER_COUNTERS, STORED,
                             Region, RxFrontConfig, RxFrontModel, access_ok, body_words_needed,
                             core_width, header_words)
from models.rx_tracker import Arrival, Probe
from models.switch_queue import trim
from models.rx_traffic import MALFORMED_KINDS, RxTraffic


def setup(seed=1, **params):
    rng = random.Random(seed)
    traffic = RxTraffic(rng)
    model = RxFrontModel(**{"n_planes": 2, **params})
    traffic.configure(model)
    return model, traffic


# --- widths and the room rule ------------------------------------------------------------------

def test_core_width_and_header_slot():
    assert [core_width(n, 64) for n in range(1, 9)] == [64, 128, 256, 256, 512, 512, 512, 512]
    assert core_width(2, 512) == 1024 and core_width(8, 512) == 4096
    assert [header_words(c) for c in (64, 128, 256, 512, 1024, 4096)] == [18, 9, 5, 3, 2, 1]
    for c in (64, 128, 256, 512, 1024, 4096):
        assert header_words(c) * c // 8 >= HEADER_KEEP > (header_words(c) - 1) * c // 8


def test_body_words_needed():
    model, traffic = setup()
    frame = traffic.data(payload=1000)          # 1142 B: 143 words of 8 B, 18 in the slot
    assert body_words_needed(frame, 64) == 143 - 18
    assert body_words_needed(frame, 512) == 18 - 3
    small = traffic.data(payload=0)             # 138 B: all in the header slot
    assert body_words_needed(small, 64) == 0 and body_words_needed(small, 4096) == 0
    assert body_words_needed(frame[:19], 64) == 0
    # the declared length counts, not the frame's
    lying = bytearray(small)
    lying[18:20] = (4000).to_bytes(2, "big")
    assert body_words_needed(bytes(lying), 512) == -(-4054 // 64) - 3


def test_plane_outcomes_and_counters():
    model, traffic = setup()
    frames = [traffic.data(payload=100) for _ in range(6)]
    assert model.arrive(0, frames[0]) == STORED
    assert model.arrive(0, frames[1], outcome=NO_BUFFER, free=0) == NO_BUFFER
    assert model.arrive(1, frames[2], bad=True, outcome=BAD) == BAD
    assert model.arrive(1, frames[3], bad=True, outcome=NO_ROOM) == NO_ROOM
    assert model.arrive(1, frames[4], outcome=NO_ROOM) == NO_ROOM
    assert model.plane_counters == [
        {"frames": 2, "dropped_bad": 0, "dropped_no_room": 0, "no_buffer": 1},
        {"frames": 3, "dropped_bad": 1, "dropped_no_room": 2, "no_buffer": 0}]
    with pytest.raises(ValueError, match="flagged bad"):
        model.arrive(0, frames[5], bad=True)
    with pytest.raises(ValueError, match="not flagged"):
        model.arrive(0, frames[5], outcome=BAD)
    needed = body_words_needed(frames[5], model.config.core_width)
    with pytest.raises(ValueError, match="free"):
        model.arrive(0, frames[5], outcome=NO_BUFFER, free=needed)
    with pytest.raises(ValueError, match="free"):
        model.arrive(0, frames[5], outcome=STORED, free=needed - 1)
    with pytest.raises(ValueError, match="cannot lack room"):
        model.arrive(0, frames[5][:10], outcome=NO_BUFFER)
    with pytest.raises(ValueError, match="plane"):
        model.arrive(2, frames[5])
    assert model.merge(0).reason == "data"
    assert model.merge(0).reason == "no_buffer_data"
    with pytest.raises(ValueError, match="holds none"):
        model.merge(1)
    assert model.empty()


def test_header_slot_rule_judges_no_room():
    # test-audit #8: NO_ROOM was taken from the RTL's trace and never judged. With
    # header_slots the model judges it: a frame is kept only while a slot can be free, NO_ROOM
    # only while every slot can be in use. Without the rule (header_slots None) the spurious
    # outcomes below pass, which is how the old model behaved.
    for slots in (None, 2):
        model, traffic = setup(header_slots=slots)
        frames = [traffic.data(payload=100) for _ in range(6)]
        spurious_no_room = lambda: model.arrive(0, frames[0], outcome=NO_ROOM)  # noqa: E731
        if slots is None:
            assert spurious_no_room() == NO_ROOM
            continue
        with pytest.raises(ValueError, match="no_room with 0 frames held"):
            spurious_no_room()
    model, traffic = setup(header_slots=2)
    frames = [traffic.data(payload=100) for _ in range(8)]
    assert model.arrive(0, frames[0]) == STORED          # slots in use: 1
    assert model.arrive(0, frames[1]) == STORED          # 2 (full)
    with pytest.raises(ValueError, match="all 2 header slots held"):
        model.arrive(0, frames[2])                       # a third kept: overfilled
    model, traffic = setup(header_slots=2)
    frames = [traffic.data(payload=100) for _ in range(8)]
    model.arrive(0, frames[0])
    assert model.arrive(0, frames[1], outcome=NO_ROOM) == NO_ROOM   # 1 held + 1 being read
    model.arrive(0, frames[2])
    model.merge(0)
    model.merge(0)                                       # merges since the last arrival: 2
    assert model.arrive(0, frames[3], outcome=NO_ROOM) == NO_ROOM   # may have been during it
    with pytest.raises(ValueError, match="no_room with 0 frames held and 0 merged"):
        model.arrive(0, frames[4], outcome=NO_ROOM)
    model2, traffic2 = setup(header_slots=2)
    model2.arrive(1, traffic2.data(payload=10))
    model2.arrive(1, traffic2.data(payload=10))
    with pytest.raises(ValueError, match="all 2 header slots"):
        model2.arrive(1, traffic2.data(payload=10), bad=True, outcome=BAD)   # BAD needed one
    model.arrive(1, frames[5], bad=True, outcome=BAD)    # a bad frame had a slot, then freed it
    assert model.plane_counters[0]["dropped_no_room"] == 2
    with pytest.raises(ValueError, match="header_slots"):
        RxFrontConfig(header_slots=1)


def test_merge_order_is_per_plane_fifo():
    model, traffic = setup()
    frames = {p: [traffic.data(payload=p * 10 + i + 1) for i in range(3)] for p in (0, 1)}
    for i in range(3):
        for p in (0, 1):
            model.arrive(p, frames[p][i])
    for p in (1, 1, 0, 1, 0, 0):
        model.merge(p)
    lengths = [len(x) for x in model.payloads]
    assert lengths == [11, 12, 1, 13, 2, 3]


# --- the checks in the order of docs/protocol.md section 5 ------------------------------------------------

@pytest.mark.parametrize("kind", [k for k in MALFORMED_KINDS if k != "tuser"])
def test_every_malformed_kind_reaches_its_counter(kind):
    model, traffic = setup(seed=hash(kind) & 0xFFFF)
    for _ in range(40):
        case = traffic.malformed(kind)
        result = model.judge(case.frame)
        if case.reason == "access_denied":
            assert result.reason == "data" and result.meta["access_ok"] == 0
        else:
            assert result.reason == case.reason, (kind, result.reason)
            assert result.meta is result.payload is result.feedback is result.control is None


def test_cut_at_every_header_boundary():
    model, traffic = setup()
    frame = traffic.data(payload=40)
    for n in range(len(frame)):
        want = "short" if n < EXT_OFFSET + 4 else "length"
        assert model.judge(frame[:n]).reason == want, n


def test_order_shape_before_qp_before_buffer_before_icrc():
    model, traffic = setup()
    frame = bytearray(traffic.data(payload=20))
    frame[-1] ^= 1                                          # bad ICRC
    assert model.judge(bytes(frame)).reason == "icrc"
    assert model.judge(bytes(frame), no_buffer=True).reason == "no_buffer_data"
    frame[BTH_OFFSET + 7] = 3                               # QP 3: disabled
    assert model.judge(bytes(frame), no_buffer=True).reason == "qp_unknown"
    frame[BTH_OFFSET + 2] = 0                               # P_Key
    assert model.judge(bytes(frame), no_buffer=True).reason == "pkey"
    frame[12] = 0x08                                        # EtherType
    assert model.judge(bytes(frame), no_buffer=True).reason == "ethertype"
    assert model.judge(bytes(frame[:100])).reason == "short"


def test_inner_destination_and_qp_configuration():
    model, traffic = setup()
    frame = traffic.data(qpn=1)
    assert model.judge(frame).reason == "data"
    model.set_inner_dst(ip6("fd00:ffff::8"))
    assert model.judge(frame).reason == "inner_dst"
    model.set_inner_dst(traffic.inner_dst)
    model.set_qp_enable(0b1101)
    assert model.judge(frame).reason == "qp_unknown"
    assert model.judge(traffic.data(qpn=3)).reason == "data"
    fresh = RxFrontModel(n_planes=1)                        # out of reset: nothing accepted
    assert fresh.judge(frame).reason == "inner_dst"
    with pytest.raises(ValueError):
        model.set_qp_enable(1 << 4)


# --- outputs of every kind ---------------------------------------------------------------------

@settings(max_examples=60, deadline=None)
@given(st.integers(0, 1 << 32), st.sampled_from(DATA_OPCODES), st.integers(0, 300))
def test_data_frame_meta_and_payload(seed, opcode, length):
    model, traffic = setup(seed)
    frame = traffic.data(opcode=opcode, payload=length)
    parsed = parse_frame(frame)
    model.arrive(0, frame)
    result = model.merge(0)
    assert result.reason == "data"
    meta = result.meta
    assert RX_META.unpack(RX_META.pack(meta)) == meta
    assert meta["payload_length"] == length and result.payload == (parsed.payload or None)
    assert model.payloads == ([parsed.payload] if length else [])
    assert meta["access_ok"] == 1 and meta["trimmed"] == 0 and meta["probe_id"] == 0
    assert meta["ev"] == parsed.ev and meta["qpn"] == parsed.bth["dest_qpn"]
    ext = int_to_ext(meta["ext"], header_length(opcode) - EXT_OFFSET)
    assert METH.unpack(ext)["msn"] == meta["msn"]
    assert RETH.unpack(ext[4:]) == {"va": meta["va"], "rkey": meta["rkey"],
                                    "dma_length": meta["dma_length"]}
    if opcode in (Opcode.WRITE_LAST_IMM, Opcode.WRITE_ONLY_IMM):
        assert IMMDT.unpack(ext[20:])["imm"] == meta["imm"]
    else:
        assert meta["imm"] == 0 and meta["ext"] >> (20 * 8) == 0
    arrival = Arrival.from_rx_meta(meta, access_ok=bool(meta["access_ok"]))
    assert arrival.psn == parsed.bth["psn"] and arrival.payload_length == length


def test_trimmed_frames():
    model, traffic = setup()
    for size in (134, 135, 137, 138, 200):
        for opcode in (Opcode.WRITE_ONLY_IMM, Opcode.WRITE_FIRST):
            whole = traffic.data(opcode=opcode, payload=500)
            frame = trim(whole, size, Dscp.TRIMMED_LASTHOP)
            result = model.judge(frame)
            assert result.reason == "trimmed" and result.payload is None
            meta = result.meta
            assert meta["trimmed"] == 1 and meta["payload_length"] == 0
            assert meta["dscp"] == Dscp.TRIMMED_LASTHOP
            has_imm = opcode == Opcode.WRITE_ONLY_IMM and size >= 138
            assert (meta["imm"] != 0 or not has_imm) and (meta["imm"] == 0 or has_imm)
            assert meta["ext"] == int.from_bytes(frame[EXT_OFFSET:EXT_OFFSET + (24 if has_imm
                                                                                 else 20)],
                                                 "little")
            # no ICRC check, and the buffer rule still applies
            assert model.judge(frame, no_buffer=True).reason == "no_buffer_data"


def test_probe_sack_nack():
    model, traffic = setup()
    probe = traffic.control(Opcode.PROBE)
    result = model.judge(probe)
    parsed = parse_frame(probe)
    assert result.reason == "probe" and result.meta["probe_id"] == parsed.peth["probe_id"]
    assert result.meta["access_ok"] == 0 and result.meta["payload_length"] == 0
    assert result.meta["trimmed"] == 0
    assert Probe.from_rx_meta(result.meta).probe_id == parsed.peth["probe_id"]
    assert int_to_ext(result.meta["ext"], PETH.size) == parsed.ext
    for opcode, name in ((Opcode.SACK, "sack"), (Opcode.NACK, "nack")):
        frame = traffic.control(opcode)
        parsed = parse_frame(frame)
        result = model.judge(frame)
        assert result.reason == name and result.meta is None
        fb = result.feedback
        assert FEEDBACK_RECORD.unpack(FEEDBACK_RECORD.pack(fb)) == fb
        assert fb == {"qpn": parsed.bth["dest_qpn"], "opcode": opcode,
                      "ecn": parsed.outer["ecn"], "ext": int.from_bytes(parsed.ext, "little")}
        assert model.judge(frame, no_buffer=True).reason == "no_buffer_control"
    bad_probe = bytearray(probe)
    bad_probe[-2] ^= 0x40
    assert model.judge(bytes(bad_probe)).reason == "icrc"


def test_no_buffer_nack_record():
    model, traffic = setup()
    frame = traffic.data(payload=700, qpn=2)
    parsed = parse_frame(frame)
    model.arrive(1, frame, outcome=NO_BUFFER)
    result = model.merge(1)
    assert result.reason == "no_buffer_data" and result.meta is None
    rec = result.control
    assert CONTROL_RECORD.unpack(CONTROL_RECORD.pack(rec)) == rec
    assert rec["qpn"] == 2 and rec["opcode"] == Opcode.NACK and rec["ev"] == parsed.ev
    neth = NETH.unpack(int_to_ext(rec["ext"], NETH.size))
    assert neth["nack_reason"] == NackReason.NO_PKT_BUFFER
    assert neth["nack_psn"] == parsed.bth["psn"] and neth["entropy"] == parsed.ev
    assert model.controls == [rec] and model.counters["no_buffer_data"] == 1


# --- memory regions ------------------------------------------------------------------------------

def test_access_rule():
    regions = [Region(5, 1000, 100), None, Region(5, 5000, 100), Region(7, 0, 10, valid=False)]
    assert access_ok(regions, 5, 1000, 100) and access_ok(regions, 5, 1099, 1)
    assert not access_ok(regions, 5, 1000, 101) and not access_ok(regions, 5, 999, 1)
    assert access_ok(regions, 5, 1100, 0) and not access_ok(regions, 5, 1101, 0)
    assert not access_ok(regions, 5, 5000, 10)          # the first region with the key decides
    assert not access_ok(regions, 7, 0, 1) and not access_ok(regions, 6, 0, 0)
    top = [Region(1, (1 << 64) - 16, 16)]
    assert access_ok(top, 1, (1 << 64) - 16, 16) and not access_ok(top, 1, (1 << 64) - 1, 2)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 1 << 32))
def test_access_through_the_model(seed):
    model, traffic = setup(seed)
    good = model.judge(traffic.data())
    bad = model.judge(traffic.data(access=False))
    assert good.reason == bad.reason == "data"
    assert good.meta["access_ok"] == 1 and bad.meta["access_ok"] == 0
    model.set_region(0, 1, 2, 3, valid=False)
    with pytest.raises(ValueError):
        model.set_region(4, 1, 2, 3)


# --- traffic mixes and counters -------------------------------------------------------------------

@settings(max_examples=20, deadline=None)
@given(st.integers(0, 1 << 32))
def test_mixed_traffic_counts_every_frame_once(seed):
    rng = random.Random(seed)
    model = RxFrontModel(n_planes=3)
    traffic = RxTraffic(rng)
    traffic.configure(model)
    sent = 0
    for _ in range(60):
        case = traffic.malformed() if rng.random() < 0.5 else traffic.good()
        plane = rng.randrange(3)
        outcome = BAD if case.tuser else rng.choice((STORED, STORED, NO_BUFFER, NO_ROOM))
        if outcome == NO_BUFFER and len(case.frame) < 20:
            outcome = STORED
        model.arrive(plane, case.frame, bad=case.tuser, outcome=outcome)
        sent += outcome in (STORED, NO_BUFFER)
        if rng.random() < 0.5 and model.stored[plane]:
            model.merge(plane)
    for plane in range(3):
        while model.stored[plane]:
            model.merge(plane)
    judged = sum(v for k, v in model.counters.items() if k != "access_denied")
    assert judged == sent
    assert len(model.metas) == sum(model.counters[k] for k in ("data", "trimmed", "probe"))
    assert len(model.feedbacks) == model.counters["sack"] + model.counters["nack"]
    assert len(model.controls) == model.counters["no_buffer_data"]
    assert len(model.payloads) == sum(1 for m in model.metas if m["payload_length"])
    assert set(model.counters) == set(PARSER_COUNTERS)
    assert set(FRAME_ERROR_REASONS) <= set(PARSER_COUNTERS)


def test_config_checks():
    with pytest.raises(ValueError, match="n_planes"):
        RxFrontConfig(n_planes=9)
    with pytest.raises(ValueError, match="data_width"):
        RxFrontConfig(data_width=32)
    with pytest.raises(ValueError, match="power of two"):
        RxFrontConfig(n_qps=3)
    with pytest.raises(ValueError, match="n_regions"):
        RxFrontConfig(n_regions=0)
    with pytest.raises(ValueError, match="either"):
        RxFrontModel(RxFrontConfig(), n_planes=2)
    assert RxFrontConfig(n_planes=3, data_width=128).core_width == 512


def test_ecn_and_class_fields_pass_through():
    model, traffic = setup()
    addr = traffic.addresses()
    hdr, body = data_packet(addr, opcode=Opcode.WRITE_ONLY, ev=0xABCD1234, dest_qpn=0, psn=9,
                            rqmsn=1, msn=2, va=traffic.regions[0][1], rkey=traffic.regions[0][0],
                            dma_length=4, payload=b"abcd", rtx=1)
    hdr["ecn"] = Ecn.CE
    meta = model.judge(build_frame(hdr, body)).meta
    assert (meta["ecn"], meta["dscp"], meta["rtx"], meta["ackreq"], meta["ev"]) == \
        (Ecn.CE, Dscp.TRIMMABLE_RETX, 1, 1, 0xABCD1234)
    assert meta["outer_src"] == addr.outer_src and meta["outer_dst"] == addr.outer_dst
    assert SETH.size == 28          # feedback ext widths used by the RTL's masks


# --- header slots: the bound and the answer when they run out (issue 25) ---------------------

def test_header_slots_needed():
    from models.rx_front import (MIN_FRAME, engine_header_slots, header_slots_needed,
                                 max_frame_words)

    assert MIN_FRAME == 134 and max_frame_words(128, 4096) == 265
    assert max_frame_words(512, 1024) == -(-1166 // 64)
    assert [header_slots_needed(n, 64) for n in (1, 2, 3, 4, 8)] == [4, 32, 32, 32, 32]
    assert header_slots_needed(2, 64, 1024) == 8 and header_slots_needed(2, 512) == 16
    assert engine_header_slots(2, 64) == 64 and engine_header_slots(1, 64, 1024) == 16
    assert engine_header_slots(2, 64, 1024) == 16
    for n in range(1, 9):
        for w in (64, 128, 256, 512):
            slots = header_slots_needed(n, w)
            assert slots & (slots - 1) == 0 and 2 <= slots <= 256
            assert header_slots_needed(n, w, 1024) <= slots <= header_slots_needed(n, w, 4096, 50)
    with pytest.raises(ValueError, match="n_planes"):
        header_slots_needed(9, 64)
    with pytest.raises(ValueError, match="more than 256"):
        header_slots_needed(8, 64, 4096, stall_words=5000)


def slot_timing(n_planes, width, planes, slots, stall=None):
    """A cycle-level replay of the plane buffers' header slots and the merge's round robin
    (rtl/rx_plane_buffer.py, rtl/plane_merge.py): ``planes[p]`` lists the frames (bytes) plane p
    receives back to back at full rate, ``stall(cycle)`` True stops the core's consumer. Gives
    the events in order, ("arrive", p, frame, outcome) and ("merge", p), and the most slots a
    plane had in use. A frame takes a slot at its first beat (NO_ROOM if none is free), is offered
    OFFER_DELAY cycles after its last beat and frees its slot when its header words are read."""
    from models.rx_front import OFFER_DELAY

    core = core_width(n_planes, width)
    lanes, wbytes, hw = width // 8, core // 8, header_words(core)
    queue = [deque((f, 0, False) for f in frames) for frames in planes]  # (frame, beats, kept)
    held = [deque() for _ in planes]     # frames kept: [offer cycle or None, words]
    used = [0] * n_planes
    events, most = [], 0
    rr, current, left, head_left, cycle = 0, None, 0, 0, 0
    while any(queue) or any(held) or left:
        cycle += 1
        for p, q in enumerate(queue):
            if not q:
                continue
            frame, sent, kept = q[0]
            beats = -(-len(frame) // lanes)
            if sent == 0:
                kept = used[p] < slots
                used[p] += kept
            q[0] = (frame, sent + 1, kept)
            if q[0][1] == beats:
                kept = q.popleft()[2]
                events.append(("arrive", p, frame, STORED if kept else NO_ROOM))
                if kept:
                    held[p].append([cycle + OFFER_DELAY, -(-len(frame) // wbytes)])
            most = max(most, used[p])
        if stall is not None and stall(cycle):
            continue
        if not left:                      # the grant: round robin among the frames offered
            for k in range(n_planes):
                p = (rr + k) % n_planes
                if held[p] and held[p][0][0] <= cycle:
                    offer, words = held[p].popleft()
                    events.append(("merge", p))
                    current, rr = p, (p + 1) % n_planes
                    left, head_left = words, min(words, hw)
                    break
        if left:                          # one word of the frame being read (the grant's too)
            left -= 1
            head_left -= 1
            if head_left == 0:
                used[current] -= 1
    return events, most


def replay(model, events):
    for event in events:
        if event[0] == "arrive":
            model.arrive(event[1], event[2], outcome=event[3])
        else:
            model.merge(event[1])


@pytest.mark.parametrize("n_planes, width, pmtu", [
    (1, 64, 4096), (2, 64, 4096), (2, 64, 1024), (3, 64, 4096), (5, 64, 4096), (7, 64, 4096),
    (3, 512, 4096), (3, 128, 1024)])
def test_small_frames_beside_large_ones_never_lack_a_slot(n_planes, width, pmtu):
    """Valid traffic only: plane 0 receives the smallest data frames back to back (138-byte
    Writes) while every other plane receives the largest, every output ready (configurations
    where the merge keeps up: not N = 2, W = 512, see docs/protocol.md section 5). With the bound's
    header slots no frame lacks one (every data frame is judged ``data``, none dropped without a
    NACK); with 8 (the old benches' setting) the 4096-byte frames exhaust them on plane 0 and
    the frames are dropped and counted ``dropped_no_room``, no NACK (docs/protocol.md section 5)."""
    from models.rx_front import header_slots_needed

    slots = header_slots_needed(n_planes, width, pmtu)
    big = max(4, 40 // n_planes)

    def traffic(model_traffic):
        small = [model_traffic.data(payload=0, opcode=Opcode.WRITE_ONLY) for _ in range(300)]
        large = [[model_traffic.data(payload=pmtu, opcode=Opcode.WRITE_ONLY_IMM)
                  for _ in range(big)] for _ in range(n_planes - 1)]
        return [small] + large

    for count in (slots, 8):
        model, rx_traffic = setup(n_planes=n_planes, data_width=width, header_slots=count)
        planes = traffic(rx_traffic)
        events, most = slot_timing(n_planes, width, planes, count)
        replay(model, events)           # the model's header-slot rule accepts every outcome
        dropped = sum(c["dropped_no_room"] for c in model.plane_counters)
        assert model.empty()
        if count == slots:
            assert most <= slots and dropped == 0
            assert model.counters["data"] == sum(len(frames) for frames in planes)
            assert model.counters["no_buffer_data"] == 0 and not model.controls
        elif n_planes > 1 and pmtu == 4096 and width == 64:
            assert dropped > 0 and model.plane_counters[0]["dropped_no_room"] == dropped
            assert model.counters["data"] + dropped == sum(len(frames) for frames in planes)
            assert not model.controls       # the documented deviation: no NACK for them


def test_slots_run_out_when_the_consumer_stops():
    """The bound holds while the consumer keeps up; stopped long enough, a plane of small
    frames exhausts any number of slots: those frames are dropped and counted (no NACK), the
    frames kept are judged as usual, and the engine's number (one largest frame of stall
    allowed) absorbs a stop of that length."""
    from models.rx_front import engine_header_slots, header_slots_needed, max_frame_words

    n, w, pmtu = 2, 64, 1024
    stall_words = max_frame_words(core_width(n, w), pmtu)
    for slots, stop, lost in ((header_slots_needed(n, w, pmtu), 2000, True),
                              (engine_header_slots(n, w, pmtu), stall_words, False)):
        model, rx_traffic = setup(n_planes=n, data_width=w, header_slots=slots)
        small = [rx_traffic.data(payload=0, opcode=Opcode.WRITE_ONLY) for _ in range(200)]
        large = [rx_traffic.data(payload=pmtu, opcode=Opcode.WRITE_ONLY_IMM) for _ in range(8)]
        events, most = slot_timing(n, w, [small, large], slots,
                                   stall=lambda c: 300 <= c < 300 + stop)
        replay(model, events)
        dropped = model.plane_counters[0]["dropped_no_room"]
        assert (dropped > 0) == lost and most <= slots
        assert model.counters["data"] == len(small) + len(large) - dropped
