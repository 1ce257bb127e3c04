'use strict';
// What the kernel's DAMON (data access monitor) is doing on this machine, read from sysfs.
// A kdamond running proactive reclaim over physical memory wakes every sampling interval and
// takes a core for 10-20 ms on a small machine: on a 2-core machine (2026-11-29) every read
// slower than 15 ms of a 5 ms answer fell on its ~0.52 s beat, and with it stopped for the
// measurement the p99 of a year of energy in day buckets went from 14-18 ms to under 10 ms.
// Reported with every result so a p99 can be read against it; nothing here changes it.
const fs = require('node:fs');
const path = require('node:path');

const ADMIN = '/sys/kernel/mm/damon/admin/kdamonds';

const read = (file) => {
  try {
    return fs.readFileSync(file, 'utf8').trim();
  } catch {
    return undefined;
  }
};

/** The running kdamonds: their operations, sampling interval and first scheme; [] where DAMON is absent or off. */
function kernelReclaim() {
  const count = Number(read(path.join(ADMIN, 'nr_kdamonds')) ?? 0);
  const running = [];
  for (let k = 0; k < count; k++) {
    const dir = path.join(ADMIN, String(k));
    if (read(path.join(dir, 'state')) !== 'on') continue;
    const context = path.join(dir, 'contexts', '0');
    const scheme = path.join(context, 'schemes', '0');
    running.push({
      operations: read(path.join(context, 'operations')),
      sample_us: Number(read(path.join(context, 'monitoring_attrs', 'intervals', 'sample_us'))),
      action: read(path.join(scheme, 'action')),
      quota_ms: Number(read(path.join(scheme, 'quotas', 'ms'))),
      quota_reset_interval_ms: Number(read(path.join(scheme, 'quotas', 'reset_interval_ms'))),
    });
  }
  return running;
}

/** One line on the running kdamonds, or undefined when none runs. */
function describeKernelReclaim(running) {
  if (!running || running.length === 0) return undefined;
  const parts = running.map((d) => `${d.operations ?? '?'} ${d.action ?? 'monitoring'} every ${Math.round(d.sample_us / 1000)} ms${d.quota_ms ? ` (up to ${d.quota_ms} ms per ${d.quota_reset_interval_ms} ms)` : ''}`);
  return `this machine's kernel runs DAMON (${parts.join('; ')}): a periodic pause of a core that shows in the p99 of short requests (bench/README.md)`;
}

module.exports = { kernelReclaim, describeKernelReclaim };
