import fp from 'fastify-plugin';
import { badRequest } from '../catalog/iceberg-error.js';

/** Whether every name and value of a raw query string percent-decodes to valid UTF-8. */
function isWellEncoded(query: string): boolean {
  for (const part of query.split(/[&=]/)) {
    try {
      decodeURIComponent(part.replaceAll('+', ' '));
    } catch {
      return false;
    }
  }
  return true;
}

/**
 * Refuse a query string that is not validly percent-encoded (`%ZZ`, a truncated escape, bytes that are not
 * UTF-8), as the router refuses such a path. The query parser would otherwise keep the text as it is, so that
 * `parent=a%C3%28` named a namespace "a%C3%28" instead of failing.
 */
export const wellEncodedQuery = fp(
  async (app) => {
    app.addHook('onRequest', async (request) => {
      const at = request.url.indexOf('?');
      if (at !== -1 && !isWellEncoded(request.url.slice(at + 1)))
        throw badRequest('the query string is not validly percent-encoded');
    });
  },
  { fastify: '5.x', name: 'reference-server/query-string', dependencies: ['reference-server/observability'] },
);
