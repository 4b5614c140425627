import { readFileSync } from 'node:fs';
import os from 'node:os';
import type { DeviceInfo } from '@fastkernels/core';

/** Used when sysfs does not say (a typical server last-level cache). */
export const DEFAULT_LLC_BYTES = 32 * 1024 * 1024;

/** Parse a sysfs cache size such as '32768K' or '1M'; undefined when unreadable. */
export function parseCacheSize(text: string): number | undefined {
  const m = /^\s*(\d+)\s*([KMG]?)\s*$/i.exec(text);
  if (!m) return undefined;
  const scale = { '': 1, K: 1024, M: 1024 ** 2, G: 1024 ** 3 }[m[2]!.toUpperCase() as '' | 'K' | 'M' | 'G'];
  const n = Number(m[1]) * scale;
  return n > 0 ? n : undefined;
}

/** The last-level cache of cpu0: index3 (L3) when present, else index2 (L2). */
export function lastLevelCacheBytes(sysfsRoot = '/sys/devices/system/cpu/cpu0/cache'): number {
  for (const index of ['index3', 'index2']) {
    try {
      const n = parseCacheSize(readFileSync(`${sysfsRoot}/${index}/size`, 'utf8'));
      if (n) return n;
    } catch {
      // not on Linux, or no such cache level: try the next one
    }
  }
  return DEFAULT_LLC_BYTES;
}

export function cpuDeviceInfo(): DeviceInfo {
  const cpus = os.cpus();
  return Object.freeze({
    backend: 'cpu',
    index: 0,
    name: cpus[0]?.model.trim() || `${os.arch()} cpu`,
    totalMemory: os.totalmem(),
    multiprocessors: Math.max(1, cpus.length),
    l2CacheBytes: lastLevelCacheBytes(),
    extra: Object.freeze({ arch: os.arch(), platform: os.platform() }),
  });
}
