# SPDX-License-Identifier: BSD-2-Clause
"""Tests of the inter-block records (models/records.py): pack/unpack round trips of every record,
widths and offsets, field widths agreeing with the header layouts, and the ext field helpers."""

import pytest
from hypothesis import given, settings, strategies as st

from models.layouts import BTH, IPV6, MAX_EXT_BYTES, METH, RETH, UDP, Opcode, ext_length
from models.records import (
    ALL_RECORDS, EXT_WIDTH, QPN_WIDTH, RX_META, TX_HEADER, Record, ext_to_int, int_to_ext,
)

RECORDS = {r.name: r for r in ALL_RECORDS}


def record_values(record):
    return st.fixed_dictionaries({name: st.one_of(st.integers(0, (1 << w) - 1),
                                                  st.sampled_from((0, (1 << w) - 1)))
                                  for name, w in record.fields})


def test_record_names_unique():
    assert len(RECORDS) == len(ALL_RECORDS)


@pytest.mark.parametrize("record", ALL_RECORDS, ids=lambda r: r.name)
@settings(max_examples=50, deadline=None)
@given(data=st.data())
def test_pack_unpack_round_trip(record, data):
    values = data.draw(record_values(record))
    word = record.pack(values)
    assert 0 <= word < 1 << record.width
    assert record.unpack(word) == values
    assert record.pack(**values) == word


@pytest.mark.parametrize("record", ALL_RECORDS, ids=lambda r: r.name)
def test_widths_and_offsets(record):
    offset = 0
    for name, width in record.fields:
        assert record.offsets[name] == offset and record.widths[name] == width
        offset += width
    assert record.width == offset
    assert record.names == [n for n, _ in record.fields]
    rows = record.table()
    assert [r[0] for r in rows] == record.names and sum(r[2] for r in rows) == record.width
    assert rows[0][1] == f"{record.fields[0][1] - 1}:0"


@pytest.mark.parametrize("record", ALL_RECORDS, ids=lambda r: r.name)
def test_field_placement(record):
    """Field 0 at bit 0; each field's value lands at its offset and nowhere else."""
    for name, width in record.fields:
        word = record.pack({name: (1 << width) - 1})
        assert word == ((1 << width) - 1) << record.offsets[name]
        assert record.unpack(word) == {n: (1 << width) - 1 if n == name else 0
                                       for n in record.names}


def test_common_widths():
    assert QPN_WIDTH == 24 and EXT_WIDTH == MAX_EXT_BYTES * 8 == 288
    for record in ALL_RECORDS:
        for name in ("qpn", "dest_qpn"):
            if name in record.widths:
                assert record.widths[name] == 24, (record.name, name)
        for name in ("psn", "ev", "ext", "opcode"):
            if name in record.widths:
                assert record.widths[name] == {"psn": 24, "ev": 32, "ext": 288,
                                               "opcode": 8}[name], (record.name, name)


def test_header_records_match_layouts():
    """Fields copied from headers have the headers' widths."""
    for name, header, field in (("dscp", IPV6, "dscp"), ("ecn", IPV6, "ecn"),
                                ("flow_label", IPV6, "flow_label"),
                                ("hop_limit", IPV6, "hop_limit"), ("outer_src", IPV6, "src"),
                                ("inner_dst", IPV6, "dst"), ("udp_sport", UDP, "sport"),
                                ("opcode", BTH, "opcode"), ("dest_qpn", BTH, "dest_qpn"),
                                ("ackreq", BTH, "ackreq"), ("rtx", BTH, "rtx"),
                                ("psn", BTH, "psn")):
        assert TX_HEADER.widths[name] == header[field].width, name
    for name, header in (("rqmsn", METH), ("msn", METH), ("va", RETH), ("rkey", RETH),
                         ("dma_length", RETH), ("padcnt", BTH)):
        assert RX_META.widths[name] == header[name].width, name
    assert TX_HEADER.widths["length"] == 16


def test_pack_errors():
    with pytest.raises(KeyError):
        TX_HEADER.pack(bogus=1)
    with pytest.raises(ValueError, match="does not fit"):
        TX_HEADER.pack(psn=1 << 24)
    assert TX_HEADER.pack(psn=-1) == ((1 << 24) - 1) << TX_HEADER.offsets["psn"]
    with pytest.raises(ValueError, match="duplicate"):
        Record("bad", [("a", 1), ("a", 2)])
    with pytest.raises(ValueError, match="width"):
        Record("bad", [("a", 0)])


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=MAX_EXT_BYTES))
def test_ext_round_trip(ext):
    value = ext_to_int(ext)
    assert 0 <= value < 1 << EXT_WIDTH
    assert int_to_ext(value, len(ext)) == ext
    assert int_to_ext(value, MAX_EXT_BYTES) == ext + bytes(MAX_EXT_BYTES - len(ext))


def test_ext_lane_order():
    """Wire byte 0 in bits 7..0 (AXI-Stream lane order)."""
    assert ext_to_int(b"\x01\x02") == 0x0201
    assert int_to_ext(0x0201, 2) == b"\x01\x02"
    assert ext_length(Opcode.SACK) == MAX_EXT_BYTES
    with pytest.raises(ValueError, match="exceed"):
        ext_to_int(bytes(MAX_EXT_BYTES + 1))
