// With REDIS_URL set, rate limits and login lockouts are counted once for every server process: two
// apps on one database and one Redis. Needs a Redis (AMBIENT_TEST_REDIS_URL, default 127.0.0.1:6379);
// without one the shared-counter suite is skipped (test/global-setup.ts says so once).
import { randomInt, randomUUID } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { assembleApp } from '../src/assemble.js';
import { loadConfig } from '../src/config.js';
import { openDatabase } from '../src/storage/open-database.js';
import type { SqlDatabase } from '../src/storage/sql/database.js';
import { BACKENDS, sqliteTestDatabase, testDatabase } from './support/databases.js';
import type { TestDatabase } from './support/databases.js';
import { fhirClient } from './support/fhir-client.js';
import { tokenRequest } from './support/token-requests.js';
import { redisTestUrl } from './support/provided.js';
import { AccountStore } from '../src/auth/accounts.js';

const REDIS_URL = redisTestUrl();

describe.skipIf(!REDIS_URL).each(BACKENDS)('limits shared through Redis on %s', (backend) => {
  let database: TestDatabase;
  let admin: SqlDatabase;
  let accounts: AccountStore;
  let one: FastifyInstance;
  let two: FastifyInstance;

  const makeApp = async () => {
    const config = loadConfig({
      DATABASE_URL: database.url,
      REDIS_URL: REDIS_URL!,
      AMBIENT_LOGIN_MAX_FAILURES_PER_USER: '4',
      AMBIENT_LOGIN_MAX_FAILURES_PER_ADDRESS: '6',
    });
    const app = await assembleApp(config);
    await app.ready();
    return app;
  };

  const login = (app: FastifyInstance, username: string, password: string, remoteAddress = '127.0.0.1') =>
    tokenRequest(app, { username, password }, { remoteAddress });

  const read = (app: FastifyInstance, token: string) => fhirClient(app, token).get(`/fhir/Patient/${randomUUID()}`);

  beforeAll(async () => {
    database = await testDatabase(backend);
    one = await makeApp();
    two = await makeApp();
    admin = openDatabase(database.url);
    accounts = new AccountStore(admin);
  });

  afterAll(async () => {
    await one?.close();
    await two?.close();
    await admin?.close();
    await database?.dispose();
  });

  it('one account limit across two server processes', async () => {
    const username = `redis-${randomUUID()}`;
    const password = `pw-${randomUUID()}`;
    await accounts.create({ username, password, rateLimit: 4 });
    const token = (await login(one, username, password)).json<{ access_token: string }>().access_token;
    const seen = [];
    for (const app of [one, two, one, two]) {
      const res = await read(app, token);
      expect(res.statusCode).toBe(404);
      seen.push(res.headers['ratelimit-remaining']);
    }
    expect(seen).toEqual(['3', '2', '1', '0']);
    for (const app of [one, two]) {
      const limited = await read(app, token);
      expect(limited.statusCode).toBe(429);
      expect(Number(limited.headers['retry-after'])).toBeGreaterThan(0);
    }
    // Another account is not slowed.
    const other = `redis-${randomUUID()}`;
    await accounts.create({ username: other, password, rateLimit: 4 });
    const otherToken = (await login(two, other, password)).json<{ access_token: string }>().access_token;
    expect((await read(one, otherToken)).statusCode).toBe(404);
  });

  it('one username lockout across two server processes', async () => {
    const username = `redis-${randomUUID()}`;
    const password = `pw-${randomUUID()}`;
    await accounts.create({ username, password });
    const address = `127.${randomInt(1, 255)}.${randomInt(1, 255)}.${randomInt(1, 255)}`;
    for (const app of [one, two, one, two]) {
      expect((await login(app, username, 'wrong-password', address)).statusCode).toBe(401);
    }
    for (const app of [one, two]) {
      const locked = await login(app, username, password, address);
      expect(locked.statusCode).toBe(429);
      expect(Number(locked.headers['retry-after'])).toBeGreaterThan(800);
    }
  });

  it('one address lockout across two server processes', async () => {
    const address = `127.${randomInt(1, 255)}.${randomInt(1, 255)}.${randomInt(1, 255)}`;
    for (let i = 0; i < 6; i++) {
      const res = await login(i % 2 ? one : two, `spray-${randomUUID()}`, 'wrong-password', address);
      expect(res.statusCode).toBe(401);
    }
    expect((await login(one, `spray-${randomUUID()}`, 'wrong-password', address)).statusCode).toBe(429);
    expect((await login(two, `spray-${randomUUID()}`, 'wrong-password', address)).statusCode).toBe(429);
  });

  it('counts attempts before the password check: a burst over two processes gets at most the threshold of 401s', async () => {
    const username = `redis-${randomUUID()}`;
    const password = `pw-${randomUUID()}`;
    await accounts.create({ username, password });
    const address = `127.${randomInt(1, 255)}.${randomInt(1, 255)}.${randomInt(1, 255)}`;
    const answers = await Promise.all(
      Array.from({ length: 60 }, (_, i) =>
        login(i % 2 ? one : two, username, i === 59 ? password : `wrong-${i}`, address),
      ),
    );
    const statuses = answers.map((r) => r.statusCode);
    expect(statuses.filter((s) => s === 401).length).toBeLessThanOrEqual(4);
    expect(statuses.filter((s) => s === 429).length).toBeGreaterThanOrEqual(56);
    expect(statuses[59]).toBe(429);
  });

  it('account unlock clears a lockout counted in Redis, for both processes', async () => {
    const username = `redis-${randomUUID()}`;
    const password = `pw-${randomUUID()}`;
    await accounts.create({ username, password });
    const address = `127.${randomInt(1, 255)}.${randomInt(1, 255)}.${randomInt(1, 255)}`;
    for (const app of [one, two, one, two]) await login(app, username, 'wrong-password', address);
    expect((await login(one, username, password, address)).statusCode).toBe(429);
    await accounts.unlock(username);
    expect((await login(two, username, password, address)).statusCode).toBe(200);
    expect((await login(one, username, password, address)).statusCode).toBe(200);
  });
});

// Needs no Redis: it is about the one that is not there.
describe('REDIS_URL without a Redis', () => {
  it('refuses to start when REDIS_URL names a Redis that is not there', async () => {
    const database = sqliteTestDatabase();
    try {
      const config = loadConfig({ DATABASE_URL: database.url, REDIS_URL: 'redis://127.0.0.1:1' });
      await expect(assembleApp(config)).rejects.toThrow(/Cannot connect to Redis at redis:\/\/127\.0\.0\.1:1/);
    } finally {
      await database.dispose();
    }
  });
});
