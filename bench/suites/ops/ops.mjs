#!/usr/bin/env node
// Op-level benchmark of the generated CUDA kernels (issue 26 item 3, targets of `bench/ops`): elementwise ops and a
// fused 3-op chain on >= 64 MB, layer_norm (FLUX 4096x3072, BGE 8192x1024), group_norm (a YOLO-like [8, 256, 80, 80]
// map), softmax / log_softmax on production shapes, a row sum, bmm / baddbmm, along-dim and layout ops, conv2d (ResNet-50
// and YOLOv10n layers, fp16 channels-last), dense attention (SDPA) and gated linear attention (GLA decode and
// prefill; gated delta rule / KDA prefill and decode). Every case runs through the op registry on the CUDA backend (prepareOp: the attrs parsed once, so a call
// is the registry's checks, inference and our launch), timed with device events: warm-up, then >= 50 calls each
// after an L2 flush (a memset of 2x L2), the median. Beside it, in the
// same process and timed the same way, a device copy of the case's byte count (half read, half written): the floor a
// memory-bound op can reach at that size. ops_torch.py times PyTorch eager and torch.compile on the same cases; run.sh
// merges both into ops.json with the table and the targets last. The matmul cases (bmm / baddbmm on cuBLASLt, group
// 'bmm') also carry their FLOPs: their floor is max(the same-size copy, FLOPs / the bf16 matrix rate measured here on an
// 8192^3 GEMM through the same path).
// Bundled by tools/gpu-host-bundle.mjs into bench/suites/ops/ops.mjs; on the GPU host:
//   dist/gpu-host/bench/run ops [--quick] [--only substring]
//   dist/gpu-host/run-node bench/suites/ops/ops.mjs --json ops_ours.json [--quick] [--only substring]
import '../../lib/user-errors.mjs'; // first: a bad FASTKERNELS_* value is one line, not a stack
import { writeFileSync } from 'node:fs';
import { Tensor, prepareOp } from '@fastkernels/core';
import { benchArgs, cudaBackendOrExit, launchSettings } from '../../lib/common.mjs';
import { benchTimer, deviceRandom, matrixRateTflops } from '../../lib/timing.mjs';

const { opt, has } = benchArgs();
const quick = has('--quick');
const jsonOut = opt('--json');
const only = opt('--only');
const ITERS = quick ? 20 : 50;
const WARMUP = 5;

const backend = cudaBackendOrExit('bench-ops');
const rt = backend.runtime;
const t0 = performance.now();
const { timeMs, sameSizeCopyMs, flushBytes } = benchTimer(backend, { warmup: WARMUP, iters: ITERS });

const fillRandom = deviceRandom(backend);
const randn = (shape, dtype, seed = 1) => fillRandom(Tensor.empty(backend, shape, dtype), seed);


const SIZE = { bf16: 2, f16: 2, f32: 4, i32: 4, i64: 8 };
const numel = (s) => s.reduce((a, b) => a * b, 1);
const bytesOf = (shape, dtype) => numel(shape) * SIZE[dtype];

// ---- cases. `torch` says what ops_torch.py builds (same shapes, dtypes, attrs); `group` picks the target it is held to.
const EW = [8192, 8192]; // 64M elements: 128 MB a bf16 tensor
const CHAIN3 = { steps: [{ op: 'silu', args: [{ input: 0 }] }, { op: 'mul', args: [{ step: 0 }, { input: 1 }] }, { op: 'add', args: [{ step: 1 }, { input: 2 }] }] };
const cases = [];
const add = (c) => cases.push(c);
for (const dtype of quick ? ['bf16'] : ['bf16', 'f32']) {
  add({ name: `gelu-${dtype}`, group: 'elementwise', op: 'gelu', attrs: { approximate: 'none' }, inputs: [{ shape: EW, dtype }], out: { shape: EW, dtype } });
  add({ name: `gelu-tanh-${dtype}`, group: 'elementwise', op: 'gelu', attrs: { approximate: 'tanh' }, inputs: [{ shape: EW, dtype }], out: { shape: EW, dtype } });
  add({ name: `silu-${dtype}`, group: 'elementwise', op: 'silu', attrs: {}, inputs: [{ shape: EW, dtype }], out: { shape: EW, dtype } });
  add({ name: `add-bias-broadcast-${dtype}`, group: 'elementwise', op: 'add', attrs: {}, inputs: [{ shape: EW, dtype }, { shape: [EW[1]], dtype }], out: { shape: EW, dtype } });
  add({ name: `chain3-silu*y+z-${dtype}`, group: 'chain', op: 'elementwise_chain', attrs: CHAIN3, inputs: [{ shape: EW, dtype }, { shape: EW, dtype }, { shape: EW, dtype }], out: { shape: EW, dtype } });
}
add({ name: 'chain3-silu*y+z-bf16-y-broadcast', group: 'chain', op: 'elementwise_chain', attrs: CHAIN3, inputs: [{ shape: EW, dtype: 'bf16' }, { shape: [EW[1]], dtype: 'bf16' }, { shape: EW, dtype: 'bf16' }], out: { shape: EW, dtype: 'bf16' } });
const ln = (name, rows, D, affine, eps) =>
  add({
    name, group: 'norm', op: 'layer_norm', attrs: { normalized_shape: [D], eps },
    inputs: [{ shape: [rows, D], dtype: 'bf16' }, affine ? { shape: [D], dtype: 'bf16' } : null, affine ? { shape: [D], dtype: 'bf16' } : null],
    out: { shape: [rows, D], dtype: 'bf16' },
  });
