// The job queue on both databases: atomic claims between two processes' connections, leases, backoff,
// final failure and release at shutdown.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrate } from '../storage/migrate.js';
import { openDatabase } from '../storage/open-database.js';
import type { SqlDatabase } from '../storage/sql/database.js';
import { BACKENDS, testDatabase } from '../../test/support/databases.js';
import type { TestDatabase } from '../../test/support/databases.js';
import { JobQueue, LeaseLostError, MAX_RETRY_DELAY_MS } from './queue.js';
import { markFailed, ScribeRecords } from './records.js';

describe.each(BACKENDS)('job queue on %s', (backend) => {
  let database: TestDatabase;
  let db: SqlDatabase;
  let other: SqlDatabase;
  let now = Date.now();
  const clock = () => now;
  const options = { leaseMs: 10_000, maxAttempts: 3, retryBaseMs: 1000, clock };

  beforeAll(async () => {
    database = await testDatabase(backend);
    db = openDatabase(database.url);
    await migrate(db);
    other = openDatabase(database.url); // a second process's connection
  });
  afterAll(async () => {
    await db?.close();
    await other?.close();
    await database?.dispose();
  });

  /** Drains whatever earlier tests left due, so each test sees only its own jobs. */
  async function drain(): Promise<void> {
    const queue = new JobQueue(db, { ...options, clock: () => now + 10 * MAX_RETRY_DELAY_MS });
    for (let job = await queue.claim(); job; job = await queue.claim()) {
      await queue.complete(job, async () => undefined);
    }
  }

  async function submit(count = 1): Promise<number[]> {
    const records = new ScribeRecords(db, () => new Date(now));
    const ids: number[] = [];
    for (let i = 0; i < count; i++) {
      ids.push((await records.submit('acct', { transcripts: ['x'], templateIds: [1], audio: [] })).id);
    }
    return ids;
  }

  const state = async (recordId: number) =>
    (
      await db.query<{ state: string; attempts: number; run_after: number; last_error: string | null }>(
        'SELECT state, attempts, run_after, last_error FROM scribe_job WHERE record_id = ?',
        [recordId],
      )
    )[0];

  it('claims a due job once, as attempt 1', async () => {
    await drain();
    const [recordId] = await submit();
    const queue = new JobQueue(db, options);
    const job = await queue.claim();
    expect(job).toMatchObject({ recordId, attempts: 1, progress: { documentIds: {}, notes: [] } });
    expect(await queue.claim()).toBeUndefined();
    expect((await state(recordId)).state).toBe('running');
  });

  it('never gives one job to two processes claiming at once', async () => {
    await drain();
    const ids = await submit(30);
    const queues = [new JobQueue(db, options), new JobQueue(other, options), new JobQueue(db, options)];
    const claimed: number[] = [];
    await Promise.all(
      queues.map(async (queue) => {
        for (let job = await queue.claim(); job; job = await queue.claim()) claimed.push(job.recordId);
      }),
    );
    expect(claimed.sort((a, b) => a - b)).toEqual(ids);
  });

  it('lets another process take over a job whose lease expired, and fences the old holder off', async () => {
    await drain();
    const [recordId] = await submit();
    const first = new JobQueue(db, options);
    const job = await first.claim();
    expect(job).toBeDefined();
    const second = new JobQueue(other, options);
    expect(await second.claim()).toBeUndefined(); // still leased
    now += 5_000;
    expect(await first.heartbeat(job!)).toBe(true); // extends to now + 10 s
    now += 9_000;
    expect(await second.claim()).toBeUndefined();
    now += 2_000; // the holder stalled: no heartbeat for 11 s
    const taken = await second.claim();
    expect(taken).toMatchObject({ recordId, attempts: 2 });
    expect(await first.heartbeat(job!)).toBe(false);
    await expect(first.saveProgress(job!, { documentIds: {}, notes: [] })).rejects.toBeInstanceOf(LeaseLostError);
    await expect(first.complete(job!, async () => undefined)).rejects.toBeInstanceOf(LeaseLostError);
    expect(await first.fail(job!, 'late', false, async () => undefined)).toBe('lost');
    await second.saveProgress(taken!, { audioTranscripts: ['hello'], documentIds: { 1: 'doc' }, notes: [] });
    await second.release(taken!);
    const again = await second.claim();
    expect(again).toMatchObject({
      recordId,
      attempts: 2,
      progress: { audioTranscripts: ['hello'], documentIds: { 1: 'doc' } },
    });
  });

  it('retries with exponential backoff, then fails the job and its record with the reason', async () => {
    await drain();
    const [recordId] = await submit();
    const queue = new JobQueue(db, options);
    const finalize = (tx: Parameters<Parameters<JobQueue['fail']>[3]>[0]) =>
      markFailed(tx, recordId, 'it kept failing', new Date(now).toISOString());

    let job = await queue.claim();
    expect(await queue.fail(job!, 'first', false, finalize)).toBe('retry');
    expect(await state(recordId)).toMatchObject({
      state: 'queued',
      attempts: 1,
      run_after: now + 1000,
      last_error: 'first',
    });
    expect(await queue.claim()).toBeUndefined();
    now += 1000;
    job = await queue.claim();
    expect(job!.attempts).toBe(2);
    expect(await queue.fail(job!, 'second', false, finalize)).toBe('retry');
    expect((await state(recordId)).run_after).toBe(now + 2000);
    now += 2000;
    job = await queue.claim();
    expect(job!.attempts).toBe(3);
    expect(await queue.fail(job!, 'third', false, finalize)).toBe('failed');
    expect(await state(recordId)).toMatchObject({ state: 'failed', attempts: 3, last_error: 'third' });
    const record = await new ScribeRecords(db).get(recordId);
    expect(record).toMatchObject({ status: 'FAILED', error: 'it kept failing' });
    expect(record!.completedAt).not.toBeNull();
    now += MAX_RETRY_DELAY_MS;
    expect(await queue.claim()).toBeUndefined();
  });

  it('fails at once on a permanent error', async () => {
    await drain();
    const [recordId] = await submit();
    const queue = new JobQueue(db, options);
    const job = await queue.claim();
    let finalized = false;
    expect(
      await queue.fail(job!, 'bad config', true, async () => {
        finalized = true;
      }),
    ).toBe('failed');
    expect(finalized).toBe(true);
    expect((await state(recordId)).state).toBe('failed');
  });

  it('gives a job back at shutdown without counting the interrupted attempt', async () => {
    await drain();
    const [recordId] = await submit();
    const queue = new JobQueue(db, options);
    const job = await queue.claim();
    await queue.release(job!);
    expect(await state(recordId)).toMatchObject({ state: 'queued', attempts: 0 });
    expect((await queue.claim())!.attempts).toBe(1);
  });

  it('caps the backoff at five minutes', () => {
    const queue = new JobQueue(db, options);
    expect([1, 2, 3, 4].map((n) => queue.retryDelayMs(n))).toEqual([1000, 2000, 4000, 8000]);
    expect(queue.retryDelayMs(30)).toBe(MAX_RETRY_DELAY_MS);
  });
});
