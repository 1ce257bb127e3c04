'use strict';
// Records every garbage collection of the process it is preloaded into, one line each:
// `<epoch ms> <kind> <pause ms>` (kind: 1 scavenge, 2 minor mark-sweep, 4 mark-sweep-compact,
// 8 incremental marking, 16 weak callbacks) in BENCH_GC_LOG_DIR (default the temp folder),
// file `gc-<script>-<pid>.txt`. For a bench's services:
//   BENCH_SERVICE_NODE_OPTIONS="--require $PWD/bench/lib/gc-log-preload.js" node bench/run.js meter
// Node refuses `--trace-gc` in NODE_OPTIONS; this is what works there.
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { PerformanceObserver } = require('node:perf_hooks');

const script = (process.argv[1] ?? 'node').split(path.sep).slice(-3, -2)[0] || 'node';
const file = path.join(process.env.BENCH_GC_LOG_DIR || os.tmpdir(), `gc-${script}-${process.pid}.txt`);
const lines = [];
const flush = () => {
  if (lines.length > 0) fs.appendFileSync(file, `${lines.splice(0).join('\n')}\n`);
};
new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) lines.push(`${Math.round(performance.timeOrigin + entry.startTime)} ${entry.detail?.kind ?? 0} ${entry.duration.toFixed(2)}`);
}).observe({ entryTypes: ['gc'] });
// Written twice a second, off the measured path; a service stopped with a signal loses at most that.
setInterval(flush, 500).unref();
process.on('exit', flush);