ln('layer_norm-flux-4096x3072', 4096, 3072, true, 1e-6);
ln('layer_norm-flux-4096x3072-no-affine', 4096, 3072, false, 1e-6);
ln('layer_norm-bge-8192x1024', 8192, 1024, true, 1e-5);
add({
  name: 'group_norm-yolo-8x256x80x80-g32-f16', group: 'norm', op: 'group_norm', attrs: { num_groups: 32, eps: 1e-5 },
  inputs: [{ shape: [8, 256, 80, 80], dtype: 'f16' }, { shape: [256], dtype: 'f16' }, { shape: [256], dtype: 'f16' }],
  out: { shape: [8, 256, 80, 80], dtype: 'f16' },
});
add({ name: 'softmax-logits-256x128256-bf16', group: 'softmax', op: 'softmax', attrs: { dim: -1 }, inputs: [{ shape: [256, 128256], dtype: 'bf16', scale: 3 }], out: { shape: [256, 128256], dtype: 'bf16' } });
add({ name: 'softmax-attn-bge-128x512x512-bf16', group: 'softmax', op: 'softmax', attrs: { dim: -1 }, inputs: [{ shape: [128 * 512, 512], dtype: 'bf16', scale: 3 }], out: { shape: [128 * 512, 512], dtype: 'bf16' } });
add({ name: 'log_softmax-logits-256x128256-bf16', group: 'softmax', op: 'log_softmax', attrs: { dim: -1 }, inputs: [{ shape: [256, 128256], dtype: 'bf16', scale: 3 }], out: { shape: [256, 128256], dtype: 'bf16' } });
add({ name: 'softmax-logits-256x128256-bf16-to-f32', group: 'softmax', op: 'softmax', attrs: { dim: -1, dtype: 'f32' }, inputs: [{ shape: [256, 128256], dtype: 'bf16', scale: 3 }], out: { shape: [256, 128256], dtype: 'f32' } });
// bmm / baddbmm (issue 26's >= 0.97x torch target). An input's `view` is taken after it is made at its stored shape
// (ops_torch.py does the same): FLUX's q @ k^T reads k [24, 4096, 128] transposed; vLLM's MLA absorbed bmm reads
// x [T, 128 heads, 512] as [128, T, 512] (transpose(0, 1)); diffusers' get_attention_scores is baddbmm(empty, q, k^T,
// beta=0, alpha=scale), beta=1 with a mask row; OpenFold3's triangle attention adds a pair bias shared over the batch.
// bytes: what must move (baddbmm with beta 0 never reads its input, so it is left out of the floor)
const mmCase = (name, op, attrs, inputs, out, B, M, K, N) =>
  add({ name, group: 'bmm', op, attrs, inputs, out, flops: 2 * B * M * N * K, ...(op === 'baddbmm' && attrs.beta === 0 ? { bytes: [...inputs.slice(1), out].reduce((s, x) => s + bytesOf(x.shape, x.dtype), 0) } : {}) });
