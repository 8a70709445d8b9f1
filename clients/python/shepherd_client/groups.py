"""Names of process groups from their member ranks and the job's TP/PP/DP(/CP) layout. Standard library only.

Rank order (as the daemon places ranks, Megatron's): rank = tp + TP·(cp + CP·(dp + DP·pp)); CP = 1 unless
SHEPHERD_PARALLELISM has a fourth value. A group is named
- "tp", "cp", "dp" or "pp" when its members are exactly one full line along that axis (the others fixed), or
  all ranks of a job whose only axis larger than 1 is that one (a pure data-parallel job's WORLD group is
  "dp");
- "world" for all ranks of a job with several axes;
- "g-<8 hex>" otherwise: a stable name from the sorted member list (the same on every member).
The daemon derives membership from "tp"/"cp"/"dp"/"pp" and rank coordinates, "world" is every rank; a
"g-" name means nothing to it, so the client sends that group's members with its collective reports.
"""

import hashlib
from typing import Iterable, Optional, Tuple

AXES = ("tp", "pp", "dp", "cp")  # the order of SHEPHERD_PARALLELISM's values
LAYOUT_NAMES = AXES + ("world",)  # the names whose members the daemon derives from the layout


def parse_layout(raw: Optional[str], world_size: int) -> Tuple[int, ...]:
    """SHEPHERD_PARALLELISM "TP,PP,DP" or "TP,PP,DP,CP" -> that tuple; (1, 1, world_size) when absent or
    inconsistent."""
    try:
        vals = tuple(int(x) for x in (raw or "").split(","))
        if len(vals) in (3, 4) and min(vals) >= 1 and _product(vals) == world_size:
            return vals
    except ValueError:
        pass
    return 1, 1, max(1, world_size)


def _product(vals: Iterable[int]) -> int:
    out = 1
    for v in vals:
        out *= v
    return out


def _sizes(layout: Tuple[int, ...]) -> Tuple[int, int, int, int]:
    """(TP, PP, DP, CP) of a 3- or 4-value layout."""
    tp_n, pp_n, dp_n = layout[:3]
    return tp_n, pp_n, dp_n, (layout[3] if len(layout) > 3 else 1)


def coords(rank: int, layout: Tuple[int, ...]) -> Tuple[int, int, int, int]:
    """(tp, pp, dp, cp) coordinates of `rank`."""
    tp_n, _, dp_n, cp_n = _sizes(layout)
    return rank % tp_n, rank // (tp_n * cp_n * dp_n), (rank // (tp_n * cp_n)) % dp_n, (rank // tp_n) % cp_n


def group_name(members: Iterable[int], layout: Tuple[int, ...]) -> str:
    ranks = sorted(set(int(m) for m in members))
    sizes = dict(zip(AXES, _sizes(layout)))
    world = _product(sizes.values())
    if ranks == list(range(world)):
        big = [a for a in AXES if sizes[a] > 1]
        if len(big) == 1:
            return big[0]
        if not big:
            return "dp"
        return "world"
    cs = [coords(r, layout) for r in ranks]
    for i, axis in enumerate(AXES):
        others = {tuple(c[j] for j in range(len(AXES)) if j != i) for c in cs}
        along = sorted(c[i] for c in cs)
        if len(others) == 1 and along == list(range(sizes[axis])) and sizes[axis] > 1:
            return axis
    return "g-" + hashlib.sha1(",".join(map(str, ranks)).encode()).hexdigest()[:8]
