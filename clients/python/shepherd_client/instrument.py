"""Zero-touch PyTorch instrumentation: `install()` patches torch so that an unmodified training script reports
collectives, steps, parameter hashes and checkpoints to shepherdd, and moves heartbeats to a helper process.

torch is imported here only when install() runs (the reporting part of the package works without it).
Everything patched calls the original and never changes its result; a failure inside the bookkeeping is
logged once and swallowed, never raised into the training loop.

What is seen, and how (docs/integration.md has the user's view):
- Collectives and p2p: torch.distributed.{all_reduce, all_gather, all_gather_into_tensor, reduce_scatter,
  reduce_scatter_tensor, broadcast, reduce, gather, scatter, all_to_all, all_to_all_single, barrier, send,
  recv, isend, irecv}. Each call is one collective (per group name: seq, op, bytes). It is *inside* until its
  work completes: a synchronous call until it returns (for NCCL, which returns once the work is enqueued, the
  call is made asynchronous internally and followed until Work.is_completed()); an asynchronous one until
  the returned Work's wait() returns (not NCCL), is_completed() is true, or its future completes.
- DDP's gradient all-reduces: a communication hook registered at the model's first forward (the same
  averaging all-reduce as PyTorch's default), or, when the script registers its own hook, that hook wrapped;
  each bucket is a collective until its future completes.
- Steps: the optimizer that stepped most often among the last 32 optimizer steps defines steps (a post-step
  wrapper on the instance; PyTorch 1.13 has no global step hooks): a GAN's critic, the main optimizer beside
  one stepping every few iterations, a later phase's optimizer. A step inside another optimizer's step
  (ZeroRedundancyOptimizer's local optimizer) is not one. Step numbers continue from SHEPHERD_RESUME_STEP.
  The loss is the sum of the scalars backward() was called on during the step (several losses, gradient
  accumulation; AMP's `scaler.scale(loss).backward()`: the loss before scaling), the grad norm
  the last value clip_grad_norm_ returned during the step, the learning rate the largest "lr" of the
  optimizer's parameter groups (read after its step, before a scheduler's). An iteration that does not step
  (AMP or the script skipping a non-finite step) is seen at the next zero_grad(): two in a row whose loss is
  non-finite report that loss for the step in progress, once (one skipped overflow is normal AMP training;
  a loss that stays NaN while every step is skipped is a fault the daemon would otherwise never see).
- Parameter hashes: every SHEPHERD_SDC_EVERY steps, of the modules wrapped in DDP (replicated), or of the
  optimizer's parameters when the job is purely data parallel and there is no DDP module; none once the
  script averages models periodically (replication.py: replicas differ between averages).
- Checkpoints: torch.save to a path (or a file object with a name) under SHEPHERD_CHECKPOINT_DIR of an object
  that may hold training state (checkpoint_files.holds_training_state: not a file of RNG states). A save to
  a temporary-looking name (".tmp", "tmp-", "~", a leading ".") is reported when it is renamed into place
  (os.replace / os.rename); any other is fsynced (a file object: flushed, and fsynced through its descriptor)
  and reported when torch.save returns. A temporary-looking directory on the way (a checkpoint written into
  "tmp-step_10/" and renamed into place) or a ".partial", ".part", ".incomplete" suffix is temporary too.
  The step is the steps counted when the save runs on the training thread, else the saved dict's. In a
  purely data-parallel job the report says scope "replicated" (one rank's file holds the whole state), unless
  the file's name marks it as the rank's own ("rank_1.pt"). torch.load of SHEPHERD_RESUME_CHECKPOINT runs in
  phase checkpoint_load.
- Evaluation: model.eval() on a DDP module (or the module it wraps; not a deep copy such as an EMA's) switches
  the phase to eval until model.train() or the next training step.
- init_process_group without a timeout gets SHEPHERD_PG_TIMEOUT_S (set by the agent above the hang timeout).
"""

import collections
import dataclasses
import functools
import math
import types
import inspect
import logging
import os
import sys
import threading
import time
from typing import Any, Callable, Deque, Dict, List, Optional

from . import checkpoint_files, faults, lineage, replication
from .client import ShepherdClient
from .config import config_from_env
from .groups import LAYOUT_NAMES, group_name, parse_layout
from .scaled_loss import ScaledLosses

log = logging.getLogger("shepherd_client")

