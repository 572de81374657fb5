// Bulk Data export jobs outlive the process that runs them (issue 12 §2): a process that dies mid-export
// leaves a job another process takes over when its lease expires, one that stops gives it back, and either
// way the export resumes where its saved progress stands, without losing or repeating a resource. Also:
// finished exports expire (AMBIENT_EXPORT_TTL_SECONDS), and what $export writes is what `import` reads
// (a full round trip into a fresh database). On both databases, over HTTP.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { assembleApp } from '../src/assemble.js';
import { ADMINISTRATOR } from '../src/auth/administrator.js';
import { loadConfig } from '../src/config.js';
import { loadR4Definitions } from '../src/definitions/registry.js';
import { patientCompartmentParams } from '../src/export/compartment.js';
import { ExportJobs } from '../src/export/jobs.js';
import type { ClaimedJob, Chunk, ExportProgress } from '../src/export/jobs.js';
import { ExportRunner } from '../src/export/runner.js';
import { createSearchCatalog } from '../src/search/engine.js';
import { openDatabase } from '../src/storage/open-database.js';
import type { SqlDatabase } from '../src/storage/sql/database.js';
import { BulkClient, ids, storedOutputBytes } from './support/bulk-export-client.js';
import type { Resource } from './support/bulk-export-client.js';
import { BACKENDS } from './support/databases.js';
import { startTestApp, TEST_PUBLIC_URL } from './support/test-app.js';
import type { TestApp } from './support/test-app.js';
import { fhirClient } from './support/fhir-client.js';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const PATIENTS = 25;

function bundle(prefix: string) {
  const entry = [];
  for (let i = 0; i < PATIENTS; i++) {
    const patient = { resourceType: 'Patient', id: `${prefix}-p${i}`, name: [{ family: `Fam${i}`, given: ['Ann'] }] };
    const observation = {
      resourceType: 'Observation',
      id: `${prefix}-o${i}`,
      status: 'final',
      code: { coding: [{ system: 'http://loinc.org', code: '8867-4' }], text: 'Heart rate' },
      subject: { reference: `Patient/${prefix}-p${i}` },
      valueQuantity: { value: 60 + i, unit: '/min', system: 'http://unitsofmeasure.org', code: '/min' },
    };
    for (const resource of [patient, observation]) {
      entry.push({ resource, request: { method: 'PUT', url: `${resource.resourceType}/${resource.id}` } });
    }
  }
  return { resourceType: 'Bundle', type: 'transaction', entry };
}

async function secondServer(t: TestApp, env: Record<string, string>): Promise<FastifyInstance> {
  const config = loadConfig({
    DATABASE_URL: t.database.url,
    AMBIENT_PUBLIC_URL: TEST_PUBLIC_URL,
    LOG_LEVEL: 'silent',
    ...env,
  });
  const app = await assembleApp(config);
  await app.ready();
  return app;
}

/** ExportJobs that calls `after(n)` after its n-th saved chunk, and (`dies`) never gives a job back. */
class ObservedJobs extends ExportJobs {
  saves = 0;
  constructor(
    db: SqlDatabase,
    private readonly after: (saves: number) => void,
    private readonly dies: boolean,
  ) {
    super(db);
  }

  override async save(job: ClaimedJob, progress: ExportProgress, chunk: Chunk | undefined, leaseMs: number) {
    await super.save(job, progress, chunk, leaseMs);
    if (chunk) this.after(++this.saves);
  }

  override async release(job: ClaimedJob) {
    if (!this.dies) await super.release(job);
  }
}