const kT = { transpose: [1, 2] };
const heads = { transpose: [0, 1] };
mmCase('bmm-flux-scores-24x4096x128x4096-bf16', 'bmm', {}, [{ shape: [24, 4096, 128], dtype: 'bf16' }, { shape: [24, 128, 4096], dtype: 'bf16' }], { shape: [24, 4096, 4096], dtype: 'bf16' }, 24, 4096, 128, 4096);
mmCase('bmm-flux-q@kT-24x4096x128x4096-bf16', 'bmm', {}, [{ shape: [24, 4096, 128], dtype: 'bf16' }, { shape: [24, 4096, 128], dtype: 'bf16', view: kT }], { shape: [24, 4096, 4096], dtype: 'bf16' }, 24, 4096, 128, 4096);
mmCase('bmm-flux-probs@v-24x4096x4096x128-bf16', 'bmm', {}, [{ shape: [24, 4096, 4096], dtype: 'bf16' }, { shape: [24, 4096, 128], dtype: 'bf16' }], { shape: [24, 4096, 128], dtype: 'bf16' }, 24, 4096, 4096, 128);
mmCase('baddbmm-flux-beta0-24x4096x128x4096-bf16', 'baddbmm', { beta: 0, alpha: 128 ** -0.5 }, [{ shape: [24, 4096, 4096], dtype: 'bf16' }, { shape: [24, 4096, 128], dtype: 'bf16' }, { shape: [24, 4096, 128], dtype: 'bf16', view: kT }], { shape: [24, 4096, 4096], dtype: 'bf16' }, 24, 4096, 128, 4096);
mmCase('baddbmm-flux-mask-row-24x4096x128x4096-bf16', 'baddbmm', { beta: 1, alpha: 128 ** -0.5 }, [{ shape: [24, 1, 4096], dtype: 'bf16' }, { shape: [24, 4096, 128], dtype: 'bf16' }, { shape: [24, 4096, 128], dtype: 'bf16', view: kT }], { shape: [24, 4096, 4096], dtype: 'bf16' }, 24, 4096, 128, 4096);
mmCase('bmm-of3-tri-1024x256x32x256-bf16', 'bmm', {}, [{ shape: [1024, 256, 32], dtype: 'bf16' }, { shape: [1024, 32, 256], dtype: 'bf16' }], { shape: [1024, 256, 256], dtype: 'bf16' }, 1024, 256, 32, 256);
mmCase('baddbmm-of3-tri-bias-1024x256x32x256-bf16', 'baddbmm', { beta: 1, alpha: 32 ** -0.5 }, [{ shape: [1, 256, 256], dtype: 'bf16' }, { shape: [1024, 256, 32], dtype: 'bf16' }, { shape: [1024, 256, 32], dtype: 'bf16', view: kT }], { shape: [1024, 256, 256], dtype: 'bf16' }, 1024, 256, 32, 256);
mmCase('bmm-mla-uk-128x1024x128x512-bf16', 'bmm', {}, [{ shape: [1024, 128, 128], dtype: 'bf16', view: heads }, { shape: [128, 128, 512], dtype: 'bf16' }], { shape: [128, 1024, 512], dtype: 'bf16' }, 128, 1024, 128, 512);
mmCase('bmm-mla-uv-128x1024x512x128-bf16', 'bmm', {}, [{ shape: [1024, 128, 512], dtype: 'bf16', view: heads }, { shape: [128, 512, 128], dtype: 'bf16' }], { shape: [128, 1024, 128], dtype: 'bf16' }, 128, 1024, 512, 128);
mmCase('bmm-mla-uv-decode-128x64x512x128-bf16', 'bmm', {}, [{ shape: [64, 128, 512], dtype: 'bf16', view: heads }, { shape: [128, 512, 128], dtype: 'bf16' }], { shape: [128, 64, 128], dtype: 'bf16' }, 128, 64, 512, 128);
if (!quick) mmCase('bmm-of3-tri-1024x256x32x256-f32', 'bmm', {}, [{ shape: [1024, 256, 32], dtype: 'f32' }, { shape: [1024, 32, 256], dtype: 'f32' }], { shape: [1024, 256, 256], dtype: 'f32' }, 1024, 256, 32, 256);
add({ name: 'sum-last-dim-8192x8192-bf16', group: 'reduction', op: 'sum', attrs: { dim: -1 }, inputs: [{ shape: EW, dtype: 'bf16' }], out: { shape: [EW[0]], dtype: 'bf16' } });
add({ name: 'mean-dim0-8192x8192-bf16', group: 'reduction', op: 'mean', attrs: { dim: 0 }, inputs: [{ shape: EW, dtype: 'bf16' }], out: { shape: [EW[1]], dtype: 'bf16' } });
// the column reductions models make: BGE-M3's mean pooling over tokens, ConvNeXt-V2's global pool of a channels-last map
add({ name: 'mean-tokens-64x512x1024-bf16', group: 'reduction', op: 'mean', attrs: { dim: 1 }, inputs: [{ shape: [64, 512, 1024], dtype: 'bf16' }], out: { shape: [64, 1024], dtype: 'bf16' } });
add({ name: 'mean-pool-nhwc-32x12x12x1024-f16', group: 'reduction', op: 'mean', attrs: { dim: [1, 2] }, inputs: [{ shape: [32, 12, 12, 1024], dtype: 'f16' }], out: { shape: [32, 1024], dtype: 'f16' } });
// along one dim (src/ops/reduction/): greedy and top-k / top-p sampling over Llama-3's vocabulary, a row sort. `out`
// only counts bytes: topk / sort also write i64 indices, so their `out` is sized as values + indices (5 bf16 / 3 f32 an
// element)
const LOGITS = [256, 128256];
add({ name: 'argmax-logits-256x128256-bf16', group: 'along-dim', op: 'argmax', attrs: { dim: -1 }, inputs: [{ shape: LOGITS, dtype: 'bf16' }], out: { shape: [LOGITS[0]], dtype: 'i64' } });
add({ name: 'topk50-logits-256x128256-bf16', group: 'along-dim', op: 'topk', attrs: { k: 50 }, inputs: [{ shape: LOGITS, dtype: 'bf16' }], out: { shape: [LOGITS[0], 50 * 5], dtype: 'bf16' } });
add({ name: 'cumsum-probs-256x128256-f32', group: 'along-dim', op: 'cumsum', attrs: { dim: -1 }, inputs: [{ shape: LOGITS, dtype: 'f32' }], out: { shape: LOGITS, dtype: 'f32' } });
add({ name: 'sort-rows-8192x1024-f32', group: 'along-dim', op: 'sort', attrs: { dim: -1 }, inputs: [{ shape: [8192, 1024], dtype: 'f32' }], out: { shape: [8192, 1024 * 3], dtype: 'f32' } });
// layout (src/ops/layout/): YOLO's nearest x2 upsample, a bilinear resize, a reflect pad of a feature map
add({ name: 'interpolate-nearest2x-yolo-8x256x40x40-f16', group: 'layout', op: 'interpolate', attrs: { scale_factor: 2, mode: 'nearest' }, inputs: [{ shape: [8, 256, 40, 40], dtype: 'f16' }], out: { shape: [8, 256, 80, 80], dtype: 'f16' } });
add({ name: 'interpolate-bilinear-8x256x80x80-to-160-f16', group: 'layout', op: 'interpolate', attrs: { size: [160, 160], mode: 'bilinear', align_corners: false }, inputs: [{ shape: [8, 256, 80, 80], dtype: 'f16' }], out: { shape: [8, 256, 160, 160], dtype: 'f16' } });
add({ name: 'pad-reflect1-8x256x80x80-bf16', group: 'layout', op: 'pad', attrs: { pad: [1, 1, 1, 1], mode: 'reflect' }, inputs: [{ shape: [8, 256, 80, 80], dtype: 'bf16' }], out: { shape: [8, 256, 82, 82], dtype: 'bf16' } });
// permutation copies (issue 34 item 3: CudaOps.copy's rows / tiled-transpose kernels): x.permute(...).contiguous() of a
// tensor made at its stored shape, as torch's x.permute(...).contiguous(); the floor is the same-size copy
for (const [name, shape, permute] of [
  ['contiguous-bhsd-to-bshd-8x32x2048x128-f16', [8, 32, 2048, 128], [0, 2, 1, 3]],
  ['contiguous-bshd-to-bhsd-8x2048x32x128-f16', [8, 2048, 32, 128], [0, 2, 1, 3]],
  ['contiguous-nchw-to-nhwc-32x256x80x80-f16', [32, 256, 80, 80], [0, 2, 3, 1]],
  ['contiguous-nhwc-to-nchw-32x80x80x256-f16', [32, 80, 80, 256], [0, 3, 1, 2]],
]) add({ name, group: 'layout', op: 'contiguous', attrs: {}, inputs: [{ shape, dtype: 'f16', view: { permute } }], out: { shape: permute.map((p) => shape[p]), dtype: 'f16' } });

