# SPDX-License-Identifier: BSD-2-Clause
"""The Wireshark dissector (sim/wireshark/mrc.lua) under Debian's tshark 4.0.

- Its generated block (header layouts, codepoints) is what models/ gives today.
- Frames of every kind, built by models.packets and, independently, by scapy, are written to a
  pcapng and read back with ``tshark -X lua_script:... -o udp.ignore_ipv6_zero_checksum:TRUE
  -T json``; every decoded value is compared with what the frame was built from: opcode names,
  QPN, PSN, AckReq and RTX, the uSID carrier (block, each uSID's plane, role and index, the
  active one), the EV, the DSCP and ECN names, METH, RETH, ImmDt, payload and pad, SETH (verdict,
  pr, offsets, trigger and base PSNs, the bitmap as PSNs), CC_STATE, NETH reason names, PETH, the
  ICRC (good, and bad on a corrupted frame), trimmed frames (cut, and kept whole).
- No frame is malformed and none has an error-severity expert item but the corrupted one.
- Frames that are not MRC's (a RoCE SEND, DNS on port 53, a RoCE frame from source port 53)
  dissect exactly as they do without the script.
- A capture of the fabric model (the reduced link_down run) decodes with no error: every
  frame's opcode, QPN and PSN as models.packets parses them.
Skipped when tshark is not installed.
"""

import random
import shutil
import subprocess

import pytest
from scapy.contrib.roce import BTH as ScapyBTH
from scapy.layers.inet import UDP as ScapyUDP
from scapy.layers.inet6 import IPv6 as ScapyIPv6
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from models.fabric import load_scenario, run_scenario
from models.layouts import (CC_STATE, IMM_OPCODES, METH, PETH, RETH, SETH, NETH, IMMDT,
                            DATA_OPCODES, Dscp, Ecn, NackReason, Opcode, SackVerdict,
                            ROCE_UDP_PORT, pad_count)
from models.packets import (Addresses, bitmap_psns, build_frame, data_packet, nack_packet,
                            parse_frame, probe_answer, probe_packet, sack_packet)
from models.switch_queue import set_outer_ecn, trim
from models import usid
from sim import dissector
from sim.dissector import TSHARK_MRC, ZERO_CHECKSUM_PREF, tshark_json, tshark_mrc
from sim.pcapng import PcapngWriter

pytestmark = pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark is not installed")

PI_ERROR = 0x00800000            # Wireshark's expert severity "error"
NAMES = {v: k for k, v in vars(Opcode).items() if not k.startswith("_")}
DSCP_NAMES = {v: k for k, v in vars(Dscp).items() if not k.startswith("_")}
ECN_NAMES = {Ecn.NOT_ECT: "Not-ECT", Ecn.ECT0: "ECT(0)", Ecn.CE: "CE"}
REASON_NAMES = {v: k for k, v in vars(NackReason).items() if not k.startswith("_")}
PATH = [usid.encode(1, usid.Role.T0, 1), usid.encode(1, usid.Role.T1, 2),
        usid.encode(1, usid.Role.T0, 2), usid.encode(1, usid.Role.HOST, 9)]


def addresses(path=PATH):
    return Addresses(eth_dst="02:00:00:01:ff:ff", eth_src="02:00:00:01:00:00",
                     outer_src="fd00:0:1::5", outer_dst=usid.carrier(path),
                     inner_src="fd00:ffff::5", inner_dst="fd00:ffff::6")


def ints(values):
    return [int(v, 0) for v in values]


def one(frame, name):
    values = frame.get(name)
    assert values is not None and len(values) == 1, f"{name}: {values}"
    return values[0]


def num(frame, name):
    return int(one(frame, name), 0)


# --- the frames: (description, frame bytes, expected) ------------------------------------------

