/** The types of pack-install.mjs, for test/pack-install.test.ts. */
export interface PackedPackage {
  readonly name: string;
  readonly version: string;
  /** The tarball's file name (in `<app>/tarballs/`). */
  readonly tarball: string;
  /** The paths inside the tarball, relative to its package folder. */
  readonly files: string[];
  readonly pkg: Record<string, unknown>;
  /** The package folder, relative to the repository root (packages/<dir>). */
  readonly rel: string;
}
export function publishablePackages(): { dir: string; rel: string; pkg: Record<string, unknown> }[];
export function packAll(dest: string): PackedPackage[];
export function lockFor(packed: readonly PackedPackage[], tarballDir: string): Record<string, unknown>;
export function packInstall(app: string): PackedPackage[];
