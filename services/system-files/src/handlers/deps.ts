import type { MessagePublisher } from '@fleet/bridge-client';
import type { TopicRoots } from '@fleet/device-protocol';
import type { ConnectivityReader, ScopeResolution, SettingSealer } from '@fleet/registry-client';
import type { SystemConfig } from '../config';
import type { FileUrls } from '../domain/file-urls';
import type { DeviceInHistory } from '../history/device-in-history';
import type { FileStorage } from '../storage/storage';
import type { SystemDb } from '../store/prisma';

/** What system-files' handlers work with; built once in main.ts. */
export interface SystemDeps {
  db: SystemDb;
  /** Every message to a device goes through mqtt-bridge (202 only once the broker took it). */
  bridge: MessagePublisher;
  /** Connectivity (device_online, the status feed), sealing secret settings, device scope (raw MQTT). */
  registry: ConnectivityReader & SettingSealer & ScopeResolution;
  roots: TopicRoots;
  storage: FileStorage;
  urls: FileUrls;
  /** Captured traffic (raw MQTT read, the status feed). */
  history: DeviceInHistory;
  config: SystemConfig;
}
