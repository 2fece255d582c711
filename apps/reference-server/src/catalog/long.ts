import { INT64_MAX, INT64_MIN } from './limits.js';

/**
 * An Iceberg `long` (snapshot id, sequence number, row id) as the catalog holds it: a number when it is a safe
 * integer, a bigint otherwise, as lossless-json.ts parses it. One representation per value, so that `===`
 * is exact; the helpers below compare and compute through bigint anyway, and give results in that form.
 */
export type Long = number | bigint;

/** Whether `value` is a long: a safe integer, or a bigint within int64. */
export function isLong(value: unknown): value is Long {
  if (typeof value === 'number') return Number.isSafeInteger(value);
  return typeof value === 'bigint' && value >= INT64_MIN && value <= INT64_MAX;
}

/** The long of a bigint in its one representation, or undefined past int64. */
export function longOf(value: bigint): Long | undefined {
  if (value < INT64_MIN || value > INT64_MAX) return undefined;
  const number = Number(value);
  return Number.isSafeInteger(number) ? number : value;
}

/** Whether two values are the same long (whatever their representation), or else strictly equal. */
export function sameLong(a: unknown, b: unknown): boolean {
  return isLong(a) && isLong(b) ? BigInt(a) === BigInt(b) : a === b;
}

/** The larger of two longs. */
export const maxLong = (a: Long, b: Long): Long => (BigInt(a) >= BigInt(b) ? a : b);

/** The sum of two longs, or undefined past int64 (a value the catalog cannot hold: the caller's error). */
export const addLongs = (a: Long, b: Long): Long | undefined => longOf(BigInt(a) + BigInt(b));
