import { readdir, rmdir, unlink } from 'node:fs/promises';
import { join } from 'node:path';

/** How many entries of one directory are removed at once. */
const AT_ONCE = 16;

const code = (error: unknown) => (error as NodeJS.ErrnoException).code;

/**
 * Remove the tree at `path` (a directory, or a file) until `untilMs` (`performance.now()` time), no longer:
 * `true` when all of it is gone, `false` when time ran out first, and what is left stays (the caller logs it).
 * Never follows a symbolic link: a link is removed, not what it points at. A part removed meanwhile by someone
 * else counts as removed.
 */
export async function purgeTree(path: string, untilMs: number): Promise<boolean> {
  let entries: import('node:fs').Dirent[];
  try {
    entries = await readdir(path, { withFileTypes: true });
  } catch (error) {
    if (code(error) === 'ENOENT') return true;
    if (code(error) !== 'ENOTDIR') throw error;
    await removeFile(path);
    return true;
  }
  let complete = true;
  for (let i = 0; i < entries.length; i += AT_ONCE) {
    if (performance.now() >= untilMs) return false;
    // Settled, all of them, before anything is decided: a branch that fails leaves none of the others still
    // deleting once the purge has returned (and the drop has answered).
    const removed = await Promise.allSettled(
      entries.slice(i, i + AT_ONCE).map(async (entry) => {
        const child = join(path, entry.name);
        if (entry.isDirectory()) return purgeTree(child, untilMs);
        await removeFile(child);
        return true;
      }),
    );
    for (const result of removed) {
      if (result.status === 'rejected') throw result.reason;
      if (!result.value) complete = false;
    }
  }
  if (!complete) return false;
  try {
    await rmdir(path);
  } catch (error) {
    if (code(error) === 'ENOENT') return true;
    // Something was put into it meanwhile: not this purge's to remove.
    if (code(error) === 'ENOTEMPTY') return false;
    throw error;
  }
  return true;
}

async function removeFile(path: string): Promise<void> {
  await unlink(path).catch((error: unknown) => {
    if (code(error) !== 'ENOENT') throw error;
  });
}
