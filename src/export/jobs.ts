// The export jobs and their output, in the database (migration 008, docs/export.md), safe with any number
// of server processes on one database. Claiming works as the scribe queue's (scribe/queue.ts): one
// conditional UPDATE per claim, a lease (random token + expiry) kept by a heartbeat, and every later
// write names the token, so a worker that lost its job (lease expired, or the job was cancelled and
// deleted) can no longer change anything. Output chunks are recorded in the same transaction as the
// progress that accounts for them, so a resumed job neither loses nor repeats a resource. Each account's
// exports are bounded (docs/api.md): so many unfinished, so many stored bytes (`bytes`, counted as each
// chunk is saved, running exports included). The same jobs carry asynchronous requests (kind `request`,
// async-requests.ts): a search run in the background, its Bundle stored as one gzip file; they have their
// own bound on unfinished jobs and share the bound on stored bytes.
import { randomUUID } from 'node:crypto';
import { AppError } from '../errors.js';
import type { ErrorCode } from '../errors.js';
import { cleanReason } from '../storage/stored-text.js';
import type { SqlDatabase, SqlExecutor, SqlValue } from '../storage/sql/database.js';
import { EMPTY_GZIP } from './gzip-file.js';
import type { GzipState } from './gzip-file.js';
import { outputStoreFor } from './output-store.js';
import type { ExportOutputStore } from './output-store.js';
import type { ExportSpec } from './selection.js';
import type { SavedCall } from '../fhir/services.js';

export type JobState = 'queued' | 'running' | 'completed' | 'failed';

/** What a job does: a Bulk Data export, or an asynchronous request (async-requests.ts). */
export type JobKind = 'export' | 'request';

/** An asynchronous request: the call to run again, and the kick-off token's scopes (they bound the run). */
export interface RequestSpec {
  readonly call: SavedCall;
  readonly scopes: readonly string[];
}

/** What an asynchronous request answered: its status and, stored as a gzip file, its body or outcome. */
export interface RequestResult {
  readonly status: number;
  readonly file: OutputFile;
  /** `Type/id` of the resources the answer holds, for the audit line of whoever fetches it. */
  readonly accessed: readonly string[];
}

/** A file of the output: one per type, or several when a type has more than FILE_MAX_RESOURCES. */
export interface OutputFile {
  readonly type: string;
  /** From 1, per type. */
  readonly fileNo: number;
  readonly count: number;
  /** Bytes stored (gzip) and bytes of NDJSON they hold: each download's Content-Length. */
  readonly bytes: number;
  readonly textBytes: number;
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
  /** That file's gzip stream so far (its stored bytes are where its next chunk goes). */
  readonly gzip: GzipState;
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
  gzip: EMPTY_GZIP,
  files: [],
  resources: 0,
};

export interface JobRecord {
  readonly id: string;
  readonly kind: JobKind;
  readonly accountId: string;
  readonly request: string;
  /** An ExportSpec, or a RequestSpec for kind `request`. */
  readonly spec: ExportSpec | RequestSpec;
  readonly state: JobState;
  readonly transactionTime: number;
  readonly progress: ExportProgress;
  /** An export's files, once completed. */
  readonly output: readonly OutputFile[] | undefined;
  /** An asynchronous request's answer, once completed. */
  readonly result: RequestResult | undefined;
  readonly error: string | undefined;
  /** The catalog code the failure is answered with (undefined: export-failed). */
  readonly errorCode: ErrorCode | undefined;
  readonly completedAt: number | undefined;
  readonly expiresAt: number | undefined;
}

/** A job claimed by this process. */
export interface ClaimedJob {
  readonly id: string;
  readonly kind: JobKind;
  /** The account that started it: its scopes now bound what the job may read (runner.ts). */
  readonly accountId: string;
  readonly leaseToken: string;
  readonly spec: ExportSpec | RequestSpec;
  readonly transactionTime: number;
  readonly progress: ExportProgress;
}

/** A chunk of a file: the gzip bytes stored after the file's first `offset` bytes. */
export interface Chunk {
  readonly type: string;
  readonly fileNo: number;
  readonly seq: number;
  readonly offset: number;
  readonly data: Buffer;
}

/** The job no longer belongs to this worker: its lease went to another process, or it was cancelled. */
export class JobLostError extends Error {
  constructor(id: string) {
    super(`export ${id}: the job was cancelled or taken over by another process`);
  }
}

