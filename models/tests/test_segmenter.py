# SPDX-License-Identifier: BSD-2-Clause
"""models.segmenter: packets of work requests (count, PSNs, opcodes, METH, RETH, payload), the
conformance vectors' data packets rebuilt from work requests, the PSN limit, retransmissions,
retires, round-robin service, read errors and every bad input's answer and counter."""

import pytest
from hypothesis import given, settings, strategies as st

from models.layouts import IMM_OPCODES, IMMDT, METH, RETH, Opcode, ext_length
from models.packets import Addresses, PSN_MODULUS, build_frame, data_packet
from models.records import TX_PACKET
from models.segmenter import (COUNTERS, MAX_LENGTH, PMTUS, HostMemory, SegmenterModel,
                              opcode_of, packet_count, psn_before)
from models import conformance as vectors

MEM = 1 << 16


def memory(seed=1, word_bytes=8, poisoned=()):
    data = bytes((i * 131 + seed * 17 + (i >> 8)) & 0xFF for i in range(MEM))
    return HostMemory(MEM, word_bytes, data, poisoned)


def model(n_qps=4, pmtu=256, mem=None, **kw):
    seg = SegmenterModel(mem or memory(), n_qps=n_qps, pmtu=pmtu, **kw)
    for q in range(n_qps):
        seg.configure_qp(q, True, 100 * q)
    return seg


def open_limit(seg, q, ahead=1 << 20):
    seg.psn_limit({"qpn": q, "psn_limit": (seg.qps[q].next_psn + ahead) % PSN_MODULUS})


def wr(qpn=0, length=0, local_addr=0, remote_va=0, has_imm=0, imm=0, req_id=0, rkey=0x42):
    return dict(qpn=qpn, length=length, local_addr=local_addr, remote_va=remote_va,
                has_imm=has_imm, imm=imm, req_id=req_id, rkey=rkey)


def test_helpers():
    assert psn_before(5, 6) and not psn_before(6, 5) and not psn_before(5, 5)
    assert psn_before(0xFFFFFF, 2) and not psn_before(2, 0xFFFFFF)
    assert [packet_count(n, 256) for n in (0, 1, 256, 257, 512)] == [1, 1, 1, 2, 2]
    assert opcode_of(True, True, 1) == Opcode.WRITE_ONLY_IMM
    assert opcode_of(False, True, 0) == Opcode.WRITE_LAST
    assert opcode_of(False, False, 1) == Opcode.WRITE_MIDDLE
    mem = HostMemory(64, 8, bytes(range(64)), poisoned=[2])
    assert mem.read(3, 4) == (bytes([3, 4, 5, 6]), 0)
    assert mem.read(14, 4) == (bytes([14, 15, 0, 0]), 1)
    assert mem.read(62, 4) == (bytes([62, 63, 0, 1]), 0)      # wraps modulo the size
    with pytest.raises(ValueError):
        HostMemory(100, 8)


@settings(max_examples=200, deadline=None)
@given(length=st.integers(0, 5 * 512), pmtu=st.sampled_from((256, 512)),
       has_imm=st.integers(0, 1), local=st.integers(0, MEM - 1),
       remote=st.integers(0, (1 << 64) - 1 - 5 * 512), start=st.integers(0, PSN_MODULUS - 1),
       imm=st.integers(0, (1 << 32) - 1))
def test_one_work_request(length, pmtu, has_imm, local, remote, start, imm):
    mem = memory()
    seg = SegmenterModel(mem, n_qps=2, pmtu=pmtu)
    seg.configure_qp(1, True, start)
    assert seg.work_request(wr(1, length, local, remote, has_imm, imm, req_id=7))
    assert seg.run() == []                       # the limit starts closed
    open_limit(seg, 1)
    packets = seg.run()
    n = packet_count(length, pmtu)
    assert len(packets) == n
    payload = b""
    for i, p in enumerate(packets):
        r = p.record
        first, last = i == 0, i == n - 1
        assert r["psn"] == (start + i) % PSN_MODULUS
        assert r["opcode"] == opcode_of(first, last, has_imm)
        assert r["ackreq"] == int(last)
        assert r["imm"] == (imm if r["opcode"] in IMM_OPCODES else 0)
        assert (r["msn"], r["rqmsn"]) == (0, 0)
        assert r["va"] == remote + i * pmtu and r["offset"] == i * pmtu
        assert r["dma_length"] == length and r["rkey"] == 0x42 and r["req_id"] == 7
        assert r["length"] == (min(pmtu, length - i * pmtu))
        assert (r["rtx"], r["avoid_valid"], r["avoid_ev"], r["cause"]) == (0, 0, 0, 0)
        assert len(p.payload) == r["length"] and not p.bad
        TX_PACKET.pack(r)
        payload += p.payload
    assert payload == mem.read(local, length)[0]
    c = seg.counters
    assert (c["packets"], c["payload_bytes"], c["wr_in"]) == (n, length, 1)