COLLECTIVES = ("all_reduce", "all_gather", "all_gather_into_tensor", "reduce_scatter", "reduce_scatter_tensor",
               "broadcast", "reduce", "gather", "scatter", "all_to_all", "all_to_all_single", "barrier")
P2P = ("send", "recv", "isend", "irecv")
_ASYNC_P2P = ("isend", "irecv")

_installed: Optional["Instrumentation"] = None
_install_lock = threading.Lock()


def _tensor_bytes(x: Any) -> int:
    if x is None:
        return 0
    if isinstance(x, (list, tuple)):
        return sum(_tensor_bytes(t) for t in x)
    try:
        return int(x.numel()) * int(x.element_size())
    except AttributeError:
        return 0


def learning_rate(optimizer: Any) -> Optional[float]:
    """The largest finite "lr" >= 0 over the optimizer's parameter groups (a float or a tensor), or None."""
    best = None
    for g in getattr(optimizer, "param_groups", None) or []:
        try:
            lr = g.get("lr") if isinstance(g, dict) else None
            v = float(lr.item() if hasattr(lr, "item") else lr)
        except (TypeError, ValueError):
            continue
        if v == v and 0 <= v < float("inf") and (best is None or v > best):
            best = v
    return best


class _TrackedWork:
    """Wraps a torch Work: the collective stays open until the work completes (see module doc)."""

    def __init__(self, work: Any, done: Callable[[], None], wait_completes: bool):
        self._work = work
        self._done = done
        self._wait_completes = wait_completes
        try:
            fut = work.get_future()
            fut.add_done_callback(lambda _f: done())
        except Exception:  # noqa: BLE001 - some backends/ops have no future
            pass

    def wait(self, *args: Any, **kwargs: Any) -> Any:
        out = self._work.wait(*args, **kwargs)
        if self._wait_completes or self._work.is_completed():
            self._done()
        return out

    def is_completed(self) -> bool:
        out = self._work.is_completed()
        if out:
            self._done()
        return out

    def get_future(self) -> Any:
        return self._work.get_future()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._work, name)


