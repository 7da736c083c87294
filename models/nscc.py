# SPDX-License-Identifier: BSD-2-Clause
"""NSCC, the congestion control of profile 2 (docs/protocol.md 5.1): one sender QP's window.

UET 1.0's network-signalled congestion control as MRC 1.0 uses it: sender-side, clocked by the
SACKs, a congestion window ``cwnd`` in bytes between ``cwnd_min`` and ``cwnd_max`` that bounds the
QP's bytes in flight (section 5, limit (b): each packet counts :func:`packet_cost` bytes). The
rules and default parameters follow the UEC model of htsim (``uet-htsim``, ``sim/uec.cpp``, read
for its arithmetic, none of its code used); the arithmetic here is integer, every step stated, so
an RTL block can compute the same window given the same inputs.

Units: bytes, and time in *stamps* of :data:`STAMP_NS` ns (the block's clock; a 1.024 us tick is
:data:`TICK_STAMPS` stamps). Fractions are fixed point with :data:`FRAC` bits (``*_q`` names).

State (:class:`Nscc`): ``cwnd``; ``inc_q``, the increase accumulator (bytes^2, ``FRAC``
fractional bits); ``received``, bytes taken as received since the last adjustment;
``last_adjust`` and ``last_decrease`` (stamps); ``avg_q``, the mean queueing delay (stamps,
``FRAC`` fractional bits); ``fast_count`` and ``fast`` (fast increase); quick adapt's
``achieved``, ``qa_end``, ``qa_trigger``, ``ignore`` and ``ignored``; ``ecn_pending`` (a trim
NACK since the last SACK).

Inputs, each at the block's clock ``now``:

- :meth:`Nscc.on_sack` (a SACK with ``pr`` = 0): ``acked`` bytes it newly took as received, its
  ECN signal (``m`` = SKIP_ONCE, or ``ecn_pending``, then cleared), its RTT sample (``now`` minus
  the send stamp of the trigger's copy, or None when the profile gives none; the delay sample
  is that minus ``base_rtt``, at least 0), and the QP's bytes in flight after it. In this
  order: (1) the sample updates ``avg_q`` (``s`` = the sample, or ``base_rtt / 4`` when it is
  above ``target`` without ECN: ``avg += (s - avg) >> EWMA_SHIFT``); no sample: ``delay =
  avg``; (2) ``achieved``, ``received`` and ``ignored`` grow by ``acked``; (3) quick adapt
  (below); if it acted, stop; (4) the quadrant on (ECN, ``delay >= target``): no ECN, below:
  proportional increase ``inc_q += alpha_q * acked * (target - delay)``, or the fast increase;
  no ECN, above: fair increase ``inc_q += fi_q * acked``; ECN, above: multiplicative decrease;
  ECN, below: nothing; (5) clamp; (6) the adjustment when ``received > adjust_bytes`` or
  ``now - last_adjust > adjust_period``: ``cwnd += (inc_q >> FRAC) // cwnd``; when
  ``now - last_adjust >= adjust_period`` also ``cwnd += eta`` and ``last_adjust = now``;
  ``inc_q = received = 0``; (7) clamp.
- Fast increase (in the proportional quadrant): with ``delay < fast_delay``, ``fast_count``
  grows by ``acked``; once it exceeds ``cwnd`` (or ``fast`` is set) ``cwnd += (acked *
  fast_q) >> FRAC``, ``fast`` is set and the proportional increase skipped. A delay at or above
  ``fast_delay`` clears ``fast_count`` and ``fast``.
- Multiplicative decrease (ECN and above target): ``fast`` and ``fast_count`` clear; when
  ``avg > target`` (integer stamps of ``avg_q``) and ``now - last_decrease > md_period``:
  ``cwnd = cwnd * max(avg - (gamma_q * (avg - target) >> FRAC), avg // 2) // avg`` (at least
  ``cwnd_min``) and ``last_decrease = now``.
- Quick adapt (on every SACK, and on every trim NACK as a loss): while ``ignored < ignore`` an
  ECN SACK or a NACK does nothing more (it acted); otherwise when ``now > qa_end``: if
  ``qa_end != 0`` and (``qa_trigger``, or a NACK, or ``delay > qa_threshold``) and ``achieved <
  cwnd_max >> qa_gate``, then ``cwnd = max(achieved, cwnd_min)``, ``ignore`` = the bytes in
  flight, ``ignored = 0``, ``qa_trigger`` clears and it acted; either way ``achieved = 0`` and
  ``qa_end = now + base_rtt + target``. When it acted, ``inc_q = received = 0``.
- :meth:`Nscc.on_trim` (a NACK TRIMMED or TRIMMED_LASTHOP of a packet of ``cost`` bytes): an
  ECN signal (``ecn_pending``, for the next SACK's quadrant: the NACK carries no queueing delay
  of the hop that trimmed), ``ignored += cost``, ``avg`` takes the sample ``base_rtt``,
  ``qa_trigger`` sets, then quick adapt as a loss; unless it acted: TRIMMED, ``cwnd -= cost``
  (htsim); TRIMMED_LASTHOP, the receiver's downlink overflowed, where no switch marks ECN
  (profile 7): with ``trim_keep_q`` 0 as TRIMMED, else when ``now - last_decrease > md_period``, ``cwnd = (cwnd * trim_keep_q) >>
  FRAC`` and ``last_decrease = now``; then clamp.
- :meth:`Nscc.on_timeout` (one timeout event, whatever it declared lost; ``cost`` of the PSN
  whose timer fired): ``cwnd = max(cwnd - cost, cwnd_min)``.

Clamp: ``cwnd = min(max(cwnd, cwnd_min), cwnd_max)``.

Nothing here imports cocotb, Amaranth or scapy.
"""

