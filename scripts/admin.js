// `npm run -s admin -- <entity> <verb> [options]`: staff commands, each carried out by the
// service that owns the data (partners and keys: gateway; organizations: device-registry;
// meter records: meter). Works whether or not the fleet is running.
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const OWNERS = { partner: 'gateway', key: 'gateway', org: 'device-registry', command: 'light-command', meter: 'meter' };
const root = path.resolve(__dirname, '..');
const [entity] = process.argv.slice(2);
const owner = OWNERS[entity];
if (!owner) {
  process.stderr.write(`admin: unknown command '${entity ?? ''}'; use one of: ${Object.keys(OWNERS).join(', ')}\n`);
  process.exit(2);
}
const entry = path.join(root, 'services', owner, 'dist', 'admin', 'cli.js');
if (!fs.existsSync(path.join(root, 'services', owner, 'package.json'))) {
  process.stderr.write(`admin: '${entity}' commands belong to ${owner}, which is not part of this fleet yet\n`);
  process.exit(1);
}
if (!fs.existsSync(entry)) {
  // A fresh clone: build once, keeping stdout for the command's JSON answer.
  const build = spawnSync('npm', ['run', '-s', 'build'], { cwd: root, stdio: ['ignore', 2, 2] });
  if (build.status !== 0) process.exit(build.status ?? 1);
}
const result = spawnSync(process.execPath, [entry, ...process.argv.slice(2)], { stdio: 'inherit' });
process.exit(result.status ?? 1);
