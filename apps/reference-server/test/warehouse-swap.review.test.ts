import { mkdirSync, mkdtempSync, readdirSync, renameSync, rmSync, symlinkSync } from 'node:fs';
import * as fs from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, expect, test, vi } from 'vitest';
import { openWarehouse } from '../src/catalog/warehouse.js';

// A review of writeMetadata's lstat shortcut (2026-12-02, since reverted): `<location>/metadata` found a real directory by lstat
// is written to without the realpath check, on the ground that `path` (confined a moment before) is real and
// inside the warehouse. lstat follows every component but the last: a `<location>` swapped for a symlink
// between the confine and the lstat leads to a real `metadata` directory outside, and the file is written
// there. Before, mkdir + realpath(dir) after the swap saw where it landed and refused (403).

/** Called once with the metadata directory's path, by whichever of lstat or mkdir touches it first. */
let onFirstTouch: ((path: string) => void) | undefined;
vi.mock('node:fs/promises', async (importOriginal) => {
  const actual = await importOriginal<typeof import('node:fs/promises')>();
  const touch = (path: unknown) => {
    if (onFirstTouch !== undefined && String(path).endsWith('/metadata')) {
      const swap = onFirstTouch;
      onFirstTouch = undefined;
      swap(String(path));
    }
  };
  return {
    ...actual,
    lstat: (async (path: string, ...rest: unknown[]) => {
      touch(path);
      return (actual.lstat as (...a: unknown[]) => unknown)(path, ...rest);
    }) as typeof actual.lstat,
    mkdir: (async (path: string, ...rest: unknown[]) => {
      touch(path);
      return (actual.mkdir as (...a: unknown[]) => unknown)(path, ...rest);
    }) as typeof actual.mkdir,
  };
});

const root = mkdtempSync(join(tmpdir(), 'idem-swap-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

test('a location swapped for a symlink out after the check: nothing is written outside the warehouse', async () => {
  const warehouseDir = join(root, 'warehouse');
  const outside = join(root, 'outside');
  mkdirSync(join(outside, 'metadata'), { recursive: true });
  const table = join(warehouseDir, 'n', 't');
  mkdirSync(join(table, 'metadata'), { recursive: true });
  const warehouse = await openWarehouse({ directory: warehouseDir, maxBytes: 1 << 20, timeoutMs: 1000 });
  expect(fs.lstat).toBeTypeOf('function');

  onFirstTouch = () => {
    renameSync(table, `${table}-moved`);
    symlinkSync(outside, table);
  };
  const outcome = await warehouse.writeMetadata(pathToFileURL(table).href, 1, '{}').catch((e: unknown) => e);
  expect(readdirSync(join(outside, 'metadata'))).toEqual([]); // failed at 03958b9 (an lstat shortcut): a metadata file written outside
  expect(outcome).toMatchObject({ code: 403 });
});
