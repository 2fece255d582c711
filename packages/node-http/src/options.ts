import type { FormatError, IdempotencyOptions } from '@idem/core';

/**
 * The options every Node.js adapter takes: the coordinator's, plus who owns a key and how the coordinator's
 * own answers read. The hooks (`redact`, `rebuildReplay`) receive the framework's request as `host`.
 */
export interface NodeIdempotencyOptions<Host> extends IdempotencyOptions<Host> {
  /**
   * Who owns the key: return the authenticated principal (and tenant) so that one caller can never replay
   * another's response. @default every request shares one scope
   */
  readonly scope?: (request: Host) => string | undefined;
  /** The JSON body of the coordinator's own answers. @default `{ error: { code, message } }` */
  readonly formatError?: FormatError<Host>;
}
