// The export jobs and their output, in the database (migration 008, docs/export.md), safe with any number
// of server processes on one database. Claiming works as the scribe queue's (scribe/queue.ts): one
// conditional UPDATE per claim, a lease (random token + expiry) kept by a heartbeat, and every later
// write names the token, so a worker that lost its job (lease expired, or the job was cancelled and
// deleted) can no longer change anything. Output chunks are written in the same transaction as the
// progress that accounts for them, so a resumed job neither loses nor repeats a resource.
import { randomUUID } from 'node:crypto';
import { AppError } from '../errors.js';
import { cleanReason } from '../scribe/queue.js';
import type { SqlDatabase, SqlExecutor } from '../storage/sql/database.js';
import type { ExportSpec } from './selection.js';

export type JobState = 'queued' | 'running' | 'completed' | 'failed';

/** A file of the output: one per type, or several when a type has more than FILE_MAX_RESOURCES. */
export interface OutputFile {
  readonly type: string;
  /** From 1, per type. */
  readonly fileNo: number;
  readonly count: number;
}

/** Where a job's walk stands; saved with every chunk written. */
export interface ExportProgress {
  /** Index into the spec's types of the type being walked. */
  readonly typeIndex: number;
  /** The last pk of that type whose resource (if exported) is in a saved chunk. */
  readonly afterPk: number;
  /** The file of that type being written (from 1), its next chunk's seq and its resources so far. */
  readonly fileNo: number;
  readonly seq: number;
  readonly fileResources: number;
  /** The files finished. */
  readonly files: readonly OutputFile[];
  /** Resources written in all. */
  readonly resources: number;
}

export const START: ExportProgress = {
  typeIndex: 0,
  afterPk: 0,
  fileNo: 1,
  seq: 0,
  fileResources: 0,
  files: [],
  resources: 0,
};

export interface JobRecord {
  readonly id: string;
  readonly accountId: string;
  readonly request: string;
  readonly spec: ExportSpec;
  readonly state: JobState;
  readonly transactionTime: number;
  readonly progress: ExportProgress;
  readonly output: readonly OutputFile[] | undefined;
  readonly error: string | undefined;
  readonly completedAt: number | undefined;
  readonly expiresAt: number | undefined;
}

/** A job claimed by this process. */
export interface ClaimedJob {
  readonly id: string;
  /** The account that started it: its scopes now bound what the job may read (runner.ts). */
  readonly accountId: string;
  readonly leaseToken: string;
  readonly spec: ExportSpec;
  readonly transactionTime: number;
  readonly progress: ExportProgress;
}

export interface Chunk {
  readonly type: string;
  readonly fileNo: number;
  readonly seq: number;
  readonly resources: number;
  readonly data: string;
}

/** The job no longer belongs to this worker: its lease went to another process, or it was cancelled. */
export class JobLostError extends Error {
  constructor(id: string) {
    super(`export ${id}: the job was cancelled or taken over by another process`);
  }
}

/** Exports an account may have queued or running at once. */
export const MAX_UNFINISHED_PER_ACCOUNT = 3;

interface JobRow {
  id: string;
  account_id: string;
  request: string;
  params: string;
  state: string;
  transaction_time: number | string;
  progress: string | null;
  output: string | null;
  error: string | null;
  completed_at: number | string | null;
  expires_at: number | string | null;
}

const optionalNumber = (value: number | string | null): number | undefined =>
  value === null ? undefined : Number(value);

function toRecord(row: JobRow): JobRecord {
  return {
    id: row.id,
    accountId: row.account_id,
    request: row.request,
    spec: JSON.parse(row.params) as ExportSpec,
    state: row.state as JobState,
    transactionTime: Number(row.transaction_time),
    progress: row.progress ? (JSON.parse(row.progress) as ExportProgress) : START,
    output: row.output ? (JSON.parse(row.output) as OutputFile[]) : undefined,
    error: row.error ?? undefined,
    completedAt: optionalNumber(row.completed_at),
    expiresAt: optionalNumber(row.expires_at),
  };
}