// conv (src/ops/conv/, issue 26's conv2d >= 0.95x torch target; issue 34's YOLOv10n and ConvNeXt-V2 shapes): fp16 channels-last as
// production runs them (ultralytics and torchvision models under .to(memory_format=torch.channels_last).half()). An
// input is made at its stored NHWC shape and viewed as NCHW (permute), so its strides are channels-last; the weight
// likewise. YOLO convs carry the bias of the folded BN (ultralytics fuse()); ResNet-50's convs have none (BN follows).
const NHWC = { permute: [0, 3, 1, 2] };
const convCase = (name, N, C, H, W, O, k, stride, pad, groups, bias, activation = null) => {
  const Ho = Math.floor((H + 2 * pad - k) / stride) + 1;
  const Wo = Math.floor((W + 2 * pad - k) / stride) + 1;
  add({
    name, group: 'conv', op: activation ? 'conv2d_act' : 'conv2d', attrs: { stride, padding: pad, groups, ...(activation ? { activation } : {}) },
    inputs: [{ shape: [N, H, W, C], dtype: 'f16', view: NHWC }, { shape: [O, k, k, C / groups], dtype: 'f16', view: NHWC }, bias ? { shape: [O], dtype: 'f16' } : null],
    out: { shape: [N, Ho, Wo, O], dtype: 'f16' },
    flops: 2 * N * Ho * Wo * O * (C / groups) * k * k,
  });
};
// ResNet-50 (torchvision v1.5: the stride on the 3x3), batch 32 at 224^2
convCase('conv-r50-stem-7x7s2-32x3x224-64-f16cl', 32, 3, 224, 224, 64, 7, 2, 3, 1, false);
convCase('conv-r50-l1-1x1-32x64x56-64-f16cl', 32, 64, 56, 56, 64, 1, 1, 0, 1, false);
convCase('conv-r50-l1-3x3-32x64x56-64-f16cl', 32, 64, 56, 56, 64, 3, 1, 1, 1, false);
convCase('conv-r50-l1-1x1-32x64x56-256-f16cl', 32, 64, 56, 56, 256, 1, 1, 0, 1, false);
convCase('conv-r50-l2-3x3s2-32x128x56-128-f16cl', 32, 128, 56, 56, 128, 3, 2, 1, 1, false);
convCase('conv-r50-l3-3x3-32x256x14-256-f16cl', 32, 256, 14, 14, 256, 3, 1, 1, 1, false);
convCase('conv-r50-l3-1x1-32x1024x14-256-f16cl', 32, 1024, 14, 14, 256, 1, 1, 0, 1, false);
convCase('conv-r50-l4-3x3-32x512x7-512-f16cl', 32, 512, 7, 7, 512, 3, 1, 1, 1, false);
// YOLOv10n (width 0.25) at 640^2, batch 1 and 32: the stem convs, a C2f 1x1 and bottleneck 3x3, SCDown's 1x1 and
// depthwise 3x3 s2, a head 3x3, a deep depthwise (C2fCIB / PSA region)
for (const N of quick ? [1] : [1, 32]) {
  convCase(`conv-y10n-m0-3x3s2-${N}x3x640-16-f16cl`, N, 3, 640, 640, 16, 3, 2, 1, 1, true);
  convCase(`conv-y10n-m1-3x3s2-${N}x16x320-32-f16cl`, N, 16, 320, 320, 32, 3, 2, 1, 1, true);
  convCase(`conv-y10n-c2f-1x1-${N}x32x160-32-f16cl`, N, 32, 160, 160, 32, 1, 1, 0, 1, true);
  convCase(`conv-y10n-c2f-3x3-${N}x16x160-16-f16cl`, N, 16, 160, 160, 16, 3, 1, 1, 1, true);
  convCase(`conv-y10n-scdown-1x1-${N}x64x80-128-f16cl`, N, 64, 80, 80, 128, 1, 1, 0, 1, true);
  convCase(`conv-y10n-scdown-dw3x3s2-${N}x128x80-f16cl`, N, 128, 80, 80, 128, 3, 2, 1, 128, true);
  convCase(`conv-y10n-head-3x3-${N}x64x80-64-f16cl`, N, 64, 80, 80, 64, 3, 1, 1, 1, true);
  convCase(`conv-y10n-cib-dw3x3-${N}x256x20-f16cl`, N, 256, 20, 20, 256, 3, 1, 1, 256, true);
}
// issue 34: YOLOv10's Conv block after fuse() is SiLU(conv + bias), conv2d_act: beside the conv2d rows above, the same
// shapes with the SiLU (torch: F.silu(F.conv2d(...)), eager and compiled)
for (const N of quick ? [1] : [1, 32]) {
  convCase(`conv-silu-y10n-m1-3x3s2-${N}x16x320-32-f16cl`, N, 16, 320, 320, 32, 3, 2, 1, 1, true, 'silu');
  convCase(`conv-silu-y10n-c2f-1x1-${N}x32x160-32-f16cl`, N, 32, 160, 160, 32, 1, 1, 0, 1, true, 'silu');
  convCase(`conv-silu-y10n-scdown-dw3x3s2-${N}x128x80-f16cl`, N, 128, 80, 80, 128, 3, 2, 1, 128, true, 'silu');
  convCase(`conv-silu-y10n-head-3x3-${N}x64x80-64-f16cl`, N, 64, 80, 80, 64, 3, 1, 1, 1, true, 'silu');
}
// ConvNeXt-V2-base (dims 128 / 256 / 512 / 1024) at 384^2, batch 32 (issue 34's shapes): the 4x4 s4 stem, each stage's
// 7x7 depthwise conv and the 2x2 s2 downsampling convs between stages; every conv carries a bias
if (!quick) {
  convCase('conv-cnx2b-stem-4x4s4-32x3x384-128-f16cl', 32, 3, 384, 384, 128, 4, 4, 0, 1, true);
  for (const [C, H] of [[128, 96], [256, 48], [512, 24], [1024, 12]]) convCase(`conv-cnx2b-dw7x7-32x${C}x${H}-f16cl`, 32, C, H, H, C, 7, 1, 3, C, true);
  for (const [C, H] of [[128, 96], [256, 48], [512, 24]]) convCase(`conv-cnx2b-down-2x2s2-32x${C}x${H}-${2 * C}-f16cl`, 32, C, H, H, 2 * C, 2, 2, 0, 1, true);
}
// dense attention (issue 28's yardstick: PyTorch's default SDPA dispatch and each backend, ops_torch.py): Llama-3-8B
// prefill (causal, as the issue measured it with 32 heads of 128 and with its real 8 KV heads), non-causal head dim 128
// at S = 4096 / 8192 and FLUX's 4608 tokens of 24 heads, head dim 64. FLOPs: 4 B H L S D (causal: the S (S + 1) / 2
// visible pairs)
const sdpaCase = (name, B, H, Hkv, S, D, causal) =>
  add({
    name, group: 'attention', op: 'scaled_dot_product_attention', attrs: { is_causal: causal, enable_gqa: Hkv !== H },
    inputs: [{ shape: [B, H, S, D], dtype: 'bf16' }, { shape: [B, Hkv, S, D], dtype: 'bf16' }, { shape: [B, Hkv, S, D], dtype: 'bf16' }, null],
    out: { shape: [B, H, S, D], dtype: 'bf16' },
    flops: 4 * B * H * D * (causal ? (S * (S + 1)) / 2 : S * S),
  });
