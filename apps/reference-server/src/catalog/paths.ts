import { realpath } from 'node:fs/promises';
import { basename, dirname, isAbsolute, join, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { badRequest, IcebergError } from './iceberg-error.js';
import { localPathProblem, locationProblem } from './limits.js';

/**
 * The local path a client's location names: a `file:` URL (no host) or an absolute path, normalised (`.`,
 * `..`, doubled and trailing slashes resolved). Any other scheme (`s3://`, `gs://`, a Windows drive letter) is a
 * 400: this catalog writes, reads and purges metadata only in its own local warehouse, so it cannot serve a
 * location it cannot reach, and keeping one as an opaque string would leave a table it cannot commit to.
 */
export function localPath(location: string, field: string): string {
  const problem = locationProblem(location);
  if (problem !== undefined) throw badRequest(`${field} ${problem}`);
  let path = location;
  if (/^[a-z][a-z0-9+.-]*:/i.test(location)) {
    if (!location.toLowerCase().startsWith('file:')) {
      throw badRequest(
        `${field} must be a file: URL or an absolute path in the catalog's warehouse; other schemes are not served`,
      );
    }
    try {
      // Rejects a host other than localhost and an encoded "/" (%2F); decodes every other escape.
      path = fileURLToPath(location);
    } catch {
      throw badRequest(`${field} is not a local file: URL (file:///absolute/path)`);
    }
  }
  if (!isAbsolute(path)) throw badRequest(`${field} must be an absolute path or a file: URL`);
  // Decoding may have revealed a control character (%00) that the check above could not see; the length
  // limit is the path's, which the filesystem sees.
  const decoded = localPathProblem(path);
  if (decoded !== undefined) throw badRequest(`${field} ${decoded}`);
  return resolve(path);
}

/** Every directory above `path` (absolute and normalised), nearest first, up to the root. */
export function ancestorsOf(path: string): string[] {
  const ancestors: string[] = [];
  for (let at = path, up = dirname(at); up !== at; at = up, up = dirname(at)) ancestors.push(up);
  return ancestors;
}

/** Whether `path` is `root` or below it (both absolute and normalised). */
export const isWithin = (root: string, path: string) =>
  path === root || path.startsWith(root.endsWith(sep) ? root : root + sep);

/**
 * The real path of `path`: symlinks of its existing part followed, the rest (not there yet, so no symlink)
 * appended as it is.
 */
async function realPathOf(path: string): Promise<string> {
  try {
    return await realpath(path);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if ((code !== 'ENOENT' && code !== 'ENOTDIR') || dirname(path) === path) throw error;
    return join(await realPathOf(dirname(path)), basename(path));
  }
}

/** A location outside the warehouse; the message names neither the real path nor anything read there. */
export const outside = (field: string, rootUrl: string) =>
  new IcebergError(403, 'ForbiddenException', `${field} must be inside the catalog's warehouse (${rootUrl})`);

/**
 * Resolve a client's location to a real path inside the warehouse, or throw: 400 for a location that is not a
 * local path, 403 for one that is, or leads through a symlink, outside the warehouse (or is the warehouse itself,
 * unless `allowRoot`). `root` is the warehouse's own real path.
 *
 * The check holds for the filesystem as it is now: the warehouse must not be writable by anyone who could swap
 * a checked directory for a symlink before the catalog uses it.
 */
export async function confine(
  root: { path: string; url: string },
  location: string,
  options: { field: string; allowRoot?: boolean },
): Promise<string> {
  const path = localPath(location, options.field);
  let real: string;
  try {
    real = await realPathOf(path);
  } catch (error) {
    // ELOOP, EACCES, ENAMETOOLONG …: whatever it is, the catalog cannot use it.
    throw badRequest(
      `${options.field} cannot be resolved (${(error as NodeJS.ErrnoException).code ?? 'error'})`,
    );
  }
  if (!isWithin(root.path, real) || (real === root.path && options.allowRoot !== true))
    throw outside(options.field, root.url);
  return real;
}
