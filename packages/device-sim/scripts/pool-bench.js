#!/usr/bin/env node
// Measures how fast a DevicePool connects and how much memory each simulated device costs.
// node --expose-gc packages/device-sim/scripts/pool-bench.js [count] [product] [brokerUrl] [seconds to run]
// Uses the built library (dist/); run `pnpm --filter @fleet/device-sim run build` first.
const { randomBytes } = require('node:crypto');
const { DevicePool, clearRetained } = require('../dist');

async function main() {
  const count = Number(process.argv[2] ?? 1000);
  const product = process.argv[3] ?? 'light';
  const brokerUrl = process.argv[4] ?? process.env.MQTT_URL ?? 'mqtt://127.0.0.1:1883';
  const runSeconds = Number(process.argv[5] ?? 10);
  const root = `simbench-${randomBytes(4).toString('hex')}`;
  const gc = global.gc ?? (() => undefined);
  const mem = () => {
    gc();
    gc();
    const m = process.memoryUsage();
    return { heap: m.heapUsed / 1048576, rss: m.rss / 1048576 };
  };
  const pool = new DevicePool({
    brokerUrl,
    product,
    idPrefix: randomBytes(3).toString('hex').slice(0, 4),
    count,
    rootSecret: 'Sim-Bench-Secret',
    speed: 60,
    concurrency: 200,
    device: { topicRoot: root, protocolVersion: 5, sessionExpirySec: 30, intervalSec: 900 },
  });
  const before = mem();
  const cpu0 = process.cpuUsage();
  const result = await pool.start();
  const after = mem();
  console.log(
    JSON.stringify({
      product,
      count,
      connected: result.connected,
      failed: result.failed,
      connect_s: +(result.elapsedMs / 1000).toFixed(2),
      connects_per_s: Math.round(result.connected / (result.elapsedMs / 1000)),
      heap_kb_per_device: +(((after.heap - before.heap) * 1024) / count).toFixed(1),
      rss_kb_per_device: +(((after.rss - before.rss) * 1024) / count).toFixed(1),
      rss_mb: Math.round(after.rss),
    }),
  );
  const s0 = pool.snapshot();
  const t0 = Date.now();
  await new Promise((r) => setTimeout(r, runSeconds * 1000));
  const s1 = pool.snapshot();
  const cpu = process.cpuUsage(cpu0);
  const secs = (Date.now() - t0) / 1000;
  console.log(
    JSON.stringify({
      speed: 60,
      run_s: secs,
      sent_per_s: Math.round((s1.sent - s0.sent) / secs),
      records: s1.records - s0.records,
      connected: s1.connected,
      cpu_s_total: +((cpu.user + cpu.system) / 1e6).toFixed(1),
      rss_mb: Math.round(process.memoryUsage().rss / 1048576),
    }),
  );
  await pool.stop();
  await clearRetained(brokerUrl, `${root}/#`, 1000);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
