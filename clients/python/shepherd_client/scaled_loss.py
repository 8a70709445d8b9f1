"""AMP: the loss a GradScaler scaled, for the backward() called on its output.

torch's GradScaler multiplies the loss by a scale that grows 2x every growth_interval steps; reported as it is,
the scaled loss would look like a divergence. patch() wraps GradScaler.scale (torch.amp's, from which the CUDA
one derives in torch >= 2.3, or torch.cuda.amp's) so that scaling a scalar remembers it; unscaled(t) answers
the loss behind t when t is that output. The rank's own thread only."""

import functools
import weakref
from typing import Any, Callable


class ScaledLosses:
    def __init__(self) -> None:
        self._last: Any = None  # (weakref to the scaler's output, the scalar loss it scaled)

    def patch(self, torch: Any) -> None:
        classes = [getattr(getattr(torch, "amp", None), "GradScaler", None),
                   getattr(getattr(torch.cuda, "amp", None), "GradScaler", None)]
        losses = self
        for cls in {c for c in classes if c is not None and "scale" in vars(c)}:
            orig_scale = cls.scale

            @functools.wraps(orig_scale)
            def scale(self: Any, outputs: Any, _orig: Callable[..., Any] = orig_scale) -> Any:
                out = _orig(self, outputs)
                if out is not outputs and isinstance(outputs, torch.Tensor) and outputs.numel() == 1:
                    losses._last = (weakref.ref(out), outputs.detach())
                return out

            cls.scale = scale

    def unscaled(self, t: Any) -> Any:
        """The loss before scaling when `t` is the last scaled output, else `t` itself (detached)."""
        last, self._last = self._last, None
        return last[1] if last is not None and last[0]() is t else t.detach()
