import { transactionBy } from '@fleet/db';
import type { RequestOf } from '@fleet/service-kit';
import { ForbiddenError, NotFoundError, ServiceUnavailableError, UnauthorizedError, ValidationError, type HandlerContext, type HandlerResult } from '@fleet/service-kit';
import { FILE_NAME_MAX_LENGTH, FILE_NAME_PATTERN, isFileDir, isProtectedName, parseProtectedNames } from '../domain/file-names';
import { deleteFileRecord, listStoredFiles } from '../store/files';
import { platformFileBody } from '../use-cases/upload-file';
import type { SystemDeps } from './deps';

/**
 * Platform files: the list (system_read), the delete (file_delete) and the first step of an
 * upload (file_upload), whose body the gateway then streams to the file server.
 */

/** A platform file name as a query parameter names it (delete, the list's filter). */
const isPlatformFileName = (name: unknown): name is string => typeof name === 'string' && name.length > 0 && name.length <= FILE_NAME_MAX_LENGTH && FILE_NAME_PATTERN.test(name);

/**
 * GET /v1/system/files: files of files/ and firmware/ (or of `dir`), ordered by directory then
 * name; `name` keeps the file of that exact name (an upload's Location is this list filtered by
 * `dir` and `name`: one file, or none once it was deleted).
 */
export async function listFiles(deps: SystemDeps, req: RequestOf<'system.file.list'>): Promise<HandlerResult> {
  const query = req.query as Record<string, unknown>;
  const dir = query['dir'];
  const name = query['name'];
  if (dir !== undefined && !isFileDir(dir)) throw new ValidationError('`dir` must be files or firmware.');
  if (name !== undefined && !isPlatformFileName(name)) throw new ValidationError('`name` must be a platform file name.');
  const rows = await listStoredFiles(deps.db, { dir, name });
  return { status: 200, body: { files: rows.map(platformFileBody) } };
}

/**
 * DELETE /v1/system/files?dir=&name=: 204; 403 for a protected name (PROTECTED_FILE_NAMES, in
 * either directory; no permission lifts it); 404 when there is no such file.
 *
 * The record is deleted and the bytes removed in one transaction: the name stays locked until
 * the commit, so an upload of the same name waits and never has its new bytes removed. When the
 * storage cannot remove the bytes the transaction rolls back (503, the file is untouched). A
 * commit that fails after the bytes went leaves the record without bytes (downloads answer
 * 404); deleting again finishes the job.
 */
export async function deleteFile(deps: SystemDeps, req: RequestOf<'system.file.delete'>, ctx: HandlerContext): Promise<HandlerResult> {
  const query = req.query as Record<string, unknown>;
  const dir = query['dir'];
  const name = query['name'];
  if (!isFileDir(dir)) throw new ValidationError('`dir` must be files or firmware.');
  if (!isPlatformFileName(name)) throw new ValidationError('`name` must be a platform file name.');
  if (isProtectedName(parseProtectedNames(deps.config.PROTECTED_FILE_NAMES), name)) {
    throw new ForbiddenError(`${name} is protected and cannot be deleted.`);
  }
  await transactionBy(deps.db, ctx, async (tx) => {
    const row = await deleteFileRecord(tx, dir, name);
    if (!row) throw new NotFoundError(`No platform file ${dir}/${name}.`);
    try {
      await deps.storage.remove(row.storageKey);
    } catch (err) {
      ctx.logger.error({ err, key: row.storageKey }, 'removing a platform file from storage failed');
      throw new ServiceUnavailableError('The file storage could not remove the file; nothing was deleted. Retry shortly.');
    }
  });
  ctx.logger.info({ dir, name }, 'platform file deleted');
  return { status: 204 };
}

/** The gateway's first step of an upload: where to stream the body (a ticket valid about a minute) and the size limit. */
export async function openUpload(deps: SystemDeps, req: RequestOf<'system.upload.open'>): Promise<HandlerResult<{ url: string; max_bytes: number }>> {
  const partnerId = req.principal?.partner_id;
  if (!partnerId) throw new UnauthorizedError();
  return { status: 200, body: { url: deps.urls.uploadUrl({ requestId: req.request_id, partnerId }), max_bytes: deps.config.UPLOAD_MAX_BYTES } };
}
