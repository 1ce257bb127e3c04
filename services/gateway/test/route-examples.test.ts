/**
 * The examples the route table gives (shown in /docs and used by the malformed-request suite as
 * requests that reach the owning service) are accepted by the schemas they illustrate and by
 * the gateway's own request checks.
 */
import Ajv2020 from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import { API_EFFECT_FIELDS, apiEffectToWire } from '@fleet/light-wire';
import { RequestValidator } from '../src/http/request-validation';
import { routes } from '../src/routes/table';
import { pathParamNames, type JsonSchema, type RouteDef } from '../src/routes/types';

const ajv = new Ajv2020({ strict: false });
addFormats(ajv);

/** Every schema node under `schema` that carries `examples`, with where it is. */
function exampleNodes(schema: unknown, at: string): Array<{ at: string; node: JsonSchema }> {
  if (!schema || typeof schema !== 'object') return [];
  const node = schema as JsonSchema;
  const own = Array.isArray(node.examples) ? [{ at, node }] : [];
  return [...own, ...Object.entries(node).flatMap(([k, v]) => (k === 'examples' ? [] : exampleNodes(v, `${at}.${k}`)))];
}

const schemasOf = (route: RouteDef): Array<[string, unknown]> => [
  ['params', route.params],
  ['query', route.query],
  ['body', route.body],
];

it('gives examples that the schemas they belong to accept', () => {
  const refused: string[] = [];
  let checked = 0;
  for (const route of routes) {
    for (const [part, schema] of schemasOf(route)) {
      for (const { at, node } of exampleNodes(schema, `${route.method} ${route.path} ${part}`)) {
        const { examples, ...rest } = node;
        const validate = ajv.compile(rest);
        for (const example of examples as unknown[]) {
          checked += 1;
          if (!validate(example)) refused.push(`${at}: ${JSON.stringify(example)} ${ajv.errorsText(validate.errors)}`);
        }
      }
    }
  }
  expect(refused).toEqual([]);
  expect(checked).toBeGreaterThan(8);
});

it('passes every body example through the gateway checks of its route', () => {
  const validator = new RequestValidator(routes);
  const withExamples = routes.filter((route) => Array.isArray(route.body?.examples));
  const paramsFor = (route: RouteDef): Record<string, string> =>
    Object.fromEntries(
      pathParamNames(route.path).map((name) => {
        const examples = route.params?.[name]?.examples as unknown[] | undefined;
        const enumValues = route.params?.[name]?.enum as unknown[] | undefined;
        return [name, String(examples?.[0] ?? enumValues?.[0] ?? (name === 'device_id' ? 'A1B2C3D4E5F6' : '1'))];
      }),
    );
  const refused = withExamples.flatMap((route) =>
    (route.body?.examples as unknown[]).flatMap((body) => {
      try {
        validator.check(route, { params: paramsFor(route), query: {}, body: structuredClone(body) });
        return [];
      } catch (err) {
        return [`${route.method} ${route.path}: ${(err as Error).message}`];
      }
    }),
  );
  expect(refused).toEqual([]);
  expect(withExamples.map((route) => `${route.method} ${route.path}`)).toEqual(
    expect.arrayContaining(['POST /v1/devices/{device_id}/commands', 'POST /v1/devices/{device_id}/channels/{channel}/effects', 'POST /v1/devices/{device_id}/system/commands']),
  );
});

describe('alert signal entries at the gateway', () => {
  const validator = new RequestValidator(routes);
  const create = routes.find((r) => r.method === 'POST' && r.path === '/v1/alert-signals')!;
  const color = { r: 255, g: 0, b: 12 };
  /** A value at the top of each field's range, as the light runs it (repeat_s outlasts the animation). */
  const valueOf = (field: string): unknown => {
    if (field.includes('color')) return color;
    if (field.endsWith('_time_s')) return 99.999;
    if (field.endsWith('period_s')) return 9.999;
    if (field.endsWith('width')) return 12;
    if (field.endsWith('duty_ratio')) return 0.99;
    return ({ repeat_s: 999_999, brightness_per: 99 } as Record<string, number>)[field];
  };
  const effectOf = (type: string): Record<string, unknown> => ({ type, ...Object.fromEntries(API_EFFECT_FIELDS[type as keyof typeof API_EFFECT_FIELDS].map((f) => [f, valueOf(f)])) });
  const check = (light: Record<string, unknown>) => {
    const entries = { CLEAR: { light: { type: 'Solid', color } }, ADVISORY: { light: { type: 'Solid', color } }, WARNING: { light }, NO_DATA: { light: { type: 'Solid', color } } };
    validator.check(create, { params: {}, query: {}, body: { name: 'x', entries } });
  };

  it('accepts every effect type at the top of its ranges, as the light-wire encoder does', () => {
    for (const type of Object.keys(API_EFFECT_FIELDS)) {
      const light = effectOf(type);
      expect(() => check(light)).not.toThrow();
      expect(() => apiEffectToWire(light)).not.toThrow();
    }
  });

  it('refuses a field out of range, missing or not of the type, naming the entry and the field', () => {
    expect(() => check({ type: 'Pulse', color, period_s: 12 })).toThrow("invalid 'entries.WARNING.light.period_s': must be <= 9.999");
    expect(() => check({ type: 'Pulse', color })).toThrow("missing required field 'entries.WARNING.light.period_s'");
    expect(() => check({ type: 'Solid', color, period_s: 1 })).toThrow("unknown field 'entries.WARNING.light.period_s'");
    expect(() => check({ type: 'Solid', color: { r: 256, g: 0, b: 0 } })).toThrow("invalid 'entries.WARNING.light.color.r': must be <= 255");
    expect(() => check({ type: 'Chase', color, period_s: 1, width: 1.5 })).toThrow("invalid 'entries.WARNING.light.width': must be integer");
    expect(() => check({ type: 'Glow', color })).toThrow(/invalid 'entries.WARNING.light.type'/);
  });
});

it('answers 404 for a profile or signal path id that is no integer, as for an integer that names no row', () => {
  const validator = new RequestValidator(routes);
  for (const path of ['/v1/profiles/{profile_id}', '/v1/alert-signals/{signal_id}']) {
    const route = routes.find((r) => r.method === 'DELETE' && r.path === path)!;
    const name = pathParamNames(path)[0]!;
    for (const id of ['abc', '1.5', '']) {
      expect(() => validator.check(route, { params: { [name]: id }, query: {}, body: undefined })).toThrow(expect.objectContaining({ status: 404, code: 'not_found' }));
    }
    expect(() => validator.check(route, { params: { [name]: '7' }, query: {}, body: undefined })).not.toThrow();
  }
});
