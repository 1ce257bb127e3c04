'use strict';
// Summarises a V8 .cpuprofile (from node --cpu-prof): self time per function and per origin
// (node internals, a node_modules package, the fleet's own code, GC, idle).
const fs = require('node:fs');
const path = require('node:path');

function origin(url) {
  if (!url) return '(native/VM)';
  if (url.startsWith('node:')) return 'node:' + url.slice(5).split('/')[0];
  const nm = url.lastIndexOf('/node_modules/');
  if (nm !== -1) {
    const rest = url.slice(nm + 14).split('/');
    return rest[0].startsWith('@') ? `${rest[0]}/${rest[1]}` : rest[0];
  }
  const fleet = /\/(services|packages)\/([^/]+)\//.exec(url);
  if (fleet) return `${fleet[1]}/${fleet[2]}`;
  return path.basename(url);
}

/**
 * Returns { totalMs, byOrigin: [{origin, ms, pct}], byFunction: [{fn, origin, ms, pct}] },
 * leaving out the idle time.
 */
function summarise(file, { top = 25 } = {}) {
  const profile = JSON.parse(fs.readFileSync(file, 'utf8'));
  const nodes = new Map(profile.nodes.map((n) => [n.id, n]));
  const selfUs = new Map();
  const deltas = profile.timeDeltas;
  for (let i = 0; i < profile.samples.length; i++) {
    const dt = deltas[i + 1] ?? 0; // time until the next sample is attributed to this one
    selfUs.set(profile.samples[i], (selfUs.get(profile.samples[i]) ?? 0) + dt);
  }
  const byOrigin = new Map();
  const byFunction = new Map();
  let busy = 0;
  let idle = 0;
  for (const [id, us] of selfUs) {
    const node = nodes.get(id);
    const { functionName, url, lineNumber } = node.callFrame;
    if (functionName === '(idle)') {
      idle += us;
      continue;
    }
    busy += us;
    const o = functionName === '(garbage collector)' ? '(gc)' : functionName === '(program)' ? '(program)' : origin(url);
    byOrigin.set(o, (byOrigin.get(o) ?? 0) + us);
    const key = `${functionName || '(anonymous)'} ${url ? `${url.replace(/^.*\/(node_modules|services|packages)\//, '$1/')}:${lineNumber + 1}` : ''}`;
    const f = byFunction.get(key) ?? { fn: key, origin: o, us: 0 };
    f.us += us;
    byFunction.set(key, f);
  }
  const pct = (us) => Math.round((us / busy) * 1000) / 10;
  return {
    file,
    busyMs: Math.round(busy / 1000),
    idleMs: Math.round(idle / 1000),
    byOrigin: [...byOrigin].map(([o, us]) => ({ origin: o, ms: Math.round(us / 1000), pct: pct(us) })).sort((a, b) => b.ms - a.ms),
    byFunction: [...byFunction.values()]
      .map((f) => ({ fn: f.fn, origin: f.origin, ms: Math.round(f.us / 1000), pct: pct(f.us) }))
      .sort((a, b) => b.ms - a.ms)
      .slice(0, top),
  };
}

function print(summary, write = (s) => process.stdout.write(s)) {
  write(`\nCPU profile ${summary.file}\n  busy ${summary.busyMs} ms, idle ${summary.idleMs} ms (whole process life: start-up, idle during the bare runs, the gateway run)\n`);
  write('  self time by origin:\n');
  for (const o of summary.byOrigin.slice(0, 20)) write(`    ${String(o.pct).padStart(5)}%  ${String(o.ms).padStart(7)} ms  ${o.origin}\n`);
  write('  top functions by self time:\n');
  for (const f of summary.byFunction) write(`    ${String(f.pct).padStart(5)}%  ${String(f.ms).padStart(7)} ms  ${f.fn}\n`);
}

/** NODE_OPTIONS that profile a child process (Node refuses --cpu-prof there); see cpu-profile-preload.js. */
const PROFILE_NODE_OPTIONS = `--require ${path.join(__dirname, 'cpu-profile-preload.js')}`;

module.exports = { PROFILE_NODE_OPTIONS, summarise, print };

if (require.main === module) {
  for (const file of process.argv.slice(2)) print(summarise(file, { top: 40 }));
}