const CLAIMABLE = `(state = 'queued' OR (state = 'running' AND lease_expires < ?))`;
const HELD = `id = ? AND lease_token = ? AND state = 'running'`;

export class ExportJobs {
  constructor(
    private readonly db: SqlDatabase,
    private readonly clock: () => number = Date.now,
  ) {}

  /**
   * Queues a new export for `accountId`; 429 when the account already has MAX_UNFINISHED_PER_ACCOUNT
   * queued or running (checked under a per-account lock on PostgreSQL; SQLite serialises writers).
   */
  async create(accountId: string, request: string, spec: ExportSpec, transactionTime: number): Promise<string> {
    const id = randomUUID();
    const now = this.clock();
    await this.db.transaction(async (tx) => {
      if (tx.dialect.transactionLock) await tx.query(tx.dialect.transactionLock, [`export:${accountId}`]);
      const [{ n }] = await tx.query<{ n: number | string }>(
        `SELECT COUNT(*) AS n FROM export_job WHERE account_id = ? AND state IN ('queued', 'running')`,
        [accountId],
      );
      if (Number(n) >= MAX_UNFINISHED_PER_ACCOUNT) {
        throw new AppError(
          'too-many-exports',
          `An account may have ${MAX_UNFINISHED_PER_ACCOUNT} exports queued or running at once; wait for one to finish or cancel one (DELETE its status URL)`,
          { headers: { 'Retry-After': '60' } },
        );
      }
      await tx.execute(
        `INSERT INTO export_job (id, account_id, request, params, state, transaction_time, created_at, updated_at) VALUES (?, ?, ?, ?, 'queued', ?, ?, ?)`,
        [id, accountId, request, JSON.stringify(spec), transactionTime, now, now],
      );
    });
    return id;
  }

  /** The job if it belongs to `accountId` and has not expired; undefined otherwise (the caller answers 404). */
  async find(id: string, accountId: string): Promise<JobRecord | undefined> {
    const [row] = await this.db.query<JobRow>(
      `SELECT id, account_id, request, params, state, transaction_time, progress, output, error, completed_at, expires_at FROM export_job WHERE id = ?`,
      [id],
    );
    if (!row || row.account_id !== accountId) return undefined;
    const record = toRecord(row);
    if (record.expiresAt !== undefined && record.expiresAt <= this.clock()) return undefined;
    return record;
  }

  /**
   * Removes a job and its output (cancel, expiry); a worker running it loses it at its next write. The
   * job's row is locked first: a chunk being saved right now commits before the chunks are deleted (and
   * is deleted with them), and every later save finds no job.
   */
  async remove(id: string): Promise<void> {
    await this.db.transaction(async (tx) => {
      await tx.query(`SELECT id FROM export_job WHERE id = ?${tx.dialect.forUpdate}`, [id]);
      await tx.execute('DELETE FROM export_chunk WHERE job_id = ?', [id]);
      await tx.execute('DELETE FROM export_job WHERE id = ?', [id]);
    });
  }

  /** Claims the oldest queued job (or one whose lease expired), or undefined when there is none. */
  async claim(leaseMs: number): Promise<ClaimedJob | undefined> {
    const now = this.clock();
    const candidates = await this.db.query<{ id: string }>(
      `SELECT id FROM export_job WHERE ${CLAIMABLE} ORDER BY created_at, id LIMIT 4`,
      [now],
    );
    for (const { id } of candidates) {
      const token = randomUUID();
      const [row] = await this.db.query<JobRow>(
        `UPDATE export_job SET state = 'running', attempts = attempts + 1, lease_token = ?, lease_expires = ?, updated_at = ?
          WHERE id = ? AND ${CLAIMABLE}
          RETURNING id, account_id, request, params, state, transaction_time, progress, output, error, completed_at, expires_at`,
        [token, now + leaseMs, now, id, now],
      );
      if (!row) continue; // another process was quicker
      const record = toRecord(row);
      return {
        id,
        accountId: record.accountId,
        leaseToken: token,
        spec: record.spec,
        transactionTime: record.transactionTime,
        progress: record.progress,
      };
    }
    return undefined;
  }

