"""How the PyTorch twins of the kernel-level suites (kernels, ops) time a call, exactly as the Node side does
(bench/lib/timing.mjs): CUDA events around one call after an L2 flush (zeroing a 2x L2 buffer), after a warm-up,
the median."""
import statistics

import torch


def l2_flush_timer(dev, warmup, iters):
    """time_ms(fn, warmup=..., iters=...): the median ms of `iters` event-timed calls of fn, each after an L2 flush."""
    l2 = torch.cuda.get_device_properties(dev).L2_cache_size or 64 * 2**20
    flush_buf = torch.empty(2 * l2 // 4, dtype=torch.float32, device=dev)

    def time_ms(fn, warmup=warmup, iters=iters):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        for _ in range(warmup):
            fn()
        torch.cuda.synchronize()
        ts = []
        for _ in range(iters):
            flush_buf.zero_()
            e0.record()
            fn()
            e1.record()
            e1.synchronize()
            ts.append(e0.elapsed_time(e1))
        return statistics.median(ts)

    return time_ms
