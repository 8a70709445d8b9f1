"""Client configuration read from the environment a node agent gives each rank.

See docs/agent-protocol.md for the variables. Parsing never raises: a malformed value falls back to its
default and is logged, so a typo in a launcher cannot stop a training job from starting.
"""

import dataclasses
import json
import logging
import os
from typing import Any, Dict, Mapping, Optional, Tuple

from .transport import split_urls

log = logging.getLogger("shepherd_client")

DEFAULT_HEARTBEAT_INTERVAL_S = 1.0
DEFAULT_TIMEOUT_S = 2.0
# "summary" (default): one summary per heartbeat interval says each process group's progress; the others
# send per-collective reports, for debugging.
COLLECTIVE_REPORT_MODES = ("summary", "all", "completed", "none")
DEFAULT_COLLECTIVE_REPORTS = "summary"


@dataclasses.dataclass
class ClientConfig:
    url: Optional[str] = None  # "url1,url2,..." (the daemon's replicas); None: disabled (no daemon)
    job: str = ""
    attempt: int = 1
    rank: int = 0
    world_size: int = 1
    coords: Optional[Tuple[int, ...]] = None  # (tp, pp, dp), or (tp, pp, dp, cp) with context parallelism
    # The node the rank runs on as its launcher names it (SLURMD_NODENAME under srun, NODE_NAME); sent as
    # every report's `node`, so that Shepherd blames the node the rank really ran on. "" when unknown.
    node: str = ""
    # The checkpoint to resume from, once its markers agree with the attempt that completed it (else None).
    resume_checkpoint: Optional[str] = None
    # Why SHEPHERD_RESUME_CHECKPOINT was refused (client.checkpoint_refusal), or "".
    resume_refused: str = ""
    token: str = ""
    heartbeat_interval_s: float = DEFAULT_HEARTBEAT_INTERVAL_S
    timeout_s: float = DEFAULT_TIMEOUT_S
    # "summary" (default): the heartbeat is a summary of every process group's collectives (client.py);
    # "all": started and completed reports; "completed": only completed (the heartbeat's `collective`
    # field carries the open one); "none": heartbeats alone describe collectives.
    collective_reports: str = DEFAULT_COLLECTIVE_REPORTS
    max_buffer: int = 10000  # unsent reports kept; the oldest are dropped beyond this
    max_batch: int = 500  # reports per POST (the daemon takes at most 1000)
    # A rank started by a user's srun without SHEPHERD_JOB: its reports bind to the Shepherd job whose
    # external_id is SLURM_JOB_ID (POST /v1/external/slurm/{id}/reports), which the first report creates
    # when none has it, named SLURM_JOB_NAME, world_size ranks, with `policy` (SHEPHERD_POLICY, a JSON
    # object) when given.
    slurm_job_id: str = ""
    slurm_job_name: str = ""
    policy: Optional[Dict[str, Any]] = None

    @property
    def enabled(self) -> bool:
        return bool(self.url)

    @property
    def bound_by_slurm(self) -> bool:
        return not self.job and bool(self.slurm_job_id)

    def envelope(self) -> Optional[Dict[str, Any]]:
        """What a report POST carries besides its reports: the Slurm job's size and name (to create the job
        on the first report), or None when the rank reports to a job it was given."""
        if not self.bound_by_slurm:
            return None
        slurm: Dict[str, Any] = {"ntasks": self.world_size}
        if self.slurm_job_name:
            slurm["job_name"] = self.slurm_job_name
        if self.policy is not None:
            slurm["policy"] = self.policy
        return {"slurm": slurm}


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


def _policy(env: Mapping[str, str]) -> Optional[Dict[str, Any]]:
    raw = env.get("SHEPHERD_POLICY", "").strip()
    if not raw:
        return None
    try:
        v = json.loads(raw)
        if isinstance(v, dict):
            return v
    except ValueError:
        pass
    log.warning("shepherd: ignoring SHEPHERD_POLICY=%r (expected a JSON object)", raw)
    return None


