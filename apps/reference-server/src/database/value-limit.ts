/**
 * The largest text value (a table's metadata) one statement carries to the database, and how the driver counts
 * a text's bytes on the way: a value past it is the caller's error, refused before anything is written.
 */
export interface ValueLimit {
  readonly maxBytes: number;
  bytesOf(text: string): number;
}

export const utf8Bytes = (text: string): number => Buffer.byteLength(text, 'utf8');

/**
 * The limit on PostgreSQL and SQLite: a text column holds up to 1 GB on PostgreSQL, and SQLite's default
 * SQLITE_MAX_LENGTH is 10^9 bytes. (MySQL's is its packet size: see mysql-packet.ts.)
 */
export const LARGE_VALUES: ValueLimit = { maxBytes: 1_000_000_000 - 1024 * 1024, bytesOf: utf8Bytes };
