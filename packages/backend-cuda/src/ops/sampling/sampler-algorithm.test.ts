// A line-by-line TypeScript model of kernels/sampler.cu (radix-select top-k on order-preserving keys, fixed-point
// top-p by histogram walk with the tied-group cut by index, log-domain exponential race), checked token for token
// against the CPU backend's sample on this CPU-only machine. Keep it in step with the kernel when the kernel changes.
import { CpuBackend } from '@fastkernels/backend-cpu';
import { Rng, Tensor, counterUniform } from '@fastkernels/core';
import { expect, it } from 'vitest';

const f = Math.fround;
const u32 = new Uint32Array(1), f32 = new Float32Array(u32.buffer);
function key(x: number): number { f32[0] = x; let b = u32[0]!; if (b === 0x80000000) b = 0; return (b & 0x80000000) ? (~b >>> 0) : ((b | 0x80000000) >>> 0); }
function findBin(h: bigint[], nb: number, target: number): [number, bigint] {
  let cum = 0n;
  for (let b = nb - 1; b >= 0; b--) { const c = h[b]!; if (Number(cum) < target && target <= Number(cum + c)) return [b, cum]; cum += c; }
  return [-1, 0n];
}
function sampleRow(row: Float32Array, T: number, k: number, p: number, seed: number, b: number): number {
  const V = row.length;
  let best = -1;
  for (let i = 0; i < V; i++) { const v = row[i]!; if (v === v && (best < 0 || key(v) > key(row[best]!))) best = i; }
  const amax = best < 0 ? 0 : best;
  if (!(T > 0) || best < 0 || !Number.isFinite(row[amax]!)) return amax;
  const lmax = row[amax]!;
  let kthr = 0;
  if (k > 0 && k < V) {
    let prefix = 0, mask = 0, need = k, all = false;
    for (let pass = 0; pass < 3; pass++) {
      const shift = [21, 10, 0][pass]!, bm = pass === 2 ? 1023 : 2047;
      const h = new Array<bigint>(2048).fill(0n);
      for (let i = 0; i < V; i++) { const v = row[i]!; if (v === v) { const kk = key(v); if (((kk & mask) >>> 0) === prefix) h[(kk >>> shift) & bm]! += 1n; } }
      const [bin, above] = findBin(h, bm + 1, need);
      if (bin < 0) { all = true; break; }
      prefix = (prefix | (bin << shift)) >>> 0; mask = (mask | (bm << shift)) >>> 0; need -= Number(above);
    }
    kthr = all ? 0 : prefix;
  }
  const mass = (v: number) => BigInt(Math.round(f(f(Math.exp(f(f(v - lmax) / T))) * 2 ** 40)));
  let useP = p < 1, tau = 0, cut = 0x7fffffff;
  if (useP) {
    let z = 0n;
    for (let i = 0; i < V; i++) { const v = row[i]!; if (v === v && key(v) >= kthr) z += mass(v); }
    let target = p * Number(z); if (!(target >= 0.5)) target = 0.5;
    let prefix = 0, mask = 0, aboveAll = 0n, cnt = 0n, m = 0n;
    for (let pass = 0; pass < 3 && useP; pass++) {
      const shift = [21, 10, 0][pass]!, bm = pass === 2 ? 1023 : 2047;
      const hc = new Array<bigint>(2048).fill(0n), hm = new Array<bigint>(2048).fill(0n);
      for (let i = 0; i < V; i++) { const v = row[i]!; if (v === v) { const kk = key(v); if (kk >= kthr && ((kk & mask) >>> 0) === prefix) { const bn = (kk >>> shift) & bm; hc[bn]! += 1n; hm[bn]! += mass(v); } } }
      const [bin, above] = findBin(hm, bm + 1, target - Number(aboveAll));
      if (bin < 0) { useP = false; break; }
      prefix = (prefix | (bin << shift)) >>> 0; mask = (mask | (bm << shift)) >>> 0; aboveAll += above; cnt = hc[bin]!; m = hm[bin]!;
    }
    if (useP) {
      tau = prefix;
      const each = m / (cnt ? cnt : 1n);
      let nTake = each ? Math.ceil((target - Number(aboveAll)) / Number(each)) : 1;
      if (nTake < 1) nTake = 1;
      if (nTake < Number(cnt)) { let need = nTake; for (let i = 0; i < V; i++) { const v = row[i]!; if (v === v && key(v) === tau) { if (--need === 0) { cut = i; break; } } } }
    }
  }
  let win = -1, ws = 0;
  for (let i = 0; i < V; i++) {
    const v = row[i]!; if (!(v === v)) continue; const kk = key(v);
    if (kk >= kthr && (!useP || kk > tau || (kk === tau && i <= cut))) {
      const u = counterUniform(seed, 0, i);
      const s = f(f(f(v - lmax) / T) - f(Math.log(f(-f(Math.log(u))))));
      if (win < 0 || key(s) > ws) { ws = key(s); win = i; }
    }
  }
  return win < 0 ? amax : win;
}

