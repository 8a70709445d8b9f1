"""The unsent-report buffer and the background thread that posts it.

Contract:
- Reports reach the daemon in the order they were enqueued: one send at a time, and a batch that failed
  transiently goes back to the front of the buffer.
- Nothing here raises into the caller on network trouble. Failures are counted and logged once per
  `log_every` consecutive failures; the buffer is bounded (oldest reports dropped first, but reports that
  must be delivered, MUST_DELIVER, only when nothing else is left to drop).
- A failover between the daemon's replicas is a transient failure like any other: post_reports tries
  every replica, and a batch none accepted goes back to the front and is resent, in order, until one does.
- Delivery is transport.deliver: a POST, or, when the rank's agent relays its reports (SHEPHERD_RELAY_DIR), a
  file in that directory; a full directory is a transient failure like an unreachable daemon.
- Every `interval_s` the thread asks `make_heartbeat()` (called with `lock` held) for a heartbeat, appends
  it and posts everything buffered in one or more POSTs of at most `max_batch` reports. So reports that
  are not urgent ride along with the next heartbeat: one POST per interval in the common case.
- Only the newest unsent heartbeat is kept: an older one describes a state that is already stale.
- `lock` is shared with the client, so a state change and the report describing it are ordered the same
  way with respect to heartbeats.
"""

import collections
import logging
import random
import threading
import time
from typing import Callable, List, Optional

from .transport import PostResult, deliver

# Reports the daemon takes in one POST (a larger batch is refused whole, 422).
MAX_BATCH = 1000

# Kinds the buffer keeps over every other when it is full: a checkpoint report (the recovery point) and the
# end of training. Heartbeats and progress are replaced by newer ones; these are not.
MUST_DELIVER = ("checkpoint", "finished")


def hold_off_s(retry_after_s: float, unit: float) -> float:
    """How long to wait after a 429/503 with Retry-After: the delay times a jitter factor in [1, 1.5) (so
    ranks told the same delay do not all return together), capped at 60 s. `unit` is uniform in [0, 1)."""
    return min(retry_after_s * (1.0 + 0.5 * min(max(unit, 0.0), 1.0)), 60.0)

log = logging.getLogger("shepherd_client")


class Entry:
    """A buffered report. `dropped` may be set (under the lock) to withdraw it before it is sent."""

    __slots__ = ("report", "heartbeat", "dropped", "must")

    def __init__(self, report: dict, heartbeat: bool = False):
        self.report = report
        self.heartbeat = heartbeat
        self.dropped = False
        self.must = not heartbeat and report.get("kind") in MUST_DELIVER


