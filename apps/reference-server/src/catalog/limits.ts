// What a name, a namespace, a prefix or a location may be: the one place these limits live. Each comes from
// what holds the value: the database columns (see catalogDdl in database/catalog-schema.ts and
// @idem/store-sql's limits) and the filesystem (a name is a directory of the warehouse).

/** A table, view or namespace-level name: one directory name on the filesystem (NAME_MAX). */
export const MAX_NAME_BYTES = 255;
/** A whole namespace, levels joined by U+001F: the MySQL column is varbinary(1020). */
export const MAX_NAMESPACE_BYTES = 1020;
/**
 * A catalog prefix. The idempotency scope is `prefix U+001F principal`, and the store holds a scope of at most
 * 255 characters: a prefix up to 128 bytes leaves room for a principal of up to {@link MAX_PRINCIPAL_CHARS}.
 */
export const MAX_PREFIX_BYTES = 128;
export const MAX_PRINCIPAL_CHARS = 126;
/**
 * A location or metadata-location, as the local path it names (percent-escapes decoded): far below PATH_MAX
 * (4096) once the catalog appends its own file names. Measured as a path, not as the text that names it: the
 * catalog's own default locations are `file:` URLs whose escapes (`%C3%A9` for `é`, `%20` for a space) can take
 * three times the bytes of the path, and must fit whatever the names (see warehouse.ts, which refuses a
 * warehouse directory too long to leave room for the longest default location).
 */
export const MAX_LOCATION_BYTES = 2048;
/**
 * What the catalog appends to a table's or view's location to name a metadata file it writes there:
 * `/metadata/<version>-<uuid>.metadata.json`, 77 bytes with a version of 16 digits (a safe integer's most),
 * rounded up to leave room.
 */
export const METADATA_FILE_BYTES = 128;
/**
 * A table's or view's own location, as the local path it names: the location limit less the room for the
 * metadata files the catalog writes under it, so that every metadata-location it answers is a location it takes
 * back (register).
 */
export const MAX_ENTITY_LOCATION_BYTES = MAX_LOCATION_BYTES - METADATA_FILE_BYTES;
/** The text of a location: a path of MAX_LOCATION_BYTES, every byte percent-escaped, in a `file://` URL. */
export const MAX_LOCATION_TEXT_BYTES = 3 * MAX_LOCATION_BYTES + 32;
/** Nesting of a JSON request body. Real Iceberg schemas nest a few dozen levels; validating is recursive. */
export const MAX_JSON_DEPTH = 128;
/**
 * Nesting of JSON the catalog reads back (a metadata file a client registers, a stored row or answer). Wider than
 * a body's, since another tool may write deeper schemas; the parser is recursive, and stays well within the
 * stack at this depth.
 */
export const MAX_STORED_JSON_DEPTH = 1024;
/** A request body. */
export const MAX_BODY_BYTES = 1024 * 1024;
/**
 * Updates in one table's or view's commit (each table change of a transaction counts on its own). Iceberg's
 * clients send a handful; a body of thousands would only make the catalog rewrite and re-check a table for
 * nothing.
 */
export const MAX_UPDATES_PER_COMMIT = 1000;
/**
 * Table changes in one `transactions/commit`: each is a table read locked, checked and written in one database
 * transaction, and answered only when all are in.
 */
export const MAX_TABLE_CHANGES = 100;
/**
 * What a table keeps of each kind (schemas, partition specs, sort orders) and a view of its versions and
 * schemas. Far above what schema evolution makes (Iceberg's own writers keep them all); a bound so that one
 * table's metadata, which every commit copies and rewrites, cannot grow without end.
 */
export const MAX_SCHEMAS = 10_000;
export const MAX_PARTITION_SPECS = 10_000;
export const MAX_SORT_ORDERS = 10_000;
export const MAX_VIEW_VERSIONS = 10_000;
/** The spec's `format: int64` (Iceberg's `long`: snapshot ids, sequence numbers, row ids, timestamps). */
export const INT64_MIN = -(2n ** 63n);
export const INT64_MAX = 2n ** 63n - 1n;
/**
 * The spec's `type: integer` without a format: every one of them is a Java `int` in Iceberg (field, schema, spec,
 * sort order and view version ids, format versions, page sizes), which no client can send past 32 bits.
 */
