/** What a simulated device is made of and reports: its options, messages, counters and state. */
import type { Clock } from './clock';

/** A message the device received or sent, byte for byte. */
export interface DeviceMessage {
  /** Full MQTT topic. */
  topic: string;
  /** Topic below `<root>/<device_id>/`, e.g. `sys/exe`, `cmd/light1`, `iv`. */
  sub: string;
  payload: Buffer;
  qos: 0 | 1 | 2;
  retain: boolean;
  /** Wall-clock epoch ms. */
  at: number;
  /** Simulated epoch ms. */
  simAt: number;
}

/** Counters a device adds to; a pool hands every device the same object. */
export interface SimStats {
  connects: number;
  disconnects: number;
  connectErrors: number;
  sent: number;
  received: number;
  suppressed: number;
  acks: number;
  records: number;
}

export function newStats(): SimStats {
  return { connects: 0, disconnects: 0, connectErrors: 0, sent: 0, received: 0, suppressed: 0, acks: 0, records: 0 };
}

export type SettingValue = string | number | boolean;
export interface FileEntry {
  name: string;
  size: number;
}

export interface DeviceOptions {
  brokerUrl: string;
  /** 12 uppercase hex characters; also client id and username. */
  deviceId: string;
  /** The broker password (32 lowercase hex), or... */
  password?: string;
  /** ...the 16-character root secret it is derived from (also gives the settings key for `enc1:` values). */
  rootSecret?: string;
  /** Topic root; default the product (`light` or `meter`). */
  topicRoot?: string;
  /** Shared simulated clock; default a private SimClock running at `speed`. */
  clock?: Clock;
  /** Simulated seconds per real second when the device makes its own clock (default 1). */
  speed?: number;
  /** MQTT protocol level: 4 (3.1.1, default) or 5. */
  protocolVersion?: 4 | 5;
  /** MQTT 5 only: session expiry in seconds (lets a test's broker sessions go away on their own). */
  sessionExpirySec?: number;
  /** Default 60, as the protocol says. */
  keepaliveSec?: number;
  /** Real ms between reconnect attempts (default 1000; 0 disables reconnecting). */
  reconnectMs?: number;
  /** Real ms to wait for CONNACK (default 30000). */
  connectTimeoutMs?: number;
  /** Real ms the device stays away during a reboot (default 200). */
  rebootDelayMs?: number;
  /** Real ms a clean stop may take (offline acknowledged, DISCONNECT sent) before the socket is closed anyway (default 3000). */
  stopGraceMs?: number;
  /** Simulated seconds between heartbeats (default 300). */
  heartbeatSec?: number;
  fwVersion?: string;
  /** Initial settings (merged over the product's defaults). */
  settings?: Record<string, SettingValue>;
  files?: FileEntry[];
  /** `enc` reported in sys/settings (false = old firmware without secret settings). Default true. */
  enc?: boolean;
  /** addfile/setcert really download the URL and check its SHA-256 (default false: accepted as is). */
  fetchFiles?: boolean;
  /** Accept ota_update images (default false: refused, as an unsigned image would be). */
  acceptOta?: boolean;
  /** Setting keys that apply at once and are acknowledged `applied` instead of `ok`. */
  immediateKeys?: string[];
  /** How many received and sent messages to keep in `received`/`sent` (default 500; pools use 0). */
  logLimit?: number;
  /** Shared counters (a pool passes one object to every device). */
  stats?: SimStats;

  // Misbehaviour switches (all can also be changed later with `misbehave()`).
  /** Connects but sends nothing at all. */
  silent?: boolean;
  /** Acknowledges verbs with `failed:<refuseReason>`: true for every verb, or a list of verbs. */
  refuse?: boolean | string[];
  refuseReason?: string;
  /** stop() kills the socket instead of a clean DISCONNECT, so the broker publishes the will. */
  dropWillOnDisconnect?: boolean;
  /** Sends `log>...` lines on sys/resp around some verbs and at boot. */
  logLines?: boolean;
}

export interface Misbehaviour {
  silent: boolean;
  refuse: boolean | string[];
  refuseReason: string;
  dropWillOnDisconnect: boolean;
  logLines: boolean;
}

export type DeviceState = 'idle' | 'connecting' | 'online' | 'offline' | 'rebooting' | 'stopped' | 'factory_reset';
