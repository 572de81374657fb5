// The worker pool on both databases: never more than `size` jobs at once, failures recorded through the
// queue, work found by polling, and a stop that aborts running jobs and gives them back.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrate } from '../storage/migrate.js';
import { openDatabase } from '../storage/open-database.js';
import type { SqlDatabase } from '../storage/sql/database.js';
import { BACKENDS, testDatabase } from '../../test/support/databases.js';
import type { TestDatabase } from '../../test/support/databases.js';
import { EngineError } from './engines/engine.js';
import { PermanentJobError } from './processor.js';
import { JobQueue } from './queue.js';
import type { Job } from './queue.js';
import { markFailed, ScribeRecords } from './records.js';
import { WorkerPool } from './worker-pool.js';
import type { JobHandler } from './worker-pool.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function until(condition: () => Promise<boolean> | boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error('timed out waiting');
    await sleep(10);
  }
}

describe.each(BACKENDS)('worker pool on %s', (backend) => {
  let database: TestDatabase;
  let db: SqlDatabase;
  let records: ScribeRecords;
  const pools: WorkerPool[] = [];

  beforeAll(async () => {
    database = await testDatabase(backend);
    db = openDatabase(database.url);
    await migrate(db);
    records = new ScribeRecords(db);
  });
  afterAll(async () => {
    for (const pool of pools) await pool.stop();
    await db?.close();
    await database?.dispose();
  });

  const submit = async (count: number) => {
    const ids: number[] = [];
    for (let i = 0; i < count; i++) {
      ids.push((await records.submit(`acct-${backend}`, { transcripts: ['x'], templateIds: [1], audio: [] })).id);
    }
    return ids;
  };

  const startPool = (
    handler: JobHandler,
    size: number,
    queueOptions: Partial<ConstructorParameters<typeof JobQueue>[1]> = {},
  ) => {
    const queue = new JobQueue(db, { leaseMs: 5000, maxAttempts: 3, retryBaseMs: 10, ...queueOptions });
    const pool = new WorkerPool(
      queue,
      handler,
      (tx, job, reason) => markFailed(tx, job.recordId, reason, new Date().toISOString()),
      { size, pollMs: 20, leaseMs: 5000 },
    );
    pools.push(pool);
    pool.start();
    return { pool, queue };
  };

  /** A handler that completes each job after `ms`, counting how many run at once. */
  const completing = (ms: number, seen: Set<number>, peak: { now: number; max: number }): JobHandler => {
    return async (job: Job) => {
      peak.now++;
      peak.max = Math.max(peak.max, peak.now);
      await sleep(ms);
      peak.now--;
      seen.add(job.recordId);
    };
  };

  it('runs at most `size` jobs at once and finds jobs by polling', async () => {
    const seen = new Set<number>();
    const peak = { now: 0, max: 0 };
    const { pool, queue } = startPool(async (job, signal) => {
      await completing(40, seen, peak)(job, signal);
      await queue.complete(job, async () => undefined);
    }, 3);
    const ids = await submit(12); // submitted without wake(): the poll finds them
    await until(() => ids.every((id) => seen.has(id)));
    expect(peak.max).toBe(3);
    await pool.stop();
  });

  it('records failures: retries, then FAILED with the reason; permanent errors at once', async () => {
    const attempts = new Map<number, number>();
    const [flaky, permanent] = await submit(2);
    const { pool } = startPool(async (job) => {
      attempts.set(job.recordId, job.attempts);
      if (job.recordId === permanent) throw new EngineError('note engine: HTTP 401', false);
      throw new Error('temporary trouble');
    }, 2);
    await until(
      async () =>
        (await records.get(flaky))!.status === 'FAILED' && (await records.get(permanent))!.status === 'FAILED',
    );
    expect(attempts.get(flaky)).toBe(3);
    expect(attempts.get(permanent)).toBe(1);
    expect((await records.get(flaky))!.error).toBe('temporary trouble (gave up after 3 attempts)');
    expect((await records.get(permanent))!.error).toBe('note engine: HTTP 401');
    await pool.stop();
  });

  it('treats PermanentJobError as final', async () => {
    const [id] = await submit(1);
    const { pool } = startPool(async () => {
      throw new PermanentJobError('template 7 no longer exists');
    }, 1);
    await until(async () => (await records.get(id))!.status === 'FAILED');
    expect((await records.get(id))!.error).toBe('template 7 no longer exists');
    await pool.stop();
  });

  it('stop() aborts running jobs and gives them back to the queue', async () => {
    const [id] = await submit(1);
    let started = false;
    const { pool } = startPool(async (_job, signal) => {
      started = true;
      await new Promise((_resolve, reject) => signal.addEventListener('abort', () => reject(signal.reason)));
    }, 1);
    await until(() => started);
    expect(pool.active).toBe(1);
    await pool.stop();
    expect(pool.active).toBe(0);
    const [row] = await db.query<{ state: string; attempts: number }>(
      'SELECT state, attempts FROM scribe_job WHERE record_id = ?',
      [id],
    );
    expect({ state: row.state, attempts: Number(row.attempts) }).toEqual({ state: 'queued', attempts: 0 });
    expect((await records.get(id))!.status).toBe('IN_PROGRESS');
    // Finish it, so that it does not linger for the other tests.
    const seen = new Set<number>();
    const { queue } = startPool(async (job) => {
      seen.add(job.recordId);
      await queue.complete(job, async () => undefined);
    }, 1);
    await until(() => seen.has(id));
  });
});
