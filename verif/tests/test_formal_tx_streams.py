# SPDX-License-Identifier: BSD-2-Clause
"""Formal checks of the stream contract of the transmit-side blocks (verif/formal_tx_streams.py,
issue [verify] item 1), with the stream rules of docs/protocol.md section 8 on every port: the
header inserter (one frame per record kept, each with its record's beats and last tkeep;
k-induction), the link (whole frames pass unchanged and in order; k-induction with register
FIFOs, and bounded as it is), the plane splitter (every frame to exactly one plane, whole, in
order; k-induction in stages, and bounded) and path building (one header per plane frame record, one send record per data
frame, every input inside, dropped or a frame; k-induction, and bounded). A deliberately broken
header inserter, link, plane splitter and path building fail with a counterexample waveform. Two findings of these checks were fixed in [tx-speed]: the plane splitter committed a
frame longer than its record when the last beat was empty (now dropped as bad_length), and
TxPath withdrew a plane frame record it presented when the sink of ``m_hdr`` dropped ready (its
``m_frame`` is a register now; the bounded checks leave every sink free).
"""

import re
from pathlib import Path

import pytest

from rtl.header_inserter import HeaderInserter
from rtl.link import Link
from rtl.plane_splitter import PlaneSplitter
from rtl.tx_path import TxPath
from verif import formal_tx_streams as harnesses
from verif.formal import FormalFailure, check, check_staged, sby_available

PS_DEEP = 10       # the plane splitter's deep BMC (test-full): about 6 minutes
HI_COVER_W64 = 36  # the header inserter's covers at W = 64 and 128 (test-full)
HI_COVER_W128 = 26

pytestmark = pytest.mark.skipif(not sby_available(), reason="yowasp-sby or yices not installed")


class OversizeInserter(HeaderInserter):
    """A header inserter whose length limit is 8 bytes too high: it keeps (and frames) a record
    whose ``length`` is above ``max_payload``, one it must drop."""

    def __init__(self, data_width=64, max_payload=4096, **kwargs):
        super().__init__(data_width, max_payload, **kwargs)
        self.max_payload = max_payload + 8


class OverrunLink(Link):
    """A link whose ``s_axis_tready`` is always high: a beat offered while its FIFO is full is
    taken and lost (the FIFO ignores the write)."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        m.d.comb += self.s_axis.ready.eq(1)       # the later assignment wins
        return m


class OverrunTxPath(TxPath):
    """A TxPath whose ``s_pkt_tready`` is always high: a packet offered while its input register
    is full is taken and lost (the register ignores it)."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        m.d.comb += self.s_pkt.ready.eq(1)        # the later assignment wins
        return m


def _failed_assertions(failure):
    """The source text of the assertions a failed run names (``file:line`` in its log)."""
    texts = []
    for path, line in re.findall(r"Assert failed in top: (\S+?):(\d+)", failure.log):
        lines = Path(path).read_text().splitlines()
        texts.append("\n".join(lines[int(line) - 1:int(line) + 2]))
    return "\n".join(texts)


# -- header inserter ----------------------------------------------------------------------------

def test_header_inserter_inductive():
    # W = 64, max_payload 16: stream rules (tdata included, the CRC stages in the cone), one
    # frame per record kept, its record's beats and last-beat tkeep; from any state.
    m, ports, depths = harnesses.header_inserter_harness(prove=2)
    result = check("txs_header_inserter", m, ports, **depths)
    assert result.modes == {"prove": ("PASS", 2)}


def test_header_inserter_inductive_w512():
    # W = 512 (a shortest frame is 3 beats, so several frames inside): the proof on the whole
    # data path.
    m, ports, depths = harnesses.header_inserter_harness(512, 16, prove=2)
    result = check("txs_header_inserter_w512", m, ports, **depths)
    assert result.modes == {"prove": ("PASS", 2)}


@pytest.mark.full
def test_header_inserter_covers_w512():
    # The covers at W = 512, all reached by step 20 (an output buffer of 6 beats, enough for
    # two frames back to back at the output).
    m, ports, depths = harnesses.header_inserter_harness(512, 16, out_depth=6, prove=2,
                                                         cover=22)
    result = check("txs_header_inserter_w512_cover", m, ports, **depths)
    assert result.modes == {"prove": ("PASS", 2), "cover": ("PASS", 22)}