/** A chunk would take the account's exports past AMBIENT_EXPORT_MAX_BYTES_PER_ACCOUNT: the job stops. */
export class ExportBoundError extends AppError {
  constructor(maxBytes: number) {
    super(
      'export-too-large',
      `The account's exports would store more than AMBIENT_EXPORT_MAX_BYTES_PER_ACCOUNT (${maxBytes} bytes, compressed): export fewer types, use _since or _typeFilter, or remove finished exports (DELETE their status URLs)`,
    );
  }
}

export interface ExportLimits {
  /** AMBIENT_EXPORT_MAX_ACTIVE: exports an account may have queued or running at once. */
  readonly maxActive: number;
  /** AMBIENT_ASYNC_MAX_ACTIVE: asynchronous requests an account may have queued or running at once. */
  readonly maxActiveRequests: number;
  /** AMBIENT_EXPORT_MAX_BYTES_PER_ACCOUNT: stored bytes of an account's jobs, running or kept. */
  readonly maxBytesPerAccount: number;
}

/** docs/api.md's defaults. */
export const DEFAULT_LIMITS: ExportLimits = { maxActive: 3, maxActiveRequests: 5, maxBytesPerAccount: 1024 ** 3 };

/** Retry-After when no kept export of the account expires sooner (only unfinished ones hold the bound). */
const RETRY_AFTER_SECONDS = 60;

interface JobRow {
  id: string;
  kind: string;
  account_id: string;
  request: string;
  params: string;
  state: string;
  transaction_time: number | string;
  progress: string | null;
  output: string | null;
  error: string | null;
  error_code: string | null;
  completed_at: number | string | null;
  expires_at: number | string | null;
}

const optionalNumber = (value: number | string | null): number | undefined =>
  value === null ? undefined : Number(value);

function toRecord(row: JobRow): JobRecord {
  const kind = row.kind as JobKind;
  const output: unknown = row.output ? JSON.parse(row.output) : undefined;
  return {
    id: row.id,
    kind,
    accountId: row.account_id,
    request: row.request,
    spec: JSON.parse(row.params) as ExportSpec | RequestSpec,
    state: row.state as JobState,
    transactionTime: Number(row.transaction_time),
    progress: row.progress ? (JSON.parse(row.progress) as ExportProgress) : START,
    output: kind === 'export' ? (output as OutputFile[] | undefined) : undefined,
    result: kind === 'request' ? (output as RequestResult | undefined) : undefined,
    error: row.error ?? undefined,
    errorCode: (row.error_code ?? undefined) as ErrorCode | undefined,
    completedAt: optionalNumber(row.completed_at),
    expiresAt: optionalNumber(row.expires_at),
  };
}

/** An account's unfinished jobs of one kind, stored bytes and first expiry (through export_job_account). */
export const ACCOUNT_USAGE = `SELECT SUM(CASE WHEN kind = ? AND state IN ('queued', 'running') THEN 1 ELSE 0 END) AS active, SUM(bytes) AS bytes, MIN(CASE WHEN bytes > 0 THEN expires_at END) AS expires FROM export_job WHERE account_id = ?`;

const COLUMNS =
  'id, kind, account_id, request, params, state, transaction_time, progress, output, error, error_code, completed_at, expires_at';
export const ACCOUNT_BYTES = 'SELECT SUM(bytes) AS bytes FROM export_job WHERE account_id = ?';

const CLAIMABLE = `kind = ? AND (state = 'queued' OR (state = 'running' AND lease_expires < ?))`;
/** The oldest jobs of a kind that a worker may claim (parameters: kind, now). */
export const CLAIM_CANDIDATES = `SELECT id FROM export_job WHERE ${CLAIMABLE} ORDER BY created_at, id LIMIT 4`;
const HELD = `id = ? AND lease_token = ? AND state = 'running'`;

export class ExportJobs {
  readonly store: ExportOutputStore;
  private readonly limits: ExportLimits;
  private readonly clock: () => number;

  constructor(
    private readonly db: SqlDatabase,
    options: { store?: ExportOutputStore; limits?: ExportLimits; clock?: () => number } = {},
  ) {
    this.store = options.store ?? outputStoreFor(db);
    this.limits = options.limits ?? DEFAULT_LIMITS;
    this.clock = options.clock ?? Date.now;
  }

