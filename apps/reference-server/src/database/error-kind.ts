/**
 * What a database driver's error means for the request, by its code (Drizzle wraps a driver's error as the
 * `cause` of its own, so the whole chain is read):
 *
 * - `unavailable`: the database cannot be reached or is busy right now; the transaction did not commit and a
 *   retry can succeed (503 + Retry-After).
 * - `conflict`: a unique key was taken by a concurrent request (409).
 * - `input`: a value the column cannot hold (400); the catalog's own limits should have caught it first.
 *
 * Anything else (a syntax error, a missing table, a bug) is none of these: a 500, never a 503, so that a
 * client does not retry it forever.
 */
export type DatabaseErrorKind = 'unavailable' | 'conflict' | 'input';

// SQLSTATEs: PostgreSQL's `code`, mysql2's `sqlState` (https://www.postgresql.org/docs/current/errcodes-appendix.html).
const TRANSIENT_STATES = new Set([
  '57P01', // admin shutdown (a terminated backend)
  '57P02', // crash shutdown
  '57P03', // cannot connect now
  '57014', // query canceled (statement timeout)
  '40001', // serialization failure
  '40P01', // deadlock
  '55P03', // lock not available
  '25P03', // idle-in-transaction timeout: the database ended a stalled node's session
  '70100', // MySQL/MariaDB: query interrupted, connection killed
]);

function sqlStateKind(state: string): DatabaseErrorKind | undefined {
  if (state.startsWith('08') || state.startsWith('53') || TRANSIENT_STATES.has(state)) return 'unavailable';
  if (state === '23505') return 'conflict';
  if (state.startsWith('22') || state === '54000') return 'input'; // data exception; program limit exceeded
  return undefined;
}

const KINDS: Record<string, DatabaseErrorKind> = {
  // Node's sockets (pg and mysql2 both pass these through).
  ECONNREFUSED: 'unavailable',
  ECONNRESET: 'unavailable',
  ETIMEDOUT: 'unavailable',
  EPIPE: 'unavailable',
  EHOSTUNREACH: 'unavailable',
  ENETUNREACH: 'unavailable',
  EAI_AGAIN: 'unavailable',
  // mysql2
  PROTOCOL_CONNECTION_LOST: 'unavailable',
  PROTOCOL_SEQUENCE_TIMEOUT: 'unavailable',
  PROTOCOL_ENQUEUE_AFTER_FATAL_ERROR: 'unavailable',
  ER_CON_COUNT_ERROR: 'unavailable',
  ER_SERVER_SHUTDOWN: 'unavailable',
  ER_LOCK_WAIT_TIMEOUT: 'unavailable',
  ER_LOCK_DEADLOCK: 'unavailable',
  ER_QUERY_INTERRUPTED: 'unavailable',
  ER_CLIENT_INTERACTION_TIMEOUT: 'unavailable',
  ER_DUP_ENTRY: 'conflict',
  // A statement larger than max_allowed_packet. Its SQLSTATE is 08S01 (a communication error, and the server
  // drops the connection), but no retry of the same value can succeed: it is the value's fault, not an outage.
  ER_NET_PACKET_TOO_LARGE: 'input',
  ER_DATA_TOO_LONG: 'input',
  ER_TRUNCATED_WRONG_VALUE_FOR_FIELD: 'input',
  ER_WARN_DATA_OUT_OF_RANGE: 'input',
  // better-sqlite3 (extended result codes, e.g. SQLITE_BUSY_SNAPSHOT, are matched by their primary code below)
  SQLITE_BUSY: 'unavailable',
  SQLITE_LOCKED: 'unavailable',
  SQLITE_IOERR: 'unavailable',
  SQLITE_FULL: 'unavailable',
  SQLITE_CANTOPEN: 'unavailable',
  SQLITE_PROTOCOL: 'unavailable',
  SQLITE_INTERRUPT: 'unavailable',
  SQLITE_TOOBIG: 'input',
  SQLITE_CONSTRAINT_PRIMARYKEY: 'conflict',
  SQLITE_CONSTRAINT_UNIQUE: 'conflict',
};

// node-postgres reports these without a code (pg/lib/client.js, pg-pool/index.js): a lost or never-made
// connection. Matched by message only here, for this one driver, because it offers nothing else.
const PG_CONNECTION_MESSAGES = new Set([
  'Connection terminated unexpectedly',
  'Connection terminated due to connection timeout',
  'timeout exceeded when trying to connect',
  'Client has encountered a connection error and is not queryable',
  'Query read timeout',
  'Client was closed and is not queryable',
  'Connection terminated',
]);

function kindOf(error: object): DatabaseErrorKind | undefined {
  const { code, sqlState, fatal, message } = error as {
    code?: unknown;
    sqlState?: unknown;
    fatal?: unknown;
    message?: unknown;
  };
  if (typeof code === 'string') {
    if (/^[0-9][0-9A-Z]{4}$/.test(code)) return sqlStateKind(code);
    const known =
      KINDS[code] ?? (code.startsWith('SQLITE_') ? KINDS[code.split('_', 2).join('_')] : undefined);
    if (known !== undefined) return known;
  }
  // mysql2 marks every error after which the connection is unusable as fatal; a MariaDB error it has no code
  // for (1927, connection killed) still carries its SQLSTATE.
  if (fatal === true) return 'unavailable';
  if (typeof sqlState === 'string') {
    const kind = sqlStateKind(sqlState);
    if (kind !== undefined) return kind;
  }
  if (typeof message === 'string' && PG_CONNECTION_MESSAGES.has(message)) return 'unavailable';
  return undefined;
}

/** The kind of database error anywhere in `error`'s cause chain, or undefined when it is not one. */
export function databaseErrorKind(error: unknown): DatabaseErrorKind | undefined {
  let current: unknown = error;
  for (let depth = 0; depth < 8 && typeof current === 'object' && current !== null; depth++) {
    const kind = kindOf(current);
    if (kind !== undefined) return kind;
    current = (current as { cause?: unknown }).cause;
  }
  return undefined;
}
