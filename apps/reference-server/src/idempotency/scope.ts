import type { FastifyRequest } from 'fastify';

/** The catalog prefix of a request ('' without one): keys are scoped to prefix + principal. */
export const prefixOf = (request: FastifyRequest): string =>
  (request.params as { prefix?: string }).prefix ?? '';

/**
 * A request's idempotency scope: its catalog prefix, U+001F, its principal. Neither holds control characters,
 * so the scope splits back unambiguously ({@link splitScope}).
 */
export const scopeOf = (request: FastifyRequest): string => `${prefixOf(request)}\u001f${request.principal}`;

/**
 * The parts of a catalog idempotency scope, as {@link scopeOf} builds it: the catalog prefix, U+001F, the
 * principal. (test/observability-audit.test.ts fails if the two drift apart.)
 */
export function splitScope(scope: string): { readonly prefix: string; readonly principal: string } {
  const at = scope.lastIndexOf('\u001f');
  return at === -1
    ? { prefix: '', principal: scope }
    : { prefix: scope.slice(0, at), principal: scope.slice(at + 1) };
}
