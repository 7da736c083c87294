# SPDX-License-Identifier: BSD-2-Clause
"""models.usid against the conformance vectors (vectors/usid.json), round trips and edge values."""

from ipaddress import IPv6Address

import pytest
from hypothesis import assume, given, strategies as st

from models import conformance as vectors
from models.usid import (
    DEFAULT_BLOCK, HOP_LIMIT, INDEX_LIMIT, MAX_USIDS, NO_ROUTE, PLANES, Forward, Role, Usid,
    active_key, carrier, carrier_usids, decode, encode, ev_carrier, ev_path, parse_block,
    path_carrier, path_template, reverse_carrier, shift, un_step,
)



def load_cases():
    return vectors.load("usid.json")


def ip(text):
    return int(IPv6Address(text))


planes = st.integers(0, PLANES - 1)
roles = st.sampled_from((Role.T0, Role.T1, Role.HOST))
indexes = st.integers(0, INDEX_LIMIT - 1)
usids = st.builds(encode, planes, roles, indexes)
blocks = st.integers(0, (1 << 32) - 1)


# --- Conformance vectors -----------------------------------------------------------------------

def test_vector_carriers():
    cases = [c for c in load_cases() if "plane" in c]
    assert len(cases) >= 20
    for case in cases:
        da = path_carrier(case["plane"], case["t0_src"], case["t1"], case["t0_dst"],
                          case["host_port"])
        assert da == ip(case["carrier"]), case
        # the first hop's input address is the carrier itself
        assert ip(case["hops"][0]["in_da"]) == da


def test_vector_carriers_from_ev():
    """The same carriers from an EV (4.1): plane in EV[3:0], j in EV[11:4], any salt."""
    for case in load_cases():
        if "plane" not in case or case["t1"] > 0xFF:
            continue
        ev = 0xABCDE << 12 | case["t1"] << 4 | case["plane"]
        assert ev_path(ev) == (case["plane"], case["t1"])
        da = ev_carrier(ev, case["t0_src"], case["t0_dst"], case["host_port"])
        assert da == ip(case["carrier"]), case


def test_vector_hops():
    hops = 0
    reasons = set()
    for case in load_cases():
        for hop in case["hops"]:
            table = {int(key, 16): port for key, port in hop["table"].items()}
            result = un_step(ip(hop["in_da"]), hop["hop_limit_in"], table,
                             int(hop["own_usid"], 16))
            if isinstance(hop["result"], str):
                assert result == hop["result"], hop
                assert hop["out_da"] is None and hop["hop_limit_out"] is None
                reasons.add(result)
            else:
                assert result == Forward(ip(hop["out_da"]), hop["hop_limit_out"],
                                         hop["result"]), hop
            hops += 1
    assert hops >= 50
    assert reasons == {HOP_LIMIT, NO_ROUTE}


def test_vector_paths_chain():
    """Along each path, a hop's output is the next hop's input."""
    for case in load_cases():
        for hop, nxt in zip(case["hops"], case["hops"][1:]):
            assert hop["out_da"] == nxt["in_da"]
            assert hop["hop_limit_out"] == nxt["hop_limit_in"]


# --- Encoding ----------------------------------------------------------------------------------

@given(planes, roles, indexes)
def test_usid_round_trip(plane, role, index):
    usid = encode(plane, role, index)
    assert 0 < usid < 1 << 16
    assert decode(usid) == Usid(plane, role, index)


@pytest.mark.parametrize("plane, role, index, value", [
    (0, Role.T0, 0, 0x0400),
    (15, Role.HOST, 1023, 0xFFFF),
    (0, Role.T1, 1, 0x0801),
    (15, Role.T0, 0, 0xF400),
    (4, Role.T1, 108, 0x486C),      # from the vectors
])
def test_usid_edges(plane, role, index, value):
    assert encode(plane, role, index) == value
    assert decode(value) == (plane, role, index)


@pytest.mark.parametrize("args", [
    (16, Role.T0, 0), (-1, Role.T0, 0), (0, 0, 0), (0, 4, 0), (0, Role.T0, 1024),
    (0, Role.T0, -1), (0.0, Role.T0, 0), (0, Role.T0, True), ("1", Role.T0, 0),
])
def test_encode_rejects(args):
    with pytest.raises(ValueError):
        encode(*args)


