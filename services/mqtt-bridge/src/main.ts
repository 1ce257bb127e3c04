import { ServiceRuntime } from '@fleet/service-kit';
import { startBridge, type Bridge } from './bridge';
import { readBridgeConfig } from './config';

async function main(): Promise<void> {
  const config = readBridgeConfig();
  // Readiness asks the bridge once it exists (the runtime starts first: it owns the bus).
  const started: { bridge?: Bridge } = {};
  const runtime = await ServiceRuntime.start({
    service: 'mqtt-bridge',
    config,
    subjectPrefix: config.SUBJECT_PREFIX,
    readiness: { mqtt: () => started.bridge?.isConnected() ?? false },
  });
  started.bridge = await startBridge(config, runtime);
  runtime.ready({ mqtt_url: config.MQTT_URL, share_group: config.MQTT_SHARE_GROUP, instance: config.SERVICE_INSTANCE });
}

main().catch((err) => {
  console.error('mqtt-bridge failed to start:', err);
  process.exit(1);
});
