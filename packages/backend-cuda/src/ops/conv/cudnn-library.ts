/**
 * cuDNN, loaded once per process on the first conv that wants it (never at import or backend construction, so the
 * addon and every other op work on a machine without cuDNN). The addon's cuDNN functions (native/cudnn.cc) are typed
 * here rather than in native.ts because only the conv ops call them.
 */
import type { NativeAddon } from '../../native.js';
import { cudnnCandidates, defaultDiscoveryEnv, formatCudnnNotFound, type DiscoveryEnv } from '../../discovery.js';

/** Which cuDNN API ran a conv key and with what (cudnnLastPlan). */
export interface CudnnPlanInfo {
  /** 'graph': the backend API; 'legacy': cudnnConvolutionForward / BackwardData; null: declined (the fallback ran). */
  api: 'graph' | 'legacy' | null;
  /** The graph engine's global index (-1 on the legacy path). */
  engine: number;
  /** The graph plan's tag ("eng<id>_k<knob>=<value>...", as cudnn-frontend tags plans) or the legacy algorithm's name. */
  engineName: string;
  /** The legacy algorithm and math type (-1 on the graph path). */
  algo: number;
  mathType: number;
  workspace: number;
  /** Measured on its first call (algoSearch 'benchmark'); timedPlans: how many graph plans were timed, measuredMs the kept one's time. */
  searched: boolean;
  timedPlans: number;
  measuredMs: number;
  /** Engine configs the graph heuristics offered after the numerics filter. */
  engineConfigs: number;
  /** Why the graph API does not run the key ('' when it does). */
  graphDeclined: string;
  /** Configs passed over before the one in use, or why a benchmark search measured nothing. */
  note: string;
  declined: boolean;
}

export interface CudnnAddon {
  cudnnLoad(candidates: string[], preloads: string[][]): { ok: boolean; path?: string; version?: number; apis?: string[]; tried: { path: string; error: string }[] };
  cudnnLoaded(): string | null;
  cudnnVersion(): number;
  cudnnEnsureHandle(device: number): void;
  /** 0: ran; > 0: the workspace bytes it needs (nothing ran); -1: cuDNN declined the shape (cudnnDeclineReason). */
  cudnnConv(params: Float64Array): number;
  cudnnDeclineReason(): string;
  cudnnPlanCount(): number;
  cudnnClearPlans(): void;
  /** The plan of the last key cudnnConv saw (null before any): which API and engine, its workspace, measured or not. */
  cudnnLastPlan(): CudnnPlanInfo | null;
}

/** apis: the conv APIs this cuDNN exports ('graph': the backend API, 'legacy': the legacy convolution API). */
export type CudnnState =
  | { readonly ok: true; readonly path: string; readonly version: string; readonly apis: readonly string[] }
  | { readonly ok: false; readonly reason: string };

/** 90600 -> "9.6.0" (cuDNN 9 encodes major * 10000 + minor * 100 + patch; 8 used major * 1000 + minor * 100 + patch). */
export function formatCudnnVersion(v: number): string {
  if (v >= 90000) return `${Math.floor(v / 10000)}.${Math.floor((v % 10000) / 100)}.${v % 100}`;
  return `${Math.floor(v / 1000)}.${Math.floor((v % 1000) / 100)}.${v % 100}`;
}

export function cudnnAddon(addon: NativeAddon): CudnnAddon {
  return addon as unknown as CudnnAddon;
}

let state: CudnnState | undefined;

/** Load cuDNN (first call only; the answer is kept for the process). Never throws: the reason says what was tried. */
export function loadCudnn(addon: CudnnAddon, de: DiscoveryEnv = defaultDiscoveryEnv()): CudnnState {
  if (state) return state;
  if (typeof addon.cudnnLoad !== 'function') return (state = { ok: false, reason: 'cuDNN: this build of the addon has no cuDNN support (rebuild it)' });
  const c = cudnnCandidates(de);
  try {
    const r = addon.cudnnLoad(c.candidates, c.preloads);
    state = r.ok
      ? { ok: true, path: r.path!, version: formatCudnnVersion(r.version!), apis: r.apis ?? ['legacy'] }
      : { ok: false, reason: formatCudnnNotFound(r.tried, c.searchedDirs) };
  } catch (e) {
    state = { ok: false, reason: `cuDNN failed to load: ${(e as Error).message}` };
  }
  return state;
}

/** The state if cuDNN was already looked for, without looking (doctor and tests). */
export function cudnnState(): CudnnState | undefined {
  return state;
}

/** For tests: forget the cached answer. */
export function resetCudnnState(): void {
  state = undefined;
}

/** backend.versions()'s entries for cuDNN: its version, file and conv APIs, or why it is unavailable (and that convs fall back). */
export function cudnnVersionEntries(s: CudnnState): Record<string, string> {
  if (!s.ok) return { cudnn: `unavailable: ${s.reason}` };
  const api = s.apis.includes('graph') ? (s.apis.includes('legacy') ? 'graph (legacy fallback)' : 'graph') : 'legacy (no backend API)';
  return { cudnn: s.version, libcudnn: s.path, cudnnConvApi: api };
}
