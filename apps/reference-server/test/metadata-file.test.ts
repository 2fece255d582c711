import { mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, test } from 'vitest';
import { IcebergError } from '../src/catalog/iceberg-error.js';
import { readJsonFile } from '../src/catalog/metadata-file.js';

const dir = mkdtempSync(join(tmpdir(), 'idem-metadata-file-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function failure(path: string, limits: { maxBytes: number; timeoutMs: number }) {
  try {
    await readJsonFile(path, 'metadata-location', limits);
  } catch (error) {
    if (error instanceof IcebergError) return { code: error.code, message: error.message };
    throw error;
  }
  throw new Error('expected a failure');
}

describe('reading a metadata file is bounded', () => {
  test('a file of exactly maxBytes is read; one byte more is a 400', async () => {
    const exact = join(dir, 'exact.json');
    writeFileSync(exact, JSON.stringify({ pad: 'x'.repeat(100 - 10) }));
    expect(await readJsonFile(exact, 'metadata-location', { maxBytes: 100, timeoutMs: 1_000 })).toMatchObject(
      {},
    );
    expect(await failure(exact, { maxBytes: 99, timeoutMs: 1_000 })).toMatchObject({
      code: 400,
      message: expect.stringMatching(/larger than 99 bytes/),
    });
  });

  test('a read that takes longer than timeoutMs is abandoned with a retryable 503', async () => {
    // 64 MiB take a thousand reads of 64 KiB: far more than 1 ms, on any disk or page cache.
    const big = join(dir, 'big.json');
    writeFileSync(big, Buffer.alloc(64 * 1024 * 1024, 0x20));
    expect(await failure(big, { maxBytes: 64 * 1024 * 1024, timeoutMs: 1 })).toMatchObject({
      code: 503,
      message: expect.stringMatching(/timed out/),
    });
  });

  test('a symlink is not followed even when handed over directly', async () => {
    const target = join(dir, 'target.json');
    writeFileSync(target, '{}');
    symlinkSync(target, join(dir, 'link.json'));
    expect(await failure(join(dir, 'link.json'), { maxBytes: 100, timeoutMs: 1_000 })).toMatchObject({
      code: 400,
      message: expect.stringMatching(/not a regular file/),
    });
  });
});