def _given(env: Mapping[str, str], key: str) -> bool:
    return bool(env.get(key, "").strip())


def config_from_env(environ: Optional[Mapping[str, str]] = None) -> ClientConfig:
    """Shepherd's variables (the agents and shepherd-slurm-rank set them); a rank started by a plain `srun`
    falls back to Slurm's: rank = SLURM_PROCID, world size = SLURM_NTASKS, attempt = SLURM_RESTART_COUNT + 1,
    and without SHEPHERD_JOB binds to its job by SLURM_JOB_ID."""
    env = os.environ if environ is None else environ
    if _given(env, "SHEPHERD_ATTEMPT") or not _given(env, "SLURM_RESTART_COUNT"):
        attempt = _int(env, "SHEPHERD_ATTEMPT", 1)
    else:
        attempt = _int(env, "SLURM_RESTART_COUNT", 0) + 1
    # One URL, or every replica's, comma-separated (transport.split_urls): normalized, empty: disabled.
    url = ",".join(split_urls(env.get("SHEPHERD_URL", ""))) or None
    mode = env.get("SHEPHERD_COLLECTIVE_REPORTS", "").strip().lower() or DEFAULT_COLLECTIVE_REPORTS
    if mode not in COLLECTIVE_REPORT_MODES:
        log.warning("shepherd: ignoring SHEPHERD_COLLECTIVE_REPORTS=%r", mode)
        mode = DEFAULT_COLLECTIVE_REPORTS
    resume, refused = _verified_resume(env)
    return ClientConfig(
        url=url,
        job=env.get("SHEPHERD_JOB", "").strip(),
        attempt=attempt,
        rank=_int(env, "RANK" if _given(env, "RANK") or not _given(env, "SLURM_PROCID") else "SLURM_PROCID", 0),
        world_size=_int(env, "WORLD_SIZE" if _given(env, "WORLD_SIZE") or not _given(env, "SLURM_NTASKS")
                        else "SLURM_NTASKS", 1, minimum=1),
        node=(env.get("SLURMD_NODENAME", "").strip() or env.get("NODE_NAME", "").strip()),
        coords=parse_coords(env.get("SHEPHERD_RANK_COORDS")),
        resume_checkpoint=resume,
        resume_refused=refused,
        token=env.get("SHEPHERD_TOKEN", "").strip(),
        heartbeat_interval_s=_float(env, "SHEPHERD_HEARTBEAT_INTERVAL", DEFAULT_HEARTBEAT_INTERVAL_S),
        timeout_s=_float(env, "SHEPHERD_HTTP_TIMEOUT", DEFAULT_TIMEOUT_S),
        collective_reports=mode,
        slurm_job_id=env.get("SLURM_JOB_ID", "").strip(),
        slurm_job_name=env.get("SLURM_JOB_NAME", "").strip(),
        policy=_policy(env),
    )


def _verified_resume(env: Mapping[str, str]) -> Tuple[Optional[str], str]:
    """SHEPHERD_RESUME_CHECKPOINT and "", or None and why it is refused: a checkpoint whose files come from
    another attempt than the one that completed it (an old attempt's rank still writing into the directory)
    is never resumed from."""
    path = env.get("SHEPHERD_RESUME_CHECKPOINT", "").strip()
    if not path:
        return None, ""
    from .client import checkpoint_refusal  # client imports this module

    attempt = _int(env, "SHEPHERD_RESUME_ATTEMPT", 0) if _given(env, "SHEPHERD_RESUME_ATTEMPT") else 0
    step = _int(env, "SHEPHERD_RESUME_STEP", 0) if _given(env, "SHEPHERD_RESUME_STEP") else None
    why = checkpoint_refusal(path, env.get("SHEPHERD_JOB", "").strip(), attempt or None, step)
    if why:
        log.error("shepherd: not resuming from %s: %s", path, why)
        return None, why
    return path, ""

