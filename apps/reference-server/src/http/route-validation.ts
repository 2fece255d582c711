import fp from 'fastify-plugin';
import { routeSchema } from './route-schemas.js';
import { validatorCompiler } from './validator.js';

/**
 * Every route the spec describes validates its path, query and body against the spec's schemas. Before the
 * routes: a route is given its schema as it is made (onRoute).
 */
export const routeValidation = fp(
  async (app) => {
    app.setValidatorCompiler(validatorCompiler);
    app.addHook('onRoute', (route) => {
      if (route.schema !== undefined || typeof route.method !== 'string') return;
      const schema = routeSchema(route.method, route.url);
      if (schema !== undefined) route.schema = schema;
    });
  },
  { fastify: '5.x', name: 'reference-server/route-validation' },
);