def test_meth_counters():
    seg = model(n_qps=2)
    imms = [0, 1, 1, 0, 1, 0, 0, 1]
    for i, has_imm in enumerate(imms):
        seg.work_request(wr(0, 300 if i % 2 else 0, has_imm=has_imm, req_id=i))
    seg.qps[1].msn, seg.qps[1].rqmsn = 0xFFFF, 0xFFFF        # wrap modulo 2^16
    for has_imm in (1, 1, 0):
        seg.work_request(wr(1, 10, has_imm=has_imm))
    open_limit(seg, 0)
    open_limit(seg, 1)
    meth = {}
    for p in seg.run():
        r = p.record
        meth.setdefault((r["qpn"], r["req_id"], r["msn"]), set()).add(r["rqmsn"])
    assert [(k[2], v) for k, v in meth.items() if k[0] == 0] == \
        [(0, {0}), (1, {0}), (2, {1}), (3, {0}), (4, {2}), (5, {0}), (6, {0}), (7, {3})]
    assert sorted((k[2], v) for k, v in meth.items() if k[0] == 1) == \
        [(0, {0}), (1, {0}), (0xFFFF, {0xFFFF})]


def test_conformance_vectors():
    """Each data packet of packets.json is rebuilt from a work request (PMTU 256, MSN-many
    messages before it, RQMSN-many of them with an immediate) and gives the same frame."""
    cases = [c for c in vectors.load("packets.json") if c["opcode"] in
             (Opcode.WRITE_FIRST, Opcode.WRITE_MIDDLE, Opcode.WRITE_LAST, Opcode.WRITE_LAST_IMM,
              Opcode.WRITE_ONLY, Opcode.WRITE_ONLY_IMM)]
    assert len(cases) == 8
    pmtu = 256
    for case in cases:
        opcode = case["opcode"]
        body = bytes.fromhex(case["ext_hex"])
        meth, reth = METH.unpack(body[:4]), RETH.unpack(body[4:20])
        imm = IMMDT.unpack(body[20:24])["imm"] if opcode in IMM_OPCODES else 0
        n_ext = ext_length(opcode)
        payload = body[n_ext:len(body) - case.get("padcnt", 0)]
        count = packet_count(reth["dma_length"], pmtu)
        index = {Opcode.WRITE_FIRST: 0, Opcode.WRITE_MIDDLE: 1}.get(opcode, count - 1)
        local = 0x1000
        mem = HostMemory(MEM, 8)
        mem.data[local + index * pmtu:local + index * pmtu + len(payload)] = payload
        seg = SegmenterModel(mem, n_qps=1, pmtu=pmtu)
        seg.configure_qp(0, True, (case["psn"] - meth["msn"] - index) % PSN_MODULUS)
        for k in range(meth["msn"]):                 # earlier messages, RQMSN-many with imm
            seg.work_request(wr(0, 0, has_imm=int(k < meth["rqmsn"])))
        seg.work_request(wr(0, reth["dma_length"], local, reth["va"] - index * pmtu,
                            int(opcode in IMM_OPCODES), imm, rkey=reth["rkey"]))
        open_limit(seg, 0)
        sent = seg.run()
        p = next(p for p in sent if p.record["psn"] == case["psn"])
        if case.get("rtx"):
            assert seg.retx_request({"qpn": 0, "psn": case["psn"], "avoid_ev": 9, "cause": 2})
            p = seg.run()[0]
        r = p.record
        assert r["opcode"] == opcode and r["ackreq"] == case["ackreq"]
        addr = Addresses(case["eth_dst"], case["eth_src"], case["outer_src"],
                         case["outer_dst"], case["inner_src"], case["inner_dst"])
        hdr, pay = data_packet(addr, opcode=r["opcode"], ev=case["ev"],
                               dest_qpn=case["dest_qpn"], psn=r["psn"], rqmsn=r["rqmsn"],
                               msn=r["msn"], va=r["va"], rkey=r["rkey"],
                               dma_length=r["dma_length"], payload=p.payload,
                               imm=r["imm"] if opcode in IMM_OPCODES else None, rtx=r["rtx"])
        assert build_frame(hdr, pay).hex() == case["frame_hex"], case["name"]


