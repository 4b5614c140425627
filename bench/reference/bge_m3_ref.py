"""BGE-M3's three heads in plain PyTorch, written from the public definition of FlagEmbedding's BGE-M3 model (its
dense / sparse / ColBERT embeddings and the inference-side post-processing of lexical weights and ColBERT vectors),
on any backbone callable (input_ids [B, L], attention_mask [B, L]) -> last_hidden_state [B, L, H]: HF's
XLMRobertaModel on the GPU host (bench/suites/encoder-parity), encoder_ref.py's plain-torch one in CI.

  dense      normalize(h[:, 0])                                             (CLS pooling, normalised)
  sparse     relu(sparse_linear(h)) per token -> {token id: its largest weight}, positive weights only, the unused
             (special) tokens dropped: cls, eos, pad, unk of the tokenizer
  colbert    normalize(colbert_linear(h[:, 1:]) * mask[:, 1:]), the rows of the real tokens after CLS (L - 1 of them)

Head tensor names are the production ones (sparse_linear.{weight,bias}, colbert_linear.{weight,bias}), as our loader
expects them in the model folder's safetensors.

CLI (our checkpoint folder, plain-torch backbone; the CPU parity test):
  python3 bge_m3_ref.py --model DIR --inputs IN.jsonl --out OUT.jsonl [--dtype float64] [--unused 0,1,2,3]
    IN: one JSON array of token ids a line (the sequence as tokenised: <s> ... </s>); OUT: one line per input,
    {"index", "tokens", "embedding", "sparse", "multi_vector"} (our `embed` output's keys).
"""
import argparse
import json
import os
import sys

import torch
from torch import nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import encoder_ref  # noqa: E402
import st_io  # noqa: E402

# XLM-R's tokenizer: <s> 0 (cls), <pad> 1, </s> 2 (eos), <unk> 3
XLMR_UNUSED = (0, 1, 2, 3)


class BgeM3Heads(nn.Module):
    def __init__(self, hidden, colbert_dim=None):
        super().__init__()
        self.sparse_linear = nn.Linear(hidden, 1)
        self.colbert_linear = nn.Linear(hidden, colbert_dim or hidden)

    def forward(self, h, mask):
        """h [B, L, H], mask [B, L] -> dense [B, H], token weights [B, L], ColBERT vectors [B, L - 1, C]."""
        dense = F.normalize(h[:, 0], dim=-1)
        weights = torch.relu(self.sparse_linear(h)).squeeze(-1)
        colbert = self.colbert_linear(h[:, 1:]) * mask[:, 1:, None].to(h.dtype)
        return dense, weights, F.normalize(colbert, dim=-1)


def load_heads(tensors, dtype=torch.float64, device='cpu'):
    """The heads of a checkpoint's tensors, strictly by the production names."""
    w = tensors['colbert_linear.weight']
    heads = BgeM3Heads(w.shape[1], w.shape[0])
    heads.load_state_dict({k: v for k, v in tensors.items() if k.startswith(('sparse_linear.', 'colbert_linear.'))}, strict=True)
    return heads.to(device=device, dtype=dtype).eval()


def lexical_weights(weights, ids, unused=XLMR_UNUSED):
    """{str(token id): largest weight} over a sequence's tokens: positive weights, unused tokens dropped."""
    out = {}
    for w, t in zip(weights.tolist(), ids):
        if t not in unused and w > 0 and w > out.get(str(t), 0.0):
            out[str(t)] = w
    return out


@torch.no_grad()
def embed(backbone, heads, seqs, unused=XLMR_UNUSED, device='cpu'):
    """Each sequence alone (unpadded): {"dense", "sparse", "multi_vector"} as lists of floats (float32-rounded or not,
    at the heads' dtype)."""
    out = []
    for ids in seqs:
        x = torch.tensor([ids], device=device)
        mask = torch.ones_like(x)
        h = backbone(x, mask)
        dense, weights, colbert = heads(h.to(next(heads.parameters()).dtype), mask)
        n = int(mask.sum())
        out.append({'dense': dense[0].tolist(), 'sparse': lexical_weights(weights[0], ids, unused), 'multi_vector': colbert[0, :n - 1].tolist()})
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--model', required=True)
    ap.add_argument('--inputs', required=True)
    ap.add_argument('--out', required=True)
    ap.add_argument('--dtype', default='float64', choices=['float64', 'float32'])
    ap.add_argument('--unused', default=','.join(map(str, XLMR_UNUSED)), help='token ids the lexical weights leave out')
    a = ap.parse_args()
    dt = getattr(torch, a.dtype)
    tensors = st_io.load_dir(a.model)
    backbone = encoder_ref.load_backbone(a.model, dtype=dt, tensors=tensors)
    heads = load_heads(tensors, dtype=dt)
    with open(a.inputs) as f:
        seqs = [json.loads(line) for line in f if line.strip()]
    unused = {int(x) for x in a.unused.split(',') if x.strip()}
    rows = embed(backbone, heads, seqs, unused)
    with open(a.out, 'w') as f:
        for i, (ids, r) in enumerate(zip(seqs, rows)):
            f.write(json.dumps({'index': i, 'tokens': len(ids), 'embedding': r['dense'], 'sparse': r['sparse'], 'multi_vector': r['multi_vector']}) + '\n')


if __name__ == '__main__':
    main()