export const INT32_MIN = -(2 ** 31);
export const INT32_MAX = 2 ** 31 - 1;

const bytes = (text: string) => Buffer.byteLength(text, 'utf8');
const hex = (char: string) => `U+${(char.codePointAt(0) ?? 0).toString(16).toUpperCase().padStart(4, '0')}`;

// C0 controls (NUL and U+001F, the namespace separator, among them), DEL and C1 controls.
// biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is this pattern's job.
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/u;
// In a `u` pattern a surrogate pair is one code point: only an unpaired half matches.
const LONE_SURROGATE = /[\ud800-\udfff]/u;

/** Why `text` cannot be stored as given (a control character, a lone surrogate), or undefined. */
export function textProblem(text: string): string | undefined {
  const control = CONTROL.exec(text);
  if (control !== null) return `must not contain control characters (${hex(control[0])})`;
  if (LONE_SURROGATE.test(text)) return 'must be valid Unicode (it holds a lone surrogate)';
  return undefined;
}

/**
 * Why `name` cannot be a table, view or namespace-level name, or undefined. Names become directories of the
 * warehouse (`<warehouse>/<namespace levels>/<name>`), so `.`, `..` and path separators are refused too.
 */
export function nameProblem(name: string): string | undefined {
  if (name === '') return 'must not be empty';
  if (bytes(name) > MAX_NAME_BYTES) return `must be at most ${MAX_NAME_BYTES} bytes in UTF-8`;
  if (name === '.' || name === '..') return 'must not be "." or ".."';
  if (/[/\\]/.test(name)) return 'must not contain "/" or "\\"';
  return textProblem(name);
}

/** Why the levels cannot be a namespace, or undefined. */
export function namespaceProblem(levels: readonly string[]): string | undefined {
  if (levels.length === 0) return 'must have at least one level';
  for (const [i, level] of levels.entries()) {
    const problem = nameProblem(level);
    if (problem !== undefined) return `level ${i + 1} ${problem}`;
  }
  if (bytes(levels.join('\u001f')) > MAX_NAMESPACE_BYTES)
    return `must be at most ${MAX_NAMESPACE_BYTES} bytes in UTF-8, levels included`;
  return undefined;
}

/** Why `prefix` cannot be a catalog prefix, or undefined. */
export function prefixProblem(prefix: string): string | undefined {
  if (bytes(prefix) > MAX_PREFIX_BYTES) return `must be at most ${MAX_PREFIX_BYTES} bytes in UTF-8`;
  return textProblem(prefix);
}

/**
 * Why `location` cannot be a location, as text (before it is decoded and resolved against the warehouse), or
 * undefined. The path it names is checked once decoded: {@link localPathProblem}.
 */
export function locationProblem(location: string): string | undefined {
  if (location === '') return 'must not be empty';
  if (bytes(location) > MAX_LOCATION_TEXT_BYTES)
    return `must be at most ${MAX_LOCATION_TEXT_BYTES} bytes in UTF-8`;
  return textProblem(location);
}

/** Why the local path a location names (escapes decoded) cannot be used, or undefined. */
export function localPathProblem(path: string): string | undefined {
  if (bytes(path) > MAX_LOCATION_BYTES)
    return `must name a path of at most ${MAX_LOCATION_BYTES} bytes in UTF-8`;
  return textProblem(path);
}
/**
 * Why the local path of a table's or view's location (escapes decoded, normalised) cannot be one, or undefined:
 * {@link localPathProblem}, with room left for the metadata files the catalog writes under it.
 */
export function entityLocationProblem(path: string): string | undefined {
  if (bytes(path) > MAX_ENTITY_LOCATION_BYTES)
    return `must name a path of at most ${MAX_ENTITY_LOCATION_BYTES} bytes in UTF-8 (the location limit, ${MAX_LOCATION_BYTES}, less ${METADATA_FILE_BYTES} for the names of the metadata files written under it)`;
  return localPathProblem(path);
}
/** A raw (percent-encoded) path parameter: a namespace of MAX_NAMESPACE_BYTES takes up to 3 characters a byte. */
export const MAX_PATH_PARAMETER_CHARS = 4096;
