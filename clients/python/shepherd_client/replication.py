"""Training setups whose data-parallel replicas legitimately hold different parameters between synchronisations.

Comparing their parameter hashes would report healthy ranks as corrupt (and their nodes cordoned), so the
instrumentation reports no hashes for them. Known: periodic model averaging, torch's ModelAverager
(PeriodicModelAverager, HierarchicalModelAverager), which PostLocalSGDOptimizer takes: between averages each
replica steps on its own gradients.
"""

import functools
from typing import Any, Callable


def watch(torch: Any, on_unreplicated: Callable[[str], None]) -> None:
    """Calls on_unreplicated(reason) when the script creates a model averager."""
    try:
        from torch.distributed.algorithms.model_averaging import averagers
    except ImportError:  # a torch without distributed
        return
    cls = averagers.ModelAverager
    orig_init = cls.__init__

    @functools.wraps(orig_init)
    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        orig_init(self, *args, **kwargs)
        on_unreplicated("periodic model averaging (%s)" % type(self).__name__)

    cls.__init__ = init
