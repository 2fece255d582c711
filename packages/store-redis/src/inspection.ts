import {
  checkListParams,
  checkStatsParams,
  type IdempotencyRecord,
  type ListedRecord,
  type ListParams,
  listedBy,
  listedRecord,
  type RecordPage,
  type StatsParams,
  StatsTally,
  type StoreStats,
} from '@idem/core';
import type { KeyNode, RedisConnection, Reply } from './clients/connection.js';
import { escapeKeyPart, globLiteral, parseRecordTag } from './key-layout.js';
import { decodeListCursor, encodeListCursor, type ListPosition, storeDigest } from './list-cursor.js';
import { decodeRecord, decodeRecordHead } from './record.js';

/** The SCAN COUNT of a page starts at its room (at least this), and doubles while batches come back short. */
const MIN_SCAN_COUNT = 16;
/**
 * The largest SCAN COUNT. A page keeps what a batch returned beyond its room in its cursor, so the COUNT of a
 * small page is held to 16 times its limit (128 at least): the names a cursor carries stay about that many.
 */
const MAX_SCAN_COUNT = 1000;

/** `list` and `stats` over the records under one prefix, by SCAN of every node that holds keys. */
export interface Inspection {
  list(params: ListParams): Promise<RecordPage>;
  stats(params: StatsParams): Promise<StoreStats>;
}

interface Found {
  readonly record: IdempotencyRecord;
  readonly listed: ListedRecord;
}

const byAddress = (a: KeyNode, b: KeyNode) => (a.address < b.address ? -1 : a.address > b.address ? 1 : 0);

/**
 * A key under the store's prefix that is not one of its records (a name it never writes, another type, a value
 * of another layout) means another program writes there: a misconfiguration, reported with the key named rather
 * than skipped, as `load` reports it.
 */
const foreign = (name: Buffer | string, why: string, cause?: unknown) =>
  new Error(
    `redis store: the key ${JSON.stringify(String(name))} under this store's prefix is not one of its records ` +
      `(${why}): is another program writing under this prefix? Give the store a prefix of its own`,
    cause === undefined ? undefined : { cause },
  );

/** Redis's answer about the key itself (another type; a value the script cannot read), not about the server. */
const aboutTheKey = (error: unknown): error is Error =>
  error instanceof Error && (error.message.startsWith('WRONGTYPE') || error.message.includes('user_script'));

/**
 * @param connection The client's connection.
 * @param prefix The store's prefix.
 * @param head Runs the script's `head` on a record key (the value up to its body, and its length).
 */
