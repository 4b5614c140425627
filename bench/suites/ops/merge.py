#!/usr/bin/env python3
"""Merges ops_ours.json (ops.mjs) and ops_torch.json (ops_torch.py) into ops.json and prints the table, the issue's
targets last. Ratios: fracCopy = same-size copy time / our time (1 = copy speed); vsEager / vsCompiled = torch time /
our time (> 1: we are faster).
Usage: python3 merge.py OUT_DIR COMMIT DRIVER
"""
import json
import math
import sys

out, commit, driver = sys.argv[1], sys.argv[2], sys.argv[3]
ours = json.load(open(f"{out}/ops_ours.json"))
torch = json.load(open(f"{out}/ops_torch.json"))
tmap = {r["name"]: r for r in torch["results"]}


def ratio(num, den):
    return num / den if (num and den) else None


rows = []
for r in ours["results"]:
    t = tmap.get(r["name"], {})
    ms = r.get("ms")
    row = dict(r)
    row["torchEagerMs"], row["torchCompiledMs"], row["torchCopyMs"] = t.get("eagerMs"), t.get("compiledMs"), t.get("copyMs")
    row["torchStatus"] = t.get("status")
    row["vsEager"] = ratio(row["torchEagerMs"], ms)
    row["vsCompiled"] = ratio(row["torchCompiledMs"], ms)
    row["torchEagerFracCopy"] = ratio(row["torchCopyMs"], row["torchEagerMs"])
    for k in ("sdpaBackendsMs", "sdpaBackendErrors", "sdpaBestMs", "sdpaBest"):
        if k in t:
            row[k] = t[k]
    # the fastest of eager, compiled and (attention) each SDPA backend: the matmul and attention targets are held to it
    row["torchGroupedMs"] = t.get("groupedMs")  # moe: torch's grouped GEMM beside the per-expert loop (eager)
    row["vsGrouped"] = ratio(row["torchGroupedMs"], ms)
    best = min([x for x in (row["torchEagerMs"], row["torchCompiledMs"], t.get("sdpaBestMs"), row["torchGroupedMs"]) if x], default=None)
    row["vsTorchBest"] = ratio(best, ms)
    row["fallbackVsEager"] = ratio(row["torchEagerMs"], r.get("fallbackMs"))  # conv: the no-cuDNN path against torch
    row["torchEagerBenchmarkMs"] = t.get("eagerBenchmarkMs")  # conv: torch with cudnn.benchmark on
    row["benchmarkVsEagerBenchmark"] = ratio(row["torchEagerBenchmarkMs"], r.get("benchmarkMs"))
    if "routing" in row:  # MoE: the per-slot experts fed both sides; the record keeps what they were, not the list
        rt = dict(row["routing"])
        rt["slots"] = len(rt.pop("slotExperts", []))
        row["routing"] = rt
    rows.append(row)


def f(x, fmt):
    return format(x, fmt) if isinstance(x, (int, float)) and not (isinstance(x, float) and math.isnan(x)) else "-"


C = ours["ceilings"]
print(f"\ncopy {C['copyGBps']:.0f} GB/s (2 GiB D2D, measured in this run); times are medians of {ours['iters']} calls after an L2 flush")
if C.get("matrixTflops"):
    print(f"matrix rate {C['matrixTflops']:.0f} TFLOP/s (bf16 {'x'.join(map(str, C['matrixShape']))} GEMM through our matmul, this run); bmm floor = max(copy, FLOPs / rate)")
print(f"{'case':46s} {'MB':>6s} {'ours us':>9s} {'copy us':>8s} {'% copy':>6s} {'eager us':>9s} {'comp us':>9s} {'x eager':>7s} {'x comp':>7s}")
for r in rows:
    if r["status"] != "ok":
        print(f"{r['name']:46s} {r['status']}: {r.get('detail', '')[:80]}")
        continue
    us = lambda v: v and v * 1e3  # noqa: E731
    print(f"{r['name']:46s} {r['bytes'] / 1e6:6.0f} {f(us(r['ms']), '9.1f')} {f(us(r['copyMs']), '8.1f')} {f(r['fracCopy'] * 100, '6.0f')} "
          f"{f(us(r['torchEagerMs']), '9.1f')} {f(us(r['torchCompiledMs']), '9.1f')} {f(r['vsEager'], '7.2f')} {f(r['vsCompiled'], '7.2f')}")