def model_frames():
    """Frames of every kind from models.packets, each with what the dissector must show."""
    rng = random.Random(21)
    addr = addresses()
    out = []
    # Data: every opcode, payload lengths with every pad count; low UDP source ports among them
    # (53 is DNS's) so that the port take-over is exercised.
    evs = [0x0035_0021, 0x1234_5671, 0x0019_00A1, 0x0101_0011, 0xF00D_0FF1, 0x0043_0031]
    for k, opcode in enumerate(DATA_OPCODES):
        length = (0, 1, 2, 3, 256, 1021)[k]
        imm = 0xC0DE0000 + k if opcode in IMM_OPCODES else None
        hdr, payload = data_packet(addr, opcode=opcode, ev=evs[k], dest_qpn=0x10 + k,
                                   psn=1000 + k, rqmsn=k, msn=2 * k, va=0x1_0000_0000 + 64 * k,
                                   rkey=0xAB00 + k, dma_length=4096 + k,
                                   payload=rng.randbytes(length), imm=imm, rtx=k % 2)
        out.append((f"data {NAMES[opcode]}", build_frame(hdr, payload),
                    dict(kind="data", opcode=opcode, qpn=0x10 + k, psn=1000 + k, ev=evs[k],
                         ackreq=int(opcode in (Opcode.WRITE_LAST, Opcode.WRITE_LAST_IMM,
                                               Opcode.WRITE_ONLY, Opcode.WRITE_ONLY_IMM)),
                         rtx=k % 2, dscp=Dscp.TRIMMABLE_RETX if k % 2 else Dscp.TRIMMABLE,
                         ecn=Ecn.ECT0, rqmsn=k, msn=2 * k, va=0x1_0000_0000 + 64 * k,
                         rkey=0xAB00 + k, dma_length=4096 + k, imm=imm, payload=payload,
                         icrc="good")))
    # A CE-marked data frame (a switch set the outer ECN; the ICRC does not cover it).
    hdr, payload = data_packet(addr, opcode=Opcode.WRITE_MIDDLE, ev=0x7777_0001, dest_qpn=1,
                               psn=5, rqmsn=0, msn=0, va=0, rkey=1, dma_length=8192,
                               payload=bytes(range(200)))
    out.append(("data CE", set_outer_ecn(build_frame(hdr, payload), Ecn.CE),
                dict(kind="data", opcode=Opcode.WRITE_MIDDLE, qpn=1, psn=5, ev=0x7777_0001,
                     ackreq=0, rtx=0, dscp=Dscp.TRIMMABLE, ecn=Ecn.CE, payload=payload,
                     icrc="good")))
    # SACKs: with a bitmap and a negative sack_offset, with SKIP_ONCE; a probe answer.
    received = {101, 103, 164, 40}
    hdr, _ = sack_packet(addr, ev=0x0050_0011, dest_qpn=3, cack_psn=100, mpr=8,
                         m=SackVerdict.SKIP_ONCE, ack_psn_offset=3, sack_offset=-36,
                         sack_bitmap=sum(1 << (63 - (p - 64)) for p in received if 64 <= p < 128)
                         | 1 << 63, ooo_count=17, placed_256=1234)
    out.append(("sack", build_frame(hdr),
                dict(kind="sack", opcode=Opcode.SACK, qpn=3, psn=0, ev=0x0050_0011,
                     dscp=Dscp.CONTROL, ecn=Ecn.NOT_ECT, verdict="SKIP_ONCE", pr=0,
                     cack_psn=100, ack_psn_offset=3, trigger=103, sack_offset=-36, base=64,
                     psns=sorted({64, 101, 103}), mpr=8, ooo_count=17, placed=1234 * 256,
                     probe_id=0, icrc="good")))
    hdr, _ = probe_answer(addr, ev=0x2222_0031, dest_qpn=4, probe_id=0xBEEF, cack_psn=0xFFFFF0,
                          mpr=8, received={0xFFFFF2, 0xFFFFFF, 0, 5})
    fields = SETH.unpack(build_frame(hdr)[114:], signed=("ack_psn_offset", "sack_offset"))
    base = (0xFFFFF0 + fields["sack_offset"]) % (1 << 24)
    psns = sorted(bitmap_psns(0xFFFFF0, fields["sack_offset"], fields["sack_bitmap"]),
                  key=lambda p: (p - base) % (1 << 24))      # in bitmap order
    out.append(("probe answer", build_frame(hdr),
                dict(kind="sack", opcode=Opcode.SACK, qpn=4, psn=0, ev=0x2222_0031,
                     dscp=Dscp.CONTROL, ecn=Ecn.NOT_ECT, verdict="NONE", pr=1,
                     cack_psn=0xFFFFF0, ack_psn_offset=0, trigger=0xFFFFF0,
                     sack_offset=fields["sack_offset"],
                     base=(0xFFFFF0 + fields["sack_offset"]) % (1 << 24), psns=psns, mpr=8,
                     ooo_count=0, placed=0, probe_id=0xBEEF, icrc="good")))
    # NACKs of every reason.
    for k, reason in enumerate(sorted(REASON_NAMES)):
        ev = 0x0600_0001 + (k << 4)
        hdr, _ = nack_packet(addr, ev=ev, dest_qpn=7, reason=reason, nack_psn=0x123456 + k)
        out.append((f"nack {REASON_NAMES[reason]}", build_frame(hdr),
                    dict(kind="nack", opcode=Opcode.NACK, qpn=7, psn=0, ev=ev,
                         dscp=Dscp.CONTROL, ecn=Ecn.NOT_ECT, reason=REASON_NAMES[reason],
                         nack_psn=0x123456 + k, icrc="good")))
    # A probe, and the same probe trimmed by a host-facing port (kept whole: 134 B < 256 B).
    hdr, _ = probe_packet(addr, ev=0x0035_0041, dest_qpn=9, probe_id=0x4242)
    probe = build_frame(hdr)
    out.append(("probe", probe, dict(kind="probe", opcode=Opcode.PROBE, qpn=9, psn=0,
                                     ev=0x0035_0041, dscp=Dscp.TRIMMABLE, ecn=Ecn.ECT0,
                                     probe_id=0x4242, icrc="good")))
    out.append(("probe trimmed whole", trim(probe, 256, Dscp.TRIMMED_LASTHOP),
                dict(kind="probe", opcode=Opcode.PROBE, qpn=9, psn=0, ev=0x0035_0041,
                     dscp=Dscp.TRIMMED_LASTHOP, ecn=Ecn.ECT0, probe_id=0x4242, icrc="good",
                     trimmed=True)))
    # A data frame trimmed by a fabric-facing port (payload cut, no ICRC), at the receiver's
    # T0: one uSID left.
    tail = addresses(PATH[3:])
    hdr, payload = data_packet(tail, opcode=Opcode.WRITE_FIRST, ev=0x0999_0021, dest_qpn=2,
                               psn=77, rqmsn=0, msn=3, va=0x2000, rkey=5, dma_length=9000,
                               payload=rng.randbytes(1024))
    cut = trim(build_frame(hdr, payload), 256, Dscp.TRIMMED)
    out.append(("data trimmed", cut,
                dict(kind="trimmed data", opcode=Opcode.WRITE_FIRST, qpn=2, psn=77,
                     ev=0x0999_0021, dscp=Dscp.TRIMMED, ecn=Ecn.ECT0, ackreq=0, rtx=0,
                     va=0x2000, rkey=5, dma_length=9000, payload=payload[:256 - 134],
                     icrc="absent (trimmed)", trimmed=True, path=PATH[3:])))
    # A corrupted data frame: one payload bit flipped, so its ICRC is bad.
    hdr, payload = data_packet(addr, opcode=Opcode.WRITE_ONLY, ev=0x0123_0001, dest_qpn=1,
                               psn=9, rqmsn=0, msn=0, va=0, rkey=1, dma_length=16,
                               payload=bytes(16))
    frame = bytearray(build_frame(hdr, payload))
    frame[140] ^= 0x10
    out.append(("corrupted", bytes(frame),
                dict(kind="data", opcode=Opcode.WRITE_ONLY, qpn=1, psn=9, ev=0x0123_0001,
                     dscp=Dscp.TRIMMABLE, ecn=Ecn.ECT0, ackreq=1, rtx=0, icrc="bad")))
    return out


