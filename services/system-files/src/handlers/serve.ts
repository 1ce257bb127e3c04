import { subjectsOf, type SubjectsOf } from '@fleet/contracts';
import type { Bus, ServiceHandlers } from '@fleet/service-kit';
import { sendCommand, writeSetting } from './commands';
import type { SystemDeps } from './deps';
import { deleteFile, listFiles, openUpload } from './files';
import { publishRaw, readRaw } from './raw-mqtt';
import { commandRegistry } from './registry';
import { listResponses } from './responses';
import { readDeviceSettings } from './settings';
import { deviceStatus } from './status';
import { createTransfer, getTransfer, listTransfers } from './transfers';

/** Every request subject system-files serves: those proto-schemas/subjects.json gives it. */
export type SystemSubject = SubjectsOf<'system-files'>;
export const SYSTEM_SUBJECTS: readonly SystemSubject[] = subjectsOf('system-files');

/** system-files' one map of what it serves; the type check fails when a subject lacks its handler. */
export function systemHandlers(deps: SystemDeps): ServiceHandlers<SystemSubject> {
  return {
    'system.command.registry': (req) => commandRegistry(req),
    'system.command.send': (req, ctx) => sendCommand(deps, req, ctx),
    'system.settings.get': (req) => readDeviceSettings(deps, req),
    'system.settings.put': (req, ctx) => writeSetting(deps, req, ctx),
    'system.response.list': (req) => listResponses(deps, req),
    'system.status.get': (req, ctx) => deviceStatus(deps, req, ctx),
    'system.file.list': (req) => listFiles(deps, req),
    'system.file.delete': (req, ctx) => deleteFile(deps, req, ctx),
    'system.upload.open': (req) => openUpload(deps, req),
    'system.transfer.create': (req, ctx) => createTransfer(deps, req, ctx),
    'system.transfer.get': (req) => getTransfer(deps, req),
    'system.transfer.list': (req) => listTransfers(deps, req),
    'system.mqtt.publish': (req, ctx) => publishRaw(deps, req, ctx),
    'system.mqtt.read': (req, ctx) => readRaw(deps, req, ctx),
  };
}

/** Serves system-files' subjects. The bus answers a database out of reach as 503. */
export function serveSystem(bus: Bus, deps: SystemDeps): void {
  bus.serveAll(systemHandlers(deps));
}
