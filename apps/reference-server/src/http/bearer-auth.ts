import fp from 'fastify-plugin';
import { notAuthorized } from '../catalog/iceberg-error.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** Who sent the request: the principal of its bearer token, or `anonymous`. */
    principal: string;
  }
}

export interface BearerAuthOptions {
  /** Bearer token → principal (TOKENS); none: every request is `anonymous`. */
  readonly tokens: ReadonlyMap<string, string>;
  /** Paths that answer without a token, whatever their query string (observability's probes and scrape). */
  readonly openPaths: ReadonlySet<string>;
}

/**
 * Who sent each request, from its bearer token: a 401 without a known one, except on the open paths. After
 * the server span opens, so that a refusal is traced too.
 */
export const bearerAuth = fp<BearerAuthOptions>(
  async (app, { tokens, openPaths }) => {
    app.decorateRequest('principal', '');
    app.addHook('onRequest', async (request) => {
      if (tokens.size === 0) {
        request.principal = 'anonymous';
        return;
      }
      if (openPaths.has(request.url.split('?', 1)[0] as string)) return;
      const match = /^Bearer (.+)$/.exec(request.headers.authorization ?? '');
      const principal = match ? tokens.get(match[1] as string) : undefined;
      if (principal === undefined) throw notAuthorized();
      request.principal = principal;
    });
  },
  { fastify: '5.x', name: 'reference-server/bearer-auth', dependencies: ['reference-server/observability'] },
);