def scapy_frames():
    """Frames built by scapy alone (Ether / IPv6 / IPv6 / UDP / scapy's BTH, extension headers
    from models.layouts' tables, ICRC by scapy's ``BTH.compute_icrc``)."""
    out = []
    import ipaddress
    da = str(ipaddress.IPv6Address(usid.carrier(PATH)))
    cases = [
        (Opcode.WRITE_LAST_IMM, 0x0AB0_0021, 42, METH.pack(rqmsn=1, msn=4)
         + RETH.pack(va=0xDEAD_0000, rkey=0x77, dma_length=300) + IMMDT.pack(imm=0x12345678),
         bytes(range(45)), dict(kind="data", ackreq=1, rtx=0, imm=0x12345678, rkey=0x77)),
        (Opcode.SACK, 0x0035_0011, 0, SETH.pack(cack_psn=500, mpr=4, sack_offset=1,
                                                 sack_bitmap=0xC000_0000_0000_0000, entropy=5)
         + CC_STATE.pack(ooo_count=2), b"", dict(kind="sack", psns=[501, 502])),
        (Opcode.NACK, 0x1000_0011, 0, NETH.pack(nack_reason=NackReason.NO_PKT_BUFFER,
                                                 entropy=0x1000_0011, nack_psn=88), b"",
         dict(kind="nack", reason="NO_PKT_BUFFER", nack_psn=88)),
        (Opcode.PROBE, 0x2000_0011, 0, PETH.pack(probe_id=0x55AA), b"",
         dict(kind="probe", probe_id=0x55AA)),
    ]
    for opcode, ev, psn, ext, payload, expect in cases:
        pad = pad_count(len(payload))
        dscp = Dscp.CONTROL if opcode in (Opcode.SACK, Opcode.NACK) else Dscp.TRIMMABLE
        ecn = Ecn.NOT_ECT if dscp == Dscp.CONTROL else Ecn.ECT0
        tc = dscp << 2 | ecn
        pkt = (Ether(dst="02:00:00:01:ff:ff", src="02:00:00:01:00:00")
               / ScapyIPv6(tc=tc, fl=ev & 0xFFFF, nh=41, hlim=64, src="fd00:0:1::5", dst=da)
               / ScapyIPv6(tc=tc, fl=ev & 0xFFFF, nh=17, hlim=64, src="fd00:ffff::5",
                           dst="fd00:ffff::6")
               / ScapyUDP(sport=ev >> 16, dport=ROCE_UDP_PORT, chksum=0)
               / ScapyBTH(opcode=opcode, padcount=pad, pkey=0xFFFF, dqpn=0x99, psn=psn,
                          ackreq=expect.get("ackreq", 0))
               / Raw(ext + payload + bytes(pad)))
        frame = bytes(pkt)            # scapy fills in the lengths and the ICRC
        out.append((f"scapy {NAMES[opcode]}", frame,
                    dict(opcode=opcode, qpn=0x99, psn=psn, ev=ev, dscp=dscp, ecn=ecn,
                         icrc="good", payload=payload if payload else None, **expect)))
    return out