@pytest.mark.full
def test_header_inserter_covers_w64():
    # The covers at W = 64 (without tdata, so that the steps fit; the output buffer at its
    # full-rate depth): a whole 17-beat frame out, frames back to back, a frame flagged bad, a
    # record dropped while busy.
    m, ports, depths = harnesses.header_inserter_harness(data=False, out_depth=16, prove=2,
                                                         cover=HI_COVER_W64)
    result = check("txs_header_inserter_cover", m, ports, **depths)
    assert result.modes == {"prove": ("PASS", 2), "cover": ("PASS", HI_COVER_W64)}


@pytest.mark.full
def test_header_inserter_inductive_w128():
    # W = 128, max_payload 64.
    m, ports, depths = harnesses.header_inserter_harness(128, 64, out_depth=12, prove=2,
                                                         cover=HI_COVER_W128)
    result = check("txs_header_inserter_w128", m, ports, **depths)
    assert result.modes == {"prove": ("PASS", 2), "cover": ("PASS", HI_COVER_W128)}


def test_broken_header_inserter_fails_with_waveform():
    # A header inserter that frames a record of length max_payload + 8 (it must drop it).
    m, ports, _ = harnesses.header_inserter_harness(block=OversizeInserter)
    with pytest.raises(FormalFailure) as info:
        check("txs_broken_header_inserter_oversize", m, ports, bmc=4)
    assert info.value.mode == "bmc" and info.value.vcd and Path(info.value.vcd).exists()


# -- link -----------------------------------------------------------------------------------------

def test_link_inductive():
    # W = 64, delay_max 0 (FIFO of 2 beats), rate_max 1, with its FIFOs as register FIFOs of the
    # same ports and timing: whole frames pass unchanged and in order, tdata included; from any
    # state.
    m, ports, depths = harnesses.link_harness(inductive=True, prove=2, cover=6)
    result = check("txs_link_inductive", m, ports, **depths)
    assert result.modes == {"prove": ("PASS", 2), "cover": ("PASS", 6)}


def test_link_bounded():
    # The link as it is (memory FIFOs), from reset, tdata included.
    m, ports, depths = harnesses.link_harness(bmc=10, cover=6)
    result = check("txs_link", m, ports, **depths)
    assert result.modes == {"bmc": ("PASS", 10), "cover": ("PASS", 6)}


@pytest.mark.full
def test_link_inductive_delay():
    # delay_max 6 (FIFO of 8 beats), rate_max 3: the release stamps and the rate gap.
    m, ports, depths = harnesses.link_harness(delay_max=6, rate_max=3, inductive=True, prove=2,
                                              cover=14)
    result = check("txs_link_inductive_delay", m, ports, **depths)
    assert result.modes == {"prove": ("PASS", 2), "cover": ("PASS", 14)}


@pytest.mark.full
def test_link_bounded_deep():
    # The link as it is, without tdata (keep, last, user compared beat by beat), deeper.
    m, ports, depths = harnesses.link_harness(data=False, bmc=18, cover=6)
    result = check("txs_link_deep", m, ports, **depths)
    assert result.modes == {"bmc": ("PASS", 18), "cover": ("PASS", 6)}


def test_broken_link_fails_with_waveform():
    # A link that takes a beat while its FIFO is full loses it.
    m, ports, _ = harnesses.link_harness(block=OverrunLink)
    with pytest.raises(FormalFailure) as info:
        check("txs_broken_link_overrun", m, ports, bmc=8)
    assert info.value.mode == "bmc" and info.value.vcd and Path(info.value.vcd).exists()


# -- plane splitter -------------------------------------------------------------------------------

def test_plane_splitter_bounded():
    # N = 2, W = 64, C = 128, max_payload 16 (FIFO 32 words, 4 frames a plane), tdata
    # included; every cover reached by step 5 (frames of any length are allowed).
    m, ports, depths = harnesses.plane_splitter_harness(bmc=7, cover=6, data=True)
    result = check("txs_plane_splitter", m, ports, **depths)
    assert result.modes == {"bmc": ("PASS", 7), "cover": ("PASS", 6)}


@pytest.mark.full
def test_plane_splitter_bounded_deep():
    # Without tdata, deeper.
    m, ports, depths = harnesses.plane_splitter_harness(bmc=PS_DEEP)
    result = check("txs_plane_splitter_deep", m, ports, **depths)
    assert result.modes == {"bmc": ("PASS", PS_DEEP)}


