/**
 * The parts of a catalog idempotency scope, as `src/idempotency.ts` builds it: the catalog prefix, U+001F, the
 * principal. (test/observability-audit.test.ts fails if the two drift apart.)
 */
export function splitScope(scope: string): { readonly prefix: string; readonly principal: string } {
  const at = scope.lastIndexOf('\u001f');
  return at === -1
    ? { prefix: '', principal: scope }
    : { prefix: scope.slice(0, at), principal: scope.slice(at + 1) };
}
