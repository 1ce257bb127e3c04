export { SimClock, ManualClock, type Clock, type ScheduledTask } from './clock';
export {
  PRODUCTS,
  assertDeviceId,
  deriveBrokerPassword,
  deriveSettingsKey,
  deviceIdsFromPrefix,
  isDeviceId,
  isSecretSettingKey,
  openSetting,
  sealSetting,
  type Product,
} from './credentials';
export { SimulatedDevice, newStats, type DeviceMessage, type DeviceOptions, type DeviceState, type FileEntry, type Misbehaviour, type SettingValue, type SimStats } from './device';
export { SimulatedLight, LIGHT_CHANNELS, type LightChannel, type LightOptions, type SensorOptions, type SensorReading } from './light';
export { SimulatedMeter, type MeterOptions, type SampleError, type SentRecord } from './meter';
export { BAD_VALUE_KINDS, type BadValueKind, type ClockMode, type IntervalRecord, type LinkState, type LoadProfile, type Stat } from './meter-model';
export { DevicePool, DevicePool as Fleet, type PoolDeviceOptions, type PoolOptions, type StartResult } from './pool';
export { MqttProbe, clearRetained, type ProbeMessage } from './probe';
export { ackLine, parseSysCommand, type AckResult, type SysCommand } from '@fleet/device-protocol';
