# SPDX-License-Identifier: BSD-2-Clause
"""Tests of the header layout tables (models/layouts.py): sizes, offsets, pack/unpack round trips,
reserved fields, signed fields, opcode tables, header lengths and the address helpers."""

import pytest
from hypothesis import given, settings, strategies as st

from models.layouts import (
    BTH, BTH_OFFSET, CC_STATE, CONTROL_OPCODES, DATA_OPCODES, ETH, EXT_OFFSET, ICRC_MASKED_BITS,
    ICRC_START, IMMDT, INNER_OFFSET, IPV6, KNOWN_OPCODES, MAX_EXT_BYTES, METH, NETH, OUTER_OFFSET,
    PETH, RETH, SETH, SETH_SIGNED, TRIM_MIN_BYTES, UDP, UDP_OFFSET, Header, Opcode, ext_headers,
    ext_length, header_length, ip6, ip6_str, mac, mac_str, pad_count,
)

HEADERS = (ETH, IPV6, UDP, BTH, METH, RETH, IMMDT, SETH, CC_STATE, NETH, PETH)
SIZES = {"eth": 14, "ipv6": 40, "udp": 8, "bth": 12, "meth": 4, "reth": 16, "immdt": 4,
         "seth": 28, "cc_state": 8, "neth": 20, "peth": 16}


@st.composite
def header_values(draw, header):
    """Random values of every non-reserved field of ``header`` (all widths' edges reachable)."""
    return {f.name: draw(st.one_of(st.integers(0, (1 << f.width) - 1),
                                   st.sampled_from((0, (1 << f.width) - 1))))
            for f in header.fields if not f.name.startswith("rsvd")}


def test_sizes():
    assert {h.name: h.size for h in HEADERS} == SIZES


@pytest.mark.parametrize("header", HEADERS, ids=lambda h: h.name)
def test_fields_tile_the_header(header):
    offset = 0
    for f in header.fields:
        assert f.offset == offset and f.width > 0
        offset += f.width
    assert offset == header.size * 8
    assert header.names == [f.name for f in header.fields if not f.name.startswith("rsvd")]


@pytest.mark.parametrize("header", HEADERS, ids=lambda h: h.name)
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_pack_unpack_round_trip(header, data):
    values = data.draw(header_values(header))
    raw = header.pack(**values)
    assert len(raw) == header.size
    out = header.unpack(raw + b"\xAA")                         # trailing bytes are ignored
    assert {k: v for k, v in out.items() if not k.startswith("rsvd")} == values
    assert all(v == 0 for k, v in out.items() if k.startswith("rsvd"))
    assert header.pack(**{k: v for k, v in out.items() if not k.startswith("rsvd")}) == raw


@pytest.mark.parametrize("header", [h for h in HEADERS if any(f.name.startswith("rsvd")
                                                                for f in h.fields)],
                         ids=lambda h: h.name)
def test_reserved_fields_reject_non_zero(header):
    for f in header.fields:
        if f.name.startswith("rsvd"):
            assert header.pack(**{f.name: 0}) == bytes(header.size)
            with pytest.raises(ValueError, match="reserved"):
                header.pack(**{f.name: 1})


def test_pack_refuses_unknown_and_too_wide():
    with pytest.raises(KeyError):
        BTH.pack(qpn=1)
    with pytest.raises(ValueError, match="does not fit"):
        BTH.pack(psn=1 << 24)
    with pytest.raises(ValueError, match="needs 12 bytes"):
        BTH.unpack(bytes(11))


def test_field_positions():
    """Positions stated in docs/protocol.md sections 1.4 and 2.1-2.3 (byte, bit 7 = MSB)."""
    assert BTH.pack(padcnt=3) == bytes([0, 0x30]) + bytes(10)
    assert BTH.pack(ackreq=1, rtx=1, ts=1)[8] == 0x80 | 0x20 | 0x10
    assert BTH.pack(dest_qpn=0x123456)[5:8] == bytes.fromhex("123456")
    assert SETH.pack(m=1)[1] == 0x20 and SETH.pack(pr=1)[1] == 0x02
    assert SETH.pack(cack_psn=0xABCDEF)[13:16] == bytes.fromhex("abcdef")
    assert SETH.pack(mpr=8)[17] == 8
    assert SETH.pack(sack_bitmap=1 << 63)[20] == 0x80
    assert CC_STATE.pack(ooo_count=0x7FFF)[2:4] == b"\x7f\xff"
    assert NETH.pack(nack_reason=0x19)[2] == 0x19
    assert NETH.pack(nack_psn=0x010203)[13:16] == b"\x01\x02\x03"
    assert PETH.pack(probe_id=0x0102)[4:6] == b"\x01\x02"
    assert IPV6.pack(version=6, dscp=46, ecn=0)[:2] == b"\x6b\x80"


