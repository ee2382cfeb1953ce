"""When DistributedOptimizer's params may be read: the param sync of stage 1 and the gathers and
releases of ZeRO-3, driven by what the model's forward actually reads.

Every param is a view of the engine's param buffer. After step() a bucket's updated values may
still be in flight (stage 1: its All-Gather overlaps the next forward), and under ZeRO-3 a rank
keeps only its shard of each bucket between uses. So, during the model's forward (entered by a
forward pre-hook on the model, left by its forward hook), a torch function mode sees every torch
call and the tensors it is given: the first read of a bucket waits for its sync (ZeRO-3: gathers
it), whatever module the read comes from (nn.MultiheadAttention reads out_proj.weight without
calling out_proj; a tied head reads the embedding's weight). The reads of the first forward are
recorded (per grad mode and training flag); later forwards prefetch the next bucket in that order
when a bucket is first read, and under ZeRO-3 release a bucket right after the call that last read
it. A module's own forward pre-hook also makes its params readable (a submodule called outside the
model's forward).

Backward under ZeRO-3: saved-tensor hooks tag the params (and their views) autograd saves; a
bucket is gathered again when backward first unpacks one of its params (the bucket read before it
in the forward is prefetched), and released once every param of it has its gradient.

Every DP rank runs the same model code, so every rank reads, gathers and releases the same buckets
in the same order, as the engine's collectives need.
"""
import bisect

import torch
from torch.overrides import TorchFunctionMode

_TAG = "canzona-param"


class _Mode(TorchFunctionMode):
    def __init__(self, access):
        super().__init__()
        self._access = access

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        access = self._access
        if access.idle:  # stage 1, every bucket waited for: nothing left to watch
            return func(*args, **kwargs)
        buckets = access.buckets_read(args, kwargs)
        if buckets:
            access.before_read(buckets)
        out = func(*args, **kwargs)
        access.after_call(buckets)
        return out


