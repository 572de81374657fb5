// The durable job queue, in the database (`scribe_job`), safe with any number of server processes on one
// database (docs/scribe.md "Jobs"):
//   - a job is claimed with one conditional UPDATE (state and lease re-checked in its WHERE), so of two
//     processes racing for it exactly one changes the row: the other sees 0 rows changed and moves on;
//   - the claim is a lease: a random token and an expiry, extended by a heartbeat while the job runs. Every
//     later write (progress, completion, failure) names the token, so a worker that lost its lease (it
//     stalled, another process took over) can no longer change anything;
//   - a process that dies leaves its jobs `running` with a lease that expires: any process then takes them
//     over (the attempt counts). A process that shuts down gives its jobs back at once (it does not count);
//   - a failed attempt is retried after retryBaseMs, 2×, 4×, ... (at most 5 minutes); after maxAttempts,
//     or at once for a permanent error, the job and its record end FAILED with the reason. A client may
//     retry a FAILED record: its job is queued again (requeueFailedJob), in the record's transaction.
import { cleanReason } from '../storage/stored-text.js';
import { randomUUID } from 'node:crypto';
import type { SqlDatabase, SqlExecutor } from '../storage/sql/database.js';
import type { ScribeNote } from './records.js';

/** What earlier attempts of a job finished, so that a retry does not redo (or re-file) it. */
export interface JobProgress {
  /** Transcripts of the record's audio files, once transcribed. */
  audioTranscripts?: string[];
  /** The DocumentReference id chosen for each template's note (by template id), before filing it. */
  documentIds: Record<string, string>;
  /** The notes already generated and filed. */
  notes: ScribeNote[];
}

export interface Job {
  readonly id: number;
  readonly recordId: number;
  /** This attempt's number, from 1. */
  readonly attempts: number;
  readonly leaseToken: string;
  readonly progress: JobProgress;
}

export interface QueueOptions {
  readonly leaseMs: number;
  readonly maxAttempts: number;
  readonly retryBaseMs: number;
  readonly clock?: () => number;
}

/** The job no longer belongs to this worker (its lease expired and another process took it). */
export class LeaseLostError extends Error {
  constructor(jobId: number) {
    super(`job ${jobId}: the lease was lost to another worker`);
  }
}

export const MAX_RETRY_DELAY_MS = 5 * 60_000;

const CLAIMABLE = `((state = 'queued' AND run_after <= ?) OR (state = 'running' AND lease_expires < ?))`;

/** Queues the job of a new record (inside the record's transaction). */
export async function enqueueJob(tx: SqlExecutor, recordId: number, now: number): Promise<void> {
  await tx.execute(
    `INSERT INTO scribe_job (record_id, state, attempts, run_after, created_at, updated_at) VALUES (?, 'queued', 0, ?, ?, ?)`,
    [recordId, now, now, now],
  );
}

/**
 * Queues the failed job of a record again (inside the retry's transaction): due now, with all its attempts
 * ahead of it, and its progress kept, so that what earlier attempts finished is not done again.
 */
export async function requeueFailedJob(tx: SqlExecutor, recordId: number, now: number): Promise<void> {
  const changed = await tx.execute(
    `UPDATE scribe_job SET state = 'queued', attempts = 0, run_after = ?, lease_token = NULL, lease_expires = NULL, last_error = NULL, updated_at = ?
      WHERE record_id = ? AND state = 'failed'`,
    [now, now, recordId],
  );
  // A FAILED record's job failed in the same transaction (fail() below): anything else is a damaged queue.
  if (changed !== 1) throw new Error(`scribe record ${recordId} is FAILED but its job is not`);
}

function emptyProgress(): JobProgress {
  return { documentIds: {}, notes: [] };
}

export type FailOutcome = 'retry' | 'failed' | 'lost';

export class JobQueue {
  private readonly clock: () => number;

  constructor(
    private readonly db: SqlDatabase,
    private readonly options: QueueOptions,
  ) {
    this.clock = options.clock ?? Date.now;
  }

  /** Claims the oldest due job (or one whose lease expired), or returns undefined when there is none. */
  async claim(): Promise<Job | undefined> {
    const now = this.clock();
    const candidates = await this.db.query<{ id: number }>(
      `SELECT id FROM scribe_job WHERE ${CLAIMABLE} ORDER BY run_after, id LIMIT 8`,
      [now, now],
    );
    for (const candidate of candidates) {
      const token = randomUUID();
      const [row] = await this.db.query<{ id: number; record_id: number; attempts: number; progress: string | null }>(
        `UPDATE scribe_job SET state = 'running', attempts = attempts + 1, lease_token = ?, lease_expires = ?, updated_at = ?
          WHERE id = ? AND ${CLAIMABLE}
          RETURNING id, record_id, attempts, progress`,
        [token, now + this.options.leaseMs, now, candidate.id, now, now],
      );
      if (!row) continue; // another process was quicker
      return {
        id: Number(row.id),
        recordId: Number(row.record_id),
        attempts: Number(row.attempts),
        leaseToken: token,
        progress: row.progress ? (JSON.parse(row.progress) as JobProgress) : emptyProgress(),
      };
    }
    return undefined;
  }

