import { counter, histogram, type Counter, type Histogram } from '@fleet/service-kit';

/** The bridge's Prometheus series (labels: direction, product, outcome; never a device id). */
export const bridgeMetrics: { messages: Counter<'direction' | 'product' | 'outcome'>; captureSeconds: Histogram<'product'> } = {
  messages: counter(
    'fleet_bridge_messages_total',
    'Device messages through the bridge: in (from devices; outcome stored, skipped or abandoned in DEVICE_IN) and out (to devices; outcome sent or failed at the broker).',
    ['direction', 'product', 'outcome'],
  ),
  captureSeconds: histogram('fleet_bridge_capture_duration_seconds', 'From a device message reaching the bridge to DEVICE_IN storing it.', ['product']),
};