def pick(groups, min_bytes=0):
    return [r for r in rows if r["group"] in groups and r["status"] == "ok" and r["bytes"] >= min_bytes]


def worst(rs, key):
    rs = [r for r in rs if r.get(key) is not None]
    return min(rs, key=lambda r: r[key]) if rs else None


mm = pick({"bmm"})
if mm:
    print(f"\n{'bmm / baddbmm case':46s} {'TFLOP/s':>8s} {'floor us':>9s} {'% floor':>7s} {'x eager':>7s} {'x comp':>7s} {'x best':>7s}")
    for r in mm:
        print(f"{r['name']:46s} {f(r.get('tflops'), '8.0f')} {f(r.get('floorMs') and r['floorMs'] * 1e3, '9.1f')} {f(r.get('fracFloor') and r['fracFloor'] * 100, '7.0f')} "
              f"{f(r['vsEager'], '7.2f')} {f(r['vsCompiled'], '7.2f')} {f(r['vsTorchBest'], '7.2f')}")

conv = pick({"conv"})
if conv:
    print(f"\n{'conv2d case (fp16 channels-last)':46s} {'TFLOP/s':>8s} {'% floor':>7s} {'ours us':>9s} {'eager us':>9s} {'x eager':>7s} {'x comp':>7s} {'bench us':>9s} {'t.bench':>8s} {'x t.b':>6s} {'engine heur/bench':>25s} {'fallbk x':>8s}")
    for r in conv:
        # the engine each run used: a graph-API plan's name (its tag), else the legacy algorithm number
        eng = lambda p: str((p or {}).get("engineName") or (p or {}).get("engine") or (p or {}).get("algo", "-"))[:12]  # noqa: E731
        algo = f"{eng(r.get('cudnnPlan'))}/{eng(r.get('cudnnPlanBenchmark'))}"
        print(f"{r['name']:46s} {f(r.get('tflops'), '8.1f')} {f(r.get('fracFloor') and r['fracFloor'] * 100, '7.0f')} {f(r['ms'] * 1e3, '9.1f')} "
              f"{f(r['torchEagerMs'] and r['torchEagerMs'] * 1e3, '9.1f')} {f(r['vsEager'], '7.2f')} {f(r['vsCompiled'], '7.2f')} "
              f"{f(r.get('benchmarkMs') and r['benchmarkMs'] * 1e3, '9.1f')} {f(r['torchEagerBenchmarkMs'] and r['torchEagerBenchmarkMs'] * 1e3, '8.1f')} {f(r['benchmarkVsEagerBenchmark'], '6.2f')} {algo:>25s} {f(r['fallbackVsEager'], '8.2f')}")
att = pick({"attention"})
if att:
    print(f"\n{'attention case (bf16)':46s} {'TFLOP/s':>8s} {'ours us':>9s} {'route':>8s} {'dense us':>9s} {'default':>9s} {'cudnn':>9s} {'flash':>9s} {'effic.':>9s} {'x dflt':>7s} {'x best':>7s}")
    for r in att:
        b = r.get("sdpaBackendsMs") or {}
        print(f"{r['name']:46s} {f(r.get('tflops'), '8.0f')} {f(r['ms'] * 1e3, '9.1f')} {str(r.get('sdpaPath') or '-'):>8s} {f(r.get('denseKernelMs') and r['denseKernelMs'] * 1e3, '9.1f')} {f(r['torchEagerMs'] and r['torchEagerMs'] * 1e3, '9.1f')} "
              + " ".join(f(b.get(k) and b[k] * 1e3, '9.1f') for k in ("cudnn", "flash", "efficient")) + f" {f(r['vsEager'], '7.2f')} {f(r['vsTorchBest'], '7.2f')}")


def geomean(xs):
    xs = [x for x in xs if x]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


