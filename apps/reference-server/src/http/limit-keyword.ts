import type { KeywordDefinition } from 'ajv';
import { locationProblem, nameProblem, namespaceProblem, prefixProblem } from '../catalog/limits.js';

/** What a value is to the catalog, and so which of the limits in catalog/limits.ts it must meet. */
export type LimitKind = 'name' | 'namespace' | 'namespace-path' | 'prefix' | 'location';

const SEPARATOR = '\u001f';

function problemOf(kind: LimitKind, data: unknown): string | undefined {
  // A value of the wrong type is the `type` keyword's to report.
  if (kind === 'namespace') {
    return Array.isArray(data) && data.every((level) => typeof level === 'string')
      ? namespaceProblem(data)
      : undefined;
  }
  if (typeof data !== 'string') return undefined;
  switch (kind) {
    case 'name':
      return nameProblem(data);
    case 'namespace-path':
      return namespaceProblem(data.split(SEPARATOR));
    case 'prefix':
      return prefixProblem(data);
    case 'location':
      return locationProblem(data);
  }
}

function validate(kind: LimitKind, data: unknown): boolean {
  const problem = problemOf(kind, data);
  if (problem === undefined) return true;
  validate.errors = [{ keyword: 'catalogLimit', message: problem, params: { kind } }];
  return false;
}
validate.errors = [] as { keyword: string; message: string; params: object }[];

/** `catalogLimit: <kind>`: the catalog's limits as a schema keyword, so they hold before any handler runs. */
export const catalogLimitKeyword: KeywordDefinition = {
  keyword: 'catalogLimit',
  schemaType: 'string',
  errors: true,
  validate,
};

/** Where the limits apply in the spec's request schemas: component → property → kind. */
export const PROPERTY_LIMITS: Record<string, Record<string, LimitKind>> = {
  CreateNamespaceRequest: { namespace: 'namespace' },
  TableIdentifier: { namespace: 'namespace', name: 'name' },
  CreateTableRequest: { name: 'name', location: 'location' },
  CreateViewRequest: { name: 'name', location: 'location' },
  RegisterTableRequest: { name: 'name', 'metadata-location': 'location' },
  RegisterViewRequest: { name: 'name', 'metadata-location': 'location' },
  SetLocationUpdate: { location: 'location' },
};

/** And in its path and query parameters, by parameter name. */
export const PARAMETER_LIMITS: Record<string, LimitKind> = {
  prefix: 'prefix',
  namespace: 'namespace-path',
  parent: 'namespace-path',
  table: 'name',
  view: 'name',
};
