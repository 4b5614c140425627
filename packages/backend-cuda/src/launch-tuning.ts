import { cudaTuning } from './tuning/load.js';

/**
 * Programmatic dependent launch (PDL, sm_90+) for FastKernels' own kernels. A kernel whose first statement is
 * fk_pdl_entry() (kernels/fk_pdl.cuh: wait for the kernel before, then let the next one be scheduled) may be launched
 * with LAUNCH_PDL: its launch and ramp then overlap the tail of the kernel before it, which at batch 1 is most of a
 * small kernel's time (run 10: the bs-1 decode step is ~420 kernels; decode-profile). fileKernel compiles those
 * instructions in (-DFK_PDL=1) only for PDL launches (in graph captures by default); every other launch runs the
 * machine code verified before PDL (tools/sass-same.sh: the same for every kernel of these files). On by default only in
 * graph captures: there a launch gap is there to hide; large eager grids were slower with it (docs/experiments.md).
 * The switches are the tuning's launch section (tuning/*.json: launch.pdl, launch.pdlEager).
 */

/**
 * Kernel files every kernel of which starts with fk_pdl_entry() (fk_gemv: fk_pdl_wait() after its first weight loads,
 * before it reads x); pdl-kernels.test.ts checks the sources. elementwise.cu, harness.cu and runtime.cu are not here:
 * they launch plainly.
 */
export const PDL_READY_FILES: ReadonlySet<string> = new Set([
  'activation.cu',
  'attention_decode.cu',
  'attention_mla_decode.cu',
  'attention_prefill.cu',
  'embedding.cu',
  'gemv.cu',
  'kvcache.cu',
  'norm.cu',
  'rotary.cu',
  'sampler.cu',
  'softmax.cu',
]);

/** Whether PDL launches are on for this device at all: launch.pdl is on and the device is sm_90+. */
export function pdlAvailable(rt: { properties(): { major: number } }): boolean {
  return cudaTuning().launch.pdl && rt.properties().major >= 9;
}

/** Whether kernels that allow it are launched with LAUNCH_PDL now: available, and a graph capture is on (or launch.pdlEager). */
export function pdlLaunches(rt: { properties(): { major: number }; readonly capturing?: boolean }): boolean {
  return pdlAvailable(rt) && (cudaTuning().launch.pdlEager || rt.capturing === true);
}