def test_psn_limit_and_wrap():
    seg = model(n_qps=1)
    seg.configure_qp(0, True, PSN_MODULUS - 3)
    seg.work_request(wr(0, 256 * 6))
    seg.psn_limit({"qpn": 0, "psn_limit": PSN_MODULUS - 1})
    assert [p.record["psn"] for p in seg.run()] == [PSN_MODULUS - 3, PSN_MODULUS - 2]
    seg.psn_limit({"qpn": 0, "psn_limit": 2})
    assert [p.record["psn"] for p in seg.run()] == [PSN_MODULUS - 1, 0, 1]
    seg.psn_limit({"qpn": 0, "psn_limit": PSN_MODULUS - 10})     # behind: stops
    assert seg.run() == []
    with pytest.raises(ValueError):
        seg.packet(0, False)
    seg.psn_limit({"qpn": 0, "psn_limit": 100})
    assert [p.record["psn"] for p in seg.run()] == [2]
    assert seg.counters["limit_in"] == 4


def test_retransmission_rebuilds_the_packet():
    mem = memory(poisoned=[0x2000 // 8 + 40])
    seg = model(n_qps=2, mem=mem)
    seg.work_request(wr(0, 700, local_addr=0x2003, remote_va=0x9000, has_imm=1, imm=5,
                        req_id=3))
    seg.work_request(wr(0, 20, local_addr=0x3000, req_id=4))
    open_limit(seg, 0)
    first = {p.record["psn"]: p for p in seg.run()}
    assert len(first) == 4 and first[1].bad and first[1].record["length"] == 256
    for psn in (2, 0, 1, 3):
        assert seg.retx_request({"qpn": 0, "psn": psn, "avoid_ev": 0x1234 + psn, "cause": 3})
    assert seg.ready(0) == (True, False)
    again = seg.run()
    assert [p.record["psn"] for p in again] == [2, 0, 1, 3]
    for p in again:
        orig = first[p.record["psn"]]
        expect = {**orig.record, "rtx": 1, "avoid_valid": 1,
                  "avoid_ev": 0x1234 + p.record["psn"], "cause": 3}
        assert p.record == expect and p.payload == orig.payload and p.bad == orig.bad
    assert seg.counters["read_errors"] == 2 and seg.counters["bad_packets"] == 2
    assert seg.counters["rtx_packets"] == 4 and seg.counters["retx_in"] == 4


def test_retransmissions_go_first_and_qps_round_robin():
    seg = model(n_qps=3)
    for q in range(3):
        seg.work_request(wr(q, 256 * 3, req_id=q))
        open_limit(seg, q, ahead=1)
    order = [(p.record["qpn"], p.record["psn"]) for p in seg.run()]
    assert order == [(0, 0), (1, 100), (2, 200)]
    seg.retx_request({"qpn": 1, "psn": 100})
    for q in range(3):
        open_limit(seg, q)
    order = [(p.record["qpn"], p.record["psn"], p.record["rtx"]) for p in seg.run()]
    assert order == [(0, 1, 0), (1, 100, 1), (2, 201, 0), (0, 2, 0), (1, 101, 0), (2, 202, 0),
                     (1, 102, 0)]


def test_bad_retransmit_requests():
    seg = model(n_qps=2)
    seg.configure_qp(1, False, 0)
    seg.work_request(wr(0, 600, req_id=1))
    seg.psn_limit({"qpn": 0, "psn_limit": 2})
    seg.run()
    for psn in (2, 3, 99, PSN_MODULUS - 1):            # never sent
        assert not seg.retx_request({"qpn": 0, "psn": psn})
    assert not seg.retx_request({"qpn": 1, "psn": 0})   # disabled
    assert not seg.retx_request({"qpn": 7, "psn": 0})   # unknown
    open_limit(seg, 0)
    seg.run()
    assert seg.retire({"qpn": 0, "req_id": 1})
    assert not seg.retx_request({"qpn": 0, "psn": 0})   # retired
    assert seg.counters["retx_drop"] == 7 and seg.counters["retx_in"] == 0


def test_retires():
    seg = model(n_qps=2)
    seg.configure_qp(1, False, 0)
    for i in range(3):
        seg.work_request(wr(0, 300, req_id=10 + i))
    seg.psn_limit({"qpn": 0, "psn_limit": 3})
    seg.run()                                            # request 10 sent, 11 half sent
    assert not seg.retire({"qpn": 0, "req_id": 11})      # not the oldest
    assert seg.retire({"qpn": 0, "req_id": 10})
    assert not seg.retire({"qpn": 0, "req_id": 11})      # not fully sent
    assert not seg.retire({"qpn": 1, "req_id": 0})       # disabled
    assert not seg.retire({"qpn": 9, "req_id": 0})       # unknown
    assert seg.status(0) == {"next_psn": 3, "psn_limit": 3, "oldest_psn": 2,
                             "counts": 2 | 2 << 8}
    open_limit(seg, 0)
    seg.run()
    assert seg.retire({"qpn": 0, "req_id": 11}) and seg.retire({"qpn": 0, "req_id": 12})
    assert not seg.retire({"qpn": 0, "req_id": 12})      # nothing held
    assert seg.status(0)["counts"] == 0 and seg.status(0)["oldest_psn"] == 6
    c = seg.counters
    assert (c["retire_in"], c["retire_drop"]) == (3, 5)


def test_bad_work_requests_and_limits():
    seg = model(n_qps=2)
    seg.configure_qp(1, False, 0)
    assert not seg.work_request(wr(1, 10))
    assert not seg.work_request(wr(5, 10))
    assert not seg.work_request(wr(0, MAX_LENGTH + 1))
    assert seg.work_request(wr(0, MAX_LENGTH))
    assert not seg.work_request(wr(0, 10, local_addr=(1 << 64) - 9))
    assert seg.work_request(wr(0, 10, local_addr=(1 << 64) - 10))
    assert not seg.work_request(wr(0, 10, remote_va=(1 << 64) - 9))
    assert not seg.psn_limit({"qpn": 1, "psn_limit": 5})
    assert not seg.psn_limit({"qpn": 4, "psn_limit": 5})
    c = seg.counters
    assert (c["wr_in"], c["wr_drop_qp"], c["wr_drop_shape"], c["limit_drop"]) == (2, 2, 3, 2)


def test_reconfigure_drops_everything():
    seg = model(n_qps=1)
    seg.work_request(wr(0, 1000))
    open_limit(seg, 0)
    seg.run(limit=2)
    seg.retx_request({"qpn": 0, "psn": 0})
    seg.configure_qp(0, True, 55)
    assert seg.run() == [] and seg.status(0) == {"next_psn": 55, "psn_limit": 55,
                                                 "oldest_psn": 55, "counts": 0}
    with pytest.raises(ValueError):
        seg.configure_qp(3, True, 0)


@settings(max_examples=40, deadline=None)
@given(ops=st.lists(st.tuples(st.integers(0, 2), st.integers(0, 3 * 256), st.integers(0, 1)),
                    min_size=1, max_size=30),
       pmtu=st.sampled_from(PMTUS))
def test_every_byte_once_per_queue(ops, pmtu):
    """Many requests on three QPs: each QP's packets cover its requests' bytes in order, PSNs
    are consecutive, every counter adds up."""
    mem = memory()
    seg = model(n_qps=3, pmtu=pmtu, mem=mem)
    expect = {q: b"" for q in range(3)}
    for i, (q, length, has_imm) in enumerate(ops):
        local = (i * 977) % MEM
        seg.work_request(wr(q, length, local, has_imm=has_imm, req_id=i))
        expect[q] += mem.read(local, length)[0]
    for q in range(3):
        open_limit(seg, q)
    got = {q: b"" for q in range(3)}
    psns = {q: [] for q in range(3)}
    packets = seg.run()
    for p in packets:
        got[p.record["qpn"]] += p.payload
        psns[p.record["qpn"]].append(p.record["psn"])
    assert got == expect
    for q in range(3):
        assert psns[q] == [(100 * q + k) % PSN_MODULUS for k in range(len(psns[q]))]
    assert seg.counters["packets"] == len(packets) == sum(
        packet_count(length, pmtu) for _, length, _ in ops)
    assert set(seg.counters) == set(COUNTERS)
