// Reads on a streaming replica (DATABASE_READ_URLS) with read-your-writes, for real: a primary and an
// asynchronous standby started by the test. Searches, reads by id, versions and history go to the
// replica, and so does export work. Pausing the standby's replay makes visible who answers: an account
// that never wrote gets the replica's (older) view, the account that wrote sees its write, an export
// sees everything written before it started, a replica that lags too long or stops answering is skipped.
// Then a synchronous standby behind `serve` processes (one or two workers, DATABASE_URL naming one host
// or both): the searches of an account that never wrote run on the standby, counted by the standby's
// own pg_stat_statements and by the server's ambient_fhir_pg_replica_reads_total.
import { randomUUID } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { assembleApp } from '../src/assemble.js';
import { AccountStore } from '../src/auth/accounts.js';
import { loadConfig } from '../src/config.js';
import { openDatabase } from '../src/storage/open-database.js';
import { BulkClient } from './support/bulk-export-client.js';
import { FULL } from './support/full-tests.js';
import {
  freePort,
  postgresServersUnavailable,
  removeServers,
  startPrimary,
  startStandby,
  statementStatsAvailable,
} from './support/pg-servers.js';
import type { PgServer } from './support/pg-servers.js';
import { fhirClient, passwordToken } from './support/fhir-client.js';
import type { FhirClient } from './support/fhir-client.js';
import { httpInject } from './support/http-inject.js';
import { startServerProcess } from './support/server-process.js';
import { migrate } from '../src/storage/migrate.js';

const unavailable = postgresServersUnavailable();
if (unavailable) console.warn(`replica suite skipped: ${unavailable}`);

const MAX_LAG_MS = 2000;

async function onServer<T = unknown>(url: string, text: string): Promise<T[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query(text)).rows as T[];
  } finally {
    await client.end();
  }
}

/**
 * Executions of search statements (those reading idx_string) a server has run, from its own
 * pg_stat_statements: exact at once, where pg_stat_database's counters reach the view only when each
 * connection reports them (at most once a second; once idle, ten seconds later).
 */
async function searchStatements(url: string): Promise<number> {
  const [row] = await onServer<{ calls: string | null }>(
    url,
    `SELECT sum(calls) AS calls FROM pg_stat_statements WHERE query LIKE '%idx_string%' AND query NOT LIKE 'INSERT%' AND query NOT LIKE 'DELETE%'`,
  );
  return Number(row.calls ?? 0);
}

/** A counter of the Prometheus text a server's metrics listener answers. */
async function metric(port: number, name: string, labels: string): Promise<number> {
  const res = await fetch(`http://127.0.0.1:${port}/metrics`);
  const line = (await res.text()).split('\n').find((l) => l.startsWith(`${name}{${labels}}`));
  return Number(line?.split(' ')[1] ?? NaN);
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

const noStatementStats = unavailable ?? (statementStatsAvailable() ? undefined : 'no pg_stat_statements module');
if (!unavailable && noStatementStats) console.warn(`synchronous standby suite skipped: ${noStatementStats}`);

describe.skipIf(noStatementStats)('a synchronous standby behind serve processes', () => {
  let primary: PgServer;
  let standby: PgServer;
  let accounts: AccountStore;
  let admin: ReturnType<typeof openDatabase>;

  beforeAll(async () => {
    primary = await startPrimary({ statementStats: true });
    standby = await startStandby(primary, { synchronous: true });
    await onServer(primary.url, 'CREATE EXTENSION pg_stat_statements');
    admin = openDatabase(primary.url);
    await migrate(admin);
    accounts = new AccountStore(admin);
  }, 120_000);
  afterAll(async () => {
    await admin?.close();
    removeServers([primary, standby]);
  });

  const cases: [string, string, number][] = [
    ['serve', 'one host', 1],
    ['serve --workers 2', 'both hosts', 2],
    ['serve --workers 2', 'one host', 2],
    ['serve', 'both hosts', 1],
  ];
  // `npm test`: the first two (one process and two workers, one host and both hosts); the full run all four.
  it.each(FULL ? cases : cases.slice(0, 2))(
    '%s with DATABASE_URL naming %s: 300 searches of an account that never wrote run on the standby',
    async (_command, hosts, workers) => {
      const databaseUrl =
        hosts === 'one host'
          ? primary.url
          : `postgres://postgres@127.0.0.1:${standby.port},127.0.0.1:${primary.port}/postgres?target_session_attrs=read-write`;
      const metricsPort = await freePort();
      const server = await startServerProcess(
        {
          DATABASE_URL: databaseUrl,
          DATABASE_READ_URLS: standby.url,
          AMBIENT_PUBLIC_URL: 'http://fhir.test:8080',
          AMBIENT_METRICS_PORT: String(metricsPort),
        },
        workers > 1 ? ['--workers', String(workers)] : [],
      );
      const target = httpInject(server.url);
      try {
        const client = async () => {
          const username = `sync-${randomUUID()}`;
          await accounts.create({ username, password: 'pw-replica-1', scopes: ['system/*.cruds'] });
          return fhirClient(target, await passwordToken(target, username, 'pw-replica-1'));
        };
        const writer = await client();
        const reader = await client();
        const family = `Sync${randomUUID().slice(0, 8)}`;
        expect((await writer.create({ resourceType: 'Patient', name: [{ family }] })).statusCode).toBe(201);
        const search = async () => {
          const res = await reader.get(`/fhir/Patient?family=${family}`);
          expect(res.statusCode, res.body).toBe(200);
          return res.json().total as number;
        };
        // The standby has the write (a synchronous commit waited for it) and replays it at once.
        await expect.poll(search, { timeout: 10_000 }).toBe(1);

        const onStandby = await searchStatements(standby.url);
        const onPrimary = await searchStatements(primary.url);
        const routed =
          workers === 1 ? await metric(metricsPort, 'ambient_fhir_pg_replica_reads_total', 'routing="replica"') : 0;
        for (let i = 0; i < 300; i++) expect(await search()).toBe(1);
        expect(await searchStatements(standby.url)).toBeGreaterThanOrEqual(onStandby + 300);
        expect(await searchStatements(primary.url)).toBe(onPrimary);
        // One process: its metrics say the same (with two, each worker counts its own).
        if (workers === 1) {
          expect(
            await metric(metricsPort, 'ambient_fhir_pg_replica_reads_total', 'routing="replica"'),
          ).toBeGreaterThanOrEqual(routed + 300);
          for (const routing of ['primary-own-write', 'primary-no-replica', 'primary-replica-failed']) {
            expect(
              await metric(metricsPort, 'ambient_fhir_pg_replica_reads_total', `routing="${routing}"`),
              routing,
            ).toBe(0);
          }
          expect(await metric(metricsPort, 'ambient_fhir_pg_replica_lag_seconds', 'replica="0"')).toBeLessThan(5);
        }
        // The writer's own searches still see its write (on whichever server has replayed it).
        expect((await writer.get(`/fhir/Patient?family=${family}`)).json().total).toBe(1);
      } finally {
        target.close();
        server.child.kill('SIGTERM');
        await server.exited;
      }
    },
    120_000,
  );
});
