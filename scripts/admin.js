// `npm run -s admin -- <entity> <verb> [options]`: staff commands, each carried out by the
// service that owns the data (packages/launcher/src/services.js says which: partners and keys:
// gateway; organizations: device-registry; command grants: light-command; meter records:
// meter). Works whether or not the fleet is running.
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const { ROOT, adminOwner, adminEntities } = require('@fleet/launcher');

const [entity] = process.argv.slice(2);
const owner = entity ? adminOwner(entity) : undefined;
if (!owner) {
  process.stderr.write(`admin: unknown command '${entity ?? ''}'; use one of: ${adminEntities().join(', ')}\n`);
  process.exit(2);
}
const entry = path.join(ROOT, 'services', owner, 'dist', 'admin', 'cli.js');
if (!fs.existsSync(path.join(ROOT, 'services', owner, 'package.json'))) {
  process.stderr.write(`admin: '${entity}' commands belong to ${owner}, which is not part of this fleet yet\n`);
  process.exit(1);
}
if (!fs.existsSync(entry)) {
  // A fresh clone: build once, keeping stdout for the command's JSON answer.
  const build = spawnSync('npm', ['run', '-s', 'build'], { cwd: ROOT, stdio: ['ignore', 2, 2] });
  if (build.status !== 0) process.exit(build.status ?? 1);
}
// A fleet keeps its data in <prefix><service> on POSTGRES_URL's server, as the launcher names
// them (prefix FLEET_DATABASE_PREFIX, default fleet_): the command goes to that fleet's
// database unless DATABASE_URL says otherwise.
const env = { ...process.env };
const prefix = process.env.FLEET_DATABASE_PREFIX ?? (process.env.POSTGRES_URL ? 'fleet_' : undefined);
if (prefix && !process.env.DATABASE_URL) {
  if (!/^[a-z][a-z0-9_]*$/.test(prefix)) {
    process.stderr.write(`admin: FLEET_DATABASE_PREFIX must be lowercase letters, digits and _, got ${prefix}\n`);
    process.exit(2);
  }
  const url = new URL(process.env.POSTGRES_URL ?? 'postgresql://postgres@127.0.0.1:5432/postgres');
  url.pathname = `/${prefix}${owner.replace(/-/g, '_')}`;
  env.DATABASE_URL = url.toString();
}
const result = spawnSync(process.execPath, [entry, ...process.argv.slice(2)], { stdio: 'inherit', env });
process.exit(result.status ?? 1);
