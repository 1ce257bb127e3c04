import { NotFoundError, optionalTimeParam, ValidationError, type HandlerContext, type HandlerResult, type RequestOf } from '@fleet/service-kit';
import { TRANSFER_ID, transferView, type TransferState } from '../domain/transfer';
import { findTransfer, listTransfers as listStored } from '../store/transfers';
import { pushFile } from '../use-cases/push-file';
import { deviceOf } from './commands';
import type { SystemDeps } from './deps';

const location = (deviceId: string, transferId: string): string => `/v1/devices/${deviceId}/files/${transferId}`;

/** POST /v1/devices/{device_id}/files: 202 with the new transfer, or 200 with a known key's transfer as it is now. */
export async function createTransfer(deps: SystemDeps, req: RequestOf<'system.transfer.create'>, ctx: HandlerContext): Promise<HandlerResult> {
  const device = deviceOf(req);
  const body = (req.body ?? {}) as { name?: unknown; dest?: unknown };
  if (typeof body.name !== 'string') throw new ValidationError("'name' is required");
  if (body.dest !== undefined && typeof body.dest !== 'string') throw new ValidationError("invalid 'dest'");
  const outcome = await pushFile(
    deps,
    {
      requestId: req.request_id,
      deadline: req.deadline,
      partnerId: req.principal?.partner_id ?? '',
      idempotencyKey: req.idempotency_key,
      device,
      name: body.name,
      dest: body.dest,
    },
    ctx.logger,
  );
  const headers = { Location: location(device.deviceId, outcome.transfer.id) };
  if (outcome.kind === 'known') return { status: 200, headers, body: transferView(outcome.transfer), unspent: true };
  return { status: 202, headers, body: { ...transferView(outcome.transfer), device_online: outcome.deviceOnline } };
}

/** GET /v1/devices/{device_id}/files/{transfer_id}. */
export async function getTransfer(deps: SystemDeps, req: RequestOf<'system.transfer.get'>): Promise<HandlerResult> {
  const { deviceId } = deviceOf(req);
  const id = req.params.transfer_id ?? '';
  const transfer = TRANSFER_ID.test(id) ? await findTransfer(deps.db, deviceId, id) : null;
  if (!transfer) throw new NotFoundError('No such transfer for this device.');
  return { status: 200, body: transferView(transfer) };
}

/** GET /v1/devices/{device_id}/files: newest first. */
export async function listTransfers(deps: SystemDeps, req: RequestOf<'system.transfer.list'>): Promise<HandlerResult> {
  const { deviceId } = deviceOf(req);
  const query = req.query as { state?: TransferState; since?: string; limit?: number | string };
  const since = optionalTimeParam(query.since, 'since');
  const rows = await listStored(deps.db, deviceId, { state: query.state, since }, query.limit === undefined ? 50 : Number(query.limit));
  const now = new Date();
  return { status: 200, body: { transfers: rows.map((t) => transferView(t, now)) } };
}