ew = pick({"elementwise", "chain"}, 64e6)
chain = pick({"chain"})
norm = pick({"norm", "softmax"})
w_ew, w_chain = worst(ew, "fracCopy"), worst(chain, "vsCompiled")
w_norm_e, w_norm_c = worst(norm, "vsEager"), worst(norm, "fracCopy")
w_mm = worst(mm, "vsTorchBest")
summary = {
    "ewMinFracCopy": w_ew and w_ew["fracCopy"], "ewMinFracCopyCase": w_ew and w_ew["name"],
    "chainMinVsCompiled": w_chain and w_chain["vsCompiled"], "chainMinVsCompiledCase": w_chain and w_chain["name"],
    "normMinVsEager": w_norm_e and w_norm_e["vsEager"], "normMinVsEagerCase": w_norm_e and w_norm_e["name"],
    "normMinFracCopy": w_norm_c and w_norm_c["fracCopy"], "normMinFracCopyCase": w_norm_c and w_norm_c["name"],
    "bmmMinVsTorch": w_mm and w_mm["vsTorchBest"], "bmmMinVsTorchCase": w_mm and w_mm["name"],
    "convGeomeanVsEager": geomean([r["vsEager"] for r in conv]), "convMinVsEager": (worst(conv, "vsEager") or {}).get("vsEager"),
    "convMinVsEagerCase": (worst(conv, "vsEager") or {}).get("name"), "convFallbackGeomeanVsEager": geomean([r["fallbackVsEager"] for r in conv]),
    # with measured algorithms on both sides (our algoSearch 'benchmark', torch's cudnn.benchmark)
    "convBenchmarkGeomeanVsEagerBenchmark": geomean([r["benchmarkVsEagerBenchmark"] for r in conv]),
    "convBenchmarkGeomeanVsEager": geomean([ratio(r["torchEagerMs"], r.get("benchmarkMs")) for r in conv]),
    # issue 28: causal Llama-3-8B vs the default dispatch; non-causal head dim 128 vs the fastest backend and >= 600 TFLOP/s
    "attnLlamaCausalVsDefault": next((r["vsEager"] for r in att if "llama3-8b-causal-1x" in r["name"]), None),
    "attnNonCausalMinVsBest": (worst([r for r in att if "noncausal" in r["name"]], "vsTorchBest") or {}).get("vsTorchBest"),
    "attnNonCausalMinVsBestCase": (worst([r for r in att if "noncausal" in r["name"]], "vsTorchBest") or {}).get("name"),
    "attnNonCausalHd128MinTflops": min([r["tflops"] for r in att if "noncausal" in r["name"] and "hd64" not in r["name"]], default=None),
    "notOk": [r["name"] for r in rows if r["status"] != "ok"],
}
# issue 32: GLA decode as a fraction of the state read floor (bytes = state read + written), prefill vs torch.compile
gla_dec = [r for r in pick({"recurrent"}) if r["op"] == "fused_recurrent_gla"]
gla_pre = [r for r in pick({"recurrent"}) if r["op"] == "chunk_gla"]
summary["glaDecodeMinFracStateFloor"] = (worst(gla_dec, "fracCopy") or {}).get("fracCopy")
summary["glaDecodeMinFracStateFloorCase"] = (worst(gla_dec, "fracCopy") or {}).get("name")
summary["glaPrefillMinVsCompiled"] = (worst(gla_pre, "vsCompiled") or {}).get("vsCompiled")
summary["glaPrefillMaxFracMatrix"] = max([r["fracFloor"] for r in gla_pre if r.get("fracFloor")], default=None)
# issue 32: gated delta rule / KDA prefill vs torch.compile and (GDN) FLA's published H200 times; their decode vs the
# state read floor
delta_pre = [r for r in pick({"recurrent"}) if r["op"] in ("chunk_gated_delta_rule", "chunk_kda")]
delta_dec = [r for r in pick({"recurrent"}) if r["op"] in ("fused_recurrent_gated_delta_rule", "fused_recurrent_kda")]
for r in delta_pre:
    r["vsYardstick"] = ratio(r.get("yardstickMs"), r["ms"])