  /** Extends the lease; false when it was lost. */
  async heartbeat(job: Job): Promise<boolean> {
    const now = this.clock();
    const changed = await this.db.execute(
      `UPDATE scribe_job SET lease_expires = ?, updated_at = ? WHERE id = ? AND lease_token = ? AND state = 'running'`,
      [now + this.options.leaseMs, now, job.id, job.leaseToken],
    );
    return changed === 1;
  }

  /** Saves what the job has finished so far (and extends the lease); throws LeaseLostError when it was lost. */
  async saveProgress(job: Job, progress: JobProgress): Promise<void> {
    const now = this.clock();
    const changed = await this.db.execute(
      `UPDATE scribe_job SET progress = ?, lease_expires = ?, updated_at = ? WHERE id = ? AND lease_token = ? AND state = 'running'`,
      [JSON.stringify(progress), now + this.options.leaseMs, now, job.id, job.leaseToken],
    );
    if (changed !== 1) throw new LeaseLostError(job.id);
  }

  /** Marks the job done and runs `finish` (the record's update) in the same transaction. */
  async complete(job: Job, finish: (tx: SqlExecutor) => Promise<void>): Promise<void> {
    const now = this.clock();
    await this.db.transaction(async (tx) => {
      const changed = await tx.execute(
        `UPDATE scribe_job SET state = 'done', lease_token = NULL, lease_expires = NULL, progress = NULL, last_error = NULL, updated_at = ?
          WHERE id = ? AND lease_token = ? AND state = 'running'`,
        [now, job.id, job.leaseToken],
      );
      if (changed !== 1) throw new LeaseLostError(job.id);
      await finish(tx);
    });
  }

  /** When the job retries after a failed attempt: retryBaseMs × 2^(attempt - 1), at most 5 minutes. */
  retryDelayMs(attempt: number): number {
    return Math.min(this.options.retryBaseMs * 2 ** Math.max(0, attempt - 1), MAX_RETRY_DELAY_MS);
  }

  /**
   * Records a failed attempt: the job is queued again after its backoff, or, when it was the last attempt
   * or the error is permanent, ends failed and `finalize` (the record's update) runs in the same transaction.
   */
  async fail(
    job: Job,
    failure: string,
    permanent: boolean,
    finalize: (tx: SqlExecutor) => Promise<void>,
  ): Promise<FailOutcome> {
    const now = this.clock();
    const reason = cleanReason(failure);
    const last = permanent || job.attempts >= this.options.maxAttempts;
    return this.db.transaction(async (tx) => {
      if (!last) {
        const changed = await tx.execute(
          `UPDATE scribe_job SET state = 'queued', run_after = ?, lease_token = NULL, lease_expires = NULL, last_error = ?, updated_at = ?
            WHERE id = ? AND lease_token = ? AND state = 'running'`,
          [now + this.retryDelayMs(job.attempts), reason, now, job.id, job.leaseToken],
        );
        return changed === 1 ? 'retry' : 'lost';
      }
      const changed = await tx.execute(
        `UPDATE scribe_job SET state = 'failed', lease_token = NULL, lease_expires = NULL, last_error = ?, updated_at = ?
          WHERE id = ? AND lease_token = ? AND state = 'running'`,
        [reason, now, job.id, job.leaseToken],
      );
      if (changed !== 1) return 'lost';
      await finalize(tx);
      return 'failed';
    });
  }

  /** Gives a job back at shutdown: due at once, and the interrupted attempt does not count. */
  async release(job: Job): Promise<void> {
    const now = this.clock();
    await this.db.execute(
      `UPDATE scribe_job SET state = 'queued', run_after = ?, attempts = attempts - 1, lease_token = NULL, lease_expires = NULL, updated_at = ?
        WHERE id = ? AND lease_token = ? AND state = 'running'`,
      [now, now, job.id, job.leaseToken],
    );
  }

  /** Jobs waiting or running (the queue's depth), by state: one indexed count (scribe_job_due). */
  async depth(): Promise<Record<string, number>> {
    const rows = await this.db.query<{ state: string; n: number }>(
      `SELECT state, COUNT(*) AS n FROM scribe_job WHERE state IN ('queued', 'running') GROUP BY state`,
    );
    return Object.fromEntries(rows.map((r) => [r.state, Number(r.n)]));
  }

  /** Counts by state, for tests and operators. */
  async counts(): Promise<Record<string, number>> {
    const rows = await this.db.query<{ state: string; n: number }>(
      'SELECT state, COUNT(*) AS n FROM scribe_job GROUP BY state',
    );
    return Object.fromEntries(rows.map((r) => [r.state, Number(r.n)]));
  }
}
