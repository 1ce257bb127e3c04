import Ajv2020, { type ErrorObject, type ValidateFunction } from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import { ValidationError } from '@fleet/service-kit';
import type { RouteDef } from '../routes/types';
import { routeId } from '../routes/types';

interface RouteValidators {
  params?: ValidateFunction;
  query?: ValidateFunction;
  body?: ValidateFunction;
}

// Query strings arrive as text: the query validator coerces them to the declared types.
const bodyAjv = new Ajv2020({ allErrors: false, strict: false });
const queryAjv = new Ajv2020({ allErrors: false, strict: false, coerceTypes: true });
addFormats(bodyAjv);
addFormats(queryAjv);

/** Compiles every route's params, query and body schemas once, at start-up. */
export class RequestValidator {
  private readonly byRoute = new Map<string, RouteValidators>();

  constructor(routes: readonly RouteDef[]) {
    for (const route of routes) {
      const validators: RouteValidators = {};
      if (route.params) {
        validators.params = bodyAjv.compile({ type: 'object', properties: route.params, required: Object.keys(route.params) });
      }
      validators.query = queryAjv.compile({
        type: 'object',
        properties: route.query?.properties ?? {},
        required: route.query?.required ?? [],
        additionalProperties: false,
      });
      if (route.body) validators.body = bodyAjv.compile(route.body);
      this.byRoute.set(routeId(route), validators);
    }
  }

  /** Validates in place (query values are coerced); throws a 400 naming the first bad field. */
  check(route: RouteDef, parts: { params: Record<string, string>; query: Record<string, unknown>; body: unknown }): void {
    const v = this.byRoute.get(routeId(route));
    if (!v) return;
    if (v.params && !v.params(parts.params)) throw new ValidationError(describe(v.params.errors, 'path'));
    if (v.query && !v.query(parts.query)) throw new ValidationError(describe(v.query.errors, 'query'));
    if (v.body && parts.body !== undefined && !v.body(parts.body)) throw new ValidationError(describe(v.body.errors, 'body'));
  }
}

function describe(errors: ErrorObject[] | null | undefined, where: 'path' | 'query' | 'body'): string {
  const e = errors?.[0];
  if (!e) return `invalid ${where}`;
  if (e.keyword === 'additionalProperties') {
    const extra = (e.params as { additionalProperty: string }).additionalProperty;
    return where === 'query' ? `unknown query parameter '${extra}'` : `unknown field '${fieldPath(e.instancePath, extra)}'`;
  }
  if (e.keyword === 'required') {
    const missing = (e.params as { missingProperty: string }).missingProperty;
    return `missing required ${where === 'query' ? 'query parameter' : 'field'} '${fieldPath(e.instancePath, missing)}'`;
  }
  const field = fieldPath(e.instancePath);
  if (!field) return `invalid ${where}: ${e.message ?? 'is invalid'}`;
  return `invalid '${field}': ${e.message ?? 'is invalid'}`;
}

function fieldPath(instancePath: string, child?: string): string {
  const parts = instancePath.split('/').filter(Boolean);
  if (child) parts.push(child);
  return parts.join('.');
}
