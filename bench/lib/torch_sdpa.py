"""The attention yardstick every suite uses (issue 28): PyTorch's *default* scaled_dot_product_attention dispatch, and
beside it each SDPA backend forced alone (cuDNN, flash, memory-efficient). The yardstick a kernel is held to is the
fastest of them: forcing one backend (what bench/kernels once did with flash only) can hide a faster default (cuDNN
attention on Hopper)."""
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

BACKENDS = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION}


def time_sdpa(time_ms, fn):
    """fn: a call that runs F.scaled_dot_product_attention (one or several times). Returns
    {"defaultMs": ms, "backendsMs": {name: ms or None}, "backendErrors": {name: why}, "bestMs": ms, "bestBackend": name}
    where a backend that declines the call (shape, dtype, GQA, mask) is None with its reason."""
    out = {"defaultMs": time_ms(fn), "backendsMs": {}, "backendErrors": {}}
    for name, b in BACKENDS.items():
        def forced(b=b):
            with sdpa_kernel([b]):
                return fn()
        try:
            forced()
            torch.cuda.synchronize()
            out["backendsMs"][name] = time_ms(forced)
        except Exception as e:  # noqa: BLE001 -- the backend declined this call: recorded, not fatal
            out["backendsMs"][name] = None
            out["backendErrors"][name] = f"{type(e).__name__}: {(str(e).splitlines() or [''])[0]}"[:160]
    timed = {"default": out["defaultMs"], **{k: v for k, v in out["backendsMs"].items() if v is not None}}
    out["bestBackend"] = min(timed, key=timed.get)
    out["bestMs"] = timed[out["bestBackend"]]
    return out
