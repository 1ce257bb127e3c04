// Builds the contracts from proto-schemas/: one bundle of every JSON Schema (for ajv at run
// time), TypeScript types for each titled schema, and the subject names.
const fs = require('node:fs');
const path = require('node:path');
const { compile } = require('json-schema-to-typescript');

const schemaRoot = path.resolve(__dirname, '../../../proto-schemas');
const outDir = path.resolve(__dirname, '../src/generated');

function findSchemas(dir) {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) return findSchemas(full);
    return entry.name.endsWith('.schema.json') ? [full] : [];
  });
}

// json-schema-to-typescript cannot follow our $id URLs offline, so the types are compiled
// from one document whose $refs point at local definitions named by each schema's title.
function localRefs(node, titleById) {
  if (Array.isArray(node)) return node.map((item) => localRefs(item, titleById));
  if (node === null || typeof node !== 'object') return node;
  const out = {};
  for (const [key, value] of Object.entries(node)) {
    if (key === '$id' || key === '$schema') continue;
    if (key === '$ref') {
      const title = titleById.get(value);
      if (!title) throw new Error(`unresolved $ref ${value}`);
      out.$ref = `#/definitions/${title}`;
    } else {
      out[key] = localRefs(value, titleById);
    }
  }
  return out;
}

/**
 * The payload types of each subject that names a schema: a request subject's body and reply,
 * an event subject's payload. The typed bus (packages/service-kit) reads them, so a wrong body
 * fails the type check.
 */
function subjectTypes(subjects, titleById) {
  const typeOf = (id) => {
    const title = titleById.get(id);
    if (!title) throw new Error(`subjects.json names unknown schema ${id}`);
    return `Types.${title}`;
  };
  const rows = (entries, key) =>
    entries
      .filter(([, def]) => def[key])
      .map(([subject, def]) => `  '${subject}': ${typeOf(def[key])};`)
      .join('\n');
  const requests = Object.entries(subjects.requests);
  return (
    `/* Generated from proto-schemas/subjects.json. Do not edit. */\n` +
    `import type * as Types from './types';\n\n` +
    `/** Request bodies of the subjects that declare a 'body' schema. */\nexport interface RequestBodies {\n${rows(requests, 'body')}\n}\n\n` +
    `/** Reply bodies of the subjects that declare a 'reply' schema. */\nexport interface ReplyBodies {\n${rows(requests, 'reply')}\n}\n\n` +
    `/** Payloads of the event subjects. */\nexport interface EventPayloads {\n${rows(Object.entries(subjects.events), 'schema')}\n}\n`
  );
}

async function main() {
  const files = findSchemas(schemaRoot).sort();
  const schemas = files.map((file) => JSON.parse(fs.readFileSync(file, 'utf8')));
  const titleById = new Map();
  for (const [i, schema] of schemas.entries()) {
    if (!schema.$id || !schema.title) throw new Error(`${files[i]} needs $id and title`);
    if ([...titleById.values()].includes(schema.title)) throw new Error(`duplicate title ${schema.title}`);
    titleById.set(schema.$id, schema.title);
  }
  const definitions = Object.fromEntries(schemas.map((s) => [s.title, localRefs(s, titleById)]));
  const types = await compile({ title: 'Contracts', definitions, type: 'object', additionalProperties: false }, 'Contracts', {
    bannerComment: '/* Generated from proto-schemas/ by packages/contracts/scripts/generate.js. Do not edit. */',
    unreachableDefinitions: true,
    additionalProperties: false,
  });
  const subjects = JSON.parse(fs.readFileSync(path.join(schemaRoot, 'subjects.json'), 'utf8'));
  fs.mkdirSync(outDir, { recursive: true });
  fs.writeFileSync(path.join(outDir, 'types.ts'), types);
  fs.writeFileSync(
    path.join(outDir, 'schemas.ts'),
    `/* Generated from proto-schemas/. Do not edit. */\nexport const schemaBundle: ReadonlyArray<Record<string, unknown>> = ${JSON.stringify(schemas, null, 2)};\n`,
  );
  fs.writeFileSync(
    path.join(outDir, 'subjects.ts'),
    `/* Generated from proto-schemas/subjects.json. Do not edit. */\n` +
      `export const requestSubjects = ${JSON.stringify(subjects.requests, null, 2)} as const;\n` +
      `export const eventSubjects = ${JSON.stringify(subjects.events, null, 2)} as const;\n` +
      `export type RequestSubject = keyof typeof requestSubjects;\n` +
      `export type EventSubject = keyof typeof eventSubjects;\n` +
      `/** The request subjects a service serves (its 'owner' in subjects.json). */\n` +
      `export type SubjectsOf<Owner extends string> = { [S in RequestSubject]: (typeof requestSubjects)[S]['owner'] extends Owner ? S : never }[RequestSubject];\n`,
  );
  fs.writeFileSync(path.join(outDir, 'subject-types.ts'), subjectTypes(subjects, titleById));
  const systemRegistry = JSON.parse(fs.readFileSync(path.join(schemaRoot, 'system', 'registry.json'), 'utf8'));
  delete systemRegistry.$comment;
  fs.writeFileSync(
    path.join(outDir, 'system-registry.ts'),
    `/* Generated from proto-schemas/system/registry.json. Do not edit. */\nexport const systemRegistry = ${JSON.stringify(systemRegistry, null, 2)} as const;\n`,
  );
  const partnerEventTypes = JSON.parse(fs.readFileSync(path.join(schemaRoot, 'events', 'partner-event-types.json'), 'utf8'));
  fs.writeFileSync(
    path.join(outDir, 'partner-event-types.ts'),
    `/* Generated from proto-schemas/events/partner-event-types.json. Do not edit. */\nexport const partnerEventTypes = ${JSON.stringify(partnerEventTypes.types, null, 2)} as const;\n`,
  );
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
