"""Candidate for L1/rms_norm (PyTorch, the original FastKernels format): vLLM's RMSNorm.

Expected: PASSED

forward computes in float32 and casts back, as vLLM's native path does: torch.nn.functional.rms_norm where this
torch has it (2.4 and later), else the same math written out.
"""
import torch
import torch.nn.functional as F


def _rms_norm(x, weight, eps):
    if hasattr(F, "rms_norm"):
        return F.rms_norm(x, (x.shape[-1],), weight, eps)
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


class RMSNorm(torch.nn.Module):
    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, x, residual=None):
        if residual is not None:
            x = x + residual
            residual = x
        y = _rms_norm(x.float(), self.weight.float(), self.variance_epsilon).to(x.dtype)
        return y if residual is None else (y, residual)
