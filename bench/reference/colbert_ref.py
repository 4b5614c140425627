"""ColBERTv2's head in plain PyTorch, written from the public definition of colbert-ir's ColBERT model (HF_ColBERT:
`bert` then `linear` Linear(hidden, dim, bias=False); a document's token vectors are the projection with the pad
token and the punctuation skiplist masked to zero, L2-normalised per token; keep_dims=False keeps the unmasked rows),
on any backbone callable (input_ids [B, L], attention_mask [B, L]) -> last_hidden_state [B, L, H]: HF's BertModel on
the GPU host (bench/suites/encoder-parity), encoder_ref.py's plain-torch one in CI. The head's tensor is the
checkpoint's `linear.weight`; the backbone's are `bert.*`.

CLI (our checkpoint folder, plain-torch backbone; the CPU parity test):
  python3 colbert_ref.py --model DIR --inputs IN.jsonl --out OUT.jsonl [--dtype float64] [--skiplist 5,6,7]
    IN: one JSON array of token ids a line; OUT: one line per input, {"index", "tokens", "multi_vector"} (the kept
    tokens' vectors, our `embed --pooling multi-vector` output's keys).
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


class ColBERTv2Head(nn.Module):
    def __init__(self, hidden, dim=128):
        super().__init__()
        self.linear = nn.Linear(hidden, dim, bias=False)

    def forward(self, h, ids, pad_id, skiplist=()):
        """h [B, L, H], ids [B, L] -> token vectors [B, L, dim] (zero rows where masked) and the keep mask [B, L]."""
        keep = ids != pad_id
        for t in skiplist:
            keep &= ids != t
        d = self.linear(h) * keep[:, :, None].to(h.dtype)
        return F.normalize(d, p=2, dim=2), keep


def load_head(tensors, dtype=torch.float64, device='cpu'):
    w = tensors['linear.weight']
    head = ColBERTv2Head(w.shape[1], w.shape[0])
    head.load_state_dict({'linear.weight': w}, strict=True)
    return head.to(device=device, dtype=dtype).eval()


@torch.no_grad()
def doc_vectors(backbone, head, seqs, pad_id, skiplist=(), device='cpu'):
    """Each sequence alone (unpadded): its kept tokens' vectors (ColBERT.doc with keep_dims=False), lists of floats."""
    out = []
    for ids in seqs:
        x = torch.tensor([ids], device=device)
        h = backbone(x, torch.ones_like(x))
        d, keep = head(h.to(head.linear.weight.dtype), x, pad_id, skiplist)
        out.append(d[0][keep[0]].tolist())
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--model', required=True)
    ap.add_argument('--inputs', required=True)
    ap.add_argument('--out', required=True)
    ap.add_argument('--dtype', default='float64', choices=['float64', 'float32'])
    ap.add_argument('--skiplist', default='', help='token ids masked out besides the pad token (punctuation)')
    a = ap.parse_args()
    dt = getattr(torch, a.dtype)
    with open(os.path.join(a.model, 'config.json')) as f:
        pad = json.load(f).get('pad_token_id', 0)
    tensors = st_io.load_dir(a.model)
    backbone = encoder_ref.load_backbone(a.model, dtype=dt, prefix='bert.', tensors=tensors)
    head = load_head(tensors, dtype=dt)
    with open(a.inputs) as f:
        seqs = [json.loads(line) for line in f if line.strip()]
    skip = [int(x) for x in a.skiplist.split(',') if x.strip()]
    with open(a.out, 'w') as f:
        for i, (ids, v) in enumerate(zip(seqs, doc_vectors(backbone, head, seqs, pad, skip))):
            f.write(json.dumps({'index': i, 'tokens': len(ids), 'multi_vector': v}) + '\n')


if __name__ == '__main__':
    main()
