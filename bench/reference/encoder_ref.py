"""BERT / XLM-RoBERTa encoders in plain PyTorch, written from the public definition of HF transformers' BertModel and
XLMRobertaModel (post-LayerNorm layers, absolute positions, erf GELU, no pooler), eager attention over one unpadded
sequence at a time. Parameter names are HF's (`embeddings.*`, `encoder.layer.N.*`), so our checkpoints load strictly
by name. The backbone of the embedding-head oracles (bge_m3_ref.py, colbert_ref.py) where transformers is not
installed (CI has Debian's python3-torch only); on the GPU host the heads run on transformers' own models instead.

  backbone = load_backbone(model_dir, dtype=torch.float64, prefix='')   # prefix 'bert.' for ColBERT's checkpoint
  h = backbone(input_ids [1, L], attention_mask [1, L])                   # last_hidden_state [1, L, H]
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


class Embeddings(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.word_embeddings = nn.Embedding(c['vocab_size'], c['hidden_size'])
        self.position_embeddings = nn.Embedding(c['max_position_embeddings'], c['hidden_size'])
        self.token_type_embeddings = nn.Embedding(c.get('type_vocab_size', 2), c['hidden_size'])
        self.LayerNorm = nn.LayerNorm(c['hidden_size'], eps=c.get('layer_norm_eps', 1e-12))
        # RoBERTa's positions start after padding_idx (create_position_ids_from_input_ids of an unpadded row)
        self.position_offset = c.get('pad_token_id', 1) + 1 if c['model_type'] in ('xlm-roberta', 'roberta') else 0

    def forward(self, ids):
        pos = torch.arange(ids.shape[1], device=ids.device)[None, :] + self.position_offset
        x = self.word_embeddings(ids) + self.position_embeddings(pos) + self.token_type_embeddings(torch.zeros_like(ids))
        return self.LayerNorm(x)


class SelfAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        h = c['hidden_size']
        self.heads = c['num_attention_heads']
        self.query, self.key, self.value = nn.Linear(h, h), nn.Linear(h, h), nn.Linear(h, h)

    def forward(self, x, mask):
        b, n, h = x.shape
        d = h // self.heads
        q, k, v = (p(x).view(b, n, self.heads, d).transpose(1, 2) for p in (self.query, self.key, self.value))
        s = q @ k.transpose(-1, -2) / math.sqrt(d)
        s = s.masked_fill(~mask[:, None, None, :].bool(), torch.finfo(s.dtype).min)
        return (s.softmax(-1) @ v).transpose(1, 2).reshape(b, n, h)


class DenseLayerNorm(nn.Module):
    """dense, then LayerNorm(out + residual): BertSelfOutput and BertOutput alike."""

    def __init__(self, cin, c):
        super().__init__()
        self.dense = nn.Linear(cin, c['hidden_size'])
        self.LayerNorm = nn.LayerNorm(c['hidden_size'], eps=c.get('layer_norm_eps', 1e-12))

    def forward(self, x, residual):
        return self.LayerNorm(self.dense(x) + residual)


class Attention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.self = SelfAttention(c)
        self.output = DenseLayerNorm(c['hidden_size'], c)

    def forward(self, x, mask):
        return self.output(self.self(x, mask), x)


class Intermediate(nn.Module):
    def __init__(self, c):
        super().__init__()
        if c.get('hidden_act', 'gelu') != 'gelu':
            raise ValueError(f"encoder_ref: hidden_act {c.get('hidden_act')!r} (only gelu, the erf form, is written)")
        self.dense = nn.Linear(c['hidden_size'], c['intermediate_size'])

    def forward(self, x):
        return F.gelu(self.dense(x))


class Layer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.attention = Attention(c)
        self.intermediate = Intermediate(c)
        self.output = DenseLayerNorm(c['intermediate_size'], c)

    def forward(self, x, mask):
        a = self.attention(x, mask)
        return self.output(self.intermediate(a), a)


class Encoder(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.layer = nn.ModuleList(Layer(c) for _ in range(c['num_hidden_layers']))

    def forward(self, x, mask):
        for layer in self.layer:
            x = layer(x, mask)
        return x


class EncoderModel(nn.Module):
    """BertModel / XLMRobertaModel without the pooler: forward(input_ids, attention_mask) -> last_hidden_state."""

    def __init__(self, c):
        super().__init__()
        self.embeddings = Embeddings(c)
        self.encoder = Encoder(c)

    def forward(self, input_ids, attention_mask):
        return self.encoder(self.embeddings(input_ids), attention_mask)


def backbone_state(tensors, prefix=''):
    """The backbone's tensors of a checkpoint, `prefix` removed; the pooler and HF's buffers left out."""
    out = {}
    for k, v in tensors.items():
        if not k.startswith(prefix):
            continue
        k = k[len(prefix):]
        if k.startswith(('embeddings.', 'encoder.')) and not k.endswith(('position_ids', 'token_type_ids')):
            out[k] = v
    return out


def load_backbone(model_dir, dtype=torch.float64, prefix='', device='cpu', tensors=None):
    """The plain-torch encoder of a model folder (config.json + safetensors), loaded strictly by HF's names."""
    with open(os.path.join(model_dir, 'config.json')) as f:
        c = json.load(f)
    m = EncoderModel(c)
    m.load_state_dict(backbone_state(tensors if tensors is not None else st_io.load_dir(model_dir), prefix), strict=True)
    return m.to(device=device, dtype=dtype).eval()
