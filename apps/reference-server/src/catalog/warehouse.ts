import { randomUUID } from 'node:crypto';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { isAbsolute, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

/** The default location of a table or view: `<warehouse>/<namespace parts>/<name>`. */
export function defaultLocation(warehouse: string, namespace: string[], name: string): string {
  return pathToFileURL(join(resolve(warehouse), ...namespace, name)).href;
}

const toPath = (location: string): string =>
  location.startsWith('file:') ? fileURLToPath(location) : location;

/**
 * Write a new metadata file under `<location>/metadata/` and return its location. Written before the catalog
 * transaction, as Iceberg does: a file no commit points to is harmless.
 */
export async function writeMetadata(location: string, version: number, metadata: unknown): Promise<string> {
  const dir = join(toPath(location), 'metadata');
  await mkdir(dir, { recursive: true });
  const file = join(dir, `${String(version).padStart(5, '0')}-${randomUUID()}.metadata.json`);
  await writeFile(file, JSON.stringify(metadata));
  return location.startsWith('file:') ? pathToFileURL(file).href : file;
}

export async function readMetadata(metadataLocation: string): Promise<Record<string, unknown>> {
  const path = toPath(metadataLocation);
  if (!isAbsolute(path)) throw new Error('metadata-location must be an absolute path or file: URL');
  return JSON.parse(await readFile(path, 'utf8')) as Record<string, unknown>;
}

/** Remove a table's files (drop with purge). */
export async function purgeLocation(location: string): Promise<void> {
  await rm(toPath(location), { recursive: true, force: true });
}
