"""What every PyTorch-side bench script records and checks first: the versions it ran with, and a preflight that exits 3
with one clear line when torch (and what else the script needs) or the CUDA device is missing."""
import json
import sys


def versions(modules=()):
    """{python, torch, cuda, gpu, <module>: version | <module>_error} for torch and `modules` (e.g. transformers)."""
    v = {'python': sys.version.split()[0]}
    try:
        import torch
        v.update(torch=torch.__version__, cuda=torch.version.cuda, gpu=torch.cuda.get_device_name(0) if torch.cuda.is_available() else None)
    except Exception as e:  # noqa: BLE001
        v['torch_error'] = str(e)
    for mod in modules:
        try:
            v[mod] = __import__(mod).__version__
        except Exception as e:  # noqa: BLE001
            v[f'{mod}_error'] = str(e)
    return v


def preflight(suite, device='cuda', modules=(), check=None):
    """Exit 3 naming what is missing: torch or `modules`, a CUDA device (device == 'cuda'), or what `check()` returns
    (a message, or None when all is well); else print the versions."""
    def fail(msg):
        print(f'{suite}: PREFLIGHT FAILED: {msg}', file=sys.stderr)
        sys.exit(3)
    try:
        import torch
        for mod in modules:
            __import__(mod)
    except Exception as e:  # noqa: BLE001
        needs = ', '.join(('torch',) + tuple(modules))
        fail(f'{type(e).__name__}: {e} (python {sys.executable} needs {needs}; on the GPU host use /opt/torch/.venv/bin/python3 or set PYTHON)')
    if device == 'cuda' and not torch.cuda.is_available():
        fail(f'torch {torch.__version__} sees no CUDA device')
    msg = check() if check else None
    if msg:
        fail(msg)
    print(f'{suite}: preflight ok: {json.dumps(versions(modules))}')