export function inspection(
  connection: RedisConnection,
  prefix: string,
  head: (key: string) => Promise<Reply>,
): Inspection {
  // What every record's name starts with, as SCAN returns it: the client's keyPrefix too, which the connection
  // puts before every key it sends (ioredis does, node-redis's connection for it) but neither into SCAN's MATCH
  // nor takes off the names SCAN returns.
  const namePrefix = Buffer.concat([connection.keyPrefix, Buffer.from(prefix, 'utf8')]);
  const store = storeDigest(namePrefix);
  const literalPrefix = globLiteral(namePrefix);
  // Only the store writes braces after its prefix (a prefix holds none), so `{` ends the prefix exactly and
  // another store's prefix never matches; an escaped scope holds no glob character.
  const matchOf = (scope: string | undefined) =>
    Buffer.concat([literalPrefix, Buffer.from(scope === undefined ? '{*}' : `{${escapeKeyPart(scope)}:*}`)]);

  /** The tag (`{<scope>:<key>}`) of a name SCAN returned. */
  function tagOf(name: Reply): string {
    if (!Buffer.isBuffer(name))
      throw new Error(`redis store: unexpected name in a SCAN reply: ${String(name)}`);
    const tag = name.subarray(namePrefix.length).toString('latin1');
    if (!name.subarray(0, namePrefix.length).equals(namePrefix) || parseRecordTag(tag) === undefined) {
      throw foreign(name, 'the store never writes a key of that name');
    }
    return tag;
  }

  // No `TYPE string` filter: it would skip a key of another type under the prefix without a word, where such a
  // key is a misconfiguration to report (see `foreign`); nor would it save any of SCAN's work.
  async function scan(node: KeyNode, cursor: string, match: Buffer, count: number) {
    const reply = await node.send(['SCAN', cursor, 'MATCH', match, 'COUNT', String(count)]);
    const [next, names] = Array.isArray(reply) ? reply : [];
    if (!Buffer.isBuffer(next) || !Array.isArray(names)) {
      throw new Error(`redis store: unexpected SCAN reply from ${node.address}: ${String(reply)}`);
    }
    return { next: next.toString('latin1'), tags: names.map(tagOf) };
  }

  /**
   * The record of a tag SCAN returned, or `undefined` when it is gone since (deleted, or expired by Redis): it
   * was not there from the first page to the last, so skipping it keeps the guarantee. Without `bodies` only the
   * value's head is read, never the body.
   */
  async function read(tag: string, bodies: boolean): Promise<Found | undefined> {
    const ref = parseRecordTag(tag) as { scope: string; key: string };
    const key = `${prefix}${tag}`;
    let reply: Reply;
    try {
      reply = bodies ? (await connection.send(key, ['GET', key])).reply : await head(key);
    } catch (error) {
      if (aboutTheKey(error)) throw foreign(`${connection.keyPrefix}${key}`, error.message, error);
      throw error;
    }
    if (reply === null) return undefined;
    try {
      if (Buffer.isBuffer(reply)) {
        const record = decodeRecord(ref, reply);
        return { record, listed: listedRecord(record, true) };
      }
      const [value, length] = Array.isArray(reply) ? reply : [];
      if (!Buffer.isBuffer(value)) throw new Error(`unexpected reply ${String(reply)}`);
      const { record, bodyBytes } = decodeRecordHead(ref, value, Number(length));
      const listed = listedRecord(record, false);
      return {
        record,
        listed:
          listed.response === null ? listed : { ...listed, response: { ...listed.response, bodyBytes } },
      };
    } catch (error) {
      throw foreign(`${connection.keyPrefix}${key}`, (error as Error).message, error);
    }
  }

  /** Where a cursor's listing stands now; the nodes it has to go on with. */
  function resume(cursor: string, nodes: readonly KeyNode[], topology: string) {
    const position = decodeListCursor(cursor);
    if (position.store !== store || (position.topology === 'server') !== (topology === 'server')) {
      throw new RangeError(
        'this cursor was made by another store (another prefix or server): list without one',
      );
    }
    if (position.node === null) return { position, index: -1 };
    const index = nodes.findIndex((node) => node.address === position.node);
    if (index === -1) {
      throw new Error(
        `redis store: ${position.node}, which this listing was scanning, is no longer a master of the Cluster ` +
          '(a failover, or a node removed): list again from the start, without a cursor',
      );
    }
    if (position.topology !== topology) {
      throw new Error(
        'redis store: slots of the Cluster moved to other masters since the first page (a resharding or a ' +
          'failover), so records could be missed: list again from the start, without a cursor',
      );
    }
    return { position, index };
  }

  return {
    async list(params) {
      checkListParams(params);
      const bodies = params.bodies === true;
      const { nodes, topology } = await connection.keyNodes();
      // One node after another, in an order every page and every client sees alike.
      const sorted = [...nodes].sort(byAddress);
      const { position, index: from } =
        params.cursor === undefined
          ? { position: { scan: '0', pending: [] as readonly string[] }, index: 0 }
          : resume(params.cursor, sorted, topology);
      const match = matchOf(params.scope);
      const records: ListedRecord[] = [];
      const pending = [...position.pending];
      // A rehash during a scan can return a name twice; within a page it is listed once.
      const seen = new Set(pending);
      let index = from;
      let scanCursor = position.scan;
      let count = Math.max(MIN_SCAN_COUNT, Math.min(params.limit, MAX_SCAN_COUNT));
      const maxCount = Math.min(MAX_SCAN_COUNT, Math.max(params.limit * 16, 128));
      for (;;) {
        const room = params.limit - records.length;
        if (room > 0 && pending.length > 0) {
          const found = await Promise.all(pending.splice(0, room).map((tag) => read(tag, bodies)));
          for (const each of found) {
            if (each !== undefined && listedBy(params, each.record)) records.push(each.listed);
          }
          continue;
        }
        // A full page scans on until one more name is found or every node is done, so that the last page comes
        // with a null cursor (unless the state filter then takes none of what is left).
        if (pending.length > 0 || index === -1) break;
        const { next, tags } = await scan(sorted[index] as KeyNode, scanCursor, match, count);
        for (const tag of tags) {
          if (seen.has(tag)) continue;
          seen.add(tag);
          pending.push(tag);
        }
        if (next === '0') {
          index = index + 1 < sorted.length ? index + 1 : -1;
          scanCursor = '0';
        } else {
          scanCursor = next;
        }
        if (tags.length < Math.max(room, 1)) count = Math.min(maxCount, count * 2);
      }
      const done = index === -1 && pending.length === 0;
      const next: ListPosition = {
        store,
        topology,
        node: index === -1 ? null : (sorted[index] as KeyNode).address,
        scan: scanCursor,
        pending,
      };
      return { records, cursor: done ? null : encodeListCursor(next) };
    },

    async stats(params) {
      checkStatsParams(params);
      const tally = new StatsTally(params);
      const { nodes } = await connection.keyNodes();
      const match = matchOf(params.scope);
      await Promise.all(
        nodes.map(async (node) => {
          let cursor = '0';
          do {
            const { next, tags } = await scan(node, cursor, match, MAX_SCAN_COUNT);
            for (const found of await Promise.all(tags.map((tag) => read(tag, false)))) {
              if (found !== undefined) tally.add(found.record);
            }
            cursor = next;
          } while (cursor !== '0');
        }),
      );
      return tally.result();
    },
  };
}
