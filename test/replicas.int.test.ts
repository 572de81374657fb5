// Reads on a streaming replica (DATABASE_READ_URLS) with read-your-writes, for real: a primary and an
// asynchronous standby started by the test. Searches, reads by id, versions and history go to the
// replica, and so does export work. Pausing the standby's replay makes visible who answers: an account
// that never wrote gets the replica's (older) view, the account that wrote sees its write, an export
// sees everything written before it started, a replica that lags too long or stops answering is skipped.
import { randomUUID } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { assembleApp } from '../src/assemble.js';
import { AccountStore } from '../src/auth/accounts.js';
import { loadConfig } from '../src/config.js';
import { openDatabase } from '../src/storage/open-database.js';
import { BulkClient } from './support/bulk-export-client.js';
import { postgresServersUnavailable, removeServers, startPrimary, startStandby } from './support/pg-servers.js';
import type { PgServer } from './support/pg-servers.js';
import { fhirClient, passwordToken } from './support/fhir-client.js';
import type { FhirClient } from './support/fhir-client.js';

const unavailable = postgresServersUnavailable();
if (unavailable) console.warn(`replica suite skipped: ${unavailable}`);

const MAX_LAG_MS = 2000;

async function onServer(url: string, text: string): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(text);
  } finally {
    await client.end();
  }
}

describe.skipIf(unavailable)('reads on a streaming replica', () => {
  let primary: PgServer;
  let standby: PgServer;
  let app: FastifyInstance;
  let writer: FhirClient;
  let reader: FhirClient;

  async function clientFor(accounts: AccountStore): Promise<FhirClient> {
    const username = `replica-${randomUUID()}`;
    await accounts.create({ username, password: 'pw-replica-1', scopes: ['system/*.cruds'] });
    return fhirClient(app, await passwordToken(app, username, 'pw-replica-1'));
  }

  const families = async (client: FhirClient, family: string): Promise<number> => {
    const res = await client.get(`/fhir/Patient?family=${family}&_total=accurate`);
    expect(res.statusCode).toBe(200);
    return res.json().total as number;
  };
  const create = async (family: string): Promise<string> => {
    const res = await writer.create({ resourceType: 'Patient', name: [{ family }] });
    expect(res.statusCode).toBe(201);
    return res.json().id as string;
  };
  const statusOf = async (client: FhirClient, url: string): Promise<number> => (await client.get(url)).statusCode;

  beforeAll(async () => {
    primary = await startPrimary();
    standby = await startStandby(primary);
    app = await assembleApp(
      loadConfig({
        DATABASE_URL: primary.url,
        DATABASE_READ_URLS: standby.url,
        AMBIENT_REPLICA_MAX_LAG_MS: String(MAX_LAG_MS),
        AMBIENT_PUBLIC_URL: 'http://fhir.test:8080',
        LOG_LEVEL: 'silent',
      }),
    );
    await app.ready();
    const admin = openDatabase(primary.url);
    const accounts = new AccountStore(admin);
    writer = await clientFor(accounts);
    reader = await clientFor(accounts);
    await admin.close();
  }, 120_000);
  afterAll(async () => {
    await app?.close();
    removeServers([primary, standby]);
  });

  it('answers other accounts from the replica, and the writer with its own write', async () => {
    await create('Before');
    await expect.poll(() => families(reader, 'Before'), { timeout: 10_000 }).toBe(1);

    await onServer(standby.url, 'SELECT pg_wal_replay_pause()');
    const paused = await create('Paused');
    // The writer's search needs its write: the paused replica has not replayed it, so the primary answers.
    expect(await families(writer, 'Paused')).toBe(1);
    // The reader never wrote: the replica answers, with what it has replayed (not the new Patient).
    expect(await families(reader, 'Paused')).toBe(0);
    // Reads by id, versions and history the same way: the writer gets its Patient, the reader the
    // replica's 404.
    for (const url of [`/fhir/Patient/${paused}`, `/fhir/Patient/${paused}/_history/1`]) {
      const own = await writer.get(url);
      expect(own.statusCode, url).toBe(200);
      expect(own.json()).toMatchObject({ id: paused, meta: { versionId: '1' }, name: [{ family: 'Paused' }] });
      expect(await statusOf(reader, url), url).toBe(404);
    }
    const history = await writer.get(`/fhir/Patient/${paused}/_history`);
    expect(history.statusCode).toBe(200);
    expect(history.json().entry.map((e: { resource: { id: string } }) => e.resource.id)).toEqual([paused]);
    expect(await statusOf(reader, `/fhir/Patient/${paused}/_history`)).toBe(404);
    // An export started now reads on a replica only once it has replayed everything before the start:
    // the paused one has not, so the primary serves the export, and the new Patient is in it.
    const bulk = new BulkClient(app, reader.token!);
    const manifest = await bulk.manifest(await bulk.start('/fhir/Patient/$export'));
    expect((await bulk.resources(manifest)).get('Patient')?.map((p) => p.id)).toContain(paused);

    // Once the replica lags more than allowed it is skipped for everyone.
    await new Promise((resolve) => setTimeout(resolve, MAX_LAG_MS + 1000));
    expect(await families(reader, 'Paused')).toBe(1);

    await onServer(standby.url, 'SELECT pg_wal_replay_resume()');
    await create('Resumed');
    await expect.poll(() => families(reader, 'Resumed'), { timeout: 10_000 }).toBe(1);
  }, 60_000);

  it('skips a replica that stops answering', async () => {
    standby.stop('immediate');
    await create('AfterStop');
    expect(await families(reader, 'AfterStop')).toBe(1);
    expect(await families(reader, 'Before')).toBe(1);
  });
});