sdpaCase('sdpa-llama3-8b-causal-1x32x4096x128', 1, 32, 32, 4096, 128, true);
sdpaCase('sdpa-llama3-8b-causal-gqa8-1x32x4096x128', 1, 32, 8, 4096, 128, true);
sdpaCase('sdpa-noncausal-1x32x4096x128', 1, 32, 32, 4096, 128, false);
if (!quick) sdpaCase('sdpa-noncausal-1x32x8192x128', 1, 32, 32, 8192, 128, false);
sdpaCase('sdpa-flux-noncausal-1x24x4608x128', 1, 24, 24, 4608, 128, false);
sdpaCase('sdpa-noncausal-hd64-1x32x4096x64', 1, 32, 32, 4096, 64, false);

// gated linear attention (issue 32, src/ops/recurrent/): GLA-2.7B's heads (5 x K 256 x V 512). Decode: one token a
// sequence over a state pool (vLLM's layout, slots 0..bs-1 in order), the state read and written in place: `bytes` is
// the state read + written plus q, k, v, g and o, so fracCopy is the fraction of the state-read floor (target >= 0.8).
// Prefill: chunk_gla over one 4096-token sequence with the final state out; FLOPs 4 T H K V (the recurrence's). Gates
// are GLA's logsigmoid(x) / 16 (`gate`); `ints` inputs are index tensors.
const GLA = { H: 5, K: 256, V: 512 };
for (const bs of quick ? [1, 256] : [1, 8, 64, 256]) {
  const { H, K, V } = GLA;
  const state = bs * H * K * V * 4;
  add({
    name: `fused_recurrent_gla-decode-gla2.7b-bs${bs}`, group: 'recurrent', op: 'fused_recurrent_gla', attrs: {},
    inputs: [
      { shape: [bs, 1, H, K], dtype: 'bf16' }, { shape: [bs, 1, H, K], dtype: 'bf16' }, { shape: [bs, 1, H, V], dtype: 'bf16' }, { shape: [bs, 1, H, K], dtype: 'bf16', gate: true },
      { shape: [bs, H, K, V], dtype: 'f32', scale: 0.1 }, null, { shape: [bs], dtype: 'i32', ints: Array.from({ length: bs }, (_, i) => i) },
    ],
    out: { shape: [bs, 1, H, V], dtype: 'bf16' },
    bytes: 2 * state + bs * H * (3 * K + 2 * V) * 2,
  });
}
for (const T of quick ? [4096] : [4096, 8192]) {
  const { H, K, V } = GLA;
  add({
    name: `chunk_gla-prefill-gla2.7b-T${T}`, group: 'recurrent', op: 'chunk_gla', attrs: { output_final_state: true },
    inputs: [{ shape: [1, T, H, K], dtype: 'bf16' }, { shape: [1, T, H, K], dtype: 'bf16' }, { shape: [1, T, H, V], dtype: 'bf16' }, { shape: [1, T, H, K], dtype: 'bf16', gate: true }, null, null, null],
    out: { shape: [1, T, H, V], dtype: 'bf16' },
    flops: 4 * T * H * K * V,
  });
}