it('the sampler kernel algorithm (emulated) matches the CPU backend token for token', () => {
  const cpu = new CpuBackend();
  let mism = 0, total = 0;
  for (const [B, V, quant] of [[60, 257, false], [60, 1000, false], [40, 300, true], [8, 20000, false]] as const) {
    const rng = new Rng(V + B);
    const data = new Float64Array(B * V).map(() => { const x = rng.normal() * 2; return quant ? Math.round(x * 2) / 4 : x; });
    const ks = [-1, 0, 1, 2, 7, 40, V - 1, V, V + 3], ps = [1, 0.95, 0.8, 0.5, 0.1, 0];
    const rows = Array.from({ length: B }, (_, b) => ({ t: b % 7 === 0 ? 0 : 0.4 + 1.2 * rng.uniform(), k: ks[b % ks.length]!, p: ps[Math.floor(b / ks.length) % ps.length]!, seed: b % 3 === 0 ? -rng.int(1, 2 ** 40) : rng.int(0, 2 ** 50) }));
    const l = Tensor.fromArray(cpu, data, [B, V], 'f32');
    const want = cpu.ops.sample(l, Tensor.fromArray(cpu, rows.map((r) => r.t), [B], 'f32'), Tensor.fromArray(cpu, rows.map((r) => r.k), [B], 'i32'), Tensor.fromArray(cpu, rows.map((r) => r.p), [B], 'f32'), Tensor.fromArray(cpu, rows.map((r) => r.seed), [B], 'i64')).toFloat64Array();
    const L = new Float32Array(l.toFloat64Array());
    const T32 = rows.map((r) => f(r.t)), P32 = rows.map((r) => f(r.p));
    for (let b = 0; b < B; b++) {
      const got = sampleRow(L.subarray(b * V, (b + 1) * V), T32[b]!, rows[b]!.k, P32[b]!, rows[b]!.seed, b);
      total++;
      if (got !== want[b]) { mism++; console.log(`B=${B} V=${V} row ${b} ${JSON.stringify(rows[b])}: ${got} vs ${want[b]}`); }
    }
  }
  console.log(`emulated sampler: ${mism} / ${total} rows differ`);
  expect(mism).toBe(0);
});

// kernels/sampler.cu's shared mass bins (fk_hist_add_mass): 32-bit atomics only, mlo plus a carry into mhi from the add
// that wraps it. Any order of the adds must give the exact u64 sum (the histogram walk and Z depend on it bit for bit).
it('the 32-bit mass bins (mlo, carry into mhi) sum 2^40 fixed-point masses exactly, in any order', () => {
  const rng = new Rng(11);
  for (let trial = 0; trial < 20; trial++) {
    const n = 1 + rng.int(0, 5000);
    // masses as the kernel makes them: round(exp(d) * 2^40), d <= 0 (the top logit's is exactly 2^40)
    const masses = Array.from({ length: n }, (_, i) => (i === 0 ? 2n ** 40n : BigInt(Math.round(Math.exp(-rng.uniform() * (trial % 4 === 0 ? 0.01 : 12)) * 2 ** 40))));
    const exact = masses.reduce((a, m) => a + m, 0n);
    for (const order of [masses, [...masses].reverse(), rng.permutation(n).map((i) => masses[i]!)]) {
      let mlo = 0, mhi = 0;
      for (const m of order) {
        if (m === 0n) continue;
        const lo = Number(m & 0xffffffffn);
        const old = mlo;
        mlo = (old + lo) >>> 0; // the atomicAdd's wrap-around
        const hi = Number(m >> 32n) + (mlo < old ? 1 : 0); // old + lo < old in 32 bits: the add wrapped
        mhi = (mhi + hi) >>> 0;
      }
      expect((BigInt(mhi) << 32n) + BigInt(mlo)).toBe(exact);
    }
  }
});

// kernels/sampler.cu's fk_find_nth_key (the top-p cut inside a tied group), modelled tile by tile: 8 consecutive elements
// a thread, an exclusive scan of the per-thread hit counts, the thread whose range holds the need-th hit picks its bit.
function findNthByTiles(hit: boolean[], need0: number, threads: number): number {
  const V = hit.length;
  let need = need0;
  for (let base = 0; base < V; base += 8 * threads) {
    const masks: number[] = [];
    for (let t = 0; t < threads; t++) {
      let m = 0;
      for (let e = 0; e < 8; e++) if (base + 8 * t + e < V && hit[base + 8 * t + e]) m |= 1 << e;
      masks.push(m);
    }
    const counts = masks.map((m) => m.toString(2).split('').filter((c) => c === '1').length);
    let excl = 0, cut = -1;
    for (let t = 0; t < threads; t++) {
      if (excl < need && need <= excl + counts[t]!) {
        let m = masks[t]!;
        for (let q = 1; q < need - excl; q++) m &= m - 1;
        cut = base + 8 * t + Math.log2(m & -m);
      }
      excl += counts[t]!;
    }
    if (cut >= 0) return cut;
    need -= excl;
  }
  return -1;
}

it('the tie cut (fk_find_nth_key by tiles) finds the need-th tied element in index order, or none', () => {
  const rng = new Rng(5);
  for (let trial = 0; trial < 200; trial++) {
    const V = 1 + rng.int(0, 6000);
    const density = [0.001, 0.01, 0.2, 0.9][trial % 4]!;
    const hit = Array.from({ length: V }, () => rng.uniform() < density);
    const positions = hit.flatMap((h, i) => (h ? [i] : []));
    const threads = [32, 64, 256, 512][trial % 4]!;
    for (const need of [1, 2, 3, Math.max(1, positions.length), positions.length + 1]) {
      expect(findNthByTiles(hit, need, threads), `V=${V} threads=${threads} need=${need}`).toBe(positions[need - 1] ?? -1);
    }
  }
});