class Instrumentation:
    def __init__(self, client: ShepherdClient, torch: Any):
        self.client = client
        self.torch = torch
        self.dist = torch.distributed
        env = os.environ
        self.layout = parse_layout(env.get("SHEPHERD_PARALLELISM"), client.world_size)
        self.replicated_job = self.layout[0] == 1 and self.layout[1] == 1
        self.sdc_every = _env_int("SHEPHERD_SDC_EVERY", 0)
        self.ckpt_dir = os.path.abspath(env["SHEPHERD_CHECKPOINT_DIR"]) if env.get("SHEPHERD_CHECKPOINT_DIR") else None
        self.resume = client.resume_checkpoint
        self.step = _env_int("SHEPHERD_RESUME_STEP", 0)  # last completed step
        self.step_start = time.monotonic()
        self.loss: Any = None
        self.grad_norm: Any = None
        self.scaled = ScaledLosses()
        self.nonfinite_skips = 0  # iterations in a row that did not step, with a non-finite loss
        self.nonfinite_reported = 0  # the step a skipped non-finite loss was last reported for
        self.optimizer_id: Optional[int] = None
        self.recent_steppers: Deque[int] = collections.deque(maxlen=32)  # ids of the last optimizers to step
        self.step_thread: Optional[int] = None  # the thread the training steps run on
        self.step_depth = 0  # optimizer steps in progress (one inside another's: not the training step)
        self.unreplicated: Optional[str] = None  # why replicas legitimately differ: no parameter hashes
        self.ddp_modules: List[Any] = []
        self.pending_saves: Dict[str, int] = {}  # temporary path -> step
        self.originals: Dict[str, Any] = {}
        self.names: Dict[Any, str] = {}
        self.members: Dict[str, List[int]] = {}  # a name the daemon cannot place ("g-...") -> its global ranks
        self.nccl_open: List[Any] = []  # (work, done) to poll for NCCL completion
        self.logged_errors = set()
        self.faults = faults.from_env(client)

    # --- helpers ------------------------------------------------------------------------------------

    def _safe(self, what: str, fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except Exception:  # noqa: BLE001 - bookkeeping must never break training
            if what not in self.logged_errors:
                self.logged_errors.add(what)
                log.exception("shepherd: instrumentation of %s failed (reported once)", what)
            return None

    def group_of(self, pg: Any) -> str:
        """The name of process group `pg` (None: WORLD); a name outside LAYOUT_NAMES gets its members, ascending
        global ranks, in self.members. Raises when torch cannot tell the members (the collective goes
        unobserved)."""
        dist = self.dist
        key = pg if pg is not None else "WORLD"
        name = self.names.get(key)
        if name is not None:
            return name
        if pg is None or pg is dist.group.WORLD:
            members = list(range(self.client.world_size))
        else:
            try:
                members = dist.get_process_group_ranks(pg)
            except Exception:  # noqa: BLE001 - older torch
                members = list(dist.distributed_c10d._pg_group_ranks[pg].keys())
        name = group_name(members, self.layout)
        if name not in LAYOUT_NAMES:
            self.members[name] = sorted(int(m) for m in members)
        self.names[key] = name
        return name

    def collective_begin(self, op: str, pg: Any, data: Any) -> Any:
        """client.collective_begin for an op on `pg` over `data`, with the members of a group the daemon cannot
        place from its name alone."""
        name = self.group_of(pg)
        return self.client.collective_begin(op, name, _tensor_bytes(data), members=self.members.get(name))

    def backend_of(self, pg: Any) -> str:
        try:
            return str(self.dist.get_backend(pg)).lower()
        except Exception:  # noqa: BLE001
            return ""

    # --- collectives --------------------------------------------------------------------------------

    def wrap_collective(self, op: str, orig: Callable[..., Any]) -> Callable[..., Any]:
        sig = inspect.signature(orig)
        client = self.client
        is_p2p = op in P2P

        @functools.wraps(orig)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            try:
                bound = sig.bind(*args, **kwargs)
            except TypeError:
                return orig(*args, **kwargs)  # let torch raise its own error
            a = bound.arguments
            pg = a.get("group")
            async_op = op in _ASYNC_P2P or bool(a.get("async_op", False))
            # The first argument given (never `x or y` on a tensor: a multi-element tensor has no truth value,
            # and the error left every such collective unobserved).
            data = next((a[k] for k in ("tensor", "input_tensor", "input", "tensor_list", "input_tensor_list")
                         if a.get(k) is not None), None)
            token = self._safe("collective begin", lambda: self.collective_begin(op, pg, data))
            if token is None:
                return orig(*args, **kwargs)
            done = functools.partial(client.collective_end, token)
            nccl = not is_p2p and "nccl" in self.backend_of(pg)
            try:
                if nccl and not async_op and "async_op" in sig.parameters:
                    # NCCL returns once the work is enqueued: follow the work until it really completes.
                    bound.arguments["async_op"] = True
                    work = orig(*bound.args, **bound.kwargs)
                    if work is None:
                        done()
                        return None
                    work.wait()  # stream-ordered, as the synchronous call would have done
                    self.watch_nccl(work, done)
                    return None
                out = orig(*args, **kwargs)
            except BaseException:
                done()
                raise
            if async_op and out is not None and hasattr(out, "wait"):
                if nccl:
                    self.watch_nccl(out, done)
                return _TrackedWork(out, done, wait_completes=not nccl)
            done()
            return out

        wrapper._shepherd_original = orig  # type: ignore[attr-defined]
        return wrapper

    def watch_nccl(self, work: Any, done: Callable[[], None]) -> None:
        """NCCL work completes on the GPU: poll is_completed() from a thread until it does."""
        with _install_lock:
            self.nccl_open.append((work, done))
            if len(self.nccl_open) == 1:
                threading.Thread(target=self._poll_nccl, name="shepherd-nccl-poll", daemon=True).start()

    def _poll_nccl(self) -> None:
        while True:
            with _install_lock:
                still = []
                for work, done in self.nccl_open:
                    try:
                        finished = work.is_completed()
                    except Exception:  # noqa: BLE001 - an aborted communicator
                        finished = True
                    if finished:
                        done()
                    else:
                        still.append((work, done))
                self.nccl_open = still
                if not still:
                    return
            time.sleep(0.005)

    # --- DDP ----------------------------------------------------------------------------------------

    def tracked_hook(self, hook: Callable[..., Any], pg_of: Callable[[Any], Any]) -> Callable[..., Any]:
        client = self.client

        # No annotations: DDP's _check_comm_hook accepts only none or dist.GradBucket / Future[Tensor].
        def shepherd_tracked_hook(state, bucket):  # type: ignore[no-untyped-def]
            buf = bucket.buffer()
            token = self._safe("ddp hook", lambda: self.collective_begin("allreduce", pg_of(state), buf))
            try:
                fut = hook(state, bucket)
            except BaseException:
                if token is not None:
                    client.collective_end(token)
                raise
            if token is not None:
                fut.add_done_callback(lambda _f: client.collective_end(token))
            return fut

        return shepherd_tracked_hook

    def patch_ddp(self) -> None:
        DDP = self.torch.nn.parallel.DistributedDataParallel
        inst = self
        orig_init, orig_register, orig_forward = DDP.__init__, DDP.register_comm_hook, DDP.forward
        all_reduce = self.originals.get("all_reduce", self.dist.all_reduce)
        dist = self.dist

        def default_allreduce(pg: Any, bucket: Any) -> Any:
            # PyTorch's default_hooks.allreduce_hook, with the unpatched all_reduce.
            group = pg if pg is not None else dist.group.WORLD
            tensor = bucket.buffer()
            tensor.div_(group.size())
            return all_reduce(tensor, group=group, async_op=True).get_future().then(lambda f: f.value()[0])

        @functools.wraps(orig_init)
        def init(self: Any, *args: Any, **kwargs: Any) -> None:
            orig_init(self, *args, **kwargs)
            self._shepherd_hooked = False
            inst.ddp_modules.append(self.module)

        @functools.wraps(orig_register)
        def register_comm_hook(self: Any, state: Any, hook: Callable[..., Any]) -> None:
            self._shepherd_hooked = True
            pg = self.process_group
            orig_register(self, state, inst.tracked_hook(hook, lambda _s: pg))

        @functools.wraps(orig_forward)
        def forward(self: Any, *args: Any, **kwargs: Any) -> Any:
            if not getattr(self, "_shepherd_hooked", True):
                self._shepherd_hooked = True
                inst._safe("ddp hook registration", lambda: orig_register(
                    self, self.process_group, inst.tracked_hook(default_allreduce, lambda s: s)))
            return orig_forward(self, *args, **kwargs)

        DDP.__init__, DDP.register_comm_hook, DDP.forward = init, register_comm_hook, forward

    def patch_train_eval(self) -> None:
        """model.eval() / model.train() on a DDP module (or the module it wraps) switch the phase to eval /
        train: an evaluation pause is announced, not read as a hang."""
        Module = self.torch.nn.Module
        DDP = self.torch.nn.parallel.DistributedDataParallel if self.dist.is_available() else None
        orig_train = Module.train
        inst = self

        @functools.wraps(orig_train)
        def train(self: Any, mode: bool = True) -> Any:
            out = orig_train(self, mode)
            # The script's own DDP model (or the module inside it), not a deep copy such as an EMA's
            # AveragedModel(ddp), whose eval() left the whole run in phase eval (hangs found 10x late).
            if any(m is self or (DDP is not None and isinstance(self, DDP) and getattr(self, "module", None) is m)
                   for m in inst.ddp_modules):
                inst._safe("phase", lambda: inst.client.set_phase("train" if mode else "eval"))
            return out

        Module.train = train

    # --- steps, loss, grad norm, hashes -------------------------------------------------------------

    def on_step(self, optimizer: Any) -> None:
        # The training step is the optimizer that steps most often lately: a GAN's critic stepping 5x per
        # generator step, the main optimizer beside a head's stepping every 4th iteration, or the optimizer
        # of a later phase (a linear probe, then full fine-tuning), whichever stepped first.
        self.recent_steppers.append(id(optimizer))
        if self.optimizer_id is None or (id(optimizer) != self.optimizer_id and self.recent_steppers.count(
                id(optimizer)) > self.recent_steppers.count(self.optimizer_id)):
            self.optimizer_id = id(optimizer)
        if id(optimizer) != self.optimizer_id:
            return
        self.step_thread = threading.get_ident()
        if self.client.phase == "eval":  # the model left in eval mode while it trains: not an evaluation
            self.client.set_phase("train")
        self.step += 1
        now = time.monotonic()
        self.faults.after_step(self.step, self)
        self.client.step(self.step, loss=self.loss, grad_norm=self.grad_norm, step_time_s=now - self.step_start,
                         lr=learning_rate(optimizer))
        self.loss = self.grad_norm = None
        self.nonfinite_skips = 0
        if self.sdc_every > 0 and self.step % self.sdc_every == 0:
            target = self.hash_target(optimizer)
            if target is not None:
                self.client.param_hash(self.step, target)
        self.client.set_step(self.step + 1)
        self.step_start = time.monotonic()

    def on_zero_grad(self) -> None:
        """A loss still pending at zero_grad(): its iteration did not step. Read only then (one sync)."""
        loss, self.loss = self.loss, None
        if loss is None:
            return
        value = float(loss)
        if math.isfinite(value):
            self.nonfinite_skips = 0
            return
        self.nonfinite_skips += 1
        if self.nonfinite_skips >= 2 and self.nonfinite_reported != self.step + 1:
            self.nonfinite_reported = self.step + 1
            self.client.step(self.step + 1, loss=value)

    def not_replicated(self, reason: str) -> None:
        if not self.unreplicated:
            log.warning("shepherd: %s: data-parallel replicas differ between averages; no parameter hashes "
                        "(SDC checks) are reported", reason)
        self.unreplicated = reason

    def hash_target(self, optimizer: Any) -> Any:
        if self.unreplicated:
            return None
        if self.ddp_modules:
            # Parameters only (param_digest of a module): DDP keeps those identical across replicas, not
            # its buffers (BatchNorm's running statistics follow each rank's own batches).
            if len(self.ddp_modules) == 1:
                return self.ddp_modules[0]
            out = {}
            for i, m in enumerate(self.ddp_modules):
                for k, v in m.named_parameters():
                    out["%d.%s" % (i, k)] = v
            return out
        if self.replicated_job:
            return [p for g in optimizer.param_groups for p in g["params"]]
        return None

    def patch_optimizer(self) -> None:
        Optimizer = self.torch.optim.Optimizer
        orig_init = Optimizer.__init__
        inst = self

        @functools.wraps(orig_init)
        def init(self: Any, *args: Any, **kwargs: Any) -> None:
            orig_init(self, *args, **kwargs)
            step = self.step

            @functools.wraps(step)
            def stepped(opt: Any, *a: Any, **k: Any) -> Any:
                # The outermost step is the training step: ZeroRedundancyOptimizer steps its local optimizer
                # on its own shard, then syncs parameters; hashing after the inner step found a healthy job
                # corrupt.
                inst.step_depth += 1
                try:
                    out = step(*a, **k)
                finally:
                    inst.step_depth -= 1
                if inst.step_depth == 0:
                    inst._safe("optimizer step", lambda: inst.on_step(opt))
                return out

            # A bound method, as `opt.step` is without us: LR schedulers wrap it through its __self__ and
            # __func__ (torch.optim.lr_scheduler's with_counter), which a plain function lacks.
            self.step = types.MethodType(stepped, self)

        Optimizer.__init__ = init
        for cls in (Optimizer, self.torch.nn.Module):  # opt.zero_grad() or model.zero_grad()
            orig_zero = cls.zero_grad

            @functools.wraps(orig_zero)
            def zero_grad(self: Any, *a: Any, _orig: Callable[..., Any] = orig_zero, **k: Any) -> Any:
                inst._safe("zero_grad", inst.on_zero_grad)
                return _orig(self, *a, **k)

            cls.zero_grad = zero_grad

    def patch_backward_and_clip(self) -> None:
        torch = self.torch
        orig_backward = torch.Tensor.backward
        inst = self

        @functools.wraps(orig_backward)
        def backward(self: Any, *args: Any, **kwargs: Any) -> Any:
            if self.numel() == 1:  # the step's loss: every scalar backward() ran on (multi-task, accumulation)
                x = inst.scaled.unscaled(self)
                inst.loss = x if inst.loss is None else inst.loss + x
            return orig_backward(self, *args, **kwargs)

        torch.Tensor.backward = backward
        clip_mod = torch.nn.utils.clip_grad
        orig_clip = clip_mod.clip_grad_norm_

        @functools.wraps(orig_clip)
        def clip(*args: Any, **kwargs: Any) -> Any:
            out = orig_clip(*args, **kwargs)
            inst.grad_norm = out.detach() if hasattr(out, "detach") else out
            return out

        clip_mod.clip_grad_norm_ = clip
        torch.nn.utils.clip_grad_norm_ = clip

    # --- checkpoints --------------------------------------------------------------------------------

    def in_ckpt_dir(self, path: str) -> bool:
        if not self.ckpt_dir:
            return False
        p = os.path.abspath(path)
        return p == self.ckpt_dir or p.startswith(self.ckpt_dir + os.sep)

    def report_checkpoint(self, path: str, step: int) -> None:
        whole = self.replicated_job and not checkpoint_files.names_rank(path, self.client.rank, self.client.world_size)
        self.client.checkpoint_saved(step, os.path.abspath(path), replicated=whole)

    def patch_save_load(self) -> None:
        checkpoint_files.patch_save_load(self)

    # --- process group ------------------------------------------------------------------------------

    def patch_init_process_group(self) -> None:
        dist = self.dist
        orig = dist.init_process_group
        timeout_s = os.environ.get("SHEPHERD_PG_TIMEOUT_S")

        @functools.wraps(orig)
        def init_process_group(*args: Any, **kwargs: Any) -> Any:
            if timeout_s and "timeout" not in kwargs:
                import datetime

                try:
                    kwargs["timeout"] = datetime.timedelta(seconds=float(timeout_s))
                except ValueError:
                    pass
            return orig(*args, **kwargs)

        dist.init_process_group = init_process_group
        dist.distributed_c10d.init_process_group = init_process_group

    # --- install ------------------------------------------------------------------------------------

    def install(self) -> None:
        dist = self.dist
        if dist.is_available():
            c10d = dist.distributed_c10d
            for op in COLLECTIVES + P2P:
                orig = getattr(dist, op, None)
                if orig is None:
                    continue
                self.originals[op] = orig
                wrapped = self.wrap_collective(op, orig)
                setattr(dist, op, wrapped)
                if getattr(c10d, op, None) is orig:
                    setattr(c10d, op, wrapped)
            self.patch_init_process_group()
            self.patch_ddp()
            replication.watch(self.torch, self.not_replicated)
        self.patch_train_eval()
        self.patch_optimizer()
        self.patch_backward_and_clip()
        self.scaled.patch(self.torch)
        self.patch_save_load()
        self.client.set_step(self.step + 1)


def _env_int(key: str, default: int) -> int:
    try:
        return int(os.environ.get(key, "") or default)
    except ValueError:
        return default


def _disabled_copy(client: Optional[ShepherdClient]) -> ShepherdClient:
    """A disabled client with the same identity (rank, job, ...) as `client` (default: the environment's)."""
    cfg = dataclasses.replace(client.config if client is not None else config_from_env(), url=None)
    return ShepherdClient(cfg)


def install(client: Optional[ShepherdClient] = None, *, helper: bool = True) -> ShepherdClient:
    """Instrument torch in this process (once; later calls return the same client) and return the client.

    With SHEPHERD_URL unset the client is disabled and nothing is patched, so a script that calls install()
    runs unchanged outside Shepherd. helper=True moves heartbeats to a helper process (GIL-independent
    liveness).

    Only the rank's own process is instrumented. In a child process of an instrumented one (lineage.py:
    spawned or forked multiprocessing children such as DataLoader workers, which run a script's top level
    again, or a subprocess calling install()) it patches nothing, starts no helper and returns a disabled
    client, whatever `client` is given. The process that does instrument itself marks its children so
    (lineage.claim) before it starts the helper."""
    global _installed
    if lineage.inherited_from_rank():
        return _disabled_copy(client)  # a forked child also inherits _installed: the rank's, not its own
    with _install_lock:
        if _installed is not None:
            return _installed.client
        client = client or ShepherdClient.from_env()
        if not client.enabled:
            return client
        if client.config.resume_refused:
            # The script reads the variables itself: it starts fresh rather than load a checkpoint whose
            # files another attempt wrote (docs/integration.md, "What a script must do to resume").
            sys.stderr.write("shepherd: not resuming from %s: %s; starting from step 0\n" % (
                os.environ.get("SHEPHERD_RESUME_CHECKPOINT", ""), client.config.resume_refused))
            os.environ["SHEPHERD_RESUME_CHECKPOINT"] = ""
            os.environ["SHEPHERD_RESUME_STEP"] = "0"
        lineage.claim()
        if helper:
            client.start_helper()
        import torch  # lazily: the reporting part of the package does not need it

        inst = Instrumentation(client, torch)
        inst.install()
        _installed = inst
        return client