// gated delta rule / KDA (issue 32, src/ops/recurrent/gdn.ts): Qwen3-Next-80B's gated DeltaNet heads (16 q / k heads,
// 32 value heads, 128 each) and Kimi-Linear-48B's KDA heads (32 / 32, 128), q / k l2-normalised in the op as both models
// call it. Prefill: one sequence with the final state out, the yardstick (FLA 0.5.1 on an H200, one layer at
// these heads: 0.247 / 0.472 / 0.930 ms at T = 4k / 8k / 16k) in `yardstickMs`; FLOPs 6 T HV K V (the recurrence's).
// Decode: one token a sequence over a state pool read and written in place; `bytes` is the state read + written plus
// the token's tensors, so fracCopy is the fraction of the state-read floor (target >= 0.8). beta is sigmoid(x) (`prob`).
const QWEN3_NEXT_DELTA = { H: 16, HV: 32, K: 128, V: 128 };
const KIMI_KDA = { H: 32, HV: 32, K: 128, V: 128 };
const FLA_GDN_H200_MS = { 4096: 0.247, 8192: 0.472, 16384: 0.93 };
const deltaAttrs = (finalState) => ({ scale: null, output_final_state: finalState, use_qk_l2norm_in_kernel: true });
for (const [op, model, heads, Ts] of [
  ['chunk_gated_delta_rule', 'qwen3next', QWEN3_NEXT_DELTA, quick ? [4096] : [4096, 8192, 16384]],
  ['chunk_kda', 'kimi48b', KIMI_KDA, quick ? [4096] : [4096, 16384]],
]) {
  const { H, HV, K, V } = heads;
  for (const T of Ts) {
    add({
      name: `${op}-prefill-${model}-T${T}`, group: 'recurrent', op, attrs: deltaAttrs(true),
      inputs: [
        { shape: [1, T, H, K], dtype: 'bf16' }, { shape: [1, T, H, K], dtype: 'bf16' }, { shape: [1, T, HV, V], dtype: 'bf16' },
        { shape: op === 'chunk_kda' ? [1, T, HV, K] : [1, T, HV], dtype: 'bf16', gate: true }, { shape: [1, T, HV], dtype: 'bf16', prob: true }, null, null, null,
      ],
      out: { shape: [1, T, HV, V], dtype: 'bf16' },
      flops: 6 * T * HV * K * V,
      ...(op === 'chunk_gated_delta_rule' ? { yardstickMs: FLA_GDN_H200_MS[T] } : {}),
    });
  }
}
for (const [op, model, heads] of [['fused_recurrent_gated_delta_rule', 'qwen3next', QWEN3_NEXT_DELTA], ['fused_recurrent_kda', 'kimi48b', KIMI_KDA]]) {
  const { H, HV, K, V } = heads;
  for (const bs of quick ? [1, 256] : [1, 8, 64, 256]) {
    const state = bs * HV * K * V * 4;
    const gK = op === 'fused_recurrent_kda' ? K : 1;
    add({
      name: `${op}-decode-${model}-bs${bs}`, group: 'recurrent', op, attrs: deltaAttrs(false),
      inputs: [
        { shape: [1, bs, H, K], dtype: 'bf16' }, { shape: [1, bs, H, K], dtype: 'bf16' }, { shape: [1, bs, HV, V], dtype: 'bf16' },
        { shape: gK > 1 ? [1, bs, HV, K] : [1, bs, HV], dtype: 'bf16', gate: true }, { shape: [1, bs, HV], dtype: 'bf16', prob: true },
        { shape: [bs, HV, K, V], dtype: 'f32', scale: 0.1 }, { shape: [bs + 1], dtype: 'i32', ints: Array.from({ length: bs + 1 }, (_, i) => i) },
        { shape: [bs], dtype: 'i32', ints: Array.from({ length: bs }, (_, i) => i) },
      ],
      out: { shape: [1, bs, HV, V], dtype: 'bf16' },
      bytes: 2 * state + bs * (2 * H * K + 2 * HV * V + HV * (gK + 1)) * 2,
    });
  }
}

// fused MoE GEMM (issue 31, src/ops/moe/): vLLM's fused_moe_kernel over moe_align's blocks at Mixtral-8x7B (top-2 of 8,
// hidden 4096, intermediate 14336) and Qwen3-30B-A3B (top-8 of 128, hidden 2048, intermediate 768) widths: the w13
// GEMM (hidden -> 2 x intermediate) and the w2 GEMM (the T x top-k slots, routed weights applied) at decode and prefill
// token counts, blocks of 16 (T <= 64) or 64 as FusedExperts aligns them, and 128 at prefill beside it. The routing is
// a seeded draw of distinct experts a token; `routing.slotExperts` carries it so ops_torch.py runs the same one (its
// per-expert loop and torch._grouped_mm). bytes: the experts actually hit (the read floor), A and C; flops 2 slots N K.
const moeIds = (T, E, topK, seed) => {
  let s = seed >>> 0;
  const next = () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32);
  const ids = [];
  for (let t = 0; t < T; t++) {
    const pool = Array.from({ length: E }, (_, i) => i);
    for (let k = 0; k < topK; k++) {
      const j = k + Math.floor(next() * (E - k));
      [pool[k], pool[j]] = [pool[j], pool[k]];
      ids.push(pool[k]);
    }
  }
  return ids;
};
// moe_align_block_size: slots grouped by expert, each expert padded to whole blocks (padding = numel), -1 past the count
const moeAlign = (ids, E, bs) => {
  const NB = Math.ceil((ids.length + E * (bs - 1)) / bs);
  const sorted = new Array(NB * bs).fill(ids.length);
  const experts = new Array(NB).fill(-1);
  let at = 0;
  for (let e = 0; e < E; e++) {
    const slots = ids.flatMap((x, i) => (x === e ? [i] : []));
    slots.forEach((x, j) => (sorted[at + j] = x));
    const padded = Math.ceil(slots.length / bs) * bs;
    for (let b = at / bs; b < (at + padded) / bs; b++) experts[b] = e;
    at += padded;
  }
  return { sorted, experts, post: at };
};
const MOE_MODELS = { mixtral: { E: 8, topK: 2, H: 4096, I: 14336 }, qwen3: { E: 128, topK: 8, H: 2048, I: 768 } };
const moeCase = (model, gemm, T, bs = T <= 64 ? 16 : 64) => {
  const m = MOE_MODELS[model];
  const ids = moeIds(T, m.E, m.topK, 31 * T + m.E);
  const al = moeAlign(ids, m.E, bs);
  const slots = T * m.topK;
  const [M, topK, N, K, mul] = gemm === 'w13' ? [T, m.topK, 2 * m.I, m.H, false] : [slots, 1, m.H, m.I, true];
  const hit = new Set(ids).size;
  const ints = (v) => ({ shape: [v.length], dtype: 'i32', ints: v });
  add({
    name: `fused_moe-${model}-${gemm}-T${T}-bs${bs}`, group: 'moe', op: 'fused_moe_gemm', attrs: { top_k: topK, mul_routed_weight: mul },
    inputs: [{ shape: [M, K], dtype: 'bf16' }, { shape: [m.E, N, K], dtype: 'bf16', scale: K ** -0.5 }, { shape: [M, topK], dtype: 'f32' }, ints(al.sorted), ints(al.experts), ints([al.post])],
    out: { shape: [M, topK, N], dtype: 'bf16' },
    routing: { slotExperts: ids, E: m.E, hitExperts: hit, blockSize: bs },
    bytes: hit * bytesOf([N, K], 'bf16') + bytesOf([M, K], 'bf16') + bytesOf([slots, N], 'bf16'),
    flops: 2 * slots * N * K,
  });
};
for (const model of ['mixtral', 'qwen3']) {
  for (const gemm of ['w13', 'w2']) {
    for (const T of quick ? [1, 4096] : [1, 4, 16, 64, 512, 4096]) moeCase(model, gemm, T);
    if (!quick) moeCase(model, gemm, 4096, 128);
  }
}