@pytest.fixture(scope="module")
def decoded(tmp_path_factory):
    """``[(description, frame, expected, decoded fields)]`` of every built frame."""
    frames = model_frames() + scapy_frames()
    path = tmp_path_factory.mktemp("dissector") / "kinds.pcapng"
    with PcapngWriter(path) as pcap:
        iface = pcap.interface("test")
        for k, (_, frame, _) in enumerate(frames):
            pcap.packet(iface, 1000 * k, frame)
    got = tshark_json(path)
    assert len(got) == len(frames)
    return path, [(d, f, e, g) for (d, f, e), g in zip(frames, got)]


def test_generated_block_is_current():
    assert dissector.check(), "run `python -m sim.dissector --write`"


def test_preference_exists():
    """The preference the make target and the tests set is the one this tshark has."""
    prefs = subprocess.run(["tshark", "-G", "defaultprefs"], capture_output=True,
                           text=True).stdout
    name = ZERO_CHECKSUM_PREF.split(":")[0]
    assert f"#{name}: FALSE" in prefs


def test_every_kind_decodes(decoded):
    _, frames = decoded
    kinds = set()
    for desc, frame, exp, got in frames:
        kinds.add(exp["kind"])
        assert "mrc" in one(got, "frame.protocols").split(":"), desc
        assert one(got, "mrc.kind") == exp["kind"], desc
        assert num(got, "mrc.bth.opcode") == exp["opcode"], desc
        assert one(got, "mrc.opcode_name") == NAMES[exp["opcode"]], desc
        assert num(got, "mrc.bth.dest_qpn") == exp["qpn"], desc
        assert num(got, "mrc.bth.psn") == exp["psn"], desc
        assert num(got, "mrc.bth.pkey") == 0xFFFF, desc
        for bit in ("ackreq", "rtx"):
            if bit in exp:
                assert num(got, f"mrc.bth.{bit}") == exp[bit], (desc, bit)
        assert num(got, "mrc.ev") == exp["ev"], desc
        assert num(got, "mrc.ev.plane") == exp["ev"] & 0xF, desc
        assert num(got, "mrc.ev.t1") == exp["ev"] >> 4 & 0xFF, desc
        assert num(got, "mrc.ev.salt") == exp["ev"] >> 12, desc
        assert num(got, "mrc.dscp") == exp["dscp"], desc
        assert one(got, "mrc.dscp_name") == DSCP_NAMES[exp["dscp"]], desc
        assert one(got, "mrc.ecn_name") == ECN_NAMES[exp["ecn"]], desc
        assert one(got, "mrc.icrc.status") == exp["icrc"], desc
        assert (one(got, "mrc.trimmed") == "1") if exp.get("trimmed") else \
            "mrc.trimmed" not in got, desc
        # the uSID carrier
        path = exp.get("path", PATH)
        assert num(got, "mrc.usid.block") == usid.DEFAULT_BLOCK, desc
        assert num(got, "mrc.usid.count") == len(path), desc
        assert ints(got["mrc.usid"]) == path, desc
        assert ints(got["mrc.usid.plane"]) == [usid.decode(u).plane for u in path], desc
        assert ints(got["mrc.usid.role"]) == [usid.decode(u).role for u in path], desc
        assert ints(got["mrc.usid.index"]) == [usid.decode(u).index for u in path], desc
        assert got["mrc.usid.role_name"] == [{1: "T0", 2: "T1", 3: "HOST"}[usid.decode(u).role]
                                             for u in path], desc
        assert ints(got["mrc.usid.active"]) == [1] + [0] * (len(path) - 1), desc
        assert num(got, "mrc.usid.active_usid") == path[0], desc
        assert num(got, "mrc.src.plane") == 1 and num(got, "mrc.src.host") == 5, desc
        # per kind
        if exp["kind"] in ("data", "trimmed data"):
            for name, field in (("rqmsn", "mrc.meth.rqmsn"), ("msn", "mrc.meth.msn"),
                                ("va", "mrc.reth.va"), ("rkey", "mrc.reth.rkey"),
                                ("dma_length", "mrc.reth.dma_length")):
                if name in exp:
                    assert num(got, field) == exp[name], (desc, name)
            if exp.get("imm") is not None:
                assert num(got, "mrc.immdt.imm") == exp["imm"], desc
            elif exp["opcode"] not in IMM_OPCODES:
                assert "mrc.immdt.imm" not in got, desc
            if exp.get("payload") is not None:
                payload = exp["payload"]
                assert num(got, "mrc.payload_length") == len(payload), desc
                if payload:
                    assert bytes.fromhex(one(got, "mrc.payload").replace(":", "")) == payload
                if exp["kind"] == "data":
                    pad = pad_count(len(payload))
                    assert num(got, "mrc.bth.padcnt") == pad, desc
                    assert ("mrc.pad" in got) == (pad > 0), desc
        if exp["kind"] == "trimmed data":
            assert one(got, "mrc.trimmed.cut") == "1", desc
            assert "mrc.icrc" not in got, desc
        if exp["kind"] == "sack":
            for name in ("cack_psn", "ack_psn_offset", "sack_offset", "mpr", "pr", "probe_id"):
                if name in exp:
                    assert num(got, f"mrc.seth.{name}") == exp[name], (desc, name)
            for name, field in (("trigger", "mrc.seth.trigger_psn"),
                                ("base", "mrc.seth.base_psn"), ("verdict", "mrc.seth.verdict"),
                                ("ooo_count", "mrc.cc_state.ooo_count"),
                                ("placed", "mrc.cc_state.placed_bytes")):
                if name in exp:
                    value = one(got, field)
                    assert (value if name == "verdict" else int(value, 0)) == exp[name], \
                        (desc, name)
            assert ints(got["mrc.seth.bitmap_psn"]) == exp["psns"], desc
            assert num(got, "mrc.seth.bitmap_count") == len(exp["psns"]), desc
        if exp["kind"] == "nack":
            assert one(got, "mrc.neth.reason_name") == exp["reason"], desc
            assert num(got, "mrc.neth.nack_psn") == exp["nack_psn"], desc
            assert num(got, "mrc.neth.entropy") == exp["ev"], desc
        if exp["kind"] == "probe":
            assert num(got, "mrc.peth.probe_id") == exp["probe_id"], desc
    assert kinds == {"data", "trimmed data", "sack", "nack", "probe"}


