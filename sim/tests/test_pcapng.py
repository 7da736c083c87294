# SPDX-License-Identifier: BSD-2-Clause
"""sim.pcapng: files written, then read back with scapy (and tshark when it is installed).

Every frame comes back with its bytes, interface and timestamp (in nanoseconds: time_ps // 1000);
the block structure is walked by hand; a data, a SACK and a trimmed frame of the MRC profile
dissect with scapy into the fields they were built from; tshark finds no malformed frame.
"""

import random
from decimal import Decimal
import shutil
import struct
import subprocess

import pytest
from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether
from scapy.utils import PcapNgReader, RawPcapNgReader

from models.fabric_topology import nic_address, plane_address, port_mac
from models.layouts import (Dscp, Opcode, ROCE_UDP_PORT, ip6_str, mac_str)
from models.packets import Addresses, build_frame, data_packet, sack_packet
from models.switch_queue import trim
from verif.tshark import NO_TSHARK, TSHARK_ROCE, tshark_fields
from sim.pcapng import (BLOCK_EPB, BLOCK_IDB, BLOCK_SHB, BYTE_ORDER_MAGIC, LINKTYPE_ETHERNET,
                        PcapngWriter)

def addresses(src, dst, plane):
    return Addresses(eth_dst=port_mac(plane, 0xFFFF), eth_src=port_mac(plane, src),
                     outer_src=plane_address(plane, src), outer_dst=0xFD00_0200_0400_0C01 << 64,
                     inner_src=nic_address(src), inner_dst=nic_address(dst))


def sample_frames(rng):
    """``(header dict, frame)`` of MRC frames: data (odd lengths too), a SACK, a trimmed one."""
    out = []
    for length in (0, 1, 2, 3, 5, 255, 4096):
        ev = rng.getrandbits(32)
        hdr, payload = data_packet(addresses(0, 1, 2), opcode=Opcode.WRITE_ONLY, ev=ev,
                                   dest_qpn=rng.getrandbits(24), psn=rng.getrandbits(24),
                                   rqmsn=0, msn=1, va=0x1000, rkey=7, dma_length=length,
                                   payload=rng.randbytes(length))
        out.append((hdr, build_frame(hdr, payload)))
    hdr, _ = sack_packet(addresses(1, 0, 2), ev=rng.getrandbits(32), dest_qpn=3, cack_psn=9,
                         mpr=8)
    out.append((hdr, build_frame(hdr)))
    data_hdr, data = out[-2]
    out.append((dict(data_hdr, dscp=Dscp.TRIMMED), trim(data, 256, Dscp.TRIMMED)))
    return out


@pytest.fixture
def written(tmp_path):
    """A file with two interfaces and the sample frames spread over them; returns the path and
    the ``(interface, time_ps, header, frame)`` written."""
    rng = random.Random(23)
    path = tmp_path / "t.pcapng"
    items = []
    with PcapngWriter(path, comment="test") as pcap:
        ids = [pcap.interface("host0-tx", "plane 2: host 0 -> T0 0"), pcap.interface("host0-rx")]
        time_ps = 0
        for k, (hdr, frame) in enumerate(sample_frames(rng)):
            time_ps += rng.randrange(1, 10**6) + (5 << 32) * 1000 * (k == 3)  # past 2^32 ns
            items.append((ids[k % 2], time_ps, hdr, frame))
            pcap.packet(ids[k % 2], time_ps, frame)
        assert pcap.packets == len(items)
    return path, items