  /**
   * Queues a new job for `accountId`; 429 when the account already has as many of its kind queued or
   * running as allowed, or its jobs store `maxBytesPerAccount` (checked under a per-account lock on
   * PostgreSQL; SQLite serialises writers).
   */
  async create(
    accountId: string,
    request: string,
    spec: ExportSpec | RequestSpec,
    transactionTime: number,
    kind: JobKind = 'export',
  ): Promise<string> {
    const id = randomUUID();
    const now = this.clock();
    await this.db.transaction(async (tx) => {
      await lockAccount(tx, accountId);
      const [{ active, bytes, expires }] = await tx.query<{
        active: number | string;
        bytes: number | string | null;
        expires: number | string | null;
      }>(ACCOUNT_USAGE, [kind, accountId]);
      const { maxBytesPerAccount } = this.limits;
      const maxActive = kind === 'export' ? this.limits.maxActive : this.limits.maxActiveRequests;
      if (Number(active ?? 0) >= maxActive) {
        throw kind === 'export'
          ? new AppError(
              'too-many-exports',
              `An account may have ${maxActive} exports queued or running at once (AMBIENT_EXPORT_MAX_ACTIVE); wait for one to finish or cancel one (DELETE its status URL)`,
              { headers: { 'Retry-After': String(RETRY_AFTER_SECONDS) } },
            )
          : new AppError(
              'too-many-async-requests',
              `An account may have ${maxActive} asynchronous requests queued or running at once (AMBIENT_ASYNC_MAX_ACTIVE); wait for one to finish or cancel one (DELETE its status URL)`,
              { headers: { 'Retry-After': String(RETRY_AFTER_SECONDS) } },
            );
      }
      if (Number(bytes ?? 0) >= maxBytesPerAccount) {
        // Space comes back when the account's first job expires (or sooner, by a DELETE).
        const wait = expires === null ? RETRY_AFTER_SECONDS : Math.ceil((Number(expires) - now) / 1000);
        throw new AppError(
          kind === 'export' ? 'too-many-exports' : 'too-many-async-requests',
          `The account's exports and asynchronous requests store ${Number(bytes)} bytes, the most AMBIENT_EXPORT_MAX_BYTES_PER_ACCOUNT allows (${maxBytesPerAccount}); wait for one to expire or remove one (DELETE its status URL)`,
          { headers: { 'Retry-After': String(Math.max(1, wait)) } },
        );
      }
      await tx.execute(
        `INSERT INTO export_job (id, kind, account_id, request, params, state, transaction_time, created_at, updated_at) VALUES (?, ?, ?, ?, ?, 'queued', ?, ?, ?)`,
        [id, kind, accountId, request, JSON.stringify(spec), transactionTime, now, now],
      );
    });
    return id;
  }