def test_icrc_computed_equals_the_models(decoded):
    _, frames = decoded
    for desc, frame, exp, got in frames:
        if exp["icrc"] in ("good", "bad"):
            assert num(got, "mrc.icrc") == int.from_bytes(frame[-4:], "little"), desc
            good = (num(got, "mrc.icrc.computed") == num(got, "mrc.icrc"))
            assert good == (exp["icrc"] == "good"), desc


def test_no_malformed_and_no_error_but_the_corrupted_frame(decoded):
    _, frames = decoded
    for desc, frame, exp, got in frames:
        assert "_ws.malformed" not in got, desc
        assert "udp.checksum.zero" not in " ".join(got.get("_ws.expert.message", [])), desc
        severities = ints(got.get("_ws.expert.severity", []))
        errors = [s for s in severities if s >= PI_ERROR]
        if exp["icrc"] == "bad":
            assert len(errors) == 1 and "mrc.icrc.bad" in got, desc
        else:
            assert errors == [], (desc, got.get("_ws.expert.message"))
        if exp["kind"] == "trimmed data":
            assert "mrc.trimmed.note" in got, desc


def test_verbose_text_output(decoded):
    """What a person reads with -V: no "Malformed", no "Unknown OpCode", each kind's names."""
    path, _ = decoded
    text = tshark_mrc(path, "-V").stdout
    assert "Malformed" not in text and "Unknown OpCode" not in text
    for word in ("WRITE_ONLY_IMM", "SACK", "NACK", "PROBE", "TRIMMED_LASTHOP", "PSN_OOR_WINDOW",
                 "Active uSID", "HOST 9", "[correct]", "[incorrect", "SKIP_ONCE"):
        assert word in text, word


