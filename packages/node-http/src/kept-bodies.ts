import type { IncomingHttpHeaders } from 'node:http';
import type { Readable } from 'node:stream';
import type { Idempotency } from '@idem/core';
import { isJsonType } from './describe-request.js';
import { type KeptBody, keepBody } from './keep-body.js';

/**
 * The bodies of an adapter's requests as it kept them for the fingerprint: the text a body parser read (the
 * framework's own JSON parser, with no stream per request), or the bytes teed as they arrived
 * ({@link keepBody}), for parsers that hand over no text.
 *
 * @example
 * // Fastify: its JSON parser keeps its text; other bodies are teed in preParsing.
 * fastify.addContentTypeParser('application/json', { parseAs: 'string' }, (request, text, done) =>
 *   parse(request, bodies.text(request, text as string), done));
 * bodies.keepText(); // JSON's
 */
export class KeptBodies<Request extends object> {
  readonly #bodies = new WeakMap<Request, KeptBody | string>();
  /** The content types whose parser keeps its text ({@link KeptBodies.text}): their bodies are not teed. */
  #textTypes: (contentType: string | undefined) => boolean = () => false;

  /** From now on the bodies of these content types (JSON's, by default) are kept as their parser's text, not teed. */
  keepText(types: (contentType: string | undefined) => boolean = isJsonType): void {
    this.#textTypes = types;
  }

  /** Keep `text`, the body a parser read for `request`; returns it, for the parser to go on with. */
  text(request: Request, text: string): string {
    this.#bodies.set(request, text);
    return text;
  }

  /**
   * The stream a body parser is to read `request`'s body from: `source` itself when its parser keeps its text
   * ({@link KeptBodies.keepText}) or there is nothing to fingerprint, else a tee that keeps the bytes
   * ({@link keepBody}).
   */
  tee(
    idem: Pick<Idempotency, 'covers' | 'headerName'>,
    request: Request & { readonly method: string; readonly headers: IncomingHttpHeaders },
    source: Readable,
  ): Readable {
    const textKept = this.#textTypes(request.headers['content-type']);
    const kept = textKept ? undefined : keepBody(idem, request, source);
    if (kept === undefined) return source;
    this.#bodies.set(request, kept);
    return kept.stream;
  }

  /** The body `begin` fingerprints: the kept text or bytes (`UNSEEN_BODY` if never read whole), else `parsed`. */
  of(request: Request, parsed: unknown): unknown {
    const kept = this.#bodies.get(request);
    return kept === undefined ? parsed : typeof kept === 'string' ? kept : kept.bytes();
  }
}
