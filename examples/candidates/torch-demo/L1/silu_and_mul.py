"""Candidate for L1/silu_and_mul (PyTorch): SwiGLU with the halves swapped.

Expected: INCORRECT_NUMERICAL

silu(up) * gate instead of silu(gate) * up: the shapes and dtypes are right, the numbers are not.
"""
import torch
import torch.nn.functional as F


class SiluAndMul(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        d = x.shape[-1] // 2
        return F.silu(x[..., d:]) * x[..., :d]
