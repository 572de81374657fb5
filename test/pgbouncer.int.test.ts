// Behind PgBouncer in transaction pooling mode (AMBIENT_POSTGRES_POOLER=transaction): consecutive
// transactions of one client connection land on different server connections, so nothing may outlive
// a transaction (no named prepared statements, no session settings). Two server connections for many
// concurrent requests make that happen all the time here.
import { randomUUID } from 'node:crypto';
import net from 'node:net';
import pg from 'pg';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { assembleApp } from '../src/assemble.js';
import { AccountStore } from '../src/auth/accounts.js';
import { loadConfig } from '../src/config.js';
import { openDatabase } from '../src/storage/open-database.js';
import { pgbouncerUnavailable, startPgbouncer } from './support/pg-servers.js';
import type { Pooler } from './support/pg-servers.js';
import { postgresTestUrl } from './support/provided.js';
import { fhirClient, passwordToken } from './support/fhir-client.js';
import type { FhirClient } from './support/fhir-client.js';

const unavailable = pgbouncerUnavailable();
if (unavailable) console.warn(`PgBouncer suite skipped: ${unavailable}`);

async function waitForPort(port: number): Promise<void> {
  for (let i = 0; i < 100; i++) {
    const open = await new Promise<boolean>((resolve) => {
      const socket = net.connect(port, '127.0.0.1', () => resolve(true));
      socket.once('error', () => resolve(false));
      socket.once('connect', () => socket.end());
    });
    if (open) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`nothing listens on ${port}`);
}

describe.skipIf(unavailable)('behind PgBouncer (transaction pooling)', () => {
  const database = `ambient_pgb_${randomUUID().slice(0, 8)}`;
  let server: URL;
  let pooler: Pooler;
  let app: FastifyInstance;
  let fhir: FhirClient;

  async function onServer(text: string): Promise<void> {
    const client = new pg.Client({ connectionString: server.toString() });
    await client.connect();
    try {
      await client.query(text);
    } finally {
      await client.end();
    }
  }

  beforeAll(async () => {
    server = new URL(postgresTestUrl());
    server.searchParams.delete('options');
    await onServer(`CREATE DATABASE ${database}`);
    pooler = await startPgbouncer(server, database, 2);
    await waitForPort(pooler.port);
    const user = server.username || 'postgres';
    const databaseUrl = `postgres://${user}@127.0.0.1:${pooler.port}/${database}`;
    const settings = { DATABASE_URL: databaseUrl, AMBIENT_POSTGRES_POOLER: 'transaction' };
    app = await assembleApp(
      loadConfig({ ...settings, AMBIENT_PUBLIC_URL: 'http://fhir.test:8080', LOG_LEVEL: 'silent' }),
    );
    await app.ready();
    const admin = openDatabase(databaseUrl, { postgresPooler: 'transaction' });
    const username = `pooled-${randomUUID()}`;
    await new AccountStore(admin).create({ username, password: 'pw-pooled-1', scopes: ['system/*.cruds'] });
    await admin.close();
    fhir = fhirClient(app, await passwordToken(app, username, 'pw-pooled-1'));
  }, 120_000);
  afterAll(async () => {
    await app?.close();
    pooler?.stop();
    if (server) await onServer(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
  });

  it('creates, reads, updates and searches concurrently, many requests over two server connections', async () => {
    const created = await Promise.all(
      Array.from({ length: 30 }, (_, i) =>
        fhir.post('/fhir/Patient', { resourceType: 'Patient', name: [{ family: `Pooled${i % 3}` }], gender: 'female' }),
      ),
    );
    expect(created.map((r) => r.statusCode)).toEqual(Array(30).fill(201));
    const ids = created.map((r) => r.json().id as string);

    const rounds = await Promise.all(
      ids.flatMap((id, i) => [
        fhir.get(`/fhir/Patient/${id}`),
        fhir.get(`/fhir/Patient?family=Pooled${i % 3}&_count=5&_total=accurate`),
        fhir.put(`/fhir/Patient/${id}`, {
          resourceType: 'Patient',
          id,
          name: [{ family: `Pooled${i % 3}` }],
          gender: 'male',
        }),
      ]),
    );
    expect(rounds.map((r) => r.statusCode)).toEqual(Array(90).fill(200));
    for (let i = 1; i < rounds.length; i += 3) expect(rounds[i].json().total).toBe(10);

    const search = await fhir.get('/fhir/Patient?gender=male&_count=100&_total=accurate');
    expect(search.json().total).toBe(30);
    const history = await fhir.get(`/fhir/Patient/${ids[0]}/_history`);
    expect(history.json().entry.map((e: any) => e.resource.meta.versionId)).toEqual(['2', '1']);
  });

  it('runs a transaction Bundle and a conditional create through the pooler', async () => {
    const bundle = await fhir.post('/fhir', {
      resourceType: 'Bundle',
      type: 'transaction',
      entry: [
        {
          fullUrl: 'urn:uuid:0d4e5f1a-0000-4000-8000-000000000001',
          resource: { resourceType: 'Patient', identifier: [{ system: 'urn:pooled', value: 'tx-1' }] },
          request: { method: 'POST', url: 'Patient', ifNoneExist: 'identifier=urn:pooled|tx-1' },
        },
        {
          resource: {
            resourceType: 'Observation',
            status: 'final',
            code: { text: 'pooled' },
            subject: { reference: 'urn:uuid:0d4e5f1a-0000-4000-8000-000000000001' },
          },
          request: { method: 'POST', url: 'Observation' },
        },
      ],
    });
    expect(bundle.statusCode).toBe(200);
    expect(bundle.json().entry.map((e: any) => e.response.status)).toEqual(['201 Created', '201 Created']);
    const again = await fhir.post(
      '/fhir/Patient',
      { resourceType: 'Patient', identifier: [{ system: 'urn:pooled', value: 'tx-1' }] },
      { 'if-none-exist': 'identifier=urn:pooled|tx-1' },
    );
    expect(again.statusCode).toBe(200);
    const observations = await fhir.get('/fhir/Observation?subject:Patient.identifier=urn:pooled|tx-1');
    expect(observations.json().entry).toHaveLength(1);
  });
});
