// The checkpoint worker started as startWorker starts it from the sources (the tests, `node --import tsx
// src/main.ts`): its .ts module, with its workerData. The compiled path is dist/'s (`npm run build`).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { startWorker } from '../../workers/start-worker.js';
import type { CheckpointWorkerData } from './checkpoint-worker.js';
import type { CheckpointResult } from './checkpointer.js';

describe('checkpoint worker', () => {
  const dir = mkdtempSync(join(tmpdir(), 'ambient-fhir-worker-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('starts from its .ts source with its workerData, checkpoints and closes', async () => {
    const fileName = join(dir, 'w.db');
    const db = new BetterSqlite3(fileName);
    db.pragma('journal_mode = WAL');
    db.exec('CREATE TABLE k (v TEXT); INSERT INTO k VALUES (1)');
    const workerData: CheckpointWorkerData = { fileName };
    const worker = startWorker(new URL('./checkpoint-worker.js', import.meta.url), { workerData });
    const exited = new Promise<number>((resolve) => worker.once('exit', resolve));
    worker.postMessage('checkpoint');
    const result = await new Promise<CheckpointResult>((resolve, reject) => {
      worker.once('message', resolve);
      worker.once('error', reject);
    });
    expect(result).toMatchObject({ ok: true });
    expect(result.checkpointed).toBe(result.log);
    worker.postMessage('close');
    expect(await exited).toBe(0);
    db.close();
  });
});
