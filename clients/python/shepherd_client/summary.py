"""Per-process-group collective progress for the summary report (SHEPHERD_COLLECTIVE_REPORTS=summary, the
default): what one `summary` per heartbeat interval says instead of one report per collective.

Per group it keeps the highest completed seq, and since the previous summary the number of collectives
completed and their summed wait (completion - entry, this process's clock). Open collectives stay in the
client's list; a summary names the oldest open one of each group. Owned by one ShepherdClient and used
under its lock only.

Size (compact JSON as sent, per rank per interval): about 120 bytes of envelope (rank, attempt, time, kind,
step, phase, node) plus about 50 bytes per group, 110 with an open collective; at most MAX_GROUPS groups
(open ones first, then the most recently active), and a named group's `members` at most every
MEMBERS_EVERY_S. A rank of a TP x PP x DP job with a few named groups sends 300-700 bytes however many
collectives its steps run; 1,900 bytes at most (16 groups, all open) between two members refreshes.
"""

from typing import Any, Dict, Iterable, List, Optional, Tuple

MAX_GROUPS = 16  # the daemon refuses a summary with more (health/report.h kMaxSummaryGroups)
MEMBERS_EVERY_S = 30.0
# Groups whose membership the daemon derives from placement: their members are never sent.
PLACED_GROUPS = ("tp", "pp", "dp", "cp", "world")


class _Group:
    __slots__ = ("completed", "count", "wait_s", "members", "members_sent", "active")

    def __init__(self) -> None:
        self.completed = -1
        self.count = 0
        self.wait_s = 0.0
        self.members: Optional[List[int]] = None
        self.members_sent: Optional[float] = None  # monotonic time a summary last carried the members
        self.active = 0  # a counter value: higher is more recent (for choosing groups beyond MAX_GROUPS)


class GroupTable:
    def __init__(self) -> None:
        self._groups: Dict[str, _Group] = {}
        self._tick = 0

    def _get(self, group: str) -> _Group:
        g = self._groups.get(group)
        if g is None:
            g = self._groups[group] = _Group()
        self._tick += 1
        g.active = self._tick
        return g

    def entered(self, group: str, members: Optional[List[int]]) -> None:
        """A collective of `group` began (the group is listed from now on, `completed` -1 until one ends)."""
        g = self._get(group)
        if members is not None and group not in PLACED_GROUPS:
            g.members = members

    def completed(self, group: str, seq: int, wait_s: float) -> None:
        g = self._get(group)
        g.completed = max(g.completed, seq)
        g.count += 1
        g.wait_s += max(0.0, wait_s)

    def pending(self) -> bool:
        """Some collective completed since the last summary."""
        return any(g.count for g in self._groups.values())

    def carry_over(self, groups: Iterable[Dict[str, Any]]) -> None:
        """Counts of a summary that will never be sent (a newer one replaces it while unsent): the next
        summary reports them."""
        for e in groups:
            g = self._groups.get(e.get("group", ""))
            if g is not None:
                g.count += int(e.get("count", 0))
                g.wait_s += float(e.get("wait_s", 0.0))

    def oldest_open(self, open_: Iterable[Any]) -> Dict[str, Any]:
        """group -> its oldest open collective (objects with seq, op, group, since)."""
        out: Dict[str, Any] = {}
        for c in open_:
            o = out.get(c.group)
            if o is None or c.since < o.since:
                out[c.group] = c
        return out

    def _chosen(self, oldest: Dict[str, Any]) -> List[str]:
        """At most MAX_GROUPS names: groups with an open collective (oldest first), then the most recent."""
        names = sorted(oldest, key=lambda n: oldest[n].since)[:MAX_GROUPS]
        if len(names) < MAX_GROUPS:
            rest = sorted((n for n in self._groups if n not in oldest), key=lambda n: -self._groups[n].active)
            names += rest[:MAX_GROUPS - len(names)]
        return names

    def build(self, open_: Iterable[Any], now_mono: float) -> List[Dict[str, Any]]:
        """The summary's `groups`; resets each listed group's count and wait."""
        oldest = self.oldest_open(open_)
        out: List[Dict[str, Any]] = []
        for name in self._chosen(oldest):
            g = self._groups.get(name) or self._get(name)
            e: Dict[str, Any] = {"group": name, "completed": g.completed, "count": g.count,
                                 "wait_s": round(g.wait_s, 6)}
            c = oldest.get(name)
            if c is not None and c.seq > g.completed:
                e["open"] = {"seq": c.seq, "op": c.op, "since": c.since}
            if g.members is not None and (g.members_sent is None or now_mono - g.members_sent >= MEMBERS_EVERY_S):
                e["members"] = g.members
                g.members_sent = now_mono
            g.count, g.wait_s = 0, 0.0
            out.append(e)
        return out

    def page_view(self, open_: Iterable[Any]) -> List[Tuple[str, int, Optional[Tuple[int, str, float]]]]:
        """What the progress page carries for the helper: (group, completed, (seq, op, since) or None)."""
        oldest = self.oldest_open(open_)
        out = []
        for name in self._chosen(oldest):
            g = self._groups[name]
            c = oldest.get(name)
            out.append((name, g.completed, (c.seq, c.op, c.since) if c is not None and c.seq > g.completed
                        else None))
        return out
