// Failover for real (docs/api.md "replicas, failover"): a primary and a synchronous streaming standby
// on their own ports, DATABASE_URL naming both in libpq's form; the primary is stopped as in a crash,
// the standby promoted. Every acknowledged write must be there afterwards, writes in flight must fail
// cleanly (503 + Retry-After), reads are retried, and service resumes within seconds.
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { assembleApp } from '../src/assemble.js';
import { AccountStore } from '../src/auth/accounts.js';
import { loadConfig } from '../src/config.js';
import { openDatabase } from '../src/storage/open-database.js';
import type { FastifyInstance } from 'fastify';
import { postgresServersUnavailable, removeServers, startPrimary, startStandby } from './support/pg-servers.js';
import type { PgServer } from './support/pg-servers.js';
import { fhirClient, passwordToken } from './support/fhir-client.js';
import type { FhirClient } from './support/fhir-client.js';

const unavailable = postgresServersUnavailable();
if (unavailable) console.warn(`failover suite skipped: ${unavailable}`);

async function sql<T>(url: string, text: string): Promise<T[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query(text)).rows as T[];
  } finally {
    await client.end();
  }
}

describe.skipIf(unavailable)('failover to a promoted standby', () => {
  let primary: PgServer;
  let standby: PgServer;
  let app: FastifyInstance;
  let fhir: FhirClient;

  beforeAll(async () => {
    primary = await startPrimary();
    standby = await startStandby(primary, { synchronous: true });
    const databaseUrl = `postgres://postgres@127.0.0.1:${primary.port},127.0.0.1:${standby.port}/postgres?target_session_attrs=read-write`;
    app = await assembleApp(
      loadConfig({ DATABASE_URL: databaseUrl, AMBIENT_PUBLIC_URL: 'http://fhir.test:8080', LOG_LEVEL: 'silent' }),
    );
    await app.ready();
    const admin = openDatabase(databaseUrl);
    const username = `failover-${randomUUID()}`;
    await new AccountStore(admin).create({ username, password: 'pw-failover-1', scopes: ['system/*.cruds'] });
    await admin.close();
    fhir = fhirClient(app, await passwordToken(app, username, 'pw-failover-1'));
  }, 120_000);
  afterAll(async () => {
    await app?.close();
    removeServers([primary, standby]);
  });

  const create = (family: string) => fhir.create({ resourceType: 'Patient', name: [{ family }] });

  it('writes to the primary while the standby streams synchronously', async () => {
    const created = await create('BeforeFailover');
    expect(created.statusCode).toBe(201);
    const [replication] = await sql<{ sync_state: string; state: string }>(
      primary.url,
      'SELECT sync_state, state FROM pg_stat_replication',
    );
    expect(replication).toEqual({ sync_state: 'sync', state: 'streaming' });
    // The standby refuses writes: the server did not pick it.
    expect((await sql<{ standby: boolean }>(standby.url, 'SELECT pg_is_in_recovery() AS standby'))[0].standby).toBe(
      true,
    );
  });

  it('keeps every acknowledged write, fails in-flight writes with 503, and writes to the promoted standby', async () => {
    const acknowledged: string[] = [];
    const statuses = new Set<number>();
    let unavailableAnswer: { retryAfter: unknown; body: any } | undefined;
    let writing = true;
    const writer = (async () => {
      for (let i = 0; writing; i++) {
        const res = await create(`Writer${i}`);
        statuses.add(res.statusCode);
        if (res.statusCode === 201) acknowledged.push(res.json().id as string);
        else if (res.statusCode === 503) {
          unavailableAnswer ??= { retryAfter: res.headers['retry-after'], body: res.json() };
          await new Promise((resolve) => setTimeout(resolve, 100));
        }
      }
    })();
    await expect.poll(() => acknowledged.length, { timeout: 20_000 }).toBeGreaterThan(10);
    const beforeCrash = acknowledged.length;

    primary.stop('immediate');
    await expect.poll(() => statuses.has(503), { timeout: 20_000 }).toBe(true);
    // A read while there is no primary: retried on the server found next, so it waits for the promotion.
    const read = fhir.get(`/fhir/Patient/${acknowledged[0]}`);
    standby.promote();
    const promotedAt = Date.now();
    expect((await read).statusCode).toBe(200);
    await expect.poll(() => acknowledged.length, { timeout: 20_000 }).toBeGreaterThan(beforeCrash + 10);
    writing = false;
    await writer;

    // Service came back within seconds of the promotion.
    expect(Date.now() - promotedAt).toBeLessThan(15_000);
    expect([...statuses].sort()).toEqual([201, 503]);
    expect(unavailableAnswer?.retryAfter).toBe('2');
    expect(unavailableAnswer?.body).toMatchObject({
      resourceType: 'OperationOutcome',
      issue: [{ severity: 'error', code: 'transient' }],
    });
    // Every acknowledged write is on the new primary.
    const stored = await sql<{ id: string }>(standby.url, "SELECT id FROM resource WHERE type = 'Patient'");
    const ids = new Set(stored.map((r) => r.id));
    expect(acknowledged.filter((id) => !ids.has(id))).toEqual([]);
    const readBack = await fhir.get(`/fhir/Patient/${acknowledged[acknowledged.length - 1]}`);
    expect(readBack.statusCode).toBe(200);
    const ready = await app.inject({ url: '/readyz' });
    expect(ready.json()).toEqual({ status: 'ready' });
  }, 120_000);
});
