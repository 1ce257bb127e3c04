// The one list of the fleet's services. The launcher starts them in this order (the gateway
// last, so partners reach it only when what it dispatches to is up), the staff CLI sends each
// command to the service that owns its data, and a test (packages/launcher/test) checks that
// docker-compose.yml and deploy/k8s/ have exactly these services. Adding a service starts here
// (CONTRIBUTING.md, "Add a service").
const fs = require('node:fs');
const path = require('node:path');

/** The repository's root (this file is packages/launcher/src/services.js). */
const ROOT = path.resolve(__dirname, '../../..');

/**
 * name: the folder under services/, the image, the compose service and the k8s manifest;
 * database: whether it owns a Postgres database (DATABASE_URL, created and migrated at start);
 * admin: the staff CLI entities it owns (`npm run -s admin -- <entity> <verb>`), served by its
 * dist/admin/cli.js.
 */
const SERVICE_LIST = [
  { name: 'device-registry', database: true, admin: ['org'] },
  { name: 'light-command', database: true, admin: ['command'] },
  { name: 'config-alerting', database: true, admin: [] },
  { name: 'meter', database: true, admin: ['meter'] },
  { name: 'system-files', database: true, admin: [] },
  { name: 'mqtt-bridge', database: false, admin: [] },
  { name: 'events', database: true, admin: [] },
  { name: 'gateway', database: true, admin: ['partner', 'key'] },
];

/** Every service name, in start order. */
const SERVICES = SERVICE_LIST.map((s) => s.name);

/** The listed services whose code exists in this checkout (a service may be listed before it is written). */
function presentServices() {
  return SERVICES.filter((name) => fs.existsSync(path.join(ROOT, 'services', name, 'package.json')));
}

/** The listed services that are built (services/<name>/dist/main.js), in start order. */
function builtServices() {
  return SERVICES.filter((name) => fs.existsSync(path.join(ROOT, 'services', name, 'dist', 'main.js')));
}

/** The service that owns a staff CLI entity, or undefined. */
function adminOwner(entity) {
  return SERVICE_LIST.find((s) => s.admin.includes(entity))?.name;
}

/** Every staff CLI entity, in list order. */
function adminEntities() {
  return SERVICE_LIST.flatMap((s) => s.admin);
}

module.exports = { ROOT, SERVICE_LIST, SERVICES, presentServices, builtServices, adminOwner, adminEntities };
