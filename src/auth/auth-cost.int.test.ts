// The cost of the bearer check per request (docs/auth.md "The hot path"), counted in database statements
// rather than timed: for a token it has seen, the check reads the auth state version (one single-row
// query) and nothing else, whatever the account's rate limit; concurrent requests share that read. The
// timings live in the benchmark: `node bench/auth-cost.mjs` (docs/auth.md "Measured cost").
import { randomUUID } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../config.js';
import { migrate } from '../storage/migrate.js';
import { openDatabase } from '../storage/open-database.js';
import type { SqlDatabase } from '../storage/sql/database.js';
import { BACKENDS, testDatabase } from '../../test/support/databases.js';
import { bearer } from '../../test/support/fhir-client.js';
import { logStatements } from '../../test/support/statement-log.js';
import type { TestDatabase } from '../../test/support/databases.js';
import { createAuthModule } from './auth-module.js';

const VERSION_READ = 'SELECT version FROM auth_state WHERE id = 1';

describe.each(BACKENDS)('statements of the bearer check on %s', (backend) => {
  let database: TestDatabase;
  let db: SqlDatabase;
  let auth: Awaited<ReturnType<typeof createAuthModule>>;
  const log: string[] = [];
  const reply = { headers: () => reply, header: () => reply } as unknown as FastifyReply;
  const requestWith = (token: string) =>
    ({
      headers: bearer(token),
      ip: '127.0.0.1',
      method: 'GET',
      url: '/fhir/Patient/x',
      id: 'cost',
    }) as unknown as FastifyRequest;
  let token: string;
  let limitedToken: string;

  beforeAll(async () => {
    database = await testDatabase(backend);
    const raw = openDatabase(database.url);
    await migrate(raw);
    db = logStatements(raw, log);
    auth = await createAuthModule(loadConfig({ DATABASE_URL: database.url }), db);
    const password = 'cost-password';
    const unlimited = await auth.accounts.create({ username: `cost-${randomUUID()}`, password });
    const limited = await auth.accounts.create({ username: `cost-${randomUUID()}`, password, rateLimit: 1_000_000 });
    const [{ version }] = await db.query<{ version: number }>(VERSION_READ);
    token = (await auth.tokens.issue(unlimited.id, 'system/*.cruds', Number(version), unlimited.tokenGeneration)).token;
    limitedToken = (await auth.tokens.issue(limited.id, 'system/*.cruds', Number(version), limited.tokenGeneration))
      .token;
  });

  afterAll(async () => {
    await auth?.close();
    await db?.close();
    await database?.dispose();
  });

  /** The statements `n` sequential checks of `token` issue, after one that fills the caches. */
  async function statementsOf(token: string, n: number): Promise<string[]> {
    await auth.authenticator.authenticate(requestWith(token), reply);
    log.length = 0;
    for (let i = 0; i < n; i++) await auth.authenticator.authenticate(requestWith(token), reply);
    return [...log];
  }

  it('reads only the auth state version per request for a cached token without a rate limit', async () => {
    expect(await statementsOf(token, 10)).toEqual(Array(10).fill(VERSION_READ));
  });

  it('and nothing more with the in-process rate limit', async () => {
    expect(await statementsOf(limitedToken, 10)).toEqual(Array(10).fill(VERSION_READ));
  });

  it('shares that read between concurrent requests: 32 at once issue at most two', async () => {
    await auth.authenticator.authenticate(requestWith(token), reply);
    log.length = 0;
    await Promise.all(Array.from({ length: 32 }, () => auth.authenticator.authenticate(requestWith(token), reply)));
    expect(log.length).toBeGreaterThanOrEqual(1);
    expect(log.length).toBeLessThanOrEqual(2);
    expect(new Set(log)).toEqual(new Set([VERSION_READ]));
  });
});
