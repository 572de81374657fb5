// The cost of the bearer check per request (docs/auth.md "Measured cost"). Skipped unless
// AMBIENT_AUTH_BENCH=1: `AMBIENT_AUTH_BENCH=1 npx vitest run src/auth/auth-cost.bench.test.ts`.
import { randomUUID } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../config.js';
import { migrate } from '../storage/migrate.js';
import { openDatabase } from '../storage/open-database.js';
import { BACKENDS, testDatabase } from '../../test/support/databases.js';
import { redisTestUrl } from '../../test/support/provided.js';
import { createAuthModule } from './auth-module.js';

const ENABLED = process.env.AMBIENT_AUTH_BENCH === '1';
const N = 20_000;

describe.skipIf(!ENABLED).each(BACKENDS)('bearer check cost on %s', (backend) => {
  const cleanups: (() => Promise<void>)[] = [];
  afterAll(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup();
  });

  it('measures', async () => {
    const database = await testDatabase(backend);
    const db = openDatabase(database.url);
    await migrate(db);
    const auth = await createAuthModule(loadConfig({ DATABASE_URL: database.url }), db);
    cleanups.push(async () => {
      await auth.close();
      await db.close();
      await database.dispose();
    });
    const limited = await auth.accounts.create({
      username: `bench-${randomUUID()}`,
      password: 'bench-password',
      rateLimit: 1_000_000,
    });
    const unlimited = await auth.accounts.create({ username: `bench-${randomUUID()}`, password: 'bench-password' });
    const reply = { headers: () => reply, header: () => reply } as unknown as FastifyReply;
    const requestWith = (token: string) =>
      ({
        headers: { authorization: `Bearer ${token}` },
        ip: '127.0.0.1',
        method: 'GET',
        url: '/fhir/Patient/x',
        id: 'bench',
      }) as unknown as FastifyRequest;

    const results: Record<string, string> = {};
    const time = async (name: string, n: number, fn: (i: number) => Promise<unknown>, concurrency = 1) => {
      for (let i = 0; i < Math.min(200, n); i++) await fn(i);
      const started = process.hrtime.bigint();
      let next = 0;
      await Promise.all(
        Array.from({ length: concurrency }, async () => {
          while (next < n) await fn(next++);
        }),
      );
      const micros = Number(process.hrtime.bigint() - started) / 1000 / n;
      results[name] = `${micros.toFixed(1)} µs/request`;
    };

    const version = await db.query<{ version: number }>('SELECT version FROM auth_state WHERE id = 1');
    const issue = async (accountId: string) =>
      (await auth.tokens.issue(accountId, 'system/*.cruds', Number(version[0].version))).token;
    const token = await issue(unlimited.id);
    const limitedToken = await issue(limited.id);
    const request = requestWith(token);
    const limitedRequest = requestWith(limitedToken);

    await time('warm-up', N, () => auth.authenticator.authenticate(request, reply));
    await time('cached token, no rate limit', N, () => auth.authenticator.authenticate(request, reply));
    await time(
      'cached token, no rate limit, 32 concurrent',
      N,
      () => auth.authenticator.authenticate(request, reply),
      32,
    );
    await time('cached token, in-process rate limit', N, () => auth.authenticator.authenticate(limitedRequest, reply));
    await time('version read alone', N, () => db.query('SELECT version FROM auth_state WHERE id = 1'));
    const redisAuth = await createAuthModule(
      loadConfig({
        DATABASE_URL: database.url,
        REDIS_URL: redisTestUrl() ?? 'redis://127.0.0.1:6379',
      }),
      db,
    );
    cleanups.push(() => redisAuth.close());
    await time('cached token, Redis rate limit', N, () => redisAuth.authenticator.authenticate(limitedRequest, reply));
    const fresh = await Promise.all(Array.from({ length: 2000 }, () => issue(unlimited.id)));
    await time('first use of a token (ES256 verify)', fresh.length, (i) =>
      auth.authenticator.authenticate(requestWith(fresh[i]), reply),
    );

    delete results['warm-up'];
    console.log(
      `\n${backend}:\n${Object.entries(results)
        .map(([k, v]) => `  ${k.padEnd(48)} ${v}`)
        .join('\n')}`,
    );
    expect(Object.keys(results).length).toBe(6);
  });
});