from dataclasses import dataclass, fields

__all__ = ["STAMP_NS", "TICK_STAMPS", "FRAC", "EWMA_SHIFT", "MIN_COST", "packet_cost",
           "NsccConfig", "Nscc", "REF_GBPS", "REF_RTT_NS", "MAX_BDPS", "MD_RTTS", "TARGET_RTTS",
           "TRIM_KEEP", "STYLES"]

STAMP_NS = 16                 # the block's clock unit for send times and delays (profile: <= 64)
TICK_STAMPS = 1024 // STAMP_NS  # stamps per 1.024 us tick
FRAC = 16                     # fractional bits of the fixed-point fractions
EWMA_SHIFT = 6                # avg += (sample - avg) / 64 (htsim: 0.0125, about 1/80)
MIN_COST = 1024               # a packet counts at least this many bytes (section 5, limit (b))
REF_GBPS = 100                # htsim's reference link rate and RTT (the parameters scale from them)
REF_RTT_NS = 12000
MAX_BDPS = 3                  # cwnd_max in bandwidth-delay products (htsim: 1.5)
MD_RTTS = 1                   # the multiplicative decrease period in base RTTs (htsim: 1)
TARGET_RTTS = 3               # the target queueing delay in base RTTs (htsim: 0.75 with trimming)
TRIM_KEEP = 0.6               # cwnd kept by a last-hop trim's decrease (htsim: one packet less)
STYLES = ("project", "htsim")   # NsccConfig.scaled: this project's defaults, or htsim's own


def packet_cost(length):
    """The bytes a data packet of ``length`` payload bytes counts in flight: max(length, 1024)."""
    return max(length, MIN_COST)


