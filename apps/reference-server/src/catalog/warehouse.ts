import { createHash, randomUUID } from 'node:crypto';
import { mkdir, realpath, rm, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { badRequest, retryLater } from './iceberg-error.js';
import {
  MAX_ENTITY_LOCATION_BYTES,
  MAX_NAME_BYTES,
  MAX_NAMESPACE_BYTES,
  MAX_PREFIX_BYTES,
  nameProblem,
} from './limits.js';
import { stringifyLosslessJson } from './lossless-json.js';
import { type ReadLimits, readJsonFile } from './metadata-file.js';
import { confine, isWithin, localPath, outside } from './paths.js';
import { purgeTree } from './purge-tree.js';

export interface WarehouseOptions extends ReadLimits {
  /** The local directory that holds every table's and view's files; created when missing. */
  readonly directory: string;
  /**
   * The largest metadata the catalog's database holds, measured as its driver sends it (see
   * database/value-limit.ts). The catalog writes no metadata past it, nor past `maxBytes`: every file it
   * writes can be registered again.
   * @default no limit beyond `maxBytes`
   */
  readonly column?: { readonly maxBytes: number; bytesOf(text: string): number };
}

/**
 * The catalog's local warehouse: every file the catalog writes, reads or deletes is inside it, whatever
 * location a client names (see paths.ts).
 */
export interface Warehouse {
  /** The warehouse directory as a file: URL. */
  readonly url: string;
  /**
   * A new default location for a table or view: `<warehouse>/<prefix>/<namespace levels>/<name>/<uuid>`, the
   * prefix `_` when there is none. Never one that another table or view has, or had: the catalog prefix keeps
   * tenants apart, the namespace levels and the name keep it readable, and the UUID keeps it unique, across
   * renames and re-creations, and between table `n.a` and the tables of namespace `n.a`. (A UUID directory
   * rather than a `<name>-<uuid>` suffix: a name may be 255 bytes, all a directory name can hold.)
   */
  defaultLocation(prefix: string, namespace: readonly string[], name: string): string;
  /** Throw the 400/403 a location (`field` of the request) would meet, before anything is done with it. */
  check(location: string, field: string): Promise<void>;
  /** The real path a location names inside the warehouse (the 400/403 of `check` otherwise). */
  pathOf(location: string, field: string): Promise<string>;
  /**
   * Metadata as the JSON text the catalog writes and stores (longs as exact digits); a 400 when it is larger
   * than a metadata file may be (`maxBytes`) or than the database holds, before anything is written.
   */
  encode(metadata: object): string;
  /**
   * Write a new metadata file (`text` from `encode`) under `<location>/metadata/` and return its location, with
   * the real path of `location` itself (`pathOf`'s, found on the way). Written inside the catalog transaction,
   * before the pointer moves, as Iceberg does: a file no commit points to is harmless.
   */
  writeMetadata(
    location: string,
    version: number,
    text: string,
  ): Promise<{ readonly metadataLocation: string; readonly path: string }>;
  /** Read a metadata file (bounded in size and time), parsed as JSON with exact longs (lossless-json.ts). */
  readMetadata(metadataLocation: string, field: string, deadline?: number): Promise<unknown>;
  /**
   * Delete a table's directory (drop with purge): never the warehouse itself, never outside it. Until `untilMs`
   * (`performance.now()` time) at most: `false` when time ran out first, and the rest stays.
   */
  purge(location: string, untilMs: number): Promise<boolean>;
  /** Delete one file (an old metadata file after commit): only inside the warehouse, never a directory. */
  removeFile(location: string): Promise<void>;
}

// The longest path a default location adds to the warehouse directory: a prefix (or its digest), the namespace
// levels (their separators included), the name and a UUID, each after a `/`.
const DEFAULT_LOCATION_BYTES = 1 + MAX_PREFIX_BYTES + 1 + MAX_NAMESPACE_BYTES + 1 + MAX_NAME_BYTES + 1 + 36;

/** The directory of a catalog prefix: the prefix itself when it can be one, `_` for none, else a digest. */
function prefixDirectory(prefix: string): string {
  if (prefix === '') return '_';
  if (nameProblem(prefix) === undefined) return prefix;
  // `..`, `a/b`: not a directory name. Any name will do (the UUID below keeps locations unique).
  return `_${createHash('sha256').update(prefix).digest('hex').slice(0, 32)}`;
}

export async function openWarehouse(options: WarehouseOptions): Promise<Warehouse> {
  const directory = resolve(options.directory);
  // Every name within its limits must make a default location within a table's or view's location limit (the
  // location limit less the room for metadata files): a warehouse directory that leaves no room for them is
  // refused, not found out by a 400 later.
  const room = MAX_ENTITY_LOCATION_BYTES - DEFAULT_LOCATION_BYTES;
  if (Buffer.byteLength(directory, 'utf8') > room)
    throw new Error(
      `WAREHOUSE ${directory} is ${Buffer.byteLength(directory, 'utf8')} bytes long; at most ${room} leave room for every default location (${MAX_ENTITY_LOCATION_BYTES} bytes)`,
    );
  await mkdir(directory, { recursive: true });
  const root = { path: await realpath(directory), url: pathToFileURL(directory).href };
  const limits: ReadLimits = { maxBytes: options.maxBytes, timeoutMs: options.timeoutMs };
  const { column } = options;

  return {
    url: root.url,
    defaultLocation: (prefix, namespace, name) =>
      pathToFileURL(join(directory, prefixDirectory(prefix), ...namespace, name, randomUUID())).href,
    check: async (location, field) => void (await confine(root, location, { field })),
    pathOf: (location, field) => confine(root, location, { field }),
    encode(metadata) {
      // Longs as exact digits (never strings, never rounded), as Iceberg's own writers do.
      const text = stringifyLosslessJson(metadata);
      const bytes = Buffer.byteLength(text, 'utf8');
      if (bytes > limits.maxBytes)
        throw badRequest(
          `the metadata would be ${bytes} bytes; this catalog holds at most ${limits.maxBytes}`,
        );
      const stored = column?.bytesOf(text) ?? 0;
      if (column !== undefined && stored > column.maxBytes)
        throw badRequest(
          `the metadata would take ${stored} bytes to store; this catalog's database holds at most ${column.maxBytes}`,
        );
      return text;
    },
    async writeMetadata(location, version, text) {
      const path = await confine(root, location, { field: 'location' });
      const dir = join(path, 'metadata');
      await mkdir(dir, { recursive: true });
      // mkdir follows a symlink swapped into the path since the check: see where it landed before writing.
      // (An lstat of an existing `metadata` instead was tried: it follows a location swapped for a link since.)
      if (!isWithin(root.path, await realpath(dir))) throw outside('location', root.url);
      const name = `${String(version).padStart(5, '0')}-${randomUUID()}.metadata.json`;
      // `wx`: a new file only; never through a symlink planted under that name.
      await writeFile(join(dir, name), text, { flag: 'wx' });
      const file = join(localPath(location, 'location'), 'metadata', name);
      return {
        metadataLocation: location.toLowerCase().startsWith('file:') ? pathToFileURL(file).href : file,
        path,
      };
    },
    // Within its own bound and the time left before the request's deadline (`performance.now()` ms).
    readMetadata: async (metadataLocation, field, deadline = Number.POSITIVE_INFINITY) => {
      const timeoutMs = Math.min(limits.timeoutMs, Math.floor(deadline - performance.now()));
      if (timeoutMs <= 0) throw retryLater(`no time was left to read ${field}; retry later`);
      return readJsonFile(await confine(root, metadataLocation, { field }), field, { ...limits, timeoutMs });
    },
    async removeFile(location) {
      await rm(await confine(root, location, { field: 'metadata-file' }), { force: true });
    },
    async purge(location, untilMs) {
      // Symlinks inside the tree are removed, never followed.
      return purgeTree(await confine(root, location, { field: 'location' }), untilMs);
    },
  };
}
