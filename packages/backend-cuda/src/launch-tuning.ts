import { envSwitch } from '@fastkernels/core';

/**
 * Programmatic dependent launch (PDL, sm_90+) for FastKernels' own kernels. A kernel whose first statement is
 * fk_pdl_entry() (kernels/fk_pdl.cuh: wait for the kernel before, then let the next one be scheduled) may be launched
 * with LAUNCH_PDL: its launch and ramp then overlap the tail of the kernel before it, which at batch 1 is most of a
 * small kernel's time (run 10: the bs-1 decode step is ~420 kernels; decode-profile). fileKernel compiles those
 * instructions in (-DFK_PDL=1) only for PDL launches (in graph captures by default); every other launch runs the
 * machine code verified before PDL (tools/sass-same.sh against 5a5d850: same for every kernel of these files).
 */

/** Knobs of kernel launches (the defaults are the shipped, H200-verified choice). */
export const LAUNCH_TUNING = {
  /**
   * Launch the kernels of PDL_READY_FILES with LAUNCH_PDL while a CUDA graph is being captured (the decode graphs).
   * Run 11 (H200): a captured graph gets programmatic edges, every spine kernel and the engine's graph decode are
   * right with PDL launches (the GPU tests, PDL launches then also eager), and the bs-1 Llama-3-8B decode step went
   * from 4.77 to 4.58 ms with it and chained decode (decode_ab-run11-gemv.json; 4.70 -> 4.47 ms with the GEMV too,
   * decode_ab.json). FASTKERNELS_PDL=0 turns it off for a process (the A/B bench's `plain`).
   */
  pdl: envSwitch('FASTKERNELS_PDL', true),
  /**
   * Also launch them with LAUNCH_PDL outside graph capture. Off: run 11's eager kernel bench was slower with it for
   * large grids (fused rms_norm T16384 173 against 132 us, T4096 48 against 38), where there is no launch gap to hide.
   * FASTKERNELS_PDL_EAGER=1 turns it on for a process: `FASTKERNELS_PDL_EAGER=1 run-gpu-tests ...` checks every spine
   * kernel as a PDL launch, as run 11 did.
   */
  pdlEager: envSwitch('FASTKERNELS_PDL_EAGER', false),
};

/**
 * Kernel files every kernel of which starts with fk_pdl_entry() (fk_gemv: fk_pdl_wait() after its first weight loads,
 * before it reads x); pdl-kernels.test.ts checks the sources. elementwise.cu, harness.cu and runtime.cu are not here:
 * they launch plainly.
 */
export const PDL_READY_FILES: ReadonlySet<string> = new Set([
  'activation.cu',
  'attention_decode.cu',
  'attention_prefill.cu',
  'embedding.cu',
  'gemv.cu',
  'kvcache.cu',
  'norm.cu',
  'rotary.cu',
  'sampler.cu',
  'softmax.cu',
]);

/** Whether PDL launches are on for this device at all: the switch is on and the device is sm_90+. */
export function pdlAvailable(rt: { properties(): { major: number } }): boolean {
  return LAUNCH_TUNING.pdl && rt.properties().major >= 9;
}

/** Whether kernels that allow it are launched with LAUNCH_PDL now: available, and a graph capture is on (or pdlEager). */
export function pdlLaunches(rt: { properties(): { major: number }; readonly capturing?: boolean }): boolean {
  return pdlAvailable(rt) && (LAUNCH_TUNING.pdlEager || rt.capturing === true);
}
