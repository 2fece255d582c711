import { readFileSync } from 'node:fs';
import { parse } from 'yaml';

/** The parts of the Iceberg REST OpenAPI document the server reads. */
export interface OpenApiDocument {
  readonly paths: Record<string, Record<string, unknown>>;
  readonly components: {
    readonly schemas: Record<string, unknown>;
    readonly parameters: Record<string, unknown>;
  };
}

let document: OpenApiDocument | undefined;

/**
 * The Iceberg REST OpenAPI document in `openapi/`, parsed once. This module sits one level below the package
 * root both as source (`src/openapi.ts`) and once bundled (`dist/main.js`), so one relative URL serves both.
 */
export function openApiDocument(): OpenApiDocument {
  document ??= parse(
    readFileSync(new URL('../openapi/rest-catalog-open-api.yaml', import.meta.url), 'utf8'),
  ) as OpenApiDocument;
  return document;
}