@dataclass(frozen=True)
class NsccConfig:
    """NSCC's per-QP parameters (integers: bytes, stamps, ``*_q`` with :data:`FRAC` fractional
    bits). Build them with :meth:`scaled` from the QP's rate and base RTT; the fields are what a
    configuration register block would hold."""
    cwnd_init: int
    cwnd_min: int
    cwnd_max: int
    base_rtt: int             # stamps
    target: int               # stamps: the target queueing delay
    alpha_q: int              # proportional increase, per byte and stamp below target
    fi_q: int                 # fair increase, per byte
    eta: int                  # bytes added at most once per adjust period
    fast_q: int               # fast increase: the fraction of acked bytes added
    fast_delay: int           # stamps: the delay below which the fast increase counts
    gamma_q: int              # multiplicative decrease gain
    md_period: int            # stamps: at most one multiplicative decrease per period
    trim_keep_q: int          # the cwnd a last-hop trim's decrease keeps (0: one packet less)
    qa_threshold: int         # stamps
    qa_gate: int              # quick adapt only when less than cwnd_max >> qa_gate was achieved
    adjust_bytes: int
    adjust_period: int        # stamps

    def __post_init__(self):
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"nscc: {f.name} must be a non-negative integer, not {value!r}")
        if not MIN_COST <= self.cwnd_min <= self.cwnd_init <= self.cwnd_max:
            raise ValueError(f"nscc: need {MIN_COST} <= cwnd_min <= cwnd_init <= cwnd_max, not "
                             f"{self.cwnd_min}, {self.cwnd_init}, {self.cwnd_max}")
        if self.trim_keep_q > 1 << FRAC or self.gamma_q > 1 << FRAC:
            raise ValueError("nscc: trim_keep_q and gamma_q are fractions of at most 1")
        if min(self.base_rtt, self.target, self.adjust_period, self.md_period) < 1:
            raise ValueError("nscc: base_rtt, target, adjust_period and md_period must be at "
                             "least 1 stamp")

    @classmethod
    def scaled(cls, rate_gbps, base_rtt_ns, mtu, target_ns=None, cwnd_init=None, sack_bytes=0,
               style="project"):
        """The defaults for a QP of ``rate_gbps`` (the NIC's rate the QP sprays over), unloaded
        RTT ``base_rtt_ns`` and ``mtu`` payload bytes: htsim's gains scaled by ``a`` = BDP /
        150,000 B (BDP = rate x RTT; 100 Gb/s x 12 us is htsim's reference): alpha = 4 MTU a /
        12 us, fi = 5 MTU a, eta = 0.15 MTU a, fast increase 0.25 a below 1 us, gamma 0.8, one
        decrease per RTT, quick adapt above 4 targets with gate 3, adjustments every 8 MTU or
        one RTT. This project's choices (docs/protocol.md 5.1, measured in docs/scenarios.md 8):
        the target :data:`TARGET_RTTS` RTTs (htsim 0.75); cwnd from one packet to
        :data:`MAX_BDPS` BDPs (htsim 1.5), starting there (as htsim) unless ``cwnd_init`` is
        given; a last-hop trim keeps :data:`TRIM_KEEP` of cwnd. The receiver's SACK coalescing
        budget ``sack_bytes`` is added to the window: those bytes stay in flight until their
        SACK, on top of the round trip (htsim ACKs every 16 KB against a 150 KB BDP; a 4-host
        fabric's BDP is below the profile's 32 KB default). ``style`` "htsim" takes htsim's own
        choices instead (the cross-check of docs/scenarios.md 8): target 0.75 RTT, cwnd up to
        1.5 BDPs (plus ``sack_bytes``), every trim one packet less (``trim_keep_q`` 0)."""
        if rate_gbps <= 0 or base_rtt_ns <= 0 or mtu <= 0:
            raise ValueError("nscc: rate, base RTT and MTU must be positive")
        if style not in STYLES:
            raise ValueError(f"nscc: style must be one of {STYLES}, not {style!r}")
        htsim = style == "htsim"
        bdp = rate_gbps * base_rtt_ns / 8                      # bytes
        a = bdp / (REF_GBPS * REF_RTT_NS / 8)
        if target_ns is None:
            target_ns = (0.75 if htsim else TARGET_RTTS) * base_rtt_ns
        stamps = lambda ns: max(1, round(ns / STAMP_NS))       # noqa: E731
        one = 1 << FRAC
        cwnd_min = packet_cost(mtu)
        cwnd_max = max(cwnd_min, int((1.5 if htsim else MAX_BDPS) * bdp) + sack_bytes)
        init = cwnd_max if cwnd_init is None else cwnd_init
        return cls(
            cwnd_init=init, cwnd_min=cwnd_min, cwnd_max=cwnd_max,
            base_rtt=stamps(base_rtt_ns), target=stamps(target_ns),
            alpha_q=round(4 * mtu * a * STAMP_NS / REF_RTT_NS * one),
            fi_q=round(5 * mtu * a * one), eta=int(0.15 * mtu * a), fast_q=round(0.25 * a * one),
            fast_delay=stamps(1000), gamma_q=round(0.8 * one),
            md_period=stamps(MD_RTTS * base_rtt_ns),
            trim_keep_q=0 if htsim else round(TRIM_KEEP * one),
            qa_threshold=stamps(4 * target_ns), qa_gate=3, adjust_bytes=8 * mtu,
            adjust_period=stamps(base_rtt_ns))


