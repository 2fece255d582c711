import { type SupportedDb, sqlRows } from '@idem/store-sql';
import { sql } from 'drizzle-orm';
import { utf8Bytes, type ValueLimit } from './value-limit.js';

// Room in a MySQL packet for the rest of the statement: its SQL, names and locations (a location's text is at
// most MAX_LOCATION_TEXT_BYTES).
const PACKET_MARGIN_BYTES = 64 * 1024;
// What mysql2 escapes when it puts a string into a statement (sqlstring: NUL, \b, \t, \n, \r, ^Z, quotes and
// backslash): each takes two bytes.
const MYSQL_ESCAPED = new Set([0x00, 0x08, 0x09, 0x0a, 0x0d, 0x1a, 0x22, 0x27, 0x5c]);

/** The bytes `text` takes in a statement mysql2 formats. Counted, not matched: a match array of 8M quotes. */
function mysqlBytes(text: string): number {
  let escaped = 0;
  for (let i = 0; i < text.length; i++) if (MYSQL_ESCAPED.has(text.charCodeAt(i))) escaped++;
  return utf8Bytes(text) + escaped;
}

/**
 * MySQL refuses a statement larger than `max_allowed_packet` (ER_NET_PACKET_TOO_LARGE, and drops the
 * connection): read it once, and count a value as mysql2 sends it, escapes included (JSON is full of quotes).
 */
export async function mysqlValueLimit(db: SupportedDb): Promise<ValueLimit> {
  const [row] = await sqlRows(db, sql`SELECT @@max_allowed_packet AS packet`);
  const packet = Number(row?.packet);
  if (!Number.isSafeInteger(packet) || packet <= PACKET_MARGIN_BYTES)
    throw new Error(`unexpected max_allowed_packet ${String(row?.packet)} from the server`);
  return {
    maxBytes: packet - PACKET_MARGIN_BYTES,
    bytesOf: mysqlBytes,
  };
}