@pytest.mark.parametrize("value", [0x0000, 0x0001, 0xF3FF, 0x10000, -1, None])
def test_decode_rejects(value):
    with pytest.raises(ValueError):
        decode(value)


# --- Carriers ----------------------------------------------------------------------------------

@given(st.lists(usids, min_size=1, max_size=MAX_USIDS), blocks)
def test_carrier_round_trip(path, block):
    da = carrier(path, block)
    assert da >> 96 == block
    assert carrier_usids(da) == (block, tuple(path))
    assert active_key(da) == block << 16 | path[0]


def test_carrier_six_usids_and_zero_end():
    path = [encode(p, Role.T1, p) for p in range(6)]
    da = carrier(path)
    assert da & 0xFFFF == path[-1]          # six uSIDs: no room left for an end marker
    assert carrier_usids(da) == (DEFAULT_BLOCK, tuple(path))
    one = carrier([0x0400])
    assert one == 0xFD000200_0400 << 80     # the rest of the carrier is 0x0000
    assert str(IPv6Address(one)) == "fd00:200:400::"


@pytest.mark.parametrize("path", [[], [0x0400] * 7, [0x0000], [0x0400, 0x0000], [0x1000]])
def test_carrier_rejects(path):
    with pytest.raises(ValueError):
        carrier(path)


def test_carrier_rejects_block():
    with pytest.raises(ValueError):
        carrier([0x0400], 1 << 32)
    with pytest.raises(ValueError):
        carrier([0x0400], "fd00:200::1")
    assert carrier([0x0400], "fd00:200::/32") == carrier([0x0400])


def test_carrier_usids_edges():
    assert carrier_usids(DEFAULT_BLOCK << 96) == (DEFAULT_BLOCK, ())   # exhausted carrier
    with pytest.raises(ValueError):          # a uSID after the end of carrier
        carrier_usids(DEFAULT_BLOCK << 96 | 0x0400 << 64)
    with pytest.raises(ValueError):          # role 0 in the active place
        carrier_usids(DEFAULT_BLOCK << 96 | 0x0001 << 80)
    with pytest.raises(ValueError):
        carrier_usids(1 << 128)


def test_parse_block():
    assert parse_block("fd00:200::") == DEFAULT_BLOCK
    assert parse_block(DEFAULT_BLOCK) == DEFAULT_BLOCK
    with pytest.raises(ValueError):
        parse_block(-1)


# --- Path templates, EVs, reverse paths --------------------------------------------------------

@given(planes, indexes, indexes, indexes, indexes)
def test_path_template(plane, t0_src, t1, t0_dst, port):
    path = path_template(plane, t0_src, t1, t0_dst, port)
    if t0_src == t0_dst:
        assert [decode(u) for u in path] == [(plane, Role.T0, t0_src), (plane, Role.HOST, port)]
    else:
        assert [decode(u) for u in path] == [(plane, Role.T0, t0_src), (plane, Role.T1, t1),
                                             (plane, Role.T0, t0_dst), (plane, Role.HOST, port)]
    assert carrier_usids(path_carrier(plane, t0_src, t1, t0_dst, port)) == (DEFAULT_BLOCK, path)


def test_path_template_rejects_t1_even_under_one_t0():
    with pytest.raises(ValueError):
        path_template(0, 3, 1024, 3, 0)


@given(st.integers(0, (1 << 32) - 1))
def test_ev_path(ev):
    plane, j = ev_path(ev)
    assert plane == ev & 0xF and j == ev >> 4 & 0xFF
    # EVs that differ only in salt share a path
    assert ev_path(ev ^ 0xFFFFF000) == (plane, j)


@pytest.mark.parametrize("ev", [-1, 1 << 32, 1.0])
def test_ev_path_rejects(ev):
    with pytest.raises(ValueError):
        ev_path(ev)


@given(st.integers(0, (1 << 32) - 1), indexes, indexes, indexes, indexes)
def test_reverse_carrier(ev, a_t0, a_port, b_t0, b_port):
    """A packet from host port ``a_port`` under ``a_t0`` to ``b_port`` under ``b_t0`` on ``ev``;
    the answer goes back on the same plane and T1 (4.5)."""
    plane, j = ev_path(ev)
    forward = carrier_usids(ev_carrier(ev, a_t0, b_t0, b_port))[1]
    back = carrier_usids(reverse_carrier(ev, b_t0, a_t0, a_port))[1]
    assert {decode(u).plane for u in forward + back} == {plane}
    if a_t0 == b_t0:
        assert len(forward) == len(back) == 2
    else:
        assert decode(forward[1]) == decode(back[1]) == (plane, Role.T1, j)
        assert back[0] == forward[2] and back[2] == forward[0]
    assert decode(back[-1]) == (plane, Role.HOST, a_port)


