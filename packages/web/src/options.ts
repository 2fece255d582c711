import type { FormatError, IdempotencyOptions } from '@idem/core';

/**
 * The options of a Web-standard adapter: the coordinator's, plus who owns a key and how the coordinator's own
 * answers read. The hooks (`scope`, `formatError`, `redact`, `rebuildReplay`) receive the host's request: the
 * `Request` for {@link withIdempotency}, the framework's context for a framework adapter.
 */
export interface WebIdempotencyOptions<Host> extends IdempotencyOptions<Host> {
  /**
   * Who owns the key: return the authenticated principal (and tenant) so that one caller can never replay
   * another's response. A string, at once: anything else (a Promise, the principal object) fails the request,
   * as a hook that throws does. @default every request shares one scope
   */
  readonly scope?: (host: Host) => string | undefined;
  /** The JSON body of the coordinator's own answers. @default `{ error: { code, message } }` */
  readonly formatError?: FormatError<Host>;
}