  /**
   * The job of that kind if it belongs to `accountId` and has not expired; undefined otherwise (the caller
   * answers 404).
   */
  async find(id: string, accountId: string, kind: JobKind = 'export'): Promise<JobRecord | undefined> {
    const [row] = await this.db.query<JobRow>(`SELECT ${COLUMNS} FROM export_job WHERE id = ?`, [id]);
    if (!row || row.account_id !== accountId || row.kind !== kind) return undefined;
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
      await this.store.removeIn(tx, id);
      await tx.execute('DELETE FROM export_job WHERE id = ?', [id]);
    });
    await this.store.discard(id);
  }

  /** Claims the oldest queued job of a kind (or one whose lease expired), or undefined when there is none. */
  async claim(leaseMs: number, kind: JobKind = 'export'): Promise<ClaimedJob | undefined> {
    const now = this.clock();
    const candidates = await this.db.query<{ id: string }>(CLAIM_CANDIDATES, [kind, now]);
    for (const { id } of candidates) {
      const token = randomUUID();
      const [row] = await this.db.query<JobRow>(
        `UPDATE export_job SET state = 'running', attempts = attempts + 1, lease_token = ?, lease_expires = ?, updated_at = ?
          WHERE id = ? AND ${CLAIMABLE}
          RETURNING ${COLUMNS}`,
        [token, now + leaseMs, now, id, kind, now],
      );
      if (!row) continue; // another process was quicker
      const record = toRecord(row);
      return {
        id,
        kind: record.kind,
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

  /**
   * Saves the progress and, in the same transaction, the chunk it accounts for; JobLostError when lost,
   * ExportBoundError when the account's exports already store `maxBytesPerAccount` (so they pass it by at
   * most one chunk per running export).
   */
  async save(job: ClaimedJob, progress: ExportProgress, chunk: Chunk | undefined, leaseMs: number): Promise<void> {
    const now = this.clock();
    const piece = chunk && { jobId: job.id, ...chunk };
    if (piece) await this.store.stage(piece);
    await this.db.transaction(async (tx) => {
      if (piece) await lockAccount(tx, job.accountId);
      await this.update(tx, job, `progress = ?, bytes = bytes + ?, lease_expires = ?, updated_at = ?`, [
        JSON.stringify(progress),
        piece?.data.length ?? 0,
        now + leaseMs,
        now,
      ]);
      if (piece) {
        const [{ bytes }] = await tx.query<{ bytes: number | string }>(ACCOUNT_BYTES, [job.accountId]);
        if (Number(bytes) - piece.data.length >= this.limits.maxBytesPerAccount) {
          throw new ExportBoundError(this.limits.maxBytesPerAccount);
        }
        await this.store.record(tx, piece);
      }
    });
  }

  /** Ends the job: completed with its files (an export) or its answer (a request), expiring `ttlMs` from now. */
  async complete(job: ClaimedJob, output: readonly OutputFile[] | RequestResult, ttlMs: number): Promise<void> {
    const now = this.clock();
    await this.update(
      this.db,
      job,
      `state = 'completed', output = ?, lease_token = NULL, lease_expires = NULL, completed_at = ?, expires_at = ?, updated_at = ?`,
      [JSON.stringify(output), now, now + ttlMs, now],
    );
  }

  /** Ends the job failed: its output is removed, the reason (and its catalog code) kept until it expires. */
  async fail(job: ClaimedJob, reason: string, ttlMs: number, code?: ErrorCode): Promise<void> {
    const now = this.clock();
    await this.db.transaction(async (tx) => {
      await this.update(
        tx,
        job,
        `state = 'failed', error = ?, error_code = ?, bytes = 0, lease_token = NULL, lease_expires = NULL, completed_at = ?, expires_at = ?, updated_at = ?`,
        [cleanReason(reason), code ?? null, now, now + ttlMs, now],
      );
      await this.store.removeIn(tx, job.id);
    });
    await this.store.discard(job.id);
  }

  /** Gives a job back (shutdown): queued again, resumed from its saved progress by whoever claims it. */
  async release(job: ClaimedJob): Promise<void> {
    const now = this.clock();
    await this.db.execute(
      `UPDATE export_job SET state = 'queued', attempts = attempts - 1, lease_token = NULL, lease_expires = NULL, updated_at = ? WHERE ${HELD}`,
      [now, job.id, job.leaseToken],
    );
  }

  /**
   * Removes up to `limit` jobs past their expiry, with their output, and gives the space of every output
   * removed since the last sweep back (cancelled and failed ones too); answers how many jobs it removed.
   */
  async sweep(limit = 20): Promise<number> {
    const expired = await this.db.query<{ id: string }>(
      'SELECT id FROM export_job WHERE expires_at < ? ORDER BY expires_at LIMIT ?',
      [this.clock(), limit],
    );
    for (const { id } of expired) await this.remove(id);
    await this.store.reclaim(async (ids) => {
      const rows = await this.db.query<{ id: string }>(
        `SELECT id FROM export_job WHERE id IN (${ids.map(() => '?').join(', ')})`,
        ids,
      );
      return new Set(rows.map((row) => row.id));
    });
    return expired.length;
  }

  /** The stored (gzip) bytes of a file of a job, a chunk or a read buffer at a time. */
  read(id: string, type: string, fileNo: number, bytes: number): AsyncGenerator<Buffer> {
    return this.store.read(id, type, fileNo, bytes);
  }

  private async update(executor: SqlExecutor, job: ClaimedJob, assignments: string, values: SqlValue[]): Promise<void> {
    const changed = await executor.execute(`UPDATE export_job SET ${assignments} WHERE ${HELD}`, [
      ...values,
      job.id,
      job.leaseToken,
    ]);
    if (changed !== 1) throw new JobLostError(job.id);
  }
}

/** Serialises the bound checks of one account (PostgreSQL; SQLite serialises writers anyway). */
async function lockAccount(tx: SqlExecutor, accountId: string): Promise<void> {
  if (tx.dialect.transactionLock) await tx.query(tx.dialect.transactionLock, [`export:${accountId}`]);
}