gdn_fla = [r for r in delta_pre if r.get("vsYardstick")]
summary["deltaPrefillMinVsCompiled"] = (worst(delta_pre, "vsCompiled") or {}).get("vsCompiled")
summary["deltaPrefillMinVsCompiledCase"] = (worst(delta_pre, "vsCompiled") or {}).get("name")
summary["deltaPrefillMaxFracMatrix"] = max([r["fracFloor"] for r in delta_pre if r.get("fracFloor")], default=None)
summary["gdnPrefillMinVsFla"] = (worst(gdn_fla, "vsYardstick") or {}).get("vsYardstick")
summary["gdnPrefillMinVsFlaCase"] = (worst(gdn_fla, "vsYardstick") or {}).get("name")
summary["deltaDecodeMinFracStateFloor"] = (worst(delta_dec, "fracCopy") or {}).get("fracCopy")
summary["deltaDecodeMinFracStateFloorCase"] = (worst(delta_dec, "fracCopy") or {}).get("name")
# issue 34: permutation copies (x.permute(...).contiguous()) against a same-size copy
perm = [r for r in pick({"layout"}) if r["op"] == "contiguous"]
summary["permuteMinFracCopy"] = (worst(perm, "fracCopy") or {}).get("fracCopy")
summary["permuteMinFracCopyCase"] = (worst(perm, "fracCopy") or {}).get("name")
# issue 31: the fused MoE GEMM at decode (T <= 16) against the read floor of the experts hit, at prefill (T 4096)
# against the dense bf16 GEMM rate of this run, and against PyTorch's per-expert loop and grouped GEMM
moe = pick({"moe"})
moe_dec = [r for r in moe if int(r["name"].split("-T")[1].split("-")[0]) <= 16]
moe_pre = [r for r in moe if "-T4096-" in r["name"]]
summary["moeDecodeMinFracFloor"] = (worst(moe_dec, "fracCopy") or {}).get("fracCopy")
summary["moeDecodeMinFracFloorCase"] = (worst(moe_dec, "fracCopy") or {}).get("name")
summary["moePrefillMinFracMatrix"] = min([ratio(r.get("matrixMs"), r["ms"]) for r in moe_pre if r.get("matrixMs")], default=None)
summary["moeMinVsLoop"] = (worst(moe, "vsEager") or {}).get("vsEager")
summary["moeMinVsLoopCase"] = (worst(moe, "vsEager") or {}).get("name")
summary["moeMinVsGrouped"] = (worst(moe, "vsGrouped") or {}).get("vsGrouped")
summary["moeMinVsGroupedCase"] = (worst(moe, "vsGrouped") or {}).get("name")
merged = {"commit": commit, "gpu": (ours.get("device") or {}).get("name"), "driver": driver,
          "versions": {"ours": ours["versions"], "torch": torch["versions"]}, "ceilings": C, "iters": ours["iters"],
          "settings": ours.get("settings"), "summary": summary, "rows": rows,
          "seconds": {"ours": ours.get("seconds"), "torch": torch.get("seconds"), "torchCompile": torch.get("compileSeconds")}}
json.dump(merged, open(f"{out}/ops.json", "w"), indent=2)

ok = lambda b: "PASS" if b else "MISS"  # noqa: E731
S = summary
print(f"\nops.json: {out}/ops.json (commit {commit or '?'}, {merged['gpu']}, driver {driver or '?'})")
if S["notOk"]:
    print(f"not measured: {', '.join(S['notOk'])}")
if ew:
    print(f"target elementwise / chains >= 64 MB >= 90% of a same-size copy: min {f(S['ewMinFracCopy'] and S['ewMinFracCopy'] * 100, '.0f')}% ({S['ewMinFracCopyCase']}) over {len(ew)} cases  {ok(bool(ew) and S['ewMinFracCopy'] >= 0.9)}")
if chain:
    print(f"target 3-op chain >= 1.0x torch.compile:                      min {f(S['chainMinVsCompiled'], '.2f')}x ({S['chainMinVsCompiledCase']})  {ok(S['chainMinVsCompiled'] is not None and S['chainMinVsCompiled'] >= 1.0)}")