def test_read_back_with_scapy(written):
    path, items = written
    reader = RawPcapNgReader(str(path))
    got = list(reader)
    assert len(got) == len(items)
    assert [iface[0] for iface in reader.interfaces] == [LINKTYPE_ETHERNET] * 2
    assert [iface[2]["name"] for iface in reader.interfaces] == [b"host0-tx", b"host0-rx"]
    assert {iface[2]["tsresol"] for iface in reader.interfaces} == {10**9}
    for (data, meta), (interface, time_ps, _, frame) in zip(got, items):
        assert data == frame
        assert meta.ifname == (b"host0-tx", b"host0-rx")[interface]
        assert meta.wirelen == len(frame)
        assert meta.tshigh << 32 | meta.tslow == time_ps // 1000
        assert meta.tsresol == 10**9
    packets = list(PcapNgReader(str(path)))
    assert [bytes(p) for p in packets] == [frame for *_, frame in items]
    assert [p.time * 10**9 for p in packets] == [t // 1000 for _, t, _, _ in items]
    assert [p.sniffed_on for p in packets] == [("host0-tx", "host0-rx")[i] for i, *_ in items]


def test_block_structure(written):
    """Walk the blocks: every length a multiple of 4 and repeated at the block's end; one
    section header, two interface descriptions, then one enhanced packet block per frame with
    the frame padded to 32 bits."""
    path, items = written
    data = path.read_bytes()
    types = []
    offset = 0
    while offset < len(data):
        block_type, total = struct.unpack_from("<II", data, offset)
        assert total % 4 == 0 and total >= 12
        assert struct.unpack_from("<I", data, offset + total - 4)[0] == total
        if block_type == BLOCK_SHB:
            assert struct.unpack_from("<IHHq", data, offset + 8) == (BYTE_ORDER_MAGIC, 1, 0, -1)
        if block_type == BLOCK_EPB:
            caplen = struct.unpack_from("<I", data, offset + 20)[0]
            assert total == 32 + caplen + (-caplen % 4)
        types.append(block_type)
        offset += total
    assert offset == len(data)
    assert types == [BLOCK_SHB, BLOCK_IDB, BLOCK_IDB] + [BLOCK_EPB] * len(items)


def test_dissect_with_scapy(written):
    """The outer headers scapy reads are the fields the frames were built from."""
    path, items = written
    for packet, (_, _, hdr, frame) in zip(PcapNgReader(str(path)), items):
        assert packet.haslayer(Ether) and bytes(packet) == frame
        assert packet[Ether].dst == mac_str(hdr["eth_dst"])
        assert packet[Ether].src == mac_str(hdr["eth_src"])
        assert packet[Ether].type == 0x86DD
        outer, inner = packet[IPv6], packet[IPv6].payload
        assert isinstance(inner, IPv6) and outer.nh == 41
        assert outer.src == ip6_str(hdr["outer_src"])
        assert outer.dst == ip6_str(hdr["outer_dst"])
        assert outer.hlim == hdr["hop_limit"]
        assert outer.tc == hdr["dscp"] << 2 | hdr["ecn"]
        assert outer.fl == hdr["flow_label"]
        assert outer.plen == len(frame) - 54
        assert inner.src == ip6_str(hdr["inner_src"]) and inner.dst == ip6_str(hdr["inner_dst"])
        udp = inner[UDP]
        assert (udp.sport, udp.dport) == (hdr["udp_sport"], ROCE_UDP_PORT)
        assert udp.len == len(frame) - 94
        assert bytes(udp.payload)[0] == hdr["opcode"]


def test_refuses_bad_input(tmp_path):
    with PcapngWriter(tmp_path / "bad.pcapng") as pcap:
        with pytest.raises(ValueError, match="not declared"):
            pcap.packet(0, 0, b"x" * 60)
        interface = pcap.interface("a")
        with pytest.raises(ValueError, match="non-negative"):
            pcap.packet(interface, -1, b"x" * 60)
        with pytest.raises(ValueError, match="non-negative"):
            pcap.packet(interface, 1.5, b"x" * 60)
        with pytest.raises(ValueError, match="64-bit"):
            pcap.packet(interface, 1000 << 64, b"x" * 60)
    with pytest.raises(ValueError, match="closed"):
        pcap.packet(interface, 0, b"x" * 60)
    assert len(list(RawPcapNgReader(str(tmp_path / "bad.pcapng")))) == 0


@pytest.mark.skipif(shutil.which("tshark") is None, reason=NO_TSHARK)
def test_tshark_reads_every_frame(written):
    """tshark reads every frame as Ethernet / IPv6 / IPv6 / UDP / InfiniBand with its interface
    and timestamp, finds no malformed frame and raises no expert warning or error."""
    path, items = written
    rows = tshark_fields(path, "frame.interface_name", "frame.time_epoch", "frame.len",
                         "frame.protocols", "_ws.expert.severity")
    assert len(rows) == len(items)
    for (name, epoch, length, protocols, severity), (interface, time_ps, _, frame) in \
            zip(rows, items):
        assert name == ("host0-tx", "host0-rx")[interface]
        assert Decimal(epoch) * 10**9 == time_ps // 1000
        assert int(length) == len(frame)
        assert protocols == "eth:ethertype:ipv6:ipv6:udp:infiniband"
        assert severity == ""
    assert tshark_fields(path, "frame.number", display_filter="_ws.malformed") == []


@pytest.mark.skipif(shutil.which("tshark") is None, reason=NO_TSHARK)
def test_tshark_flags_a_cut_frame(tmp_path):
    """The malformed check can fail: a frame cut inside its headers (lengths left as they were)
    is reported."""
    _, frame = sample_frames(random.Random(1))[6]
    path = tmp_path / "cut.pcapng"
    with PcapngWriter(path) as pcap:
        pcap.packet(pcap.interface("a"), 0, frame[:100])
    assert len(tshark_fields(path, "frame.number", display_filter="_ws.malformed")) == 1
