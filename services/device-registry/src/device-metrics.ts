import { Gauge, metricsRegistry } from '@fleet/service-kit';
import type { RegistryDb } from './store/prisma';

/**
 * Devices by product and connectivity status, counted at each scrape: connected devices are the
 * fleet's own golden signal (a broker or bridge outage shows as a drop here).
 */
export function registerDeviceMetrics(db: Pick<RegistryDb, '$queryRawUnsafe'>): void {
  if (metricsRegistry.getSingleMetric('fleet_registry_devices')) return;
  new Gauge({
    name: 'fleet_registry_devices',
    help: 'Provisioned devices by product and connectivity status (connected, disconnected), as stored.',
    labelNames: ['product', 'status'],
    registers: [metricsRegistry],
    async collect() {
      const rows = await db.$queryRawUnsafe<Array<{ product: string; status: string; n: number }>>('SELECT product, status, count(*)::int AS n FROM devices GROUP BY product, status');
      this.reset();
      for (const r of rows) this.set({ product: r.product, status: r.status }, r.n);
    },
  });
}
