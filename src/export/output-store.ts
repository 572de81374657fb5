// Where an export's files live (docs/export.md, "Space"). Each file is a gzip stream (gzip-file.ts) stored
// a piece at a time, each piece saved with the progress that accounts for it (jobs.ts).
//
// - Beside a SQLite database, as files (`<database>-files/exports/<job>/<Type>-<n>.gz`): every process
//   using a SQLite database runs on its host, and a file removed gives its space back to the file system
//   at once, where rows deleted from the database would leave free pages inside it (the file only shrinks
//   by a VACUUM, which rewrites the whole database, or with auto_vacuum, which must be chosen before the
//   first table and costs every write).
// - In the export_chunk table elsewhere (PostgreSQL, whose processes may run on several hosts): after
//   output is removed, a plain VACUUM of the table frees its rows (and their TOAST) for the next exports
//   and gives empty pages at the table's end back to the file system.
import { randomUUID } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdir, open, readdir, rename, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { constants } from 'node:fs';
import type { SqlDatabase, SqlExecutor } from '../storage/sql/database.js';

/** One stored piece of a file: the gzip bytes after the `offset` bytes stored before it. */
export interface StoredPiece {
  readonly jobId: string;
  readonly type: string;
  readonly fileNo: number;
  /** From 0, per file. */
  readonly seq: number;
  readonly offset: number;
  readonly data: Buffer;
}

export interface ExportOutputStore {
  /** Writes a piece ahead of the transaction that records it (files: written and synced to disk). */
  stage(piece: StoredPiece): Promise<void>;
  /** Records a staged piece in the transaction that saves the job's progress (the table: the row). */
  record(tx: SqlExecutor, piece: StoredPiece): Promise<void>;
  /** The `bytes` stored bytes of one file, in order, a piece or a read buffer (64 KiB) at a time. */
  read(jobId: string, type: string, fileNo: number, bytes: number): AsyncGenerator<Buffer>;
  /** Removes a job's output in the transaction that removes or fails the job (the table's rows). */
  removeIn(tx: SqlExecutor, jobId: string): Promise<void>;
  /** Removes a job's output once that transaction committed (the files). */
  discard(jobId: string): Promise<void>;
  /**
   * Gives back the space of output removed since the last call, and removes output no job owns any more
   * (files staged by a worker whose job was cancelled meanwhile). `existing` answers which of some job
   * ids still have a row.
   */
  reclaim(existing: (ids: readonly string[]) => Promise<ReadonlySet<string>>): Promise<void>;
}

/** Files beside a SQLite database when it has a folder, the export_chunk table otherwise. */
export function outputStoreFor(db: SqlDatabase): ExportOutputStore {
  return db.localFolder === undefined
    ? new TableOutputStore(db)
    : new FolderOutputStore(join(db.localFolder, 'exports'));
}

/**
 * How long after output was removed each sweep vacuums the table again. A VACUUM cannot free rows that a
 * transaction still open anywhere in the database might see, nor cut the table's end while a reader holds
 * it; so one right after the removal may free nothing, and later ones (cheap: pages of kept exports are
 * all-visible and skipped) finish the work once that transaction has ended.
 */
export const RECLAIM_WINDOW_MS = 60_000;

export class TableOutputStore implements ExportOutputStore {
  /** When rows were last deleted (a VACUUM of a table with nothing dead is a waste). */
  private removedAt: number | undefined;

  constructor(
    private readonly db: SqlDatabase,
    private readonly clock: () => number = Date.now,
  ) {}

  async stage(): Promise<void> {}

  async record(tx: SqlExecutor, piece: StoredPiece): Promise<void> {
    await tx.execute('INSERT INTO export_chunk (job_id, type, file_no, seq, data) VALUES (?, ?, ?, ?, ?)', [
      piece.jobId,
      piece.type,
      piece.fileNo,
      piece.seq,
      piece.data,
    ]);
  }

  async *read(jobId: string, type: string, fileNo: number): AsyncGenerator<Buffer> {
    for (let seq = 0; ; seq++) {
      const [row] = await this.db.query<{ data: Buffer }>(
        'SELECT data FROM export_chunk WHERE job_id = ? AND type = ? AND file_no = ? AND seq = ?',
        [jobId, type, fileNo, seq],
      );
      if (!row) return;
      yield row.data;
    }
  }