describe.each(BACKENDS)('bulk export durability on %s', (backend) => {
  let t: TestApp;
  let token: string;
  let db: SqlDatabase;
  const catalog = createSearchCatalog(loadR4Definitions(), `${TEST_PUBLIC_URL}/fhir`);

  beforeAll(async () => {
    // This process queues exports and answers status requests but runs none: the tests decide who does.
    t = await startTestApp(backend, { AMBIENT_EXPORT_WORKERS: '0' });
    token = await t.token();
    const res = await fhirClient(t.app, token).post('/fhir', bundle('d'));
    expect(res.statusCode, res.body).toBe(200);
    db = openDatabase(t.database.url);
  });
  afterAll(async () => {
    await db?.close();
    await t?.close();
  });

  /** Runs the job in a runner of its own until `stopAfter` chunks are saved, then stops it. */
  async function interrupt(dies: boolean, stopAfter: number): Promise<void> {
    let stopped: Promise<void> | undefined;
    let runner: ExportRunner | undefined = undefined;
    const jobs = new ObservedJobs(
      db,
      (saves) => {
        if (saves === stopAfter) stopped = runner!.stop();
      },
      dies,
    );
    runner = new ExportRunner(db, jobs, catalog, patientCompartmentParams(loadR4Definitions()), {
      workers: 1,
      leaseMs: 1000,
      ttlMs: 60_000,
      pollMs: 50,
      chunkBytes: 1, // a chunk per resource: many chances to stop mid-file
      principalOf: async () => ADMINISTRATOR,
    });
    runner.start();
    const deadline = Date.now() + 20_000;
    while (!stopped && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
    expect(stopped, 'the runner never reached its stop point').toBeDefined();
    await stopped;
  }

  async function expectComplete(client: BulkClient, statusUrl: string) {
    const manifest = await client.manifest(statusUrl);
    const resources = await client.resources(manifest);
    const patients = resources.get('Patient') ?? [];
    const observations = resources.get('Observation') ?? [];
    const expected = (kind: string) => Array.from({ length: PATIENTS }, (_, i) => `d-${kind}${i}`).sort();
    // Exactly once each: nothing lost, nothing repeated across the interruption.
    expect(ids(patients)).toEqual(expected('p'));
    expect(ids(observations)).toEqual(expected('o'));
    expect(Object.fromEntries(manifest.output.map((o) => [o.type, o.count]))).toEqual({
      Patient: PATIENTS,
      Observation: PATIENTS,
    });
  }

  const attempts = async (statusUrl: string) => {
    const [row] = await db.query<{ attempts: number; state: string }>(
      'SELECT attempts, state FROM export_job WHERE id = ?',
      [statusUrl.split('/').pop()!],
    );
    return { attempts: Number(row.attempts), state: row.state };
  };

  it('takes over the job of a process that died mid-export once its lease expires, and resumes it', async () => {
    const client = new BulkClient(t.app, token);
    const statusUrl = await client.start('/fhir/$export?_type=Patient,Observation');
    await interrupt(true, 30);
    // The dead process's job: still running, part written.
    const during = await client.status(statusUrl);
    expect(during.statusCode).toBe(202);
    // 30 chunks of one resource each, but for the chunk that ends the Patient file (the gzip trailer).
    expect(String(during.headers['x-progress'])).toBe('Observation (type 2 of 2), 29 resources written');
    expect(await attempts(statusUrl)).toEqual({ attempts: 1, state: 'running' });

    const next = await secondServer(t, { AMBIENT_EXPORT_LEASE_SECONDS: '1' });
    try {
      await expectComplete(new BulkClient(next, token), statusUrl);
      expect(await attempts(statusUrl)).toEqual({ attempts: 2, state: 'completed' });
    } finally {
      await next.close();
    }
  });

  it('a process that stops mid-export gives the job back, and the next server finishes it', async () => {
    const client = new BulkClient(t.app, token);
    const statusUrl = await client.start('/fhir/$export?_type=Patient,Observation');
    await interrupt(false, 10);
    expect(await attempts(statusUrl)).toEqual({ attempts: 0, state: 'queued' });
    expect((await client.status(statusUrl)).headers['x-progress']).toBe('queued');
    const next = await secondServer(t, {});
    try {
      await expectComplete(client, statusUrl);
    } finally {
      await next.close();
    }
  });

  it('round trip: what $export writes, `import` loads into a fresh database unchanged', async () => {
    const worker = await secondServer(t, {});
    let exported: Map<string, Resource[]>;
    const dir = mkdtempSync(join(tmpdir(), 'ambient-export-'));
    try {
      const client = new BulkClient(worker, token);
      const manifest = await client.manifest(await client.start('/fhir/$export'));
      exported = await client.resources(manifest);
      for (const output of manifest.output) {
        const res = await client.file(output.url);
        writeFileSync(join(dir, basename(new URL(output.url).pathname)), res.body);
      }
    } finally {
      await worker.close();
    }
    expect(exported.get('Patient')).toHaveLength(PATIENTS);

    const fresh = await startTestApp(backend, { AMBIENT_EXPORT_WORKERS: '0' });
    try {
      const result = spawnSync(process.execPath, ['--import', 'tsx', 'src/main.ts', 'import', dir], {
        cwd: ROOT,
        env: { ...process.env, DATABASE_URL: fresh.database.url, LOG_LEVEL: 'silent' },
        encoding: 'utf8',
      });
      expect(result.status, result.stdout + result.stderr).toBe(0);
      const freshFhir = await fresh.client();
      for (const [type, resources] of exported) {
        for (const resource of resources) {
          const res = await freshFhir.get(`/fhir/${type}/${resource.id}`);
          expect(res.statusCode, `${type}/${resource.id}`).toBe(200);
          const { meta: _meta, ...loaded } = res.json() as Resource;
          const { meta: _exportedMeta, ...original } = resource;
          expect(loaded).toEqual(original);
        }
      }
      // And nothing beyond what was exported.
      const count = await freshFhir.get('/fhir/Observation?_summary=count');
      expect(count.json().total).toBe(exported.get('Observation')!.length);
    } finally {
      await fresh.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('answers a failed export with 500 and an OperationOutcome naming the reason, its output removed', async () => {
    const client = new BulkClient(t.app, token);
    const statusUrl = await client.start('/fhir/$export?_type=Patient');
    const jobs = new ExportJobs(db);
    const job = await jobs.claim(60_000);
    expect(job?.id).toBe(statusUrl.split('/').pop());
    await jobs.save(
      job!,
      { ...job!.progress, seq: 1 },
      { type: 'Patient', fileNo: 1, seq: 0, offset: 0, data: Buffer.from('stored bytes') },
      60_000,
    );
    expect(await storedOutputBytes(db, job!.id)).toBe('stored bytes'.length);
    await jobs.fail(job!, 'the disk caught fire', 60_000);
    const res = await client.status(statusUrl);
    expect(res.statusCode).toBe(500);
    expect(res.json().issue[0].diagnostics).toBe('The export failed: the disk caught fire');
    expect(await storedOutputBytes(db, job!.id)).toBe(0);
    // A lost job can no longer write.
    await expect(jobs.save(job!, job!.progress, undefined, 60_000)).rejects.toThrow(/cancelled or taken over/);
  });
});

describe.each(BACKENDS)('bulk export expiry on %s', (backend) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp(backend, { AMBIENT_EXPORT_TTL_SECONDS: '1' });
  });
  afterAll(async () => t?.close());

  it('answers 404 for status and files once AMBIENT_EXPORT_TTL_SECONDS have passed, and sweeps the output', async () => {
    const fhir = await t.client();
    const put = await fhir.put('/fhir/Patient/x1', { resourceType: 'Patient', id: 'x1' });
    expect(put.statusCode).toBe(201);
    const client = new BulkClient(t.app, fhir.token!);
    const statusUrl = await client.start('/fhir/$export?_type=Patient');
    const manifest = await client.manifest(statusUrl);
    const status = await client.status(statusUrl);
    const expires = Date.parse(String(status.headers.expires));
    expect(expires).toBeGreaterThan(Date.now() - 2000);
    expect(expires).toBeLessThanOrEqual(Date.now() + 1000);
    await new Promise((resolve) => setTimeout(resolve, 1100));
    expect((await client.status(statusUrl)).statusCode).toBe(404);
    expect((await client.file(manifest.output[0].url)).statusCode).toBe(404);
    const db = openDatabase(t.database.url);
    try {
      const id = statusUrl.split('/').pop()!;
      const deadline = Date.now() + 15_000;
      let left = 1;
      while (left > 0 && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 250));
        const [row] = await db.query<{ n: number }>('SELECT COUNT(*) AS n FROM export_job WHERE id = ?', [id]);
        left = Number(row.n) + (await storedOutputBytes(db, id));
      }
      expect(left).toBe(0);
    } finally {
      await db.close();
    }
  });
});
