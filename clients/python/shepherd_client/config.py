"""Client configuration read from the environment a node agent gives each rank.

See docs/agent-protocol.md for the variables. Parsing never raises: a malformed value falls back to its
default and is logged, so a typo in a launcher cannot stop a training job from starting.
"""

import dataclasses
import logging
import os
from typing import Mapping, Optional, Tuple

log = logging.getLogger("shepherd_client")

DEFAULT_HEARTBEAT_INTERVAL_S = 1.0
DEFAULT_TIMEOUT_S = 2.0
COLLECTIVE_REPORT_MODES = ("all", "completed", "none")


@dataclasses.dataclass
class ClientConfig:
    url: Optional[str] = None  # None: the client is disabled (no daemon)
    job: str = ""
    attempt: int = 1
    rank: int = 0
    world_size: int = 1
    coords: Optional[Tuple[int, ...]] = None  # (tp, pp, dp), or (tp, pp, dp, cp) with context parallelism
    # The node the rank runs on as its launcher names it (SLURMD_NODENAME under srun, NODE_NAME); sent as
    # every report's `node`, so that Shepherd blames the node the rank really ran on. "" when unknown.
    node: str = ""
    resume_checkpoint: Optional[str] = None
    token: str = ""
    heartbeat_interval_s: float = DEFAULT_HEARTBEAT_INTERVAL_S
    timeout_s: float = DEFAULT_TIMEOUT_S
    # "all": started and completed reports; "completed": only completed (the heartbeat's `collective`
    # field carries the open one); "none": heartbeats alone describe collectives.
    collective_reports: str = "all"
    max_buffer: int = 10000  # unsent reports kept; the oldest are dropped beyond this
    max_batch: int = 500  # reports per POST

    @property
    def enabled(self) -> bool:
        return bool(self.url)


def _int(env: Mapping[str, str], key: str, default: int, minimum: int = 0) -> int:
    raw = env.get(key, "").strip()
    if not raw:
        return default
    try:
        v = int(raw)
        if v >= minimum:
            return v
    except ValueError:
        pass
    log.warning("shepherd: ignoring %s=%r (expected an integer >= %d)", key, raw, minimum)
    return default


def _float(env: Mapping[str, str], key: str, default: float) -> float:
    raw = env.get(key, "").strip()
    if not raw:
        return default
    try:
        v = float(raw)
        if v > 0 and v < float("inf"):
            return v
    except ValueError:
        pass
    log.warning("shepherd: ignoring %s=%r (expected a positive number)", key, raw)
    return default


def parse_coords(raw: Optional[str]) -> Optional[Tuple[int, ...]]:
    """"tp,pp,dp" -> (tp, pp, dp), "tp,pp,dp,cp" (context parallel) -> (tp, pp, dp, cp); None when absent or
    malformed."""
    if not raw or not raw.strip():
        return None
    parts = raw.split(",")
    try:
        vals = tuple(int(p) for p in parts)
    except ValueError:
        vals = ()
    if len(vals) not in (3, 4) or min(vals) < 0:
        log.warning("shepherd: ignoring SHEPHERD_RANK_COORDS=%r (expected \"tp,pp,dp[,cp]\")", raw)
        return None
    return vals  # type: ignore[return-value]


def _given(env: Mapping[str, str], key: str) -> bool:
    return bool(env.get(key, "").strip())


def config_from_env(environ: Optional[Mapping[str, str]] = None) -> ClientConfig:
    """Shepherd's variables (the agents and shepherd-slurm-rank set them); a rank started by a plain `srun`
    falls back to Slurm's: rank = SLURM_PROCID, world size = SLURM_NTASKS, attempt = SLURM_RESTART_COUNT + 1."""
    env = os.environ if environ is None else environ
    if _given(env, "SHEPHERD_ATTEMPT") or not _given(env, "SLURM_RESTART_COUNT"):
        attempt = _int(env, "SHEPHERD_ATTEMPT", 1)
    else:
        attempt = _int(env, "SLURM_RESTART_COUNT", 0) + 1
    url = env.get("SHEPHERD_URL", "").strip().rstrip("/") or None
    mode = env.get("SHEPHERD_COLLECTIVE_REPORTS", "all").strip().lower() or "all"
    if mode not in COLLECTIVE_REPORT_MODES:
        log.warning("shepherd: ignoring SHEPHERD_COLLECTIVE_REPORTS=%r", mode)
        mode = "all"
    return ClientConfig(
        url=url,
        job=env.get("SHEPHERD_JOB", "").strip(),
        attempt=attempt,
        rank=_int(env, "RANK" if _given(env, "RANK") or not _given(env, "SLURM_PROCID") else "SLURM_PROCID", 0),
        world_size=_int(env, "WORLD_SIZE" if _given(env, "WORLD_SIZE") or not _given(env, "SLURM_NTASKS")
                        else "SLURM_NTASKS", 1, minimum=1),
        node=(env.get("SLURMD_NODENAME", "").strip() or env.get("NODE_NAME", "").strip()),
        coords=parse_coords(env.get("SHEPHERD_RANK_COORDS")),
        resume_checkpoint=env.get("SHEPHERD_RESUME_CHECKPOINT", "").strip() or None,
        token=env.get("SHEPHERD_TOKEN", "").strip(),
        heartbeat_interval_s=_float(env, "SHEPHERD_HEARTBEAT_INTERVAL", DEFAULT_HEARTBEAT_INTERVAL_S),
        timeout_s=_float(env, "SHEPHERD_HTTP_TIMEOUT", DEFAULT_TIMEOUT_S),
        collective_reports=mode,
    )