if norm:
    print(f"target layer/group norm, softmax >= 1.0x torch eager:         min {f(S['normMinVsEager'], '.2f')}x ({S['normMinVsEagerCase']})  {ok(S['normMinVsEager'] is not None and S['normMinVsEager'] >= 1.0)}")
    print(f"target layer/group norm, softmax >= 85% of a same-size copy:  min {f(S['normMinFracCopy'] and S['normMinFracCopy'] * 100, '.0f')}% ({S['normMinFracCopyCase']})  {ok(S['normMinFracCopy'] is not None and S['normMinFracCopy'] >= 0.85)}")
if mm:
    print(f"target bmm / baddbmm >= 0.97x torch (faster of eager, compile): min {f(S['bmmMinVsTorch'], '.2f')}x ({S['bmmMinVsTorchCase']}) over {len(mm)} cases  {ok(S['bmmMinVsTorch'] is not None and S['bmmMinVsTorch'] >= 0.97)}")
if conv:
    print(f"target conv2d >= 0.95x torch (cuDNN) geomean, none below 0.8x:  geomean {f(S['convGeomeanVsEager'], '.2f')}x, min {f(S['convMinVsEager'], '.2f')}x ({S['convMinVsEagerCase']}) over {len(conv)} cases  {ok((S['convGeomeanVsEager'] or 0) >= 0.95 and (S['convMinVsEager'] or 0) >= 0.8)}")
    print(f"  (informative) the implicit-GEMM fallback (no cuDNN) vs torch: geomean {f(S['convFallbackGeomeanVsEager'], '.2f')}x")
    print(f"  (informative) algoSearch 'benchmark': {f(S['convBenchmarkGeomeanVsEager'], '.2f')}x torch default, {f(S['convBenchmarkGeomeanVsEagerBenchmark'], '.2f')}x torch with cudnn.benchmark (geomeans)")
if att:
    print(f"target (issue 28) Llama-3-8B causal prefill attention >= 1.0x default SDPA: {f(S['attnLlamaCausalVsDefault'], '.2f')}x  {ok((S['attnLlamaCausalVsDefault'] or 0) >= 1.0)}")
    print(f"target (issue 28) non-causal >= 1.0x the fastest SDPA backend: min {f(S['attnNonCausalMinVsBest'], '.2f')}x ({S['attnNonCausalMinVsBestCase']})  {ok((S['attnNonCausalMinVsBest'] or 0) >= 1.0)}")
    print(f"target (issue 28) non-causal head dim 128 >= 600 TFLOP/s: min {f(S['attnNonCausalHd128MinTflops'], '.0f')}  {ok((S['attnNonCausalHd128MinTflops'] or 0) >= 600)}")
if gla_dec or gla_pre:
    print(f"target (issue 32) GLA decode bs 1-256 >= 80% of the state read floor: min {f(S['glaDecodeMinFracStateFloor'] and S['glaDecodeMinFracStateFloor'] * 100, '.0f')}% ({S['glaDecodeMinFracStateFloorCase']})  {ok((S['glaDecodeMinFracStateFloor'] or 0) >= 0.8)}")
    print(f"target (issue 32) chunk_gla prefill >= 2x the plain-PyTorch chunked form under torch.compile: min {f(S['glaPrefillMinVsCompiled'], '.2f')}x  {ok((S['glaPrefillMinVsCompiled'] or 0) >= 2.0)}"
          f"  (tensor-core rate of its FLOPs: {f(S['glaPrefillMaxFracMatrix'] and S['glaPrefillMaxFracMatrix'] * 100, '.1f')}%)")
if delta_pre or delta_dec:
    print(f"target (issue 32) gated delta rule / KDA prefill >= 2x the plain-PyTorch chunked form under torch.compile: min {f(S['deltaPrefillMinVsCompiled'], '.2f')}x ({S['deltaPrefillMinVsCompiledCase']})  {ok((S['deltaPrefillMinVsCompiled'] or 0) >= 2.0)}"
          f"  (tensor-core rate of its FLOPs: {f(S['deltaPrefillMaxFracMatrix'] and S['deltaPrefillMaxFracMatrix'] * 100, '.1f')}%)")
    for r in gdn_fla:
        print(f"  {r['name']:44s} {f(r['ms'], '.3f')} ms vs FLA 0.5.1 on an H200 {r['yardstickMs']:.3f} ms: {f(r['vsYardstick'], '.2f')}x")
    print(f"target (issue 32) gated delta rule at least as fast as FLA 0.5.1 (H200 figures): min {f(S['gdnPrefillMinVsFla'], '.2f')}x ({S['gdnPrefillMinVsFlaCase']})  {ok((S['gdnPrefillMinVsFla'] or 0) >= 1.0)}"
          f"{'' if 'H200' in str(merged['gpu']) else '  (this GPU is not an H200: informative)'}")
    print(f"target (issue 32) delta-rule / KDA decode bs 1-256 >= 80% of the state read floor: min {f(S['deltaDecodeMinFracStateFloor'] and S['deltaDecodeMinFracStateFloor'] * 100, '.0f')}% ({S['deltaDecodeMinFracStateFloorCase']})  {ok((S['deltaDecodeMinFracStateFloor'] or 0) >= 0.8)}")