@pytest.mark.parametrize("value", [-(1 << 15), -1, 0, 1, (1 << 15) - 1])
def test_signed_fields(value):
    raw = SETH.pack(ack_psn_offset=value, sack_offset=value)
    out = SETH.unpack(raw, signed=SETH_SIGNED)
    assert out["ack_psn_offset"] == out["sack_offset"] == value
    assert SETH.unpack(raw)["sack_offset"] == value & 0xFFFF


def test_header_definition_errors():
    with pytest.raises(ValueError, match="whole bytes"):
        Header("bad", [("a", 3)])
    with pytest.raises(ValueError, match="duplicate"):
        Header("bad", [("a", 8), ("a", 8)])


def test_frame_offsets():
    offsets = (OUTER_OFFSET, INNER_OFFSET, UDP_OFFSET, BTH_OFFSET, EXT_OFFSET)
    assert offsets == (14, 54, 94, 102, 114)
    assert ICRC_START == 54 and TRIM_MIN_BYTES == 134 and MAX_EXT_BYTES == 36


def test_icrc_masked_bits():
    """docs/protocol.md 1.6: inner Traffic Class, Flow Label, Hop Limit; UDP checksum; BTH byte 4."""
    masked = {b for bit, width in ICRC_MASKED_BITS for b in range(bit, bit + width)}
    expected = set(range(54 * 8 + 4, 54 * 8 + 32)) | set(range(61 * 8, 62 * 8)) | \
        set(range(100 * 8, 102 * 8)) | set(range(106 * 8, 107 * 8))
    assert masked == expected


@pytest.mark.parametrize("opcode,length", [
    (Opcode.WRITE_FIRST, 134), (Opcode.WRITE_MIDDLE, 134), (Opcode.WRITE_LAST, 134),
    (Opcode.WRITE_ONLY, 134), (Opcode.WRITE_LAST_IMM, 138), (Opcode.WRITE_ONLY_IMM, 138),
    (Opcode.SACK, 150), (Opcode.NACK, 134), (Opcode.PROBE, 130),
])
def test_header_length_per_opcode(opcode, length):
    assert header_length(opcode) == length
    assert ext_length(opcode) == sum(h.size for h in ext_headers(opcode)) == length - 114


def test_opcode_tables():
    assert DATA_OPCODES == tuple(range(0xC6, 0xCC))
    assert CONTROL_OPCODES == (0xDC, 0xDD, 0xDE)
    assert set(KNOWN_OPCODES) == set(DATA_OPCODES) | set(CONTROL_OPCODES)
    assert ext_headers(Opcode.SACK) == (SETH, CC_STATE)
    assert ext_headers(Opcode.WRITE_ONLY_IMM) == (METH, RETH, IMMDT)


@pytest.mark.parametrize("opcode", sorted(set(range(256)) - set(KNOWN_OPCODES)))
def test_unknown_opcode_raises(opcode):
    assert ext_headers(opcode) is None
    with pytest.raises(ValueError, match="unknown opcode"):
        ext_length(opcode)
    with pytest.raises(ValueError, match="unknown opcode"):
        header_length(opcode)


@pytest.mark.parametrize("length,pad", [(0, 0), (1, 3), (2, 2), (3, 1), (4, 0), (4095, 1),
                                        (4096, 0)])
def test_pad_count(length, pad):
    assert pad_count(length) == pad


def test_address_helpers():
    assert ip6("fd00:0:1::5") == 0xFD00_0000_0001_0000_0000_0000_0000_0005
    assert ip6(7) == 7 and ip6_str(ip6("fd00:ffff::9")) == "fd00:ffff::9"
    assert mac("02:00:00:05:00:01") == 0x020000050001 and mac(5) == 5
    assert mac_str(0x020000050001) == "02:00:00:05:00:01"