class ReportSender:
    def __init__(self, url: str, *, token: str = "", timeout_s: float = 2.0, interval_s: float = 1.0,
                 max_buffer: int = 10000, max_batch: int = 500,
                 make_heartbeat: Optional[Callable[[], Optional[dict]]] = None,
                 lock: Optional[threading.Lock] = None,
                 post: Callable[..., PostResult] = deliver, log_every: int = 30,
                 envelope: Optional[dict] = None):
        self.url = url
        self._envelope = envelope
        self.lock = lock or threading.Lock()
        self._token = token
        self._timeout_s = timeout_s
        self._interval_s = interval_s
        self._max_buffer = max(1, max_buffer)
        self._max_batch = min(max(1, max_batch), MAX_BATCH)
        self._make_heartbeat = make_heartbeat
        self._post = post
        self._log_every = max(1, log_every)
        self._buf: "collections.deque[Entry]" = collections.deque()
        self._last_heartbeat: Optional[Entry] = None
        self._send_lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._retry_at = 0.0
        self._failures = 0  # consecutive
        self.stats = {"posts": 0, "sent": 0, "failed_posts": 0, "dropped": 0, "rejected": 0}

    # --- called by the client -------------------------------------------------------------------

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="shepherd-heartbeat", daemon=True)
            self._thread.start()

    def enqueue_locked(self, report: dict, urgent: bool = False, heartbeat: bool = False) -> Entry:
        """Append a report. REQUIRES: `self.lock` held. Returns the entry (to withdraw it later)."""
        e = Entry(report, heartbeat)
        if heartbeat:
            if self._last_heartbeat is not None:
                self._last_heartbeat.dropped = True
            self._last_heartbeat = e
        self._buf.append(e)
        self._evict_locked()
        if urgent or len(self._buf) >= self._max_batch:
            self._wake.set()
        return e

    def enqueue(self, report: dict, urgent: bool = False) -> Entry:
        with self.lock:
            return self.enqueue_locked(report, urgent)

    def wake(self) -> None:
        self._wake.set()

    def pending(self) -> int:
        with self.lock:
            return sum(1 for e in self._buf if not e.dropped)

    def flush(self) -> bool:
        """Send everything buffered now, in the caller's thread. True when all of it reached the daemon;
        False when some is left unsent or the daemon refused a batch for good (a 401: dropped)."""
        return self._send_pending()

    def close(self, flush: bool = True) -> None:
        self._stop.set()
        self._wake.set()
        t = self._thread
        if t is not None and t is not threading.current_thread():
            t.join(timeout=self._timeout_s + self._interval_s + 1.0)
        if flush:
            self._send_pending()

    # --- the thread ------------------------------------------------------------------------------

    def _enqueue_heartbeat(self) -> None:
        if self._make_heartbeat is None:
            return
        with self.lock:
            try:
                hb = self._make_heartbeat()
            except Exception:  # noqa: BLE001 - a bug in state formatting must not kill the thread
                log.exception("shepherd: cannot build a heartbeat")
                return
            if hb is not None:
                self.enqueue_locked(hb, heartbeat=True)

    def _run(self) -> None:
        next_heartbeat = time.monotonic()
        while not self._stop.is_set():
            now = time.monotonic()
            if now >= next_heartbeat:
                self._enqueue_heartbeat()
                # Keep a steady cadence, but never try to catch up on missed ticks after a stall.
                next_heartbeat = max(next_heartbeat + self._interval_s, now + self._interval_s / 2)
            if now >= self._retry_at:
                self._send_pending()
            self._wake.wait(max(0.0, next_heartbeat - time.monotonic()))
            self._wake.clear()

    def _take_batch(self) -> List[Entry]:
        with self.lock:
            batch: List[Entry] = []
            while self._buf and len(batch) < self._max_batch:
                e = self._buf.popleft()
                if e is self._last_heartbeat:
                    self._last_heartbeat = None
                if not e.dropped:
                    batch.append(e)
            return batch

    def _send_pending(self) -> bool:
        with self._send_lock:
            refused = False
            while True:
                batch = self._take_batch()
                if not batch:
                    return not refused
                extra = {"envelope": self._envelope} if self._envelope else {}
                res = self._post(self.url, [e.report for e in batch], token=self._token,
                                 timeout_s=self._timeout_s, **extra)
                self.stats["posts"] += 1
                if res.ok:
                    self._on_success(batch, res)
                    continue
                self.stats["failed_posts"] += 1
                self._failures += 1
                if self._failures == 1 or self._failures % self._log_every == 0:
                    log.warning("shepherd: cannot send %d reports to %s (%d consecutive failures, %d dropped "
                                "so far): %s", len(batch), self.url, self._failures, self.stats["dropped"],
                                res.detail)
                if not res.retry:  # the daemon refused this batch for good (4xx): do not resend it
                    self.stats["dropped"] += len(batch)
                    refused = True
                    continue
                self._requeue(batch)
                if res.retry_after_s is not None:
                    self._retry_at = time.monotonic() + hold_off_s(res.retry_after_s, random.random())
                return False

    def _on_success(self, batch: List[Entry], res: PostResult) -> None:
        if self._failures:
            log.info("shepherd: reports reach %s again after %d failures", self.url, self._failures)
        self._failures = 0
        self._retry_at = 0.0
        self.stats["sent"] += len(batch)
        if res.rejected:
            before = self.stats["rejected"]
            self.stats["rejected"] += len(res.rejected)
            if before == 0 or before // 100 != self.stats["rejected"] // 100:
                log.warning("shepherd: the daemon rejected %d reports (%d in all), first: %s",
                            len(res.rejected), self.stats["rejected"], res.rejected[0])

    def _requeue(self, batch: List[Entry]) -> None:
        with self.lock:
            # Heartbeats are not resent: a fresh one describes the present better.
            for e in reversed(batch):
                if not e.heartbeat:
                    self._buf.appendleft(e)
            self._evict_locked()

    def _evict_locked(self) -> None:
        """Bring the buffer back to max_buffer: the oldest entries go first, except MUST_DELIVER ones, which
        go only when nothing else is left (memory stays bounded). REQUIRES: `self.lock` held."""
        excess = len(self._buf) - self._max_buffer
        if excess <= 0:
            return
        kept: "collections.deque[Entry]" = collections.deque()
        while excess > 0 and self._buf:
            old = self._buf.popleft()
            if old.must and not old.dropped:
                kept.append(old)
                continue
            if old is self._last_heartbeat:
                self._last_heartbeat = None
            if not old.dropped:
                self.stats["dropped"] += 1
            excess -= 1
        while excess > 0 and kept:  # nothing but must-deliver reports: the oldest of them go
            kept.popleft()
            self.stats["dropped"] += 1
            excess -= 1
        self._buf.extendleft(reversed(kept))
