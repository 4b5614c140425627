"""ConvNeXt-V2 image classifier in plain PyTorch, written from the public definition of transformers'
ConvNextV2ForImageClassification (module tree and state_dict names as HF's, so our checkpoints load strictly by name):
patch-embedding conv + channels-first LayerNorm (eps 1e-6), stages of [optional LayerNorm + 2x2/2 conv downsampling]
and blocks (7x7 depthwise conv, LayerNorm eps 1e-6, Linear 4x, GELU, GRN, Linear, residual), global mean pool,
LayerNorm (config layer_norm_eps), classifier. No transformers import: the oracle for our ConvNeXt-V2.

CLI: python3 convnextv2_ref.py --model DIR --inputs IN.safetensors --out OUT.safetensors [--dtype float64|float32|bfloat16]
  IN holds `pixel_values` [B, 3, S, S]; OUT gets `logits` [B, num_labels] (float32 copy of the result).
"""
import json
import math
import os
import sys

import torch
from torch import nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import st_io  # noqa: E402


class ChannelsFirstLayerNorm(nn.Module):
    """LayerNorm over dim 1 of [B, C, H, W] (HF's ConvNextV2LayerNorm, data_format channels_first)."""

    def __init__(self, c, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(c))
        self.bias = nn.Parameter(torch.zeros(c))
        self.eps = eps

    def forward(self, x):
        y = F.layer_norm(x.permute(0, 2, 3, 1), (x.shape[1],), self.weight, self.bias, self.eps)
        return y.permute(0, 3, 1, 2)


class GRN(nn.Module):
    """Global response normalisation over channels-last [B, H, W, C]: L2 over H, W; divided by its mean over C."""

    def __init__(self, c):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(1, 1, 1, c))
        self.bias = nn.Parameter(torch.zeros(1, 1, 1, c))

    def forward(self, x):
        g = torch.sqrt((x * x).sum(dim=(1, 2), keepdim=True))
        n = g / (g.mean(dim=-1, keepdim=True) + 1e-6)
        return self.weight * (x * n) + self.bias + x


class Block(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dwconv = nn.Conv2d(dim, dim, 7, padding=3, groups=dim)
        self.layernorm = nn.LayerNorm(dim, eps=1e-6)
        self.pwconv1 = nn.Linear(dim, 4 * dim)
        self.grn = GRN(4 * dim)
        self.pwconv2 = nn.Linear(4 * dim, dim)

    def forward(self, x):
        h = self.dwconv(x).permute(0, 2, 3, 1)
        h = F.gelu(self.pwconv1(self.layernorm(h)))  # hidden_act "gelu": the erf form
        h = self.pwconv2(self.grn(h)).permute(0, 3, 1, 2)
        return x + h


class Stage(nn.Module):
    def __init__(self, cin, cout, stride, depth):
        super().__init__()
        if cin != cout or stride > 1:
            self.downsampling_layer = nn.Sequential(ChannelsFirstLayerNorm(cin, 1e-6), nn.Conv2d(cin, cout, stride, stride=stride))
        else:
            self.downsampling_layer = None
        self.layers = nn.Sequential(*[Block(cout) for _ in range(depth)])

    def forward(self, x):
        if self.downsampling_layer is not None:
            x = self.downsampling_layer(x)
        return self.layers(x)


class Embeddings(nn.Module):
    def __init__(self, cin, c, patch):
        super().__init__()
        self.patch_embeddings = nn.Conv2d(cin, c, patch, stride=patch)
        self.layernorm = ChannelsFirstLayerNorm(c, 1e-6)

    def forward(self, x):
        return self.layernorm(self.patch_embeddings(x))


class Encoder(nn.Module):
    def __init__(self, hs, depths):
        super().__init__()
        self.stages = nn.ModuleList([Stage(hs[max(i - 1, 0)], hs[i], 1 if i == 0 else 2, depths[i]) for i in range(len(hs))])

    def forward(self, x):
        for s in self.stages:
            x = s(x)
        return x


class Backbone(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        hs = cfg['hidden_sizes']
        self.embeddings = Embeddings(cfg.get('num_channels', 3), hs[0], cfg.get('patch_size', 4))
        self.encoder = Encoder(hs, cfg['depths'])
        self.layernorm = nn.LayerNorm(hs[-1], eps=cfg.get('layer_norm_eps', 1e-12))

    def forward(self, x):
        h = self.encoder(self.embeddings(x))
        return self.layernorm(h.mean(dim=(2, 3)))


class ConvNextV2Classifier(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        if cfg.get('hidden_act', 'gelu') != 'gelu':
            raise ValueError(f"convnextv2_ref: hidden_act {cfg.get('hidden_act')!r} is not supported (only gelu)")
        n = len(cfg['id2label']) if 'id2label' in cfg else cfg.get('num_labels', 2)
        self.convnextv2 = Backbone(cfg)
        self.classifier = nn.Linear(cfg['hidden_sizes'][-1], n)

    def forward(self, pixel_values):
        return self.classifier(self.convnextv2(pixel_values))


def load_model(model_dir, dtype):
    with open(os.path.join(model_dir, 'config.json')) as f:
        cfg = json.load(f)
    m = ConvNextV2Classifier(cfg)
    sd = {k: v.to(torch.float32) for k, v in st_io.load_dir(model_dir).items()}
    m.load_state_dict(sd, strict=True)  # every name ours writes is HF's, and nothing is missing
    return m.to(dtype).eval()


if __name__ == '__main__':
    st_io.image_model_main(__doc__, load_model, 'logits')