  async removeIn(tx: SqlExecutor, jobId: string): Promise<void> {
    if ((await tx.execute('DELETE FROM export_chunk WHERE job_id = ?', [jobId])) > 0) this.removedAt = this.clock();
  }

  async discard(): Promise<void> {}

  async reclaim(): Promise<void> {
    const statement = this.db.dialect.reclaimSpace('export_chunk');
    if (statement === undefined || this.removedAt === undefined) return;
    if (this.clock() - this.removedAt > RECLAIM_WINDOW_MS) {
      this.removedAt = undefined;
      return;
    }
    await this.db.executeScript(statement);
  }
}

/** Read buffer of a file download: what one paused download holds of the file besides the socket's. */
const READ_BYTES = 64 * 1024;

export class FolderOutputStore implements ExportOutputStore {
  constructor(private readonly root: string) {}

  private folder(jobId: string): string {
    return join(this.root, jobId);
  }

  private file(jobId: string, type: string, fileNo: number): string {
    return join(this.folder(jobId), `${type}-${fileNo}.gz`);
  }

  /**
   * Writes the piece at its offset and syncs the file (and the folders when the file is new) before the
   * progress commits. Bytes after it (staged by a run that stopped before recording them) are left: the
   * next pieces overwrite them, and reads stop at the recorded size. Nothing is cut, because a worker that
   * lost its job without knowing yet may still stage the piece it was writing: the walk is deterministic
   * from the saved progress, so that piece holds the same bytes the job's new worker wrote there, while a
   * cut could remove pieces the new worker had written after it.
   */
  async stage(piece: StoredPiece): Promise<void> {
    const folder = this.folder(piece.jobId);
    if (piece.offset === 0) {
      // Patient data: only the server's user may read it (the files too, 0600).
      await mkdir(folder, { recursive: true, mode: 0o700 });
    }
    const handle = await open(
      this.file(piece.jobId, piece.type, piece.fileNo),
      constants.O_RDWR | constants.O_CREAT,
      0o600,
    );
    try {
      await handle.write(piece.data, 0, piece.data.length, piece.offset);
      await handle.datasync();
    } finally {
      await handle.close();
    }
    if (piece.offset === 0) {
      await syncFolder(folder);
      await syncFolder(this.root);
    }
  }

  async record(): Promise<void> {}

  async *read(jobId: string, type: string, fileNo: number, bytes: number): AsyncGenerator<Buffer> {
    if (bytes === 0) return;
    const stream = createReadStream(this.file(jobId, type, fileNo), { highWaterMark: READ_BYTES, end: bytes - 1 });
    try {
      for await (const data of stream) yield data as Buffer;
    } finally {
      stream.destroy();
    }
  }

  async removeIn(): Promise<void> {}

  /** Renamed first, so that a download or a reclaim never sees half a folder, then removed. */
  async discard(jobId: string): Promise<void> {
    const doomed = join(this.root, `.removed-${randomUUID()}`);
    try {
      await rename(this.folder(jobId), doomed);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return;
      throw error;
    }
    await rm(doomed, { recursive: true, force: true });
  }

  async reclaim(existing: (ids: readonly string[]) => Promise<ReadonlySet<string>>): Promise<void> {
    let entries: string[];
    try {
      entries = await readdir(this.root);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return;
      throw error;
    }
    // Left by a discard that stopped halfway (the process died).
    for (const name of entries.filter((e) => e.startsWith('.removed-'))) {
      await rm(join(this.root, name), { recursive: true, force: true });
    }
    const ids = entries.filter((e) => !e.startsWith('.'));
    for (let at = 0; at < ids.length; at += 500) {
      const batch = ids.slice(at, at + 500);
      const live = await existing(batch);
      for (const id of batch) if (!live.has(id)) await this.discard(id);
    }
  }
}

/** fsync of a folder, so that a file created in it is found after a power cut. */
async function syncFolder(folder: string): Promise<void> {
  const handle = await open(folder, constants.O_RDONLY);
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}
