/** Image decoding for detect / classify: PNG (RGB, RGBA, gray, 16-bit) and JPEG to RGB8; bad files are UserErrors. */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { UserError } from '@fastkernels/core';
import { encode as encodePng } from 'fast-png';
import { encode as encodeJpeg } from 'jpeg-js';
import { afterAll, describe, expect, it } from 'vitest';
import { listImages, readImage } from './images.js';

const tmp = mkdtempSync(join(tmpdir(), 'fk-images-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

describe('readImage', () => {
  it('PNG RGB / RGBA / gray / 16-bit and JPEG decode to RGB8', () => {
    const rgb = Uint8Array.from({ length: 4 * 3 * 3 }, (_, i) => (i * 17) % 256);
    writeFileSync(join(tmp, 'rgb.png'), encodePng({ width: 4, height: 3, data: rgb, channels: 3, depth: 8 }));
    expect(readImage(join(tmp, 'rgb.png'))).toEqual({ width: 4, height: 3, data: rgb });
    const rgba = Uint8Array.from({ length: 2 * 1 * 4 }, (_, i) => i * 30);
    writeFileSync(join(tmp, 'rgba.png'), encodePng({ width: 2, height: 1, data: rgba, channels: 4, depth: 8 }));
    expect([...readImage(join(tmp, 'rgba.png')).data]).toEqual([0, 30, 60, 120, 150, 180]); // alpha dropped
    writeFileSync(join(tmp, 'gray16.png'), encodePng({ width: 2, height: 1, data: Uint16Array.from([0x1234, 0xff00]), channels: 1, depth: 16 }));
    expect([...readImage(join(tmp, 'gray16.png')).data]).toEqual([0x12, 0x12, 0x12, 0xff, 0xff, 0xff]);
    const flat = new Uint8Array(8 * 8 * 4).fill(200);
    writeFileSync(join(tmp, 'a.jpg'), encodeJpeg({ width: 8, height: 8, data: flat }, 95).data);
    const j = readImage(join(tmp, 'a.jpg'));
    expect([j.width, j.height, j.data.length]).toEqual([8, 8, 8 * 8 * 3]);
    expect(Math.max(...j.data.map((v) => Math.abs(v - 200)))).toBeLessThanOrEqual(2);
  });

  it('a non-image, a missing file and an empty folder are UserErrors naming them; a folder lists its images sorted', () => {
    writeFileSync(join(tmp, 'b.txt'), 'hello');
    expect(() => readImage(join(tmp, 'b.txt'))).toThrow(UserError);
    expect(() => readImage(join(tmp, 'b.txt'))).toThrow(/b\.txt: not a PNG or JPEG image/);
    expect(() => readImage(join(tmp, 'none.png'))).toThrow(/cannot read .*none\.png/);
    expect(listImages(tmp).map((f) => f.slice(tmp.length + 1))).toEqual(['a.jpg', 'gray16.png', 'rgb.png', 'rgba.png']);
    const empty = mkdtempSync(join(tmp, 'empty-'));
    expect(() => listImages(empty)).toThrow(/no PNG or JPEG images in/);
  });
});