// The tensor-core grouped GEMM (issue 31, src/ops/moe/grouped-gemm-tc.ts): gpt-oss-20b's gate_up (top-4 of 32 experts,
// hidden 2880 -> 2 x 2880, bias) at prefill's routed rows, its experts in MXFP4 (mxfp4_grouped_gemm: each weight tile
// decoded inside the GEMM) and dense bf16 in HF's [E, K, N] layout (grouped_gemm on the transposed view): their gap is
// the decode's cost. ops_torch.py dequantises every expert to bf16 (MXFP4) and loops over the hit experts.
// bytes: the hit experts' weights (4.25 or 16 bits a weight), x, bias and out; flops 2 rows N K.
const GPT_OSS_20B = { E: 32, topK: 4, H: 2880, I: 2880 };
const groupedCase = (tokens, format) => {
  const m = GPT_OSS_20B;
  const [N, K, rows] = [2 * m.I, m.H, tokens * m.topK];
  const ids = moeIds(tokens, m.E, m.topK, 131 * tokens);
  const hit = new Set(ids).size;
  const [x, routing, bias] = [{ shape: [rows, K], dtype: 'bf16' }, { shape: [rows], dtype: 'i64', ints: ids }, { shape: [m.E, N], dtype: 'bf16', scale: 0.1 }];
  const mx = format === 'mxfp4';
  const weights = mx
    ? [{ shape: [m.E, N, K / 32, 16], dtype: 'u8', bytes: [0, 256] }, { shape: [m.E, N, K / 32], dtype: 'u8', bytes: [118, 123] }]
    : [{ shape: [m.E, K, N], dtype: 'bf16', view: { transpose: [1, 2] } }]; // HF's layout, seen as [E, N, K]
  add({
    name: `${mx ? 'mxfp4_grouped_gemm' : 'grouped_gemm-bf16'}-gptoss20b-gate_up-R${rows}`, group: 'moe-grouped', op: mx ? 'mxfp4_grouped_gemm' : 'grouped_gemm', attrs: {},
    inputs: [x, ...weights, null, routing, bias],
    out: { shape: [rows, N], dtype: 'bf16' },
    routing: { slotExperts: ids, E: m.E, hitExperts: hit },
    bytes: (hit * N * K * (mx ? 17 : 64)) / 32 + bytesOf([rows, K], 'bf16') + bytesOf([m.E, N], 'bf16') + bytesOf([rows, N], 'bf16'),
    flops: 2 * rows * N * K,
  });
};
for (const tokens of quick ? [1024] : [128, 1024]) for (const format of ['mxfp4', 'bf16']) groupedCase(tokens, format);
// uniform bytes in [lo, hi) (MXFP4 blocks and scales), from a seeded LCG
const randomBytes = (n, [lo, hi], seed) => {
  let s = seed >>> 0;
  const out = new Uint8Array(n);
  for (let i = 0; i < n; i++) out[i] = lo + (((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) >>> 24) % (hi - lo));
  return out;
};

const copyAll = sameSizeCopyMs(2 * 2 ** 30); // a 2 GiB copy: the device's copy bandwidth, for reference
const copyGBps = (2 * 2 ** 30) / (copyAll / 1e3) / 1e9;
console.log(`copy ${copyGBps.toFixed(0)} GB/s (2 GiB D2D, read + write, timed like the cases); ${ITERS} timed calls a case after an L2 flush of ${(flushBytes / 2 ** 20).toFixed(0)} MiB`);

// the bf16 matrix rate: an 8192^3 GEMM through the registry's matmul (cuBLASLt), timed like the cases
const MR = 8192;
const matrixTflops = matrixRateTflops(backend, timeMs, MR);
console.log(`matrix rate ${matrixTflops.toFixed(0)} TFLOP/s (bf16 ${MR}^3 through matmul, timed like the cases)`);

