'use strict';
// Garbage collections of fleet services, read from their /metrics (prom-client's default
// nodejs_gc_duration_seconds histogram, by kind): taken before and after a phase of a bench,
// the difference says how many collections of each kind ran in it and how long they took.

/** { '<kind>': { count, seconds } } of one service now. */
async function gcTotals(healthPort) {
  const text = await (await fetch(`http://127.0.0.1:${healthPort}/metrics`, { signal: AbortSignal.timeout(5000) })).text();
  const totals = {};
  for (const line of text.split('\n')) {
    const m = /^nodejs_gc_duration_seconds_(count|sum)\{([^}]*)\} ([0-9.e+-]+)$/.exec(line);
    const kind = m && /(?:^|,)kind="(\w+)"/.exec(m[2])?.[1];
    if (!kind) continue;
    const [, what, , value] = m;
    totals[kind] ??= { count: 0, seconds: 0 };
    totals[kind][what === 'count' ? 'count' : 'seconds'] = Number(value);
  }
  return totals;
}

/** Starts counting for the named services of a fleet; `stop()` answers { service: { kind: { count, ms } } }. */
async function countCollections(fleet, names) {
  const services = fleet.services.filter((s) => names.includes(s.name));
  const before = await Promise.all(services.map((s) => gcTotals(s.healthPort)));
  return {
    async stop() {
      const after = await Promise.all(services.map((s) => gcTotals(s.healthPort)));
      return Object.fromEntries(
        services.map((s, i) => [
          s.name,
          Object.fromEntries(
            Object.entries(after[i]).map(([kind, a]) => {
              const b = before[i][kind] ?? { count: 0, seconds: 0 };
              return [kind, { count: a.count - b.count, ms: Math.round((a.seconds - b.seconds) * 1000) }];
            }),
          ),
        ]),
      );
    },
  };
}

/** One line per service: `major 11 (91 ms), minor 3 (13 ms)`. */
function describeCollections(byService) {
  return Object.entries(byService).map(([service, kinds]) => [
    service,
    ['major', 'minor']
      .filter((k) => kinds[k])
      .map((k) => `${k} ${kinds[k].count} (${kinds[k].ms} ms)`)
      .join(', '),
  ]);
}

module.exports = { countCollections, describeCollections };
