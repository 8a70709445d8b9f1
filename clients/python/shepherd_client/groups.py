"""Names of process groups from their member ranks and the job's TP/PP/DP layout. Standard library only.

Rank order (as the daemon places ranks): rank = tp + TP·(dp + DP·pp). A group is named
- "tp", "pp" or "dp" when its members are exactly one full line along that axis (the others fixed), or all
  ranks of a job whose only axis larger than 1 is that one (a pure data-parallel job's WORLD group is "dp");
- "world" for all ranks of a job with several axes;
- "g-<8 hex>" otherwise: a stable name from the sorted member list (the same on every member).
The daemon derives membership from "tp"/"pp"/"dp" and rank coordinates; other names are opaque to it.
"""

import hashlib
from typing import Iterable, Optional, Tuple

AXES = ("tp", "pp", "dp")


def parse_layout(raw: Optional[str], world_size: int) -> Tuple[int, int, int]:
    """SHEPHERD_PARALLELISM "TP,PP,DP" -> (TP, PP, DP); (1, 1, world_size) when absent or inconsistent."""
    try:
        tp, pp, dp = (int(x) for x in (raw or "").split(","))
        if tp >= 1 and pp >= 1 and dp >= 1 and tp * pp * dp == world_size:
            return tp, pp, dp
    except ValueError:
        pass
    return 1, 1, max(1, world_size)


def coords(rank: int, layout: Tuple[int, int, int]) -> Tuple[int, int, int]:
    """(tp, pp, dp) coordinates of `rank`."""
    tp_n, _, dp_n = layout
    return rank % tp_n, rank // (tp_n * dp_n), (rank // tp_n) % dp_n


def group_name(members: Iterable[int], layout: Tuple[int, int, int]) -> str:
    ranks = sorted(set(int(m) for m in members))
    sizes = dict(zip(AXES, layout))
    world = layout[0] * layout[1] * layout[2]
    if ranks == list(range(world)):
        big = [a for a in AXES if sizes[a] > 1]
        if len(big) == 1:
            return big[0]
        if not big:
            return "dp"
        return "world"
    cs = [coords(r, layout) for r in ranks]
    for i, axis in enumerate(AXES):
        others = {tuple(c[j] for j in range(3) if j != i) for c in cs}
        along = sorted(c[i] for c in cs)
        if len(others) == 1 and along == list(range(sizes[axis])) and sizes[axis] > 1:
            return axis
    return "g-" + hashlib.sha1(",".join(map(str, ranks)).encode()).hexdigest()[:8]
