# SPDX-License-Identifier: BSD-2-Clause
"""models.un_stage: the frame-level uN stage, its check order, table priority and counters."""

import random
from ipaddress import IPv6Address

import pytest
from hypothesis import given, settings, strategies as st

from models.layouts import Opcode
from models.packets import build_frame, icrc
from models import conformance
from models.un_stage import (
    DROP_REASONS, DST_BYTE, FORWARDED, HOP_LIMIT, HOP_LIMIT_BYTE, MIN_FRAME, NO_ROUTE, NOT_IPV6,
    REASONS, SHORT, Forwarded, UnStageModel,
)
from models.usid import DEFAULT_BLOCK, active_key, carrier, path_carrier, shift

OWN = 0x2411                        # plane 2, T0 17
NEXT = 0x2C21                       # plane 2, HOST 33
DA = carrier([OWN, NEXT])


def frame_to(da, hop_limit=64, payload=b"\x5a" * 40):
    hdr = {"opcode": Opcode.WRITE_ONLY, "outer_dst": da, "hop_limit": hop_limit,
           "length": len(payload), "eth_dst": 0x020000000001, "eth_src": 0x020000000002,
           "outer_src": 0xFD000002 << 96 | 5, "inner_src": 0xFD00FFFF << 96 | 5,
           "inner_dst": 0xFD00FFFF << 96 | 9, "flow_label": 0x1234, "udp_sport": 0xBEEF}
    return build_frame(hdr, payload)


def stage(routes=((NEXT, 5),), own=OWN):
    model = UnStageModel()
    model.set_own(usid=own)
    for index, (usid, port) in enumerate(routes):
        model.set_entry(index, DEFAULT_BLOCK << 16 | usid, port)
    return model


def test_forward_rewrites_only_da_and_hop_limit():
    model = stage()
    frame = frame_to(DA, hop_limit=64)
    out = model.process(frame)
    assert isinstance(out, Forwarded) and out.port == 5
    assert len(out.frame) == len(frame)
    assert out.frame[HOP_LIMIT_BYTE] == 63
    assert int.from_bytes(out.frame[DST_BYTE:DST_BYTE + 16], "big") == carrier([NEXT])
    changed = [i for i in range(len(frame)) if frame[i] != out.frame[i]]
    assert set(changed) <= {HOP_LIMIT_BYTE} | set(range(DST_BYTE + 4, DST_BYTE + 16))
    # the ICRC does not cover the outer header: still valid
    assert icrc(out.frame[:-4]) == out.frame[-4:]
    assert model.counters == {FORWARDED: 1, SHORT: 0, "not_ipv6": 0, HOP_LIMIT: 0, NO_ROUTE: 0}


def test_vector_hops_as_frames():
    """Every hop of vectors/usid.json, carried by a whole frame."""
    for case in conformance.load("usid.json"):
        for hop in case["hops"]:
            model = UnStageModel()
            model.set_own(usid=int(hop["own_usid"], 16))
            for index, (key, port) in enumerate(hop["table"].items()):
                model.set_entry(index, int(key, 16), port)
            out = model.process(frame_to(int(IPv6Address(hop["in_da"])), hop["hop_limit_in"]))
            if isinstance(hop["result"], str):
                assert out == hop["result"]
            else:
                assert out.port == hop["result"]
                assert out.frame[DST_BYTE:DST_BYTE + 16] == IPv6Address(hop["out_da"]).packed
                assert out.frame[HOP_LIMIT_BYTE] == hop["hop_limit_out"]


@pytest.mark.parametrize("length", [0, 1, 13, 14, 22, 53])
def test_short(length):
    model = stage()
    assert model.process(frame_to(DA)[:length]) == SHORT
    # shorter than 54 bytes is 'short' whatever its first bytes hold
    assert model.process(bytes(length)) == SHORT
    assert model.counters[SHORT] == 2


def test_54_bytes_is_enough():
    model = stage()
    out = model.process(frame_to(DA)[:MIN_FRAME])
    assert isinstance(out, Forwarded) and len(out.frame) == MIN_FRAME


@pytest.mark.parametrize("offset, value", [(12, 0x08), (13, 0xDE), (14, 0x45), (14, 0x05),
                                           (14, 0xF6)])
def test_not_ipv6(offset, value):
    frame = bytearray(frame_to(DA, hop_limit=0))     # also expiring: not_ipv6 goes first
    frame[offset] = value
    model = stage()
    assert model.process(frame) == NOT_IPV6
    assert model.counters[NOT_IPV6] == 1