def test_other_frames_are_left_alone(tmp_path):
    """Frames that are not MRC's dissect as they do without the script (the same protocols and
    Info column; ``mrc`` shows only in ``frame.protocols`` of those it passed on, and the
    display filter ``mrc`` matches none of them)."""
    roce_send = (Ether() / ScapyIPv6(src="fd00::1", dst="fd00::2")
                 / ScapyUDP(sport=50000, dport=ROCE_UDP_PORT, chksum=0)
                 / ScapyBTH(opcode=0x04, dqpn=5, psn=1) / Raw(bytes(8)))
    from scapy.layers.dns import DNS, DNSQR
    dns = (Ether() / ScapyIPv6(src="fd00::1", dst="fd00::2") / ScapyUDP(sport=40000, dport=53)
           / DNS(rd=1, qd=DNSQR(qname="example.org")))
    dns_back = (Ether() / ScapyIPv6(src="fd00::2", dst="fd00::1") / ScapyUDP(sport=53, dport=40000)
                / DNS(qr=1, id=3, qd=DNSQR(qname="example.org")))
    roce_from_53 = (Ether() / ScapyIPv6(src="fd00::1", dst="fd00::2")
                    / ScapyUDP(sport=53, dport=ROCE_UDP_PORT, chksum=0)
                    / ScapyBTH(opcode=0x0A, dqpn=5, psn=1) / Raw(bytes(16)))
    path = tmp_path / "other.pcapng"
    with PcapngWriter(path) as pcap:
        iface = pcap.interface("test")
        for k, pkt in enumerate((roce_send, dns, dns_back, roce_from_53)):
            pcap.packet(iface, 1000 * k, bytes(pkt))
    fields = ["-T", "fields", "-e", "frame.protocols", "-e", "_ws.col.Info"]
    plain = subprocess.run(["tshark", "-n", "-o", ZERO_CHECKSUM_PREF, "-r", str(path), *fields],
                           capture_output=True, text=True, check=True).stdout
    with_mrc = tshark_mrc(path, *fields).stdout
    # The only trace: Wireshark lists a dissector that passed a frame on among its layers.
    assert with_mrc.replace(":mrc:", ":") == plain
    assert tshark_mrc(path, "-Y", "mrc").stdout == ""
    protocols = [line.split("\t")[0] for line in plain.splitlines()]
    assert ":infiniband" in protocols[0] and protocols[1].endswith("dns")
    assert protocols[2].endswith("dns")


