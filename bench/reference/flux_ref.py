"""FLUX.1 in plain PyTorch, written from the public definitions of diffusers' FluxTransformer2DModel (its double- and
single-stream blocks, FluxAttention with the Flux attention processor, FluxPosEmbed's 3-axis rotary embedding,
CombinedTimestepGuidanceTextProjEmbeddings, AdaLayerNormZero / ZeroSingle / Continuous) and AutoencoderKL's Decoder
(UNetMidBlock2D with its attention, UpDecoderBlock2D, ResnetBlock2D, Upsample2D). Module trees and parameter names are
diffusers', so our checkpoints (transformer/*.safetensors, vae/*.safetensors) load strictly by name. No diffusers
import: the oracle for our FLUX transformer and VAE decoder.

CLI:
  python3 flux_ref.py transformer --model DIR/transformer --inputs IN --out OUT [--dtype ...] [--num-layers N --num-single-layers M]
    IN: hidden_states [B, S, in_channels], encoder_hidden_states [B, St, joint_attention_dim], pooled_projections
        [B, pooled_projection_dim], timestep [B] (the pipeline's t / 1000, as diffusers' forward takes it),
        guidance [B] (when guidance_embeds), img_ids [S, 3], txt_ids [St, 3]; OUT: sample [B, S, out_channels].
    --num-layers / --num-single-layers keep the first N / M blocks (the GPU suite's few-layer FLUX.1-dev).
  python3 flux_ref.py vae --model DIR/vae --inputs IN --out OUT [--dtype ...]
    IN: latents [N, latent_channels, h, w] (already unscaled: what vae.decode receives); OUT: sample [N, 3, 8h, 8w].
"""
import argparse
import json
import math
import os
import sys

import torch
from torch import nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import st_io  # noqa: E402


# ----------------------------------------------------------------------------------------------- transformer pieces

def timestep_features(t, dim=256, max_period=10000.0):
    """Sinusoidal features as diffusers' Timesteps(256, flip_sin_to_cos=True, downscale_freq_shift=0): [cos | sin]."""
    half = dim // 2
    ft = torch.float64 if t.dtype == torch.float64 else torch.float32  # diffusers: float32; the float64 oracle keeps f64
    freqs = torch.exp(-math.log(max_period) * torch.arange(half, dtype=ft, device=t.device) / half)
    a = t.to(ft)[:, None] * freqs[None, :]
    return torch.cat([torch.cos(a), torch.sin(a)], dim=-1)


class MLPEmbedder(nn.Module):
    """linear_1, SiLU, linear_2 (TimestepEmbedding and PixArtAlphaTextProjection(act_fn='silu') alike)."""

    def __init__(self, cin, dim):
        super().__init__()
        self.linear_1 = nn.Linear(cin, dim)
        self.linear_2 = nn.Linear(dim, dim)

    def forward(self, x):
        return self.linear_2(F.silu(self.linear_1(x)))


class TimeTextEmbed(nn.Module):
    def __init__(self, dim, pooled_dim, guidance):
        super().__init__()
        self.timestep_embedder = MLPEmbedder(256, dim)
        self.guidance_embedder = MLPEmbedder(256, dim) if guidance else None
        self.text_embedder = MLPEmbedder(pooled_dim, dim)

    def forward(self, t, guidance, pooled):
        dt = pooled.dtype
        e = self.timestep_embedder(timestep_features(t).to(dt))
        if self.guidance_embedder is not None:
            e = e + self.guidance_embedder(timestep_features(guidance).to(dt))
        return e + self.text_embedder(pooled)


def rope(ids, axes_dim, theta=10000.0):
    """FluxPosEmbed: per axis, angles pos * theta^(-2i/d) (float64), cos / sin each repeated pairwise; concatenated."""
    cos, sin = [], []
    for i, d in enumerate(axes_dim):
        freqs = 1.0 / (theta ** (torch.arange(0, d, 2, dtype=torch.float64, device=ids.device) / d))
        a = ids[:, i].double()[:, None] * freqs[None, :]
        cos.append(a.cos().repeat_interleave(2, dim=1))
        sin.append(a.sin().repeat_interleave(2, dim=1))
    return torch.cat(cos, -1), torch.cat(sin, -1)  # float64; forward casts to float32 unless the model runs in float64


