/**
 * The one list of services (src/services.js) and everything that must name the same services:
 * the folders under services/, docker-compose.yml, the Kubernetes manifests, the Dockerfile and
 * the staff CLI.
 * A service added or renamed in one place and not the others fails here.
 */
import fs from 'node:fs';
import path from 'node:path';
import { adminEntities, adminOwner, presentServices, ROOT, SERVICE_LIST, SERVICES } from '@fleet/launcher';

const read = (...parts: string[]) => fs.readFileSync(path.join(ROOT, ...parts), 'utf8');

/** Top-level service blocks of docker-compose.yml: name -> the block's text. */
function composeServices(): Map<string, string> {
  const text = read('docker-compose.yml');
  const body = text.slice(text.indexOf('\nservices:\n') + '\nservices:\n'.length);
  const end = body.search(/^\S/m);
  const blocks = new Map<string, string>();
  let current: string | undefined;
  for (const line of (end < 0 ? body : body.slice(0, end)).split('\n')) {
    const head = /^ {2}([a-z][a-z0-9-]*):\s*$/.exec(line);
    if (head?.[1]) {
      current = head[1];
      blocks.set(current, '');
    } else if (current) {
      blocks.set(current, `${blocks.get(current)}${line}\n`);
    }
  }
  return blocks;
}

describe('the list of services', () => {
  it('names every service folder of the repository, in a start order that ends with the gateway', () => {
    const folders = fs
      .readdirSync(path.join(ROOT, 'services'))
      .filter((name) => fs.existsSync(path.join(ROOT, 'services', name, 'package.json')))
      .sort();
    expect(folders.filter((name) => !SERVICES.includes(name))).toEqual([]);
    expect(presentServices().sort()).toEqual(folders);
    expect(SERVICES.at(-1)).toBe('gateway');
    expect(new Set(SERVICES).size).toBe(SERVICES.length);
  });

  it('is what docker-compose.yml runs: one fleet image per service, DATABASE_URL exactly for those with a database', () => {
    const compose = composeServices();
    const fleetImages = [...compose].filter(([, block]) => /image: fleet\//.test(block)).map(([name]) => name);
    expect(fleetImages.sort()).toEqual([...SERVICES].sort());
    for (const service of SERVICE_LIST) {
      const block = compose.get(service.name) ?? '';
      expect({ service: service.name, image: new RegExp(`image: fleet/${service.name}:`).test(block) }).toEqual({ service: service.name, image: true });
      expect({ service: service.name, database: /DATABASE_URL:/.test(block) }).toEqual({ service: service.name, database: service.database });
    }
  });

  it('is what deploy/k8s deploys: one manifest per service, listed with its image in kustomization.yaml, beside the broker', () => {
    const kustomization = read('deploy', 'k8s', 'kustomization.yaml');
    const workloads = fs
      .readdirSync(path.join(ROOT, 'deploy', 'k8s'))
      .filter((file) => /^kind: (Deployment|StatefulSet)$/m.test(read('deploy', 'k8s', file)));
    const own = (file: string) => /image: fleet\//.test(read('deploy', 'k8s', file));
    expect(workloads.filter(own).map((file) => file.replace(/\.yaml$/, '')).sort()).toEqual([...SERVICES].sort());
    // The one workload that is not the fleet's own image: the MQTT broker that asks the registry's hook.
    expect(workloads.filter((file) => !own(file))).toEqual(['emqx.yaml']);
    expect(kustomization.includes('  - emqx.yaml\n')).toBe(true);
    for (const name of SERVICES) {
      expect({ name, resource: kustomization.includes(`  - ${name}.yaml\n`) }).toEqual({ name, resource: true });
      expect({ name, image: kustomization.includes(`name: fleet/${name},`) }).toEqual({ name, image: true });
      expect({ name, image: read('deploy', 'k8s', `${name}.yaml`).includes(`image: fleet/${name}`) }).toEqual({ name, image: true });
    }
  });

  it('is what the Dockerfile accepts as SERVICE', () => {
    const accepted = /RUN case "\$\{SERVICE\}" in \\\n\s*([a-z|-]+)\) ;;/.exec(read('Dockerfile'))?.[1]?.split('|') ?? [];
    expect(accepted.sort()).toEqual([...SERVICES].sort());
  });

  it('sends each staff CLI entity to the one service that has the command line for it', () => {
    expect(adminEntities().sort()).toEqual(['command', 'key', 'meter', 'org', 'partner']);
    for (const entity of adminEntities()) {
      const owner = adminOwner(entity) as string;
      if (!presentServices().includes(owner)) continue;
      expect({ entity, cli: fs.existsSync(path.join(ROOT, 'services', owner, 'src', 'admin', 'cli.ts')) }).toEqual({ entity, cli: true });
    }
    expect(adminOwner('nothing')).toBeUndefined();
  });
});
