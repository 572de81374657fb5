// What searching conditional criteria ahead of the write costs (docs/storage.md "Searches and conditional
// criteria of a write"): ms per conditional create (If-None-Exist on an identifier, no match), per plain
// create and per transaction Bundle of 5 creates, through app.inject (no sockets), one client, on a fresh
// database per backend, runs alternating between two builds so that both see the same minutes.
// Needs a build of each (`npm run build`).
//
// Usage: node bench/conditional-writes.mjs [--before /path/to/other/dist] [--n 1000] [--rounds 3]
//   [--backends sqlite,postgres]; PostgreSQL from AMBIENT_TEST_POSTGRES_URL (default
//   postgres://postgres@127.0.0.1:5432/test), in a fresh schema dropped afterwards.
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import pg from 'pg';

const { values } = parseArgs({
  options: {
    before: { type: 'string' },
    n: { type: 'string', default: '1000' },
    rounds: { type: 'string', default: '3' },
    backends: { type: 'string', default: 'sqlite,postgres' },
  },
});
const N = Number(values.n);
const POSTGRES = process.env.AMBIENT_TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const builds = { after: resolve('dist'), ...(values.before ? { before: resolve(values.before) } : {}) };

async function freshDatabase(backend, name) {
  if (backend === 'sqlite') {
    const dir = mkdtempSync(join(tmpdir(), 'ambient-cond-bench-'));
    return { url: `sqlite:${join(dir, 'bench.db')}`, dispose: async () => rmSync(dir, { recursive: true }) };
  }
  const schema = `bench_cond_${name}_${process.pid}`;
  const admin = async (sql) => {
    const client = new pg.Client({ connectionString: POSTGRES });
    await client.connect();
    await client.query(sql);
    await client.end();
  };
  await admin(`CREATE SCHEMA ${schema}`);
  const url = new URL(POSTGRES);
  url.searchParams.set('options', `-c search_path=${schema}`);
  return { url: url.toString(), dispose: () => admin(`DROP SCHEMA ${schema} CASCADE`) };
}

/** An app of one build on a fresh database, and a token for an account that may do everything. */
async function start(dist, backend, name) {
  const { assembleApp } = await import(join(dist, 'assemble.js'));
  const { loadConfig } = await import(join(dist, 'config.js'));
  const { openDatabase } = await import(join(dist, 'storage/open-database.js'));
  const { AccountStore } = await import(join(dist, 'auth/accounts.js'));
  const database = await freshDatabase(backend, name);
  const app = await assembleApp(loadConfig({ DATABASE_URL: database.url, LOG_LEVEL: 'silent' }));
  await app.ready();
  const adminDb = openDatabase(database.url);
  const username = `bench-${randomUUID()}`;
  const password = `pw-${randomUUID()}`;
  await new AccountStore(adminDb).create({ username, password, scopes: ['system/*.cruds'], rateLimit: null });
  const res = await app.inject({
    method: 'POST',
    url: '/v1/ambient/api/auth/token',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    payload: new URLSearchParams({ username, password }).toString(),
  });
  const headers = { authorization: `Bearer ${res.json().access_token}`, 'content-type': 'application/fhir+json' };
  return {
    app,
    headers,
    close: async () => {
      await app.close();
      await adminDb.close();
      await database.dispose();
    },
  };
}

const patient = (value) => ({
  resourceType: 'Patient',
  identifier: [{ system: 'urn:bench', value }],
  name: [{ family: 'Bench', given: ['Conditional'] }],
  birthDate: '1970-01-01',
});

const cases = {
  'plain create': () => ({ method: 'POST', url: '/fhir/Patient', payload: JSON.stringify(patient(randomUUID())) }),
  'conditional create': (s) => {
    const value = randomUUID();
    return {
      method: 'POST',
      url: '/fhir/Patient',
      headers: { ...s.headers, 'if-none-exist': `identifier=urn:bench|${value}` },
      payload: JSON.stringify(patient(value)),
    };
  },
  'transaction of 5 creates': () => ({
    method: 'POST',
    url: '/fhir',
    payload: JSON.stringify({
      resourceType: 'Bundle',
      type: 'transaction',
      entry: Array.from({ length: 5 }, () => ({
        resource: patient(randomUUID()),
        request: { method: 'POST', url: 'Patient' },
      })),
    }),
  }),
  'transaction of 5 ifNoneExist creates': () => ({
    method: 'POST',
    url: '/fhir',
    payload: JSON.stringify({
      resourceType: 'Bundle',
      type: 'transaction',
      entry: Array.from({ length: 5 }, () => {
        const value = randomUUID();
        return {
          resource: patient(value),
          request: { method: 'POST', url: 'Patient', ifNoneExist: `identifier=urn:bench|${value}` },
        };
      }),
    }),
  }),
};

async function run(server, make, n) {
  const started = performance.now();
  for (let i = 0; i < n; i++) {
    const request = make(server);
    const res = await server.app.inject({ headers: server.headers, ...request });
    if (res.statusCode >= 300) throw new Error(`${res.statusCode} ${res.body.slice(0, 300)}`);
  }
  return (performance.now() - started) / n;
}

for (const backend of values.backends.split(',')) {
  const servers = {};
  for (const [name, dist] of Object.entries(builds)) servers[name] = await start(dist, backend, name);
  try {
    for (const [label, make] of Object.entries(cases)) {
      const results = Object.fromEntries(Object.keys(builds).map((name) => [name, []]));
      for (const server of Object.values(servers)) await run(server, make, Math.min(100, N));
      for (let round = 0; round < Number(values.rounds); round++) {
        for (const [name, server] of Object.entries(servers)) results[name].push(await run(server, make, N));
      }
      const shown = Object.entries(results)
        .map(([name, ms]) => `${name} ${ms.map((m) => m.toFixed(3)).join(', ')} ms`)
        .join(' | ');
      console.log(`${backend} ${label}: ${shown}`);
    }
  } finally {
    for (const server of Object.values(servers)) await server.close();
  }
}