def apply_rope(x, cos, sin):
    """x [B, H, S, D]: pairs (x0, x1) rotated as complex numbers (diffusers' use_real_unbind_dim=-1)."""
    xr, xi = x.reshape(*x.shape[:-1], -1, 2).unbind(-1)
    rot = torch.stack([-xi, xr], dim=-1).flatten(3)
    ct = cos.dtype  # float32 (diffusers' x.float()), float64 for the float64 oracle
    return (x.to(ct) * cos + rot.to(ct) * sin).to(x.dtype)


class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        var = x.float().pow(2).mean(-1, keepdim=True)
        return (x.float() * torch.rsqrt(var + self.eps)).to(x.dtype) * self.weight


class FluxAttention(nn.Module):
    """Joint attention: image q/k/v (to_q/k/v, RMS-normed q and k per head), for double blocks also the text stream's
    (add_q/k/v_proj, norm_added_q/k) placed first; rotary on the joint sequence; SDPA; split back and projected
    (to_out.0, to_add_out) unless pre_only (single blocks)."""

    def __init__(self, dim, heads, head_dim, pre_only):
        super().__init__()
        self.heads, self.head_dim = heads, head_dim
        self.to_q, self.to_k, self.to_v = nn.Linear(dim, dim), nn.Linear(dim, dim), nn.Linear(dim, dim)
        self.norm_q, self.norm_k = RMSNorm(head_dim), RMSNorm(head_dim)
        self.pre_only = pre_only
        if not pre_only:
            self.to_out = nn.ModuleList([nn.Linear(dim, dim)])
            self.add_q_proj, self.add_k_proj, self.add_v_proj = nn.Linear(dim, dim), nn.Linear(dim, dim), nn.Linear(dim, dim)
            self.norm_added_q, self.norm_added_k = RMSNorm(head_dim), RMSNorm(head_dim)
            self.to_add_out = nn.Linear(dim, dim)

    def heads_of(self, x):
        B, S, _ = x.shape
        return x.view(B, S, self.heads, self.head_dim).transpose(1, 2)

    def forward(self, x, cos, sin, ctx=None):
        q = self.norm_q(self.heads_of(self.to_q(x)))
        k = self.norm_k(self.heads_of(self.to_k(x)))
        v = self.heads_of(self.to_v(x))
        St = 0
        if ctx is not None:
            St = ctx.shape[1]
            q = torch.cat([self.norm_added_q(self.heads_of(self.add_q_proj(ctx))), q], dim=2)
            k = torch.cat([self.norm_added_k(self.heads_of(self.add_k_proj(ctx))), k], dim=2)
            v = torch.cat([self.heads_of(self.add_v_proj(ctx)), v], dim=2)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        a = attention(q, k, v)
        B, H, S, D = a.shape
        a = a.transpose(1, 2).reshape(B, S, H * D)
        if ctx is None:
            return a
        return self.to_out[0](a[:, St:]), self.to_add_out(a[:, :St])


def attention(q, k, v):
    """softmax(q k^T / sqrt(d)) v over [..., S, d]: torch's SDPA where it has one (diffusers' processors call it; in
    bf16 it keeps the scores in fp32), else the plain product (Debian's torch 1.13)."""
    if hasattr(F, 'scaled_dot_product_attention'):
        return F.scaled_dot_product_attention(q, k, v)
    return torch.softmax((q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1]), dim=-1) @ v


def layer_norm(x, eps=1e-6):
    return F.layer_norm(x, (x.shape[-1],), eps=eps)


