'use strict';
// Preloaded with `--require` into a process under a benchmark's --profile (Node refuses
// --cpu-prof in NODE_OPTIONS): profiles the whole life of the process and writes a V8
// .cpuprofile named by SERVICE_INSTANCE (or the script's name) and pid into
// BENCH_CPU_PROFILE_DIR when it exits. bench/run.js sets that directory under --profile.
const fs = require('node:fs');
const inspector = require('node:inspector');
const path = require('node:path');

const dir = process.env.BENCH_CPU_PROFILE_DIR;
if (dir) {
  const session = new inspector.Session();
  session.connect();
  session.post('Profiler.enable');
  session.post('Profiler.setSamplingInterval', { interval: 500 });
  session.post('Profiler.start');
  process.on('exit', () => {
    // An in-process session answers synchronously, so this completes inside the exit handler.
    session.post('Profiler.stop', (err, result) => {
      if (err || !result) return;
      fs.mkdirSync(dir, { recursive: true });
      const who = process.env.SERVICE_INSTANCE || path.basename(process.argv[1] || 'node', '.js');
      const name = `${who}.${process.pid}.cpuprofile`;
      fs.writeFileSync(path.join(dir, name), JSON.stringify(result.profile));
    });
  });
}
