/**
 * The examples the route table gives (shown in /docs and used by the malformed-request suite as
 * requests that reach the owning service) are accepted by the schemas they illustrate and by
 * the gateway's own request checks.
 */
import Ajv2020 from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
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