# The inductive proof's configuration: N = 2, W = 64, C = 512 (FIFO 8 words and 4 frames a
# plane), route queue 2, max_payload 16. At C = 256 (FIFO 16 words) one stage ("each word is its
# frame's") ran past 7 minutes; the default (C = 128, FIFO 32 words, route queue 8) is bounded.
PS_SMALL = dict(core_width=512, route_queue=2)


def _plane_splitter_staged(name, block=None, only=None, **config):
    return check_staged(name, lambda: harnesses.plane_splitter_harness(prove=1, block=block,
                                                                       **config),
                        harnesses.PLANE_SPLITTER_STAGES, only=only)


def test_plane_splitter_inductive():
    # Every property of the bounded check, by k-induction (k = 1, unbounded) in stages (about
    # a minute): the memories as registers, the words tagged, tdata not followed.
    results = _plane_splitter_staged("txs_plane_splitter_inductive", **PS_SMALL)
    assert [r.modes for r in results] == [{"prove": ("PASS", 1)}] * \
        len(harnesses.PLANE_SPLITTER_STAGES)


class NoLastSplitter(PlaneSplitter):
    """Broken on purpose: plane 0 never marks a frame's last beat."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        m.d.comb += self.port(0).p.last.eq(0)
        return m


def test_broken_plane_splitter_fails_induction():
    # Its last stage (the port properties) fails, with a waveform.
    last = len(harnesses.PLANE_SPLITTER_STAGES) - 1
    with pytest.raises(FormalFailure) as info:
        _plane_splitter_staged("txs_broken_plane_splitter", block=NoLastSplitter, only=[last],
                               **PS_SMALL)
    assert info.value.mode == "prove" and info.value.vcd and Path(info.value.vcd).exists()


def test_plane_splitter_empty_last_beat():
    # An empty last beat (tkeep[0] = 0 on tlast, outside the stream convention) may come: such
    # a frame is dropped as bad_length (the model's rule), never committed. The block once
    # committed a frame longer than its record by whole words with an empty last beat,
    # truncated and without tlast (BMC: a record of 0 bytes, a 2-beat frame, at step 3).
    m, ports, _ = harnesses.plane_splitter_harness(empty_last=True, cover=6)
    result = check("txs_plane_splitter_empty_last", m, ports, bmc=5, cover=6)
    assert result.modes == {"bmc": ("PASS", 5), "cover": ("PASS", 6)}


# -- path building ------------------------------------------------------------------------------

def test_tx_path_inductive():
    # 1 QP, 2 planes, max_payload 16; every sink free to drop ready: the stream rules, one header
    # per plane frame record, one send record per data frame and the exact accounting of the
    # packets and control records taken (inside, dropped or a frame), by k-induction (k = 2)
    # from any state; the covers from reset.
    m, ports, depths = harnesses.tx_path_harness(prove=2, cover=5)
    result = check("txs_tx_path_inductive", m, ports, **depths)
    assert result.modes == {"prove": ("PASS", 2), "cover": ("PASS", 5)}


def test_tx_path_bounded():
    # The bounded form (with the modular "frames never exceed the inputs taken", the case that
    # withdrew a plane frame record at step 3 before the rebuild).
    m, ports, depths = harnesses.tx_path_harness(bmc=6, cover=5)
    result = check("txs_tx_path", m, ports, **depths)
    assert result.modes == {"bmc": ("PASS", 6), "cover": ("PASS", 5)}


@pytest.mark.full
def test_tx_path_inductive_wide():
    # 16 QPs, 8 planes, max_payload 4096 (the block's defaults).
    m, ports, depths = harnesses.tx_path_harness(16, 8, 4096, prove=2, cover=5)
    result = check("txs_tx_path_inductive_wide", m, ports, **depths)
    assert result.modes == {"prove": ("PASS", 2), "cover": ("PASS", 5)}


def test_broken_tx_path_fails_with_waveform():
    # A TxPath that takes a packet while its input register is full loses it: the accounting of
    # the proof's harness fails from reset (a packet taken that is neither inside, dropped nor a
    # frame), with a waveform.
    m, ports, _ = harnesses.tx_path_harness(block=OverrunTxPath, prove=2)
    with pytest.raises(FormalFailure) as info:
        check("txs_broken_tx_path_overrun", m, ports, bmc=4)
    assert info.value.mode == "bmc" and info.value.vcd and Path(info.value.vcd).exists()
    assert "every packet and control record taken" in _failed_assertions(info.value)