# --- The uN step -------------------------------------------------------------------------------

def test_shift():
    da = carrier([0x4409, 0x486C, 0x4414, 0x4C27])
    assert shift(da) == carrier([0x486C, 0x4414, 0x4C27])
    six = carrier([0x0401 + i for i in range(6)])
    assert shift(six) == carrier([0x0402 + i for i in range(5)])
    assert shift(carrier([0x0400])) == DEFAULT_BLOCK << 96


@given(st.lists(usids, min_size=2, max_size=MAX_USIDS), st.integers(2, 255),
       st.integers(0, 15))
def test_un_step_walks_a_path(path, hop_limit, port):
    """Each switch of a path, owning the active uSID, shifts it and routes on the next."""
    da = carrier(path)
    for k in range(len(path) - 1):
        if hop_limit <= 1:
            assert un_step(da, hop_limit, {}, path[k]) == HOP_LIMIT
            return
        table = {DEFAULT_BLOCK << 16 | path[k + 1]: port}
        step = un_step(da, hop_limit, table, path[k])
        assert step == Forward(carrier(path[k + 1:]), hop_limit - 1, port)
        da, hop_limit = step.da, step.hop_limit


@given(st.lists(usids, min_size=1, max_size=MAX_USIDS), usids, st.integers(2, 255))
def test_un_step_not_active(path, own, hop_limit):
    """A switch whose own uSID is not active looks the unshifted DA up and forwards it unchanged."""
    assume(own != path[0])
    da = carrier(path)
    assert un_step(da, hop_limit, {active_key(da): 7}, own) == Forward(da, hop_limit - 1, 7)
    if active_key(shift(da)) != active_key(da):
        assert un_step(da, hop_limit, {active_key(shift(da)): 7}, own) == NO_ROUTE


def test_un_step_foreign_block():
    """The own uSID behind another block is not ours: no shift."""
    da = carrier([0x0403, 0x0C36], block=0xFD000300)
    assert un_step(da, 64, {active_key(da): 2}, 0x0403) == Forward(da, 63, 2)
    assert un_step(da, 64, {}, 0x0403, own_block=0xFD000300) == NO_ROUTE


@pytest.mark.parametrize("hop_limit, expected", [
    (0, HOP_LIMIT), (1, HOP_LIMIT), (2, Forward(carrier([0x0C36]), 1, 3)),
    (255, Forward(carrier([0x0C36]), 254, 3)),
])
def test_un_step_hop_limits(hop_limit, expected):
    da = carrier([0x0403, 0x0C36])
    assert un_step(da, hop_limit, {DEFAULT_BLOCK << 16 | 0x0C36: 3}, 0x0403) == expected


def test_un_step_precedence():
    """Hop Limit first: a packet that both expires and has no route counts as 'hop_limit'."""
    da = carrier([0x0403, 0x0C36])
    assert un_step(da, 1, {}, 0x0403) == HOP_LIMIT
    assert un_step(da, 0, {}, 0x0405) == HOP_LIMIT
    assert un_step(da, 2, {}, 0x0403) == NO_ROUTE


def test_un_step_exhausted_carrier():
    """The last uSID shifted out leaves key block|0x0000: routed only if the table says so."""
    da = carrier([0x0403])
    assert un_step(da, 64, {DEFAULT_BLOCK << 16 | 0x0403: 1}, 0x0403) == NO_ROUTE
    assert un_step(da, 64, {DEFAULT_BLOCK << 16: 1}, 0x0403) == \
        Forward(DEFAULT_BLOCK << 96, 63, 1)


@pytest.mark.parametrize("args", [
    (1 << 128, 64, {}, 0x0400), (-1, 64, {}, 0x0400), (0, 256, {}, 0x0400),
    (0, -1, {}, 0x0400), (0, 64, {}, 1 << 16), (0, 64, {}, 0x0400, 1 << 32),
])
def test_un_step_rejects(args):
    with pytest.raises(ValueError):
        un_step(*args)