class AdaNorm(nn.Module):
    """linear(SiLU(emb)) chunked into n modulation vectors (AdaLayerNormZero: 6, ZeroSingle: 3)."""

    def __init__(self, dim, n):
        super().__init__()
        self.linear = nn.Linear(dim, n * dim)
        self.n = n

    def forward(self, emb):
        return self.linear(F.silu(emb)).chunk(self.n, dim=1)


class GELUProj(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.proj = nn.Linear(d, h)

    def forward(self, x):
        return F.gelu(self.proj(x), approximate='tanh')


class FeedForward(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.net = nn.ModuleList([GELUProj(dim, 4 * dim), nn.Dropout(0.0), nn.Linear(4 * dim, dim)])

    def forward(self, x):
        for m in self.net:
            x = m(x)
        return x


def modulate(x, shift, scale):
    return layer_norm(x) * (1 + scale[:, None]) + shift[:, None]


class DoubleBlock(nn.Module):
    def __init__(self, dim, heads, hd):
        super().__init__()
        self.norm1, self.norm1_context = AdaNorm(dim, 6), AdaNorm(dim, 6)
        self.attn = FluxAttention(dim, heads, hd, pre_only=False)
        self.ff, self.ff_context = FeedForward(dim), FeedForward(dim)

    def forward(self, x, ctx, emb, cos, sin):
        sh, sc, g, sh2, sc2, g2 = self.norm1(emb)
        csh, csc, cg, csh2, csc2, cg2 = self.norm1_context(emb)
        a, ca = self.attn(modulate(x, sh, sc), cos, sin, modulate(ctx, csh, csc))
        x = x + g[:, None] * a
        x = x + g2[:, None] * self.ff(modulate(x, sh2, sc2))
        ctx = ctx + cg[:, None] * ca
        ctx = ctx + cg2[:, None] * self.ff_context(modulate(ctx, csh2, csc2))
        if ctx.dtype == torch.float16:
            ctx = ctx.clip(-65504, 65504)
        return ctx, x


class SingleBlock(nn.Module):
    def __init__(self, dim, heads, hd):
        super().__init__()
        self.norm = AdaNorm(dim, 3)
        self.proj_mlp = nn.Linear(dim, 4 * dim)
        self.attn = FluxAttention(dim, heads, hd, pre_only=True)
        self.proj_out = nn.Linear(5 * dim, dim)

    def forward(self, x, emb, cos, sin):
        sh, sc, g = self.norm(emb)
        h = modulate(x, sh, sc)
        y = torch.cat([self.attn(h, cos, sin), F.gelu(self.proj_mlp(h), approximate='tanh')], dim=2)
        x = x + g[:, None] * self.proj_out(y)
        if x.dtype == torch.float16:
            x = x.clip(-65504, 65504)
        return x


class NormOut(nn.Module):
    """AdaLayerNormContinuous: linear(SiLU(emb)) -> (scale, shift) in that order."""

    def __init__(self, dim):
        super().__init__()
        self.linear = nn.Linear(dim, 2 * dim)

    def forward(self, x, emb):
        scale, shift = self.linear(F.silu(emb)).chunk(2, dim=1)
        return layer_norm(x) * (1 + scale[:, None]) + shift[:, None]


class FluxTransformer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        heads, hd = cfg.get('num_attention_heads', 24), cfg.get('attention_head_dim', 128)
        dim = heads * hd
        cin = cfg.get('in_channels', 64)
        p = cfg.get('patch_size', 1)
        cout = cfg.get('out_channels') or cin
        self.axes = cfg.get('axes_dims_rope', [16, 56, 56])
        if sum(self.axes) != hd:
            raise ValueError(f'flux_ref: axes_dims_rope {self.axes} does not sum to attention_head_dim {hd}')
        self.time_text_embed = TimeTextEmbed(dim, cfg.get('pooled_projection_dim', 768), cfg.get('guidance_embeds', False))
        self.context_embedder = nn.Linear(cfg.get('joint_attention_dim', 4096), dim)
        self.x_embedder = nn.Linear(cin, dim)
        self.transformer_blocks = nn.ModuleList(DoubleBlock(dim, heads, hd) for _ in range(cfg.get('num_layers', 19)))
        self.single_transformer_blocks = nn.ModuleList(SingleBlock(dim, heads, hd) for _ in range(cfg.get('num_single_layers', 38)))
        self.norm_out = NormOut(dim)
        self.proj_out = nn.Linear(dim, p * p * cout)

    def forward(self, hidden_states, encoder_hidden_states, pooled_projections, timestep, img_ids, txt_ids, guidance=None):
        dt = hidden_states.dtype
        x = self.x_embedder(hidden_states)
        t = timestep.to(dt) * 1000
        g = guidance.to(dt) * 1000 if guidance is not None else None
        if (g is None) != (self.time_text_embed.guidance_embedder is None):
            raise ValueError('flux_ref: guidance must be given exactly when the config has guidance_embeds')
        emb = self.time_text_embed(t, g, pooled_projections)
        ctx = self.context_embedder(encoder_hidden_states)
        cos, sin = rope(torch.cat([txt_ids, img_ids], dim=0), self.axes)
        if dt != torch.float64:
            cos, sin = cos.float(), sin.float()
        for b in self.transformer_blocks:
            ctx, x = b(x, ctx, emb, cos, sin)
        St = ctx.shape[1]
        h = torch.cat([ctx, x], dim=1)
        for b in self.single_transformer_blocks:
            h = b(h, emb, cos, sin)
        x = h[:, St:]
        return self.proj_out(self.norm_out(x, emb))


# ---------------------------------------------------------------------------------------------------- VAE decoder

class Resnet(nn.Module):
    def __init__(self, cin, cout, groups, eps=1e-6):
        super().__init__()
        self.norm1 = nn.GroupNorm(groups, cin, eps=eps)
        self.conv1 = nn.Conv2d(cin, cout, 3, padding=1)
        self.norm2 = nn.GroupNorm(groups, cout, eps=eps)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1)
        self.conv_shortcut = nn.Conv2d(cin, cout, 1) if cin != cout else None

    def forward(self, x):
        h = self.conv1(F.silu(self.norm1(x)))
        h = self.conv2(F.silu(self.norm2(h)))
        return (self.conv_shortcut(x) if self.conv_shortcut is not None else x) + h


class MidAttention(nn.Module):
    """One head over the H x W positions (head dim = channels), GroupNorm first, residual after."""

    def __init__(self, c, groups):
        super().__init__()
        self.group_norm = nn.GroupNorm(groups, c, eps=1e-6)
        self.to_q, self.to_k, self.to_v = nn.Linear(c, c), nn.Linear(c, c), nn.Linear(c, c)
        self.to_out = nn.ModuleList([nn.Linear(c, c)])

    def forward(self, x):
        B, C, H, W = x.shape
        h = self.group_norm(x).view(B, C, H * W).transpose(1, 2)
        q, k, v = self.to_q(h), self.to_k(h), self.to_v(h)
        a = attention(q, k, v)
        return x + self.to_out[0](a).transpose(1, 2).reshape(B, C, H, W)


class MidBlock(nn.Module):
    def __init__(self, c, groups, attention):
        super().__init__()
        self.resnets = nn.ModuleList([Resnet(c, c, groups), Resnet(c, c, groups)])
        self.attentions = nn.ModuleList([MidAttention(c, groups)]) if attention else None

    def forward(self, x):
        x = self.resnets[0](x)
        if self.attentions is not None:
            x = self.attentions[0](x)
        return self.resnets[1](x)


class Upsampler(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3, padding=1)

    def forward(self, x):
        return self.conv(F.interpolate(x, scale_factor=2.0, mode='nearest'))


class UpBlock(nn.Module):
    def __init__(self, cin, cout, n, groups, upsample):
        super().__init__()
        self.resnets = nn.ModuleList(Resnet(cin if j == 0 else cout, cout, groups) for j in range(n))
        self.upsamplers = nn.ModuleList([Upsampler(cout)]) if upsample else None

    def forward(self, x):
        for r in self.resnets:
            x = r(x)
        return self.upsamplers[0](x) if self.upsamplers is not None else x


class Decoder(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        boc = cfg.get('block_out_channels', [64])
        g = cfg.get('norm_num_groups', 32)
        if cfg.get('act_fn', 'silu') != 'silu':
            raise ValueError('flux_ref: only act_fn silu is supported')
        self.conv_in = nn.Conv2d(cfg.get('latent_channels', 4), boc[-1], 3, padding=1)
        self.mid_block = MidBlock(boc[-1], g, cfg.get('mid_block_add_attention', True))
        rev = list(reversed(boc))
        ups, prev = [], rev[0]
        for i, c in enumerate(rev):
            ups.append(UpBlock(prev, c, cfg.get('layers_per_block', 2) + 1, g, i < len(rev) - 1))
            prev = c
        self.up_blocks = nn.ModuleList(ups)
        self.conv_norm_out = nn.GroupNorm(g, boc[0], eps=1e-6)
        self.conv_out = nn.Conv2d(boc[0], cfg.get('out_channels', 3), 3, padding=1)

    def forward(self, z):
        x = self.mid_block(self.conv_in(z))
        for u in self.up_blocks:
            x = u(x)
        return self.conv_out(F.silu(self.conv_norm_out(x)))


class AutoencoderKLDecoder(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.decoder = Decoder(cfg)
        c = cfg.get('latent_channels', 4)
        self.post_quant_conv = nn.Conv2d(c, c, 1) if cfg.get('use_post_quant_conv', True) else None

    def forward(self, z):
        return self.decoder(self.post_quant_conv(z) if self.post_quant_conv is not None else z)


# --------------------------------------------------------------------------------------------------------- loading

def load_model(part, model_dir, dtype, num_layers=None, num_single_layers=None):
    with open(os.path.join(model_dir, 'config.json')) as f:
        cfg = json.load(f)
    sd = {k: v.to(torch.float32) for k, v in st_io.load_dir(model_dir).items()}
    if part == 'transformer':
        if num_layers is not None:
            cfg['num_layers'] = num_layers
        if num_single_layers is not None:
            cfg['num_single_layers'] = num_single_layers
        m = FluxTransformer(cfg)
        keep = lambda k: not ((k.startswith('transformer_blocks.') and int(k.split('.')[1]) >= cfg.get('num_layers', 19)) or (k.startswith('single_transformer_blocks.') and int(k.split('.')[1]) >= cfg.get('num_single_layers', 38)))
        sd = {k: v for k, v in sd.items() if keep(k)}
    else:
        m = AutoencoderKLDecoder(cfg)
        sd = {k: v for k, v in sd.items() if not (k.startswith('encoder.') or k.startswith('quant_conv.'))}  # the encoding half is unused
    m.load_state_dict(sd, strict=True)
    return m.to(dtype).eval()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('part', choices=['transformer', 'vae'])
    ap.add_argument('--model', required=True)
    ap.add_argument('--inputs', required=True)
    ap.add_argument('--out', required=True)
    ap.add_argument('--dtype', default='float64', choices=['float64', 'float32', 'bfloat16'])
    ap.add_argument('--device', default='cpu')
    ap.add_argument('--num-layers', type=int)
    ap.add_argument('--num-single-layers', type=int)
    a = ap.parse_args()
    dt = getattr(torch, a.dtype)
    m = load_model(a.part, a.model, dt, a.num_layers, a.num_single_layers).to(a.device)
    inp = {k: v.to(a.device) for k, v in st_io.load(a.inputs).items()}
    with torch.no_grad():
        if a.part == 'transformer':
            y = m(inp['hidden_states'].to(dt), inp['encoder_hidden_states'].to(dt), inp['pooled_projections'].to(dt), inp['timestep'],
                  inp['img_ids'], inp['txt_ids'], inp.get('guidance'))
        else:
            y = m(inp['latents'].to(dt))
    st_io.save(a.out, {'sample': y.float().cpu()})


if __name__ == '__main__':
    main()
