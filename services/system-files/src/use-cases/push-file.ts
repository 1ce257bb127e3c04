import { sysExeTopic } from '@fleet/device-protocol';
import { ApiError, ValidationError, warnIfFails, type Logger } from '@fleet/service-kit';
import { isDeviceFileName } from '../domain/device-file-name';
import { addfileLine, newTransferId, transferFingerprint, type CorrMode } from '../domain/transfer';
import type { SystemDeps } from '../handlers/deps';
import { findFile } from '../store/files';
import { deleteTransfer, findByIdempotencyKey, findTransfer, insertTransfer, markSent, type StoredTransfer } from '../store/transfers';
import type { DeviceRef } from './command-line';

export interface PushRequest {
  requestId: string;
  deadline?: number;
  partnerId: string;
  idempotencyKey: string | undefined;
  device: DeviceRef;
  name: string;
  dest: string | undefined;
}

export type PushOutcome = { kind: 'created'; transfer: StoredTransfer; deviceOnline: boolean } | { kind: 'known'; transfer: StoredTransfer };

/** Only .mp3 files are pushed, under .mp3 names (any case). */
const isMp3Name = (name: string): boolean => /\.mp3$/i.test(name);

const isUniqueViolation = (err: unknown): boolean => (err as { code?: unknown }).code === 'P2002';

/**
 * A file push: the checks that make it final (an .mp3 name that exists in files/, and an .mp3
 * `dest`: 400 with nothing published), the transfer stored as queued, the addfile line (with
 * the server's SHA-256 and a signed URL) handed to the broker, then sent with its
 * acknowledgement deadline.
 * A publish that fails removes the transfer (503 publish_failed; the partner may retry). The
 * Idempotency-Key is kept on the transfer, so it is recognised as long as the transfer exists.
 */
export async function pushFile(deps: SystemDeps, push: PushRequest, logger: Logger): Promise<PushOutcome> {
  const dest = push.dest ?? push.name;
  const fingerprint = transferFingerprint(push.device.deviceId, push.name, dest);
  if (push.idempotencyKey !== undefined) {
    const known = await knownTransfer(deps, push, fingerprint);
    if (known) return { kind: 'known', transfer: known };
  }
  if (!isMp3Name(push.name)) throw new ValidationError("invalid 'name': only .mp3 files are pushed; nothing was published");
  if (!isDeviceFileName(dest)) throw new ValidationError("invalid 'dest': letters, digits, '.', '_' and '-', at most 64");
  // The device stores what it is pushed under `dest`: an .mp3 name there too (spec rule 9).
  if (!isMp3Name(dest)) throw new ValidationError("invalid 'dest': a pushed file keeps an .mp3 name on the device; nothing was published");
  const file = await findFile(deps.db, 'files', push.name);
  if (!file) throw new ValidationError(`invalid 'name': no platform file '${push.name}' in files/ (GET /v1/system/files); nothing was published`);

  const call = { requestId: push.requestId, deadline: push.deadline };
  const corrMode: CorrMode = deps.config.TRANSFER_CORR_MODE;
  const id = newTransferId();
  const url = await deps.urls.downloadUrl({ dir: 'files', name: file.name, storageKey: file.storageKey }, corrMode === 'url_token' ? { transferId: id } : undefined);
  const line = addfileLine(dest, file.sha256, url, id, corrMode);
  try {
    await insertTransfer(deps.db, { id, deviceId: push.device.deviceId, partnerId: push.partnerId, idempotencyKey: push.idempotencyKey ?? null, fingerprint, src: `files/${file.name}`, dest, sha256: file.sha256, corrMode, line });
  } catch (err) {
    // The same key raced in from another request: answer what that one created.
    if (push.idempotencyKey !== undefined && isUniqueViolation(err)) {
      const known = await knownTransfer(deps, push, fingerprint);
      if (known) return { kind: 'known', transfer: known };
    }
    throw err;
  }
  const deviceOnline = deps.registry
    .connectivity(call, push.device.deviceId)
    .then((c) => c.status === 'connected')
    .catch((err: unknown) => {
      // device_online is advice to the partner; the push goes ahead without it.
      logger.warn({ err, device_id: push.device.deviceId }, 'reading the device connectivity failed; device_online reported false');
      return false;
    });
  let sentAt: Date;
  try {
    const published = await deps.bridge.publish(call, { topic: sysExeTopic(deps.roots[push.device.product], push.device.deviceId), payload: line });
    sentAt = new Date(published.sent_at);
  } catch (err) {
    await deleteTransfer(deps.db, id).catch(warnIfFails(logger, 'removing the unsent transfer', { transfer_id: id }));
    throw err;
  }
  await markSent(deps.db, id, sentAt, new Date(sentAt.getTime() + deps.config.TRANSFER_ACK_TIMEOUT_SECONDS * 1000));
  const transfer = await findTransfer(deps.db, push.device.deviceId, id);
  if (!transfer) throw new Error(`transfer ${id} vanished after it was sent`);
  return { kind: 'created', transfer, deviceOnline: await deviceOnline };
}

async function knownTransfer(deps: SystemDeps, push: PushRequest, fingerprint: string): Promise<StoredTransfer | null> {
  const known = await findByIdempotencyKey(deps.db, push.partnerId, push.idempotencyKey as string);
  if (!known) return null;
  if (known.fingerprint !== fingerprint) throw new ApiError(422, 'idempotency_key_reused', 'This Idempotency-Key was used with a different request.');
  return known;
}
