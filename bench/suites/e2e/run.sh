#!/usr/bin/env bash
# Issue 6 end-to-end benchmark on the GPU host: Llama-3-8B shape (hidden 4096, 32 layers, 32/8 heads, intermediate
# 14336, vocab 128256), random bf16 weights, eager (no CUDA graphs): prefill tokens/s at 1 x 4096 and decode
# tokens/s at bs 1 and bs 32, ours (e2e_llama.mjs: the engine's generate on the CUDA backend, weights filled
# on the device) and HF transformers (e2e_llama.py: sdpa and eager attention, weights initialised on the GPU)
# in the same run, one after the other. Writes $OUT/e2e_llama.json; the table's last lines compare ours vs HF.
#   dist/gpu-host/bench/run e2e [--quick]
# Budget: ours ~1 min, HF ~1.5 min (HF decode is measured over 16 steps only: ~9 tok/s at bs 1); each side runs
# under a timeout (OURS_TIMEOUT=150, HF_TIMEOUT=170 s) and writes its JSON after every measurement, so the merge and
# the table always come.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/../../lib/lib.sh"
fk_setup e2e-llama
ours_args=(--decode-steps 64 --repeats 2); hf_args=(--decode-steps 16 --repeats 2)
for x in "$@"; do [ "$x" = "--quick" ] && { ours_args=(--decode-steps 32 --repeats 1); hf_args=(--decode-steps 8 --repeats 1 --attn sdpa); }; done
echo "e2e-llama: bundle $bundle (commit ${commit:-?}), python $PY, out $OUT"
model="$OUT/e2e-llama3-8b"
fk_llama3_8b_config "$model/config.json"
t0=$SECONDS
rm -f "$OUT/e2e_ours.json" "$OUT/e2e_hf.json"
echo "e2e-llama: ours (e2e_llama.mjs)"
timeout "${OURS_TIMEOUT:-150}" "$bundle/run-node" "$drv/e2e_llama.mjs" --model "$model" --json "$OUT/e2e_ours.json" --batches 1,32 "${ours_args[@]}" \
  || echo "e2e-llama: ours exited with $? (partial results, if any, are kept)" >&2
echo "e2e-llama: ours took $((SECONDS - t0)) s; HF (e2e_llama.py)"
t1=$SECONDS
timeout "${HF_TIMEOUT:-170}" "$PY" "$here/e2e_llama.py" --model "$model" --json "$OUT/e2e_hf.json" --batches 1,32 --budget-s "$(( ${HF_TIMEOUT:-170} - 30 ))" "${hf_args[@]}" \
  || echo "e2e-llama: HF exited with $? (partial results, if any, are kept)" >&2
echo "e2e-llama: HF took $((SECONDS - t1)) s"

"$PY" - "$OUT" "$commit" <<'PY'
import json, os, sys
out, commit = sys.argv[1], sys.argv[2]
load = lambda f: json.load(open(f)) if os.path.exists(f) and os.path.getsize(f) else None
ours, hf = load(f"{out}/e2e_ours.json"), load(f"{out}/e2e_hf.json")
runs = ["prefill", "decode_bs1", "decode_bs32"]
label = {"prefill": "prefill 1x4096 tok/s", "decode_bs1": "decode bs1 tok/s", "decode_bs32": "decode bs32 tok/s"}
attns = list((hf or {}).get("runs", {}).keys())
tps = lambda side, r: ((side or {}).get(r) or {}).get("tokensPerS")
rows = []
for r in runs:
    row = {"run": r, "ours": tps((ours or {}).get("runs"), r)}
    for a in attns:
        row[f"hf_{a}"] = tps(hf["runs"][a], r)
        row[f"ours_vs_hf_{a}"] = (row["ours"] / row[f"hf_{a}"]) if row["ours"] and row[f"hf_{a}"] else None
    rows.append(row)
merged = {"commit": commit, "device": (ours or {}).get("device") or (hf or {}).get("device"), "model": "Llama-3-8B shape, random bf16, eager (no graphs)",
          "summary": rows, "ours": ours, "hf": hf}
json.dump(merged, open(f"{out}/e2e_llama.json", "w"), indent=2)
f = lambda x, p=1: "-" if x is None else f"{x:.{p}f}"
print(f"\ne2e_llama.json: {out}/e2e_llama.json (commit {commit or '?'}, {merged['device']}; torch {(hf or {}).get('versions', {}).get('torch')}, transformers {(hf or {}).get('versions', {}).get('transformers')})")
for side, d in (("ours", ours), ("hf", hf)):
    if d is None:
        print(f"{side}: NO RESULTS (see the log above)")
        continue
    for e in d.get("errors", []):
        print(f"{side} error in {e.get('run')}: {str(e.get('error'))[:400]}")
    if d.get("skipped"):
        print(f"{side} skipped (time budget): {', '.join(d['skipped'])}")
if ours:
    for r in ("decode_bs1", "decode_bs32"):
        x = ours["runs"].get(r)
        if x: print(f"ours {r}: {x['msPerStep']:.2f} ms/step over {x['steps']} steps (prefill of the batch {x['firstStepMs']:.1f} ms)")
    print(f"ours: weights filled on the device in {ours.get('weightsMs', 0) / 1e3:.1f} s (excluded)")
hdr = f"{'':22s} {'ours':>10s}" + "".join(f" {'HF ' + a:>12s}" for a in attns) + "".join(f" {'ours/HF ' + a:>14s}" for a in attns)
print(hdr)
for row in rows:
    print(f"{label[row['run']]:22s} {f(row['ours']):>10s}" + "".join(f" {f(row[f'hf_{a}']):>12s}" for a in attns) + "".join(f" {(f(row[f'ours_vs_hf_{a}'], 2) + 'x') if row[f'ours_vs_hf_{a}'] else '-':>14s}" for a in attns))
PY
echo "e2e-llama: total $((SECONDS - t0)) s"