  /** Extends the lease; false when the job was lost. */
  async heartbeat(job: ClaimedJob, leaseMs: number): Promise<boolean> {
    const now = this.clock();
    const changed = await this.db.execute(`UPDATE export_job SET lease_expires = ?, updated_at = ? WHERE ${HELD}`, [
      now + leaseMs,
      now,
      job.id,
      job.leaseToken,
    ]);
    return changed === 1;
  }

  /** Saves the progress and, in the same transaction, the chunk it accounts for; JobLostError when lost. */
  async save(job: ClaimedJob, progress: ExportProgress, chunk: Chunk | undefined, leaseMs: number): Promise<void> {
    const now = this.clock();
    await this.db.transaction(async (tx) => {
      await this.update(tx, job, `progress = ?, lease_expires = ?, updated_at = ?`, [
        JSON.stringify(progress),
        now + leaseMs,
        now,
      ]);
      if (chunk) {
        await tx.execute(
          'INSERT INTO export_chunk (job_id, type, file_no, seq, resources, data) VALUES (?, ?, ?, ?, ?, ?)',
          [job.id, chunk.type, chunk.fileNo, chunk.seq, chunk.resources, chunk.data],
        );
      }
    });
  }

  /** Ends the job: completed with its files, expiring `ttlMs` from now. */
  async complete(job: ClaimedJob, output: readonly OutputFile[], ttlMs: number): Promise<void> {
    const now = this.clock();
    await this.update(
      this.db,
      job,
      `state = 'completed', output = ?, lease_token = NULL, lease_expires = NULL, completed_at = ?, expires_at = ?, updated_at = ?`,
      [JSON.stringify(output), now, now + ttlMs, now],
    );
  }

  /** Ends the job failed: its output is removed, the reason kept until it expires. */
  async fail(job: ClaimedJob, reason: string, ttlMs: number): Promise<void> {
    const now = this.clock();
    await this.db.transaction(async (tx) => {
      await this.update(
        tx,
        job,
        `state = 'failed', error = ?, lease_token = NULL, lease_expires = NULL, completed_at = ?, expires_at = ?, updated_at = ?`,
        [cleanReason(reason), now, now + ttlMs, now],
      );
      await tx.execute('DELETE FROM export_chunk WHERE job_id = ?', [job.id]);
    });
  }

  /** Gives a job back (shutdown): queued again, resumed from its saved progress by whoever claims it. */
  async release(job: ClaimedJob): Promise<void> {
    const now = this.clock();
    await this.db.execute(
      `UPDATE export_job SET state = 'queued', attempts = attempts - 1, lease_token = NULL, lease_expires = NULL, updated_at = ? WHERE ${HELD}`,
      [now, job.id, job.leaseToken],
    );
  }

  /** Removes up to `limit` jobs past their expiry, with their output; answers how many. */
  async sweep(limit = 20): Promise<number> {
    const expired = await this.db.query<{ id: string }>(
      'SELECT id FROM export_job WHERE expires_at < ? ORDER BY expires_at LIMIT ?',
      [this.clock(), limit],
    );
    for (const { id } of expired) await this.remove(id);
    return expired.length;
  }

  /** Chunk `seq` of a file, or undefined past its last one. */
  async chunk(id: string, type: string, fileNo: number, seq: number): Promise<string | undefined> {
    const [row] = await this.db.query<{ data: string }>(
      'SELECT data FROM export_chunk WHERE job_id = ? AND type = ? AND file_no = ? AND seq = ?',
      [id, type, fileNo, seq],
    );
    return row?.data;
  }

  private async update(
    executor: SqlExecutor,
    job: ClaimedJob,
    assignments: string,
    values: (string | number)[],
  ): Promise<void> {
    const changed = await executor.execute(`UPDATE export_job SET ${assignments} WHERE ${HELD}`, [
      ...values,
      job.id,
      job.leaseToken,
    ]);
    if (changed !== 1) throw new JobLostError(job.id);
  }
}