@pytest.fixture(scope="module")
def fabric_capture(tmp_path_factory):
    """The reduced link_down run of the fabric model, plane 0 written as pcapng."""
    from sim import model_run
    out = tmp_path_factory.mktemp("model_run")
    scenario = load_scenario(dissector.ROOT / "sim/scenarios/link_down.yaml", reduced=True)
    run = model_run.run(scenario, out)
    return run.pcaps[0]


def test_fabric_model_capture(fabric_capture):
    """Every frame of a plane of the model fabric: an MRC kind, no malformed frame, no error
    expert item, and the opcode, QPN and PSN that models.packets parses from the same bytes."""
    from scapy.utils import RawPcapNgReader
    frames = [bytes(data) for data, _ in RawPcapNgReader(str(fabric_capture))]
    out = tshark_mrc(fabric_capture, "-T", "fields", "-E", "occurrence=a", "-E",
                     "aggregator=,", "-e", "mrc.kind", "-e", "mrc.bth.opcode", "-e",
                     "mrc.bth.dest_qpn", "-e", "mrc.bth.psn", "-e", "_ws.malformed", "-e",
                     "_ws.expert.severity", "-e", "mrc.usid.count").stdout.splitlines()
    assert len(out) == len(frames) > 100
    kinds = {}
    for line, frame in zip(out, frames):
        kind, opcode, qpn, psn, malformed, severity, count = line.split("\t")
        kinds[kind] = kinds.get(kind, 0) + 1
        assert malformed == ""
        assert all(int(s) < PI_ERROR for s in severity.split(",") if s)
        assert int(opcode, 0) == frame[102]
        assert int(qpn, 0) == int.from_bytes(frame[107:110], "big")
        assert int(psn) == int.from_bytes(frame[111:114], "big")
        assert int(count) >= 1
    assert {"data", "sack"} <= set(kinds), kinds


def test_install_into_a_home(tmp_path, decoded):
    """``make wireshark-install`` (``python -m sim.dissector --install``) into an empty home:
    plain ``tshark -r`` then loads the dissector and takes the zero checksum; a second install
    leaves the preferences file as it was."""
    path, frames = decoded
    home = tmp_path / "home"
    plugin, prefs = dissector.install(home)
    first = prefs.read_text()
    dissector.install(home)
    assert prefs.read_text() == first and first.count("udp.ignore_ipv6_zero_checksum") == 1
    env = {"HOME": str(home), "PATH": "/usr/bin:/bin"}
    out = subprocess.run(["tshark", "-n", "-r", str(path), "-T", "fields", "-e", "mrc.kind",
                          "-e", "_ws.expert.severity"], capture_output=True, text=True,
                         check=True, env=env).stdout.splitlines()
    assert [line.split("\t")[0] for line in out] == [exp["kind"] for _, _, exp, _ in frames]
    errors = [line for line in out if any(int(s) >= PI_ERROR for s in
                                          line.split("\t")[1].split(",") if s)]
    assert len(errors) == 1          # the corrupted frame's ICRC
