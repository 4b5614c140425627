"""Candidate for L1/relu (PyTorch): raises in forward.

Expected: RUNTIME_ERROR

The error comes back naming this file and line (relu.py:17, an IndexError), and the rest of the run goes on.
"""
import torch


class ReLU(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, input):
        # the last dim's size as an index: one past the end
        last = input.shape[-1]
        return input.clamp_min(0)[..., last]