if perm:
    print(f"target (issue 34) permutation copies >= 80% of a same-size copy: min {f(S['permuteMinFracCopy'] and S['permuteMinFracCopy'] * 100, '.0f')}% ({S['permuteMinFracCopyCase']})  {ok((S['permuteMinFracCopy'] or 0) >= 0.8)}")
if moe:
    print(f"\n{'fused MoE GEMM case (bf16)':46s} {'tile':>11s} {'ours us':>9s} {'% copy':>7s} {'TFLOP/s':>8s} {'loop us':>9s} {'grouped':>9s} {'x loop':>7s} {'x grp':>7s}")
    for r in moe:
        print(f"{r['name']:46s} {str(r.get('moeTile')):>11s} {f(r['ms'] * 1e3, '9.1f')} {f(r['fracCopy'] * 100, '7.0f')} {f(r.get('tflops'), '8.0f')} "
              f"{f(r['torchEagerMs'] and r['torchEagerMs'] * 1e3, '9.1f')} {f(r['torchGroupedMs'] and r['torchGroupedMs'] * 1e3, '9.1f')} {f(r['vsEager'], '7.2f')} {f(r['vsGrouped'], '7.2f')}")
    print(f"target (issue 31) fused MoE GEMM decode (T <= 16) >= 80% of the hit experts' read floor: min {f(S['moeDecodeMinFracFloor'] and S['moeDecodeMinFracFloor'] * 100, '.0f')}% ({S['moeDecodeMinFracFloorCase']})  {ok((S['moeDecodeMinFracFloor'] or 0) >= 0.8)}")
    print(f"target (issue 31) fused MoE GEMM prefill (T 4096) >= 70% of the dense bf16 GEMM rate: min {f(S['moePrefillMinFracMatrix'] and S['moePrefillMinFracMatrix'] * 100, '.0f')}%  {ok((S['moePrefillMinFracMatrix'] or 0) >= 0.7)}")
    print(f"target (issue 31) >= 3x the PyTorch per-expert loop: min {f(S['moeMinVsLoop'], '.2f')}x ({S['moeMinVsLoopCase']})  {ok((S['moeMinVsLoop'] or 0) >= 3.0)}"
          f"  (vs torch's grouped GEMM: min {f(S['moeMinVsGrouped'], '.2f')}x, {S['moeMinVsGroupedCase']})")
# issue 31, informative: the tensor-core grouped GEMM at gpt-oss-20b's gate_up, MXFP4 experts (decoded inside the GEMM)
# beside dense bf16 ones, against PyTorch's per-expert loop (dequantising every expert first for MXFP4)
mx = pick({"moe-grouped"})
if mx:
    print(f"\n{'grouped GEMM case (bf16 activations)':46s} {'ours us':>9s} {'TFLOP/s':>8s} {'% matrix':>9s} {'torch us':>9s} {'x torch':>8s}")
    for r in mx:
        print(f"{r['name']:46s} {f(r['ms'] * 1e3, '9.1f')} {f(r.get('tflops'), '8.0f')} {f(ratio(r.get('matrixMs'), r['ms']) and ratio(r.get('matrixMs'), r['ms']) * 100, '9.0f')} "
              f"{f(r['torchEagerMs'] and r['torchEagerMs'] * 1e3, '9.1f')} {f(r['vsEager'], '8.2f')}")
