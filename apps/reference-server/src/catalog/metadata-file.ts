import { constants } from 'node:fs';
import { lstat, open } from 'node:fs/promises';
import { badRequest, retryLater } from './iceberg-error.js';
import { MAX_STORED_JSON_DEPTH } from './limits.js';
import { JsonTextError, parseLosslessJson } from './lossless-json.js';

export interface ReadLimits {
  /** Larger files are refused. */
  readonly maxBytes: number;
  /** A read that takes longer is abandoned with a retryable 503. */
  readonly timeoutMs: number;
}

const notMetadata = (field: string, why: string) =>
  badRequest(`${field} does not hold Iceberg metadata: ${why}`);

/**
 * Read and parse a JSON metadata file at a real path already confined to the warehouse. Only a regular file is
 * read (never a FIFO, a device or a socket, which could block or never end), at most `maxBytes` of it, within
 * `timeoutMs`. Errors never quote the file: a non-JSON file must not leak its first bytes to the client.
 */
export async function readJsonFile(path: string, field: string, limits: ReadLimits): Promise<unknown> {
  const before = await lstat(path).catch((error: NodeJS.ErrnoException) => {
    throw notMetadata(field, error.code === 'ENOENT' ? 'no such file' : `cannot be read (${error.code})`);
  });
  if (!before.isFile()) throw notMetadata(field, 'not a regular file');
  if (before.size > limits.maxBytes) throw notMetadata(field, `larger than ${limits.maxBytes} bytes`);
  // O_NOFOLLOW: the last component cannot have become a symlink since; O_NONBLOCK: opening a FIFO swapped in
  // since the lstat cannot block. fstat then checks what was actually opened.
  const file = await open(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK).catch(
    (error: NodeJS.ErrnoException) => {
      throw notMetadata(field, `cannot be opened (${error.code})`);
    },
  );
  try {
    const opened = await file.stat();
    if (!opened.isFile() || opened.ino !== before.ino || opened.dev !== before.dev)
      throw notMetadata(field, 'the file changed while it was opened');
    const chunks: Buffer[] = [];
    let size = 0;
    // `end` is inclusive: at most maxBytes + 1 bytes are read, enough to tell a file that grew past the cap.
    const stream = file.createReadStream({
      start: 0,
      end: limits.maxBytes,
      autoClose: false,
      signal: AbortSignal.timeout(limits.timeoutMs),
    });
    try {
      for await (const chunk of stream) {
        size += (chunk as Buffer).length;
        chunks.push(chunk as Buffer);
      }
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ABORT_ERR')
        throw retryLater(`reading ${field} timed out; retry later`);
      throw notMetadata(field, `cannot be read (${(error as NodeJS.ErrnoException).code ?? 'error'})`);
    }
    if (size > limits.maxBytes) throw notMetadata(field, `larger than ${limits.maxBytes} bytes`);
    let text: string;
    try {
      text = new TextDecoder('utf-8', { fatal: true }).decode(Buffer.concat(chunks));
    } catch {
      throw notMetadata(field, 'not UTF-8 text');
    }
    try {
      // Exact: Iceberg's writers put 64-bit snapshot ids in these files.
      return parseLosslessJson(text, { maxDepth: MAX_STORED_JSON_DEPTH });
    } catch (error) {
      if (!(error instanceof JsonTextError)) throw error;
      throw notMetadata(field, error.problem === 'syntax' ? 'not JSON' : `JSON that ${error.message}`);
    }
  } finally {
    await file.close();
  }
}
