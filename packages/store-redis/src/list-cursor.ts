import { createHash } from 'node:crypto';
import { decodeCursor, encodeCursor } from '@idem/core';
import { parseRecordTag } from './key-layout.js';

/**
 * Where a listing stands between two pages: the node being scanned and its SCAN cursor, and the record names a
 * SCAN returned that the last page had no room for (SCAN's COUNT is only a hint: one batch can hold more names
 * than a page takes, and a SCAN cursor cannot resume in the middle of a batch).
 */
export interface ListPosition {
  /** Which store made the cursor: a digest of the full key prefix its records are under. */
  readonly store: string;
  /** The {@link KeyNodes.topology} the listing started from. */
  readonly topology: string;
  /** The address of the node being scanned; `null` once every node has been. */
  readonly node: string | null;
  /** The SCAN cursor to resume that node with (`0` to start it). */
  readonly scan: string;
  /** The tags (`{<scope>:<key>}`, escaped) of names already scanned and not listed yet, in scan order. */
  readonly pending: readonly string[];
}

const TAG = 'r1';

/** A short digest of the bytes every record name starts with (the client's keyPrefix, then the store's prefix). */
export const storeDigest = (namePrefix: Buffer): string =>
  createHash('sha256').update(namePrefix).digest('base64url').slice(0, 8);

/** The opaque cursor of a position: base64url JSON, URL- and shell-safe. */
export const encodeListCursor = (position: ListPosition): string =>
  encodeCursor(TAG, [position.store, position.topology, position.node, position.scan, position.pending]);

const malformed = () =>
  new RangeError('malformed cursor: pass back the cursor of a page of this store, or list without one');

/** The position of a cursor {@link encodeListCursor} made; a `RangeError` for anything else. */
export function decodeListCursor(cursor: string): ListPosition {
  const parts = decodeCursor(cursor, TAG, 5);
  if (parts === undefined) throw malformed();
  const [store, topology, node, scan, pending] = parts;
  if (
    typeof store !== 'string' ||
    typeof topology !== 'string' ||
    !(node === null || typeof node === 'string') ||
    typeof scan !== 'string' ||
    !/^\d{1,20}$/.test(scan) ||
    (node === null && scan !== '0') ||
    !Array.isArray(pending) ||
    !pending.every((tag) => typeof tag === 'string' && parseRecordTag(tag) !== undefined)
  )
    throw malformed();
  return { store, topology, node, scan, pending: pending as string[] };
}
