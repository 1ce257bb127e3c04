import { Prisma } from '../generated/prisma/client';
import type { SystemDb, SystemTx } from './prisma';

export type FileDir = 'files' | 'firmware';

export interface PlatformFileRow {
  dir: FileDir;
  name: string;
  size: number;
  sha256: string;
  audio: unknown;
  storageKey: string;
  modifiedAt: Date;
}

/** A stored platform file, or null. */
export async function findFile(db: SystemDb | SystemTx, dir: FileDir, name: string): Promise<PlatformFileRow | null> {
  const row = await db.platformFile.findUnique({ where: { dir_name: { dir, name } } });
  return row ? { ...row, dir: row.dir as FileDir, size: Number(row.size) } : null;
}

/** What an upload stores about a file; modifiedAt is the insert's time. */
export interface NewPlatformFile {
  dir: FileDir;
  name: string;
  size: number;
  sha256: string;
  /** The audio check (an .mp3 in files/), or null. */
  audio: object | null;
  storageKey: string;
}

type StoredRow = { dir: string; name: string; size: bigint; sha256: string; audio: unknown; storageKey: string; modifiedAt: Date };

const toRow = (row: StoredRow): PlatformFileRow => ({ ...row, dir: row.dir as FileDir, size: Number(row.size) });

/**
 * Records a file under its (dir, name), or answers null when that name is taken. A concurrent
 * insert of the same name waits for the other transaction, then sees the name taken.
 */
export async function insertFile(db: SystemDb | SystemTx, file: NewPlatformFile): Promise<PlatformFileRow | null> {
  const [row] = await db.platformFile.createManyAndReturn({
    data: [
      {
        dir: file.dir,
        name: file.name,
        size: BigInt(file.size),
        sha256: file.sha256,
        audio: file.audio === null ? Prisma.DbNull : (file.audio as Prisma.InputJsonObject),
        storageKey: file.storageKey,
      },
    ],
    skipDuplicates: true,
  });
  return row ? toRow(row) : null;
}

/** Platform files, of one directory or both, and of one name when given, ordered by directory then name. */
export async function listStoredFiles(db: SystemDb | SystemTx, filter: { dir?: FileDir; name?: string } = {}): Promise<PlatformFileRow[]> {
  const where = { ...(filter.dir ? { dir: filter.dir } : {}), ...(filter.name !== undefined ? { name: filter.name } : {}) };
  const rows = await db.platformFile.findMany({ where, orderBy: [{ dir: 'asc' }, { name: 'asc' }] });
  return rows.map(toRow);
}

/**
 * Deletes a file's record and answers it, or null when there was none. Inside a transaction the
 * name stays locked until the commit, so an upload of the same name waits for it.
 */
export async function deleteFileRecord(db: SystemDb | SystemTx, dir: FileDir, name: string): Promise<PlatformFileRow | null> {
  const rows = await db.$queryRaw<Array<{ dir: string; name: string; size: bigint; sha256: string; audio: unknown; storage_key: string; modified_at: Date }>>`
    DELETE FROM platform_files WHERE dir = ${dir} AND name = ${name}
    RETURNING dir, name, size, sha256, audio, storage_key, modified_at`;
  const row = rows[0];
  return row ? toRow({ ...row, storageKey: row.storage_key, modifiedAt: row.modified_at }) : null;
}
