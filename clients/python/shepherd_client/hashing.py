"""A deterministic digest of a model's parameters, for the daemon's cross-replica SDC check.

Replicas that hold identical parameters produce identical digests; any bit flip changes it. The digest
covers, in state_dict order, each entry's name, dtype, shape and raw bytes. torch is imported lazily and
only when a torch object is passed, so the package stays importable without it.
"""

import hashlib
from typing import Any


def _tensor_bytes(t: Any) -> bytes:
    t = t.detach().cpu().contiguous()
    try:
        return t.numpy().tobytes()
    except (TypeError, RuntimeError):
        # numpy has no bfloat16 (and no some other dtypes): reinterpret the same bytes as an integer
        # type of the same width, which is exact.
        import torch

        width = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()]
        return t.view(width).numpy().tobytes()


def _update(h: "hashlib._Hash", name: str, value: Any) -> None:
    h.update(name.encode())
    h.update(b"\0")
    if isinstance(value, (bytes, bytearray, memoryview)):
        h.update(b"bytes\0")
        h.update(bytes(value))
    elif hasattr(value, "detach"):  # a torch tensor
        h.update(("%s%s\0" % (value.dtype, tuple(value.shape))).encode())
        h.update(_tensor_bytes(value))
    else:  # plain Python values (an int step counter in a state dict, ...)
        h.update(repr(value).encode())
    h.update(b"\1")


def param_digest(obj: Any) -> str:
    """sha256 hex of a module (its parameters by name), a mapping name -> tensor/bytes, an iterable of
    tensors, or bytes. A module's buffers are left out: data-parallel replicas share parameters, not
    buffers (BatchNorm's running statistics follow each rank's batches), so hashing them would report
    healthy replicas as corrupt."""
    h = hashlib.sha256()
    if hasattr(obj, "named_parameters") and callable(obj.named_parameters):
        obj = dict(obj.named_parameters())
    elif hasattr(obj, "state_dict") and callable(obj.state_dict):
        obj = obj.state_dict()
    if isinstance(obj, (bytes, bytearray, memoryview)):
        _update(h, "", obj)
    elif hasattr(obj, "items"):
        for name, value in obj.items():
            _update(h, str(name), value)
    else:
        for i, value in enumerate(obj):
            _update(h, str(i), value)
    return h.hexdigest()
