"""Minimal safetensors reader / writer on torch alone (the GPU host and Debian's python3-torch have no `safetensors`
package): an 8-byte little-endian header length, a JSON header {name: {dtype, shape, data_offsets}}, then the bytes."""
import json
import struct

import torch

_DT = {
    'F64': torch.float64, 'F32': torch.float32, 'F16': torch.float16, 'BF16': torch.bfloat16,
    'I64': torch.int64, 'I32': torch.int32, 'I16': torch.int16, 'I8': torch.int8, 'U8': torch.uint8, 'BOOL': torch.bool,
}
_NAME = {v: k for k, v in _DT.items()}


def load(path):
    """{name: tensor} of a .safetensors file (CPU tensors in the file's dtypes)."""
    with open(path, 'rb') as f:
        blob = f.read()
    (n,) = struct.unpack('<Q', blob[:8])
    header = json.loads(blob[8:8 + n].decode('utf8'))
    base = 8 + n
    out = {}
    for name, e in header.items():
        if name == '__metadata__':
            continue
        a, b = e['data_offsets']
        dt = _DT[e['dtype']]
        raw = bytearray(blob[base + a:base + b])
        t = torch.frombuffer(raw, dtype=dt) if b > a else torch.empty(0, dtype=dt)
        out[name] = t.reshape(e['shape']).clone()
    return out


def save(path, tensors):
    """Write {name: tensor} (contiguous CPU copies) as .safetensors."""
    header, chunks, off = {}, [], 0
    for name, t in tensors.items():
        t = t.detach().contiguous().cpu()
        data = t.view(torch.uint8).numpy().tobytes() if t.numel() else b''
        header[name] = {'dtype': _NAME[t.dtype], 'shape': list(t.shape), 'data_offsets': [off, off + len(data)]}
        chunks.append(data)
        off += len(data)
    h = json.dumps(header).encode('utf8')
    h += b' ' * ((8 - len(h) % 8) % 8)
    with open(path, 'wb') as f:
        f.write(struct.pack('<Q', len(h)))
        f.write(h)
        for c in chunks:
            f.write(c)


def load_dir(path):
    """Every *.safetensors of a model folder (sharded or not), merged."""
    import glob
    import os
    out = {}
    for p in sorted(glob.glob(os.path.join(path, '*.safetensors'))):
        out.update(load(p))
    return out


def image_model_main(doc, load_model, out_key):
    """The command line the image references share: --model DIR --inputs IN.safetensors ('pixel_values') --out
    OUT.safetensors ({out_key}: the forward's output in float32) [--dtype float64|float32|bfloat16] [--device]."""
    import argparse
    ap = argparse.ArgumentParser(description=doc.split('\n')[0])
    ap.add_argument('--model', required=True)
    ap.add_argument('--inputs', required=True)
    ap.add_argument('--out', required=True)
    ap.add_argument('--dtype', default='float64', choices=['float64', 'float32', 'bfloat16'])
    ap.add_argument('--device', default='cpu')
    a = ap.parse_args()
    dt = getattr(torch, a.dtype)
    m = load_model(a.model, dt).to(a.device)
    x = load(a.inputs)['pixel_values'].to(a.device, dt)
    with torch.no_grad():
        y = m(x)
    save(a.out, {out_key: y.float().cpu()})
