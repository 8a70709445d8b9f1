"""Shepherd rank client: heartbeats, step metrics, collectives, parameter hashes and checkpoints from a
training rank to shepherdd (`POST /v1/jobs/{job}/reports`). Standard library only.

    from shepherd_client import ShepherdClient
    client = ShepherdClient.from_env()          # disabled (no-op) when SHEPHERD_URL is unset
    for step in range(start, steps):
        client.set_step(step)
        with client.collective("allreduce", group="dp"):
            loss.backward(); opt.step()
        client.step(step, loss=loss.item(), grad_norm=gn, step_time_s=dt)
        if step % 10 == 0:
            client.param_hash(step, model)
    client.close()

Zero-code and one-line modes (PyTorch, imported lazily): `python3 -m shepherd_client.run script.py args`
or `client = shepherd_client.install()` at the top of a script (instrument.py, docs/integration.md).

See client.py for the contract (threading, batching, failure handling).
"""

from .client import PHASES, ShepherdClient, encode_metric
from .config import ClientConfig, config_from_env, parse_coords
from .hashing import param_digest

__all__ = ["ShepherdClient", "ClientConfig", "config_from_env", "parse_coords", "encode_metric",
           "param_digest", "PHASES", "from_env", "install"]


def from_env(**kwargs):
    """Shorthand for ShepherdClient.from_env()."""
    return ShepherdClient.from_env(**kwargs)


def install(client=None, **kwargs):
    """Instrument PyTorch in this process and return the client (instrument.install); in a child process of
    an instrumented rank, patch nothing and return a disabled client."""
    from .instrument import install as _install

    return _install(client, **kwargs)