const results = [];
for (const c of cases) {
  if (only && !c.name.includes(only)) continue;
  const bytes = c.bytes ?? c.inputs.reduce((s, x) => s + (x ? bytesOf(x.shape, x.dtype) : 0), 0) + bytesOf(c.out.shape, c.out.dtype);
  // a MoE case's routing tensors are listed by shape only (`routing` says what they hold)
  const listed = c.group.startsWith('moe') ? c.inputs.map((x) => (x?.ints ? { shape: x.shape, dtype: x.dtype, ints: 'routing' } : x)) : c.inputs;
  const row = { name: c.name, group: c.group, op: c.op, attrs: c.attrs, inputs: listed, out: c.out, bytes };
  if (c.routing) row.routing = c.routing;
  if (c.yardstickMs) row.yardstickMs = c.yardstickMs;
  const inputs = c.inputs.map((x, i) => {
    if (!x) return null;
    if (x.ints) return Tensor.fromArray(backend, x.ints, x.shape, x.dtype);
    if (x.bytes) return Tensor.fromArray(backend, randomBytes(numel(x.shape), x.bytes, i + 1), x.shape, x.dtype);
    let t = randn(x.shape, x.dtype, i + 1);
    if (x.gate) {
      // GLA's forget gate: logsigmoid(x) / 16
      const ls = prepareOp('log_sigmoid')([t])[0];
      t.dispose();
      t = prepareOp('mul')([ls, 1 / 16])[0];
      ls.dispose();
    }
    if (x.prob) {
      // a delta rule's beta: sigmoid(x), in (0, 1)
      const p = prepareOp('sigmoid')([t])[0];
      t.dispose();
      t = p;
    }
    if (x.view) {
      const v = x.view.permute ? t.permute(x.view.permute) : t.transpose(...x.view.transpose);
      t.dispose();
      return v;
    }
    if (x.scale && x.scale !== 1) {
      const s = prepareOp('mul')([t, x.scale])[0];
      t.dispose();
      return s;
    }
    return t;
  });
  try {
    const call = prepareOp(c.op, c.attrs);
    const once = () => call(inputs).forEach((t) => t.dispose());
    once();
    rt.synchronize();
    row.ms = timeMs(once);
    row.copyMs = sameSizeCopyMs(bytes);
    row.fracCopy = row.copyMs / row.ms;
    row.gbps = bytes / (row.ms / 1e3) / 1e9;
    if (c.flops) {
      row.flops = c.flops;
      row.tflops = c.flops / (row.ms / 1e3) / 1e12;
      row.matrixMs = (c.flops / (matrixTflops * 1e12)) * 1e3;
      row.floorMs = Math.max(row.copyMs, row.matrixMs);
      row.fracFloor = row.floorMs / row.ms;
    }
    if (c.group === 'conv') {
      // row.ms is cuDNN with its heuristics' algorithm (torch's default); then the algorithm measured on the shape
      // (cudnn.benchmark), the plan each used, and the generated implicit-GEMM fallback (what runs without cuDNN)
      const conv = backend.generatedOps.conv;
      const dnn = backend.runtime.addon;
      row.convPath = conv.lastPath;
      row.cudnnPlan = dnn.cudnnLastPlan?.() ?? null;
      conv.algoSearch = 'benchmark';
      try {
        once();
        rt.synchronize();
        row.benchmarkMs = timeMs(once);
        row.cudnnPlanBenchmark = dnn.cudnnLastPlan?.() ?? null;
      } finally {
        conv.algoSearch = 'heuristic';
      }
      conv.library = 'fallback';
      try {
        once();
        rt.synchronize();
        row.fallbackMs = timeMs(once);
      } finally {
        conv.library = 'auto';
      }
    }
    if (c.group === 'moe') row.moeTile = backend.generatedOps.moe.lastPlan?.tile.name;
    // the kernel a softmax / log_softmax ran (softmax.cu's fk_softmax / fk_softmax_cluster / fk_softmax_smem, or 'generated')
    if (c.group === 'softmax') row.softmaxPath = backend.generatedOps.softmaxPath;
    if (c.group === 'attention') {
      // row.ms is the route SDPA takes (the flash prefill kernel where it fits); the dense kernel beside it, informative
      const sdpa = backend.generatedOps.sdpa;
      row.sdpaPath = sdpa.lastPath; // 'fa3' (the FA3 kernel in place), 'prefill' (the varlen op and a copy) or 'dense'
      if (sdpa.lastPath !== 'fa3') row.sdpaFa3Decline = sdpa.lastFa3Decline;
      if (sdpa.lastPath === 'prefill' || sdpa.lastPath === 'fa3') {
        sdpa.viaPrefill = false;
        try {
          once();
          rt.synchronize();
          row.denseKernelMs = timeMs(once);
        } finally {
          sdpa.viaPrefill = true;
        }
      }
    }
    row.kernelsCompiled = backend.generatedOps.cache.size;
    row.status = 'ok';
    console.log(`${c.name.padEnd(44)} ${(row.ms * 1e3).toFixed(1).padStart(9)} us  ${(bytes / 1e6).toFixed(0).padStart(5)} MB  ${row.gbps.toFixed(0).padStart(5)} GB/s  copy ${(row.copyMs * 1e3).toFixed(1).padStart(8)} us = ${(row.fracCopy * 100).toFixed(0).padStart(3)}%`);
    if (c.flops) console.log(`${''.padEnd(44)} ${row.tflops.toFixed(0).padStart(9)} TFLOP/s  floor ${(row.floorMs * 1e3).toFixed(1)} us (${row.matrixMs > row.copyMs ? 'matrix' : 'copy'}) = ${(row.fracFloor * 100).toFixed(0)}%`);
  } catch (e) {
    row.status = 'error';
    row.detail = (e instanceof Error ? e.message : String(e)).split('\n').slice(0, 3).join(' | ');
    console.log(`${c.name.padEnd(44)} error: ${row.detail}`);
  }
  for (const t of inputs) t?.dispose();
  rt.allocator.emptyCache();
  results.push(row);
}

const result = {
  tool: 'fastkernels',
  versions: backend.versions(),
  device: backend.devices()[0],
  ceilings: { copyGBps, copyBytes: 2 * 2 ** 30, l2FlushBytes: flushBytes, matrixTflops, matrixShape: [MR, MR, MR] },
  iters: ITERS,
  settings: launchSettings(backend),
  seconds: (performance.now() - t0) / 1e3,
  results,
};
if (jsonOut) writeFileSync(jsonOut, JSON.stringify(result, null, 2));
else console.log(JSON.stringify(result));
console.log(`bench-ops: ${results.length} cases in ${result.seconds.toFixed(1)} s`);