class Nscc:
    """One QP's NSCC state (module docstring); ``cwnd`` is the window in bytes."""

    def __init__(self, cfg):
        if not isinstance(cfg, NsccConfig):
            raise ValueError(f"Nscc needs an NsccConfig, not {cfg!r}")
        self.cfg = cfg
        self.cwnd = cfg.cwnd_init
        self.inc_q = 0
        self.received = 0
        self.last_adjust = 0
        self.last_decrease = 0
        self.avg_q = 0
        self.fast_count = 0
        self.fast = False
        self.achieved = 0
        self.qa_end = 0
        self.qa_trigger = False
        self.ignore = 0
        self.ignored = 0
        self.ecn_pending = False
        self.counters = {"sacks": 0, "trims": 0, "timeouts": 0, "decreases": 0,
                         "quick_adapts": 0, "adjustments": 0}

    @property
    def avg(self):
        """The mean queueing delay in whole stamps."""
        return self.avg_q >> FRAC

    def _clamp(self):
        cfg = self.cfg
        self.cwnd = min(max(self.cwnd, cfg.cwnd_min), cfg.cwnd_max)

    def _average(self, sample):
        """``avg += (sample - avg) >> EWMA_SHIFT`` in fixed point (an arithmetic shift)."""
        self.avg_q += ((sample << FRAC) - self.avg_q) >> EWMA_SHIFT

    def _quick_adapt(self, now, loss, ecn, delay, in_flight):
        cfg = self.cfg
        acted = False
        if ecn and self.ignored < self.ignore:
            acted = True
        elif now > self.qa_end:
            if self.qa_end != 0 and (self.qa_trigger or loss or delay > cfg.qa_threshold) and \
                    self.achieved < cfg.cwnd_max >> cfg.qa_gate:
                self.cwnd = max(self.achieved, cfg.cwnd_min)
                self.ignore = in_flight
                self.ignored = 0
                self.qa_trigger = False
                self.counters["quick_adapts"] += 1
                acted = True
            self.achieved = 0
            self.qa_end = now + cfg.base_rtt + cfg.target
        if acted:
            self.inc_q = 0
            self.received = 0
        return acted

    def on_sack(self, now, acked, ecn, rtt, in_flight):
        """A SACK with ``pr`` = 0 (module docstring): ``acked`` bytes newly taken as received,
        ``ecn`` its signal, ``rtt`` the stamps from its trigger's send to now (None: no sample;
        the delay sample is ``rtt - base_rtt``, at least 0), ``in_flight`` the QP's bytes in
        flight after it. Returns the new cwnd."""
        cfg = self.cfg
        self.counters["sacks"] += 1
        ecn = ecn or self.ecn_pending
        self.ecn_pending = False
        if rtt is None:
            delay = self.avg
        else:
            delay = max(0, rtt - cfg.base_rtt)
            self._average(cfg.base_rtt >> 2 if not ecn and delay > cfg.target else delay)
        self.achieved += acked
        self.received += acked
        self.ignored += acked
        if self._quick_adapt(now, False, ecn, delay, in_flight):
            return self.cwnd
        above = delay >= cfg.target
        if not ecn and not above:
            if delay < cfg.fast_delay:
                self.fast_count += acked
                if self.fast_count > self.cwnd or self.fast:
                    self.fast = True
                    self.cwnd += (acked * cfg.fast_q) >> FRAC
            else:
                self.fast_count = 0
                self.fast = False
            if not self.fast:
                self.inc_q += cfg.alpha_q * acked * (cfg.target - delay)
        elif not ecn:
            self.inc_q += cfg.fi_q * acked
        elif above:
            self.fast = False
            self.fast_count = 0
            avg = self.avg
            if avg > cfg.target and now - self.last_decrease > cfg.md_period:
                keep = max(avg - ((cfg.gamma_q * (avg - cfg.target)) >> FRAC), avg >> 1)
                self.cwnd = max(self.cwnd * keep // avg, cfg.cwnd_min)
                self.last_decrease = now
                self.counters["decreases"] += 1
        self._clamp()
        if self.received > cfg.adjust_bytes or now - self.last_adjust > cfg.adjust_period:
            self.cwnd += (self.inc_q >> FRAC) // self.cwnd
            if now - self.last_adjust >= cfg.adjust_period:
                self.cwnd += cfg.eta
                self.last_adjust = now
            self.inc_q = 0
            self.received = 0
            self.counters["adjustments"] += 1
        self._clamp()
        return self.cwnd

    def on_trim(self, now, cost, in_flight, last_hop=False):
        """A NACK TRIMMED (or TRIMMED_LASTHOP, ``last_hop``) of a packet counting ``cost``
        bytes. Returns cwnd."""
        cfg = self.cfg
        self.counters["trims"] += 1
        self.ecn_pending = True
        self.ignored += cost
        self._average(cfg.base_rtt)
        self.qa_trigger = True
        if not self._quick_adapt(now, True, True, 0, in_flight):
            if not last_hop or not cfg.trim_keep_q:
                self.cwnd -= cost
            elif now - self.last_decrease > cfg.md_period:
                self.cwnd = (self.cwnd * cfg.trim_keep_q) >> FRAC
                self.last_decrease = now
                self.counters["decreases"] += 1
            self._clamp()
        return self.cwnd

    def on_timeout(self, now, cost):
        """One timeout event (its PSN counted ``cost`` bytes). Returns cwnd."""
        self.counters["timeouts"] += 1
        self.cwnd = max(self.cwnd - cost, self.cfg.cwnd_min)
        return self.cwnd
