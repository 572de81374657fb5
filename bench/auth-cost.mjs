// The time of the bearer check per request (docs/auth.md "Measured cost"): calls `authenticate()`
// directly, N times per case after a warm-up, on a fresh database per backend. What the check issues to
// the database is pinned by a test instead (src/auth/auth-cost.int.test.ts); this only times it.
// Needs a build (`npm run build`, which `npm install` does).
//
// Usage: node bench/auth-cost.mjs [--n 20000] [--backends sqlite,postgres]
//   PostgreSQL: AMBIENT_TEST_POSTGRES_URL (default postgres://postgres@127.0.0.1:5432/test), in a fresh
//   schema dropped afterwards; Redis: AMBIENT_TEST_REDIS_URL (default redis://127.0.0.1:6379).
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { createAuthModule } from '../dist/auth/auth-module.js';
import { loadConfig } from '../dist/config.js';
import { migrate } from '../dist/storage/migrate.js';
import { openDatabase } from '../dist/storage/open-database.js';

const { values } = parseArgs({
  options: { n: { type: 'string', default: '20000' }, backends: { type: 'string', default: 'sqlite,postgres' } },
});
const N = Number(values.n);
const POSTGRES = process.env.AMBIENT_TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const REDIS = process.env.AMBIENT_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

async function freshDatabase(backend) {
  if (backend === 'sqlite') {
    const dir = mkdtempSync(join(tmpdir(), 'ambient-auth-cost-'));
    return { url: `sqlite:${join(dir, 'bench.db')}`, dispose: async () => rmSync(dir, { recursive: true }) };
  }
  const schema = `bench_auth_${process.pid}`;
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

async function measure(backend) {
  const database = await freshDatabase(backend);
  const db = openDatabase(database.url);
  const closing = [];
  try {
    await migrate(db);
    const auth = await createAuthModule(loadConfig({ DATABASE_URL: database.url }), db);
    closing.push(() => auth.close());
    const password = 'bench-password';
    const limited = await auth.accounts.create({ username: `bench-${randomUUID()}`, password, rateLimit: 1_000_000 });
    const unlimited = await auth.accounts.create({ username: `bench-${randomUUID()}`, password });
    const reply = { headers: () => reply, header: () => reply };
    const requestWith = (token) => ({
      headers: { authorization: `Bearer ${token}` },
      ip: '127.0.0.1',
      method: 'GET',
      url: '/fhir/Patient/x',
      id: 'bench',
    });
    const results = {};
    const time = async (name, n, fn, concurrency = 1) => {
      for (let i = 0; i < Math.min(200, n); i++) await fn(i);
      const started = process.hrtime.bigint();
      let next = 0;
      await Promise.all(
        Array.from({ length: concurrency }, async () => {
          while (next < n) await fn(next++);
        }),
      );
      results[name] = `${(Number(process.hrtime.bigint() - started) / 1000 / n).toFixed(1)} µs/request`;
    };
    const [{ version }] = await db.query('SELECT version FROM auth_state WHERE id = 1');
    const issue = async (accountId) => (await auth.tokens.issue(accountId, 'system/*.cruds', Number(version))).token;
    const request = requestWith(await issue(unlimited.id));
    const limitedRequest = requestWith(await issue(limited.id));

    await time('warm-up', N, () => auth.authenticator.authenticate(request, reply));
    delete results['warm-up'];
    await time('cached token, no rate limit', N, () => auth.authenticator.authenticate(request, reply));
    await time(
      'cached token, no rate limit, 32 concurrent',
      N,
      () => auth.authenticator.authenticate(request, reply),
      32,
    );
    await time('cached token, in-process rate limit', N, () => auth.authenticator.authenticate(limitedRequest, reply));
    await time('version read alone', N, () => db.query('SELECT version FROM auth_state WHERE id = 1'));
    const redisAuth = await createAuthModule(loadConfig({ DATABASE_URL: database.url, REDIS_URL: REDIS }), db);
    closing.push(() => redisAuth.close());
    await time('cached token, Redis rate limit', N, () => redisAuth.authenticator.authenticate(limitedRequest, reply));
    const fresh = await Promise.all(Array.from({ length: 2000 }, () => issue(unlimited.id)));
    await time('first use of a token (ES256 verify)', fresh.length, (i) =>
      auth.authenticator.authenticate(requestWith(fresh[i]), reply),
    );
    console.log(`${backend}:`);
    for (const [name, value] of Object.entries(results)) console.log(`  ${name.padEnd(48)} ${value}`);
  } finally {
    for (const close of closing.reverse()) await close();
    await db.close();
    await database.dispose();
  }
}

for (const backend of values.backends.split(',')) await measure(backend);
