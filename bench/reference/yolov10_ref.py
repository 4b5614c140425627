"""YOLOv10 (n / s / m) detector in plain PyTorch, written from the public definitions of ultralytics' modules (Conv,
C2f, Bottleneck, SCDown, SPPF, PSA + Attention, C2fCIB + CIB + RepVGGDW, v10Detect with DFL) and its yolov10{n,s,m}.yaml
graphs as parse_model scales them. The module tree is ultralytics' (`model.<i>.*`), so our checkpoints load by their
production names; BatchNorms are unfused with eps 1e-3 (ultralytics' initialize_weights). forward returns the
one-to-one head's decoded predictions [B, 4 + nc, A] (xyxy boxes in input pixels, sigmoid scores), i.e. what
v10Detect hands to its NMS-free postprocess. No ultralytics import: the oracle for our YOLOv10.

CLI: python3 yolov10_ref.py --model DIR --inputs IN.safetensors --out OUT.safetensors [--dtype float64|float32|bfloat16]
  IN holds `pixel_values` [B, 3, S, S] (already scaled to [0, 1]); OUT gets `preds` [B, 4 + nc, A] (float32 copy).
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

BN_EPS = 1e-3
SCALES = {'n': (0.33, 0.25, 1024), 's': (0.33, 0.50, 1024), 'm': (0.67, 0.75, 768)}


def graph(scale):
    """[from, repeats, module, args] of yolov10{scale}.yaml; the three differ only in where C2fCIB sits and its lk."""
    l8 = [-1, 3, 'C2fCIB', [1024, True, True]] if scale == 's' else [-1, 3, 'C2fCIB', [1024, True]] if scale == 'm' else [-1, 3, 'C2f', [1024, True]]
    l19 = [-1, 3, 'C2fCIB', [512, True]] if scale == 'm' else [-1, 3, 'C2f', [512]]
    l22 = [-1, 3, 'C2fCIB', [1024, True]] if scale == 'm' else [-1, 3, 'C2fCIB', [1024, True, True]]
    return [
        [-1, 1, 'Conv', [64, 3, 2]], [-1, 1, 'Conv', [128, 3, 2]], [-1, 3, 'C2f', [128, True]],
        [-1, 1, 'Conv', [256, 3, 2]], [-1, 6, 'C2f', [256, True]], [-1, 1, 'SCDown', [512, 3, 2]],
        [-1, 6, 'C2f', [512, True]], [-1, 1, 'SCDown', [1024, 3, 2]], l8, [-1, 1, 'SPPF', [1024, 5]], [-1, 1, 'PSA', [1024]],
        [-1, 1, 'Upsample', []], [[-1, 6], 1, 'Concat', []], [-1, 3, 'C2f', [512]],
        [-1, 1, 'Upsample', []], [[-1, 4], 1, 'Concat', []], [-1, 3, 'C2f', [256]],
        [-1, 1, 'Conv', [256, 3, 2]], [[-1, 13], 1, 'Concat', []], l19,
        [-1, 1, 'SCDown', [512, 3, 2]], [[-1, 10], 1, 'Concat', []], l22,
        [[16, 19, 22], 1, 'v10Detect', []],
    ]


class Conv(nn.Module):
    """Conv2d (no bias, 'same' padding) + BatchNorm2d + SiLU (or no activation)."""

    def __init__(self, c1, c2, k=1, s=1, g=1, act=True):
        super().__init__()
        self.conv = nn.Conv2d(c1, c2, k, s, k // 2, groups=g, bias=False)
        self.bn = nn.BatchNorm2d(c2, eps=BN_EPS)
        self.act = act

    def forward(self, x):
        y = self.bn(self.conv(x))
        return F.silu(y) if self.act else y


class Bottleneck(nn.Module):
    def __init__(self, c1, c2, shortcut):
        super().__init__()
        self.cv1 = Conv(c1, c2, 3)
        self.cv2 = Conv(c2, c2, 3)
        self.add = shortcut and c1 == c2

    def forward(self, x):
        y = self.cv2(self.cv1(x))
        return x + y if self.add else y


class RepVGGDW(nn.Module):
    """Depthwise 7x7 and 3x3 branches (BN each, no activation) summed, then SiLU."""

    def __init__(self, c):
        super().__init__()
        self.conv = Conv(c, c, 7, g=c, act=False)
        self.conv1 = Conv(c, c, 3, g=c, act=False)

    def forward(self, x):
        return F.silu(self.conv(x) + self.conv1(x))


class CIB(nn.Module):
    def __init__(self, c1, c2, shortcut, lk):
        super().__init__()
        c_ = c2  # e = 1.0 inside C2fCIB
        self.cv1 = nn.Sequential(
            Conv(c1, c1, 3, g=c1), Conv(c1, 2 * c_, 1),
            RepVGGDW(2 * c_) if lk else Conv(2 * c_, 2 * c_, 3, g=2 * c_),
            Conv(2 * c_, c2, 1), Conv(c2, c2, 3, g=c2))
        self.add = shortcut and c1 == c2

    def forward(self, x):
        y = self.cv1(x)
        return x + y if self.add else y


class C2f(nn.Module):
    """1x1 conv to 2c, split in halves, n blocks chained on the last half, concat of all, 1x1 conv."""

    def __init__(self, c1, c2, n, shortcut=False, cib=False, lk=False):
        super().__init__()
        self.c = int(c2 * 0.5)
        self.cv1 = Conv(c1, 2 * self.c, 1)
        self.cv2 = Conv((2 + n) * self.c, c2, 1)
        self.m = nn.ModuleList(CIB(self.c, self.c, shortcut, lk) if cib else Bottleneck(self.c, self.c, shortcut) for _ in range(n))

    def forward(self, x):
        y = list(self.cv1(x).split((self.c, self.c), 1))
        for m in self.m:
            y.append(m(y[-1]))
        return self.cv2(torch.cat(y, 1))


class SCDown(nn.Module):
    def __init__(self, c1, c2, k, s):
        super().__init__()
        self.cv1 = Conv(c1, c2, 1)
        self.cv2 = Conv(c2, c2, k, s, g=c2, act=False)

    def forward(self, x):
        return self.cv2(self.cv1(x))


class SPPF(nn.Module):
    def __init__(self, c1, c2, k):
        super().__init__()
        c_ = c1 // 2
        self.cv1 = Conv(c1, c_, 1)
        self.cv2 = Conv(c_ * 4, c2, 1)
        self.k = k

    def forward(self, x):
        y = [self.cv1(x)]
        for _ in range(3):
            y.append(F.max_pool2d(y[-1], self.k, 1, self.k // 2))
        return self.cv2(torch.cat(y, 1))


class Attention(nn.Module):
    """Multi-head self-attention over the H x W positions from a 1x1 qkv conv (per head: key_dim q, key_dim k,
    head_dim v), plus a depthwise 3x3 positional conv of v, then a 1x1 projection."""

    def __init__(self, dim, num_heads):
        super().__init__()
        self.h = num_heads
        self.hd = dim // num_heads
        self.kd = int(self.hd * 0.5)
        self.qkv = Conv(dim, dim + 2 * self.kd * num_heads, 1, act=False)
        self.proj = Conv(dim, dim, 1, act=False)
        self.pe = Conv(dim, dim, 3, g=dim, act=False)

    def forward(self, x):
        B, C, H, W = x.shape
        N = H * W
        q, k, v = self.qkv(x).view(B, self.h, 2 * self.kd + self.hd, N).split([self.kd, self.kd, self.hd], dim=2)
        a = ((q.transpose(-2, -1) @ k) * self.kd ** -0.5).softmax(dim=-1)
        y = (v @ a.transpose(-2, -1)).view(B, C, H, W) + self.pe(v.reshape(B, C, H, W))
        return self.proj(y)


class PSA(nn.Module):
    def __init__(self, c1, c2):
        super().__init__()
        self.c = int(c1 * 0.5)
        self.cv1 = Conv(c1, 2 * self.c, 1)
        self.cv2 = Conv(2 * self.c, c1, 1)
        if self.c < 64:
            raise ValueError(f'yolov10_ref: PSA over {self.c} channels has c // 64 = 0 heads (a width_multiple too small for the scale)')
        self.attn = Attention(self.c, self.c // 64)
        self.ffn = nn.Sequential(Conv(self.c, 2 * self.c, 1), Conv(2 * self.c, self.c, 1, act=False))

    def forward(self, x):
        a, b = self.cv1(x).split((self.c, self.c), dim=1)
        b = b + self.attn(b)
        b = b + self.ffn(b)
        return self.cv2(torch.cat((a, b), 1))


class Upsample(nn.Module):
    def forward(self, x):
        return F.interpolate(x, scale_factor=2.0, mode='nearest')


class Concat(nn.Module):
    def forward(self, xs):
        return torch.cat(xs, 1)


class V10Detect(nn.Module):
    """The one-to-one head: per level a box branch (two 3x3 Convs, 1x1 conv to 4 x reg_max) and a light class branch
    (dw3x3 + 1x1 Conv twice, 1x1 conv to nc); DFL expectation over reg_max bins, distances around anchor centres to
    xyxy, times the stride; class logits through a sigmoid."""

    reg_max = 16

    def __init__(self, nc, ch):
        super().__init__()
        self.nc = nc
        c2 = max(16, ch[0] // 4, self.reg_max * 4)
        c3 = max(ch[0], min(nc, 100))
        self.one2one_cv2 = nn.ModuleList(nn.Sequential(Conv(x, c2, 3), Conv(c2, c2, 3), nn.Conv2d(c2, 4 * self.reg_max, 1)) for x in ch)
        self.one2one_cv3 = nn.ModuleList(nn.Sequential(
            nn.Sequential(Conv(x, x, 3, g=x), Conv(x, c3, 1)),
            nn.Sequential(Conv(c3, c3, 3, g=c3), Conv(c3, c3, 1)),
            nn.Conv2d(c3, nc, 1)) for x in ch)

    def forward(self, xs):
        B = xs[0].shape[0]
        box = torch.cat([self.one2one_cv2[i](x).view(B, 4 * self.reg_max, -1) for i, x in enumerate(xs)], 2)
        cls = torch.cat([self.one2one_cv3[i](x).view(B, self.nc, -1) for i, x in enumerate(xs)], 2)
        anchors, strides = [], []
        for x, s in zip(xs, (8, 16, 32)):
            h, w = x.shape[2:]
            # made on the input's device: no host tensor in the forward (torch.compile's CUDA graphs refuse one)
            sy, sx = torch.meshgrid(torch.arange(h, dtype=x.dtype, device=x.device) + 0.5, torch.arange(w, dtype=x.dtype, device=x.device) + 0.5, indexing='ij')
            anchors.append(torch.stack((sx, sy), -1).view(-1, 2))
            strides.append(torch.full((h * w, 1), float(s), dtype=x.dtype, device=x.device))
        anchors = torch.cat(anchors).transpose(0, 1).unsqueeze(0)  # [1, 2, A]
        strides = torch.cat(strides).transpose(0, 1).unsqueeze(0)  # [1, 1, A]
        A = box.shape[2]
        p = box.view(B, 4, self.reg_max, A).softmax(2)
        dist = (p * torch.arange(self.reg_max, dtype=p.dtype, device=p.device).view(1, 1, -1, 1)).sum(2)  # [B, 4, A]
        lt, rb = dist.chunk(2, 1)
        dbox = torch.cat((anchors - lt, anchors + rb), 1) * strides
        return torch.cat((dbox, cls.sigmoid()), 1)


def make_divisible(x, d=8):
    return int(math.ceil(x / d) * d)


class YOLOv10(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        scale = cfg.get('scale', 'n')
        depth, width, max_ch = SCALES[scale]
        depth = cfg.get('depth_multiple', depth)
        width = cfg.get('width_multiple', width)
        max_ch = cfg.get('max_channels', max_ch)
        nc = cfg.get('nc', 80)
        ch, layers, self.froms = [3], [], []
        for f, n, mod, args in graph(scale):
            n = max(round(n * depth), 1) if n > 1 else n
            c1 = ch[f] if isinstance(f, int) else None
            if mod in ('Conv', 'C2f', 'C2fCIB', 'SCDown', 'SPPF', 'PSA'):
                c2 = make_divisible(min(args[0], max_ch) * width, 8)
            if mod == 'Conv':
                m = Conv(c1, c2, args[1], args[2])
            elif mod in ('C2f', 'C2fCIB'):
                shortcut = bool(args[1]) if len(args) > 1 else False
                lk = bool(args[2]) if len(args) > 2 else False
                m = C2f(c1, c2, n, shortcut, cib=mod == 'C2fCIB', lk=lk)
            elif mod == 'SCDown':
                m = SCDown(c1, c2, args[1], args[2])
            elif mod == 'SPPF':
                m = SPPF(c1, c2, args[1])
            elif mod == 'PSA':
                m = PSA(c1, c2)
            elif mod == 'Upsample':
                m, c2 = Upsample(), c1
            elif mod == 'Concat':
                m, c2 = Concat(), sum(ch[j if j < 0 else j + 1] for j in f)
            else:
                m, c2 = V10Detect(nc, [ch[j + 1] for j in f]), None
            layers.append(m)
            self.froms.append(f)
            ch.append(c2)
        self.model = nn.ModuleList(layers)

    def forward(self, x):
        outs = []
        for m, f in zip(self.model, self.froms):
            if f == -1:
                x = m(x)
            else:
                x = m([x if j == -1 else outs[j] for j in f])
            outs.append(x)
        return x


# ultralytics checkpoints also carry the training-only one-to-many head and the DFL's fixed arange conv
IGNORED = ('.cv2.', '.cv3.', '.dfl.')


def load_model(model_dir, dtype):
    with open(os.path.join(model_dir, 'config.json')) as f:
        cfg = json.load(f)
    m = YOLOv10(cfg)
    sd = {k: v.to(torch.float32) for k, v in st_io.load_dir(model_dir).items()}
    head = f'model.{len(m.model) - 1}.'
    sd = {k: v for k, v in sd.items() if not (k.startswith(head) and any(s in k[len(head) - 1:] for s in IGNORED))}
    missing, unexpected = m.load_state_dict(sd, strict=False)
    missing = [k for k in missing if not k.endswith('num_batches_tracked')]
    if missing or unexpected:
        raise RuntimeError(f'yolov10_ref: checkpoint names differ from ultralytics\' tree: missing {missing[:8]}, unexpected {unexpected[:8]}')
    return m.to(dtype).eval()


if __name__ == '__main__':
    st_io.image_model_main(__doc__, load_model, 'preds')