class ParamAccess:
    """engine: the native DistributedEngine; params: the managed params; indices: each one's
    index in the engine's model (its bucket numbers span the dense and the expert engine)."""

    def __init__(self, engine, params, indices):
        self._engine = engine
        self.zero3 = engine.zero_stage == 3
        self._ranges = [(a, a + n) for a, n in engine.params_ranges]
        self.bucket_of = [engine.bucket_of(i) for i in indices]
        spans = sorted((p.data_ptr(), p.data_ptr() + p.numel() * p.element_size(), b)
                       for p, b in zip(params, self.bucket_of))
        self._starts = [s for s, _, _ in spans]
        self._spans = spans
        self._params_in = {}
        for b in self.bucket_of:
            self._params_in[b] = self._params_in.get(b, 0) + 1
        self._accumulated = dict.fromkeys(self._params_in, 0)
        self.pending = False  # stage 1: a param sync is in flight
        self.idle = False  # stage 1: every bucket is final for the rest of this forward
        self.pinned = 0  # > 0: inside gathered(), nothing is released
        self._live = set()  # ZeRO-3: buckets gathered now (stage 1: waited since the step)
        self._records = {}  # (grad enabled, training) -> (first-read order, last read call)
        self._forward = None  # the forward in progress: its key, calls, reads
        self._saved_hooks = None
        self._backward_order = []  # the first-read order of the last forward with grad
        self._mode = _Mode(self)

    # Which buckets a call reads ----------------------------------------------------------

    def _bucket_at(self, address):
        if not any(a <= address < e for a, e in self._ranges):
            return None
        k = bisect.bisect_right(self._starts, address) - 1
        if k < 0:
            return None
        start, end, bucket = self._spans[k]
        return bucket if address < end else None

    def _bucket_of_tensor(self, t):
        if type(t) is not torch.Tensor and not isinstance(t, torch.nn.Parameter):
            return None
        if t.layout != torch.strided or t.device.type != "cpu" or t.numel() == 0:
            return None
        try:
            return self._bucket_at(t.data_ptr())
        except RuntimeError:  # a tensor without storage (a functorch wrapper)
            return None

    def buckets_read(self, args, kwargs):
        found = None
        for group in (args, kwargs.values()):
            for a in group:
                if isinstance(a, torch.Tensor):
                    b = self._bucket_of_tensor(a)
                    if b is not None:
                        found = found or []
                        found.append(b)
                elif isinstance(a, (list, tuple)):
                    for x in a:
                        if isinstance(x, torch.Tensor):
                            b = self._bucket_of_tensor(x)
                            if b is not None:
                                found = found or []
                                found.append(b)
        return found

    # Forward --------------------------------------------------------------------------------

    def needed(self):
        return self.zero3 or self.pending

    def begin_forward(self, training):
        if self._forward is not None or not self.needed():
            return
        key = (torch.is_grad_enabled(), bool(training))
        record = self._records.get(key)
        final = max(record[1].values()) if record is not None and record[1] else -1
        self._forward = {"key": key, "calls": 0, "order": [], "last": {}, "record": record,
                         "seen": set(), "final": final}
        self.idle = False
        self._mode.__enter__()
        if self.zero3 and key[0]:
            self._saved_hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, self._unpack)
            self._saved_hooks.__enter__()

    def end_forward(self, failed=False):
        f = self._forward
        if f is None:
            return
        self._forward = None
        self.idle = False
        if self._saved_hooks is not None:
            hooks, self._saved_hooks = self._saved_hooks, None
            hooks.__exit__(None, None, None)
        self._mode.__exit__(None, None, None)
        if f["record"] is None and not failed:
            self._records[f["key"]] = (f["order"], f["last"])
        if self.zero3:
            # Backward gathers what it needs; it starts with the bucket read last: keep that one.
            keep = set()
            if f["key"][0] and f["last"]:
                keep.add(max(f["last"].items(), key=lambda kv: kv[1])[0])
                self._backward_order = self._records[f["key"]][0]
            for b in sorted(self._live - keep):
                self.release(b)
        elif self.pending and len(self._live) == len(self._params_in):
            self.pending = False

    def before_read(self, buckets):
        f = self._forward
        for b in buckets:
            if b not in self._live:
                self.make_readable(b)
            if f is not None and b not in f["seen"]:
                f["seen"].add(b)
                f["order"].append(b)
                record = f["record"]
                if self.zero3 and record is not None:
                    order = record[0]
                    k = len(f["order"])
                    if k < len(order) and order[k - 1] == b:
                        self._engine.prefetch_params(order[k])

    def after_call(self, buckets):
        f = self._forward
        if f is None:
            return
        call = f["calls"]
        f["calls"] = call + 1
        if not buckets:
            return
        for b in buckets:
            f["last"][b] = call
        record = f["record"]
        if self.zero3 and record is not None and f["key"][0]:
            last = record[1]
            for b in set(buckets):
                if last.get(b) == call and call != f["final"] and b in self._live:
                    self.release(b)

    def make_readable(self, b):
        """Waits for bucket b's param sync (ZeRO-3: gathers it)."""
        self._engine.wait_param_sync(b)
        self._live.add(b)
        # Stage 1 once every bucket is final: later calls of this forward need no look (the
        # first-read order is recorded only for ZeRO-3's prefetch).
        self.idle = not self.zero3 and len(self._live) == len(self._params_in)

    def release(self, b):
        if self.pinned:  # inside DistributedOptimizer.gathered(): every bucket stays
            return
        if self.zero3 and b in self._live:
            self._engine.release_params(b)
        self._live.discard(b)

    def ensure(self, buckets):
        for b in buckets:
            if b not in self._live and (self.zero3 or self.pending):
                self.make_readable(b)

    # Backward (ZeRO-3) -------------------------------------------------------------------------

    def _pack(self, t):
        b = self._bucket_of_tensor(t) if isinstance(t, torch.Tensor) else None
        return (_TAG, b, t) if b is not None else t

    def _unpack(self, packed):
        if isinstance(packed, tuple) and len(packed) == 3 and packed[0] is _TAG:
            b = packed[1]
            if b not in self._live:
                self.make_readable(b)
                self._prefetch_before(b)
            return packed[2]
        return packed

    def _prefetch_before(self, b):
        """Prefetches the bucket the forward read before b (backward runs the other way)."""
        order = self._backward_order
        if b in order:
            k = order.index(b)
            if k > 0:
                self._engine.prefetch_params(order[k - 1])

    def accumulated(self, i):
        """Param i got its gradient in this backward (ZeRO-3: a bucket whose every param has it is
        not read again until the next forward)."""
        if not self.zero3:
            return
        b = self.bucket_of[i]
        self._accumulated[b] += 1
        if self._accumulated[b] >= self._params_in[b]:
            self._accumulated[b] = 0
            self.release(b)

    # Steps ------------------------------------------------------------------------------------

    def after_step(self):
        """step() posted the param sync (stage 1) or left every bucket released (ZeRO-3)."""
        self._live.clear()
        self.pending = not self.zero3
        for b in self._accumulated:
            self._accumulated[b] = 0

    def gather_all(self):
        for b in sorted(self._params_in):
            if b not in self._live:
                self.make_readable(b)

    def release_all(self):
        for b in sorted(self._live):
            self.release(b)

    def forget(self):
        """The engine released every bucket itself (Engine::finish under ZeRO-3)."""
        self._live.clear()