def test_check_order():
    """short > not_ipv6 > hop_limit > no_route."""
    model = stage(routes=())
    bad_type = bytearray(frame_to(DA, hop_limit=1))
    bad_type[12] = 0x08
    assert model.decide(bad_type[:40]) == SHORT
    assert model.decide(bad_type) == NOT_IPV6
    assert model.decide(frame_to(DA, hop_limit=1)) == HOP_LIMIT
    assert model.decide(frame_to(DA, hop_limit=2)) == NO_ROUTE
    assert model.counters == dict.fromkeys(REASONS, 0)    # decide() does not count


def test_not_active_but_routed():
    da = carrier([0x2412, NEXT])
    model = stage(routes=((0x2412, 9),))
    out = model.process(frame_to(da, hop_limit=9))
    assert out.port == 9
    assert int.from_bytes(out.frame[DST_BYTE:DST_BYTE + 16], "big") == da
    assert out.frame[HOP_LIMIT_BYTE] == 8


def test_priority_and_valid_bit():
    model = stage(routes=())
    key = DEFAULT_BLOCK << 16 | NEXT
    model.set_entry(3, key, 4)
    model.set_entry(1, key, 2, valid=False)
    model.set_entry(7, key, 6)
    assert model.process(frame_to(DA)).port == 4
    model.set_entry(1, key, 2)
    assert model.process(frame_to(DA)).port == 2
    model.set_entry(1, key, 2, valid=False)
    model.set_entry(3, 0, 0, valid=False)
    assert model.process(frame_to(DA)).port == 6
    model.set_entry(7, key, 6, valid=False)
    assert model.process(frame_to(DA)) == NO_ROUTE


def test_reset_state():
    """Out of reset: block fd00:0200, uSID 0, an empty table: every valid frame has no route."""
    model = UnStageModel()
    assert model.own_block == DEFAULT_BLOCK and model.own_usid == 0
    assert model.process(frame_to(DA)) == NO_ROUTE


def test_counter_clear():
    model = stage()
    model.process(frame_to(DA))
    model.process(b"")
    model.clear_counter(FORWARDED)
    assert model.counters[FORWARDED] == 0 and model.counters[SHORT] == 1
    with pytest.raises(ValueError):
        model.clear_counter("bogus")


@pytest.mark.parametrize("kwargs", [dict(table_depth=0), dict(table_depth=1025),
                                    dict(table_depth=4.0), dict(port_width=0),
                                    dict(port_width=17)])
def test_bad_parameters(kwargs):
    with pytest.raises(ValueError):
        UnStageModel(**kwargs)


@pytest.mark.parametrize("args", [(64, 0, 1), (-1, 0, 1), (0, 1 << 48, 1), (0, 0, 16),
                                  (0, 0, -1)])
def test_bad_entries(args):
    with pytest.raises(ValueError):
        UnStageModel().set_entry(*args)


@pytest.mark.parametrize("kwargs", [dict(usid=1 << 16), dict(usid=-1), dict(block=1 << 32)])
def test_bad_own(kwargs):
    with pytest.raises(ValueError):
        UnStageModel().set_own(**kwargs)


@settings(max_examples=200)
@given(st.integers(0, 2**32 - 1), st.binary(min_size=0, max_size=120), st.integers(0, 255),
       st.integers(0, 3), st.booleans())
def test_random_frames(seed, raw, hop_limit, kind, own_active):
    """Random frames: the answer matches the definition and the counters add up."""
    rng = random.Random(seed)
    plane, t0, t1, t0d, port = (rng.randrange(16), rng.randrange(1024), rng.randrange(1024),
                                rng.randrange(1024), rng.randrange(1024))
    da = path_carrier(plane, t0, t1, t0d, port)
    own = da >> 80 & 0xFFFF if own_active else rng.randrange(1 << 16)
    routes = {}
    model = UnStageModel(table_depth=8)
    model.set_own(usid=own)
    key = active_key(shift(da) if own == da >> 80 & 0xFFFF else da)
    if kind:
        model.set_entry(rng.randrange(8), key, kind)
        routes[key] = kind
    frame = bytearray(frame_to(da, hop_limit) + raw)[:rng.choice([len(raw), 200, 4000])]
    out = model.process(frame)
    if len(frame) < MIN_FRAME:
        assert out == SHORT
    elif hop_limit <= 1:
        assert out == HOP_LIMIT
    elif not routes:
        assert out == NO_ROUTE
    else:
        assert out.port == kind and out.frame[HOP_LIMIT_BYTE] == hop_limit - 1
        assert out.frame[:HOP_LIMIT_BYTE] == frame[:HOP_LIMIT_BYTE]
        assert out.frame[DST_BYTE + 16:] == frame[DST_BYTE + 16:]
    assert sum(model.counters.values()) == 1
    assert set(model.counters) == set(REASONS) and len(DROP_REASONS) == 4
