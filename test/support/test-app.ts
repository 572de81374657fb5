// An app on a fresh test database, assembled exactly as `serve` assembles it, with real accounts and
// tokens from the token endpoint, for tests that talk HTTP (app.inject) the way a client does.
import { randomUUID } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { assembleApp } from '../../src/assemble.js';
import { AccountStore } from '../../src/auth/accounts.js';
import { loadConfig } from '../../src/config.js';
import type { Config } from '../../src/config.js';
import type { Logger } from '../../src/logger.js';
import { openDatabase } from '../../src/storage/open-database.js';
import { testDatabase } from './databases.js';
import { fhirClient, passwordToken } from './fhir-client.js';
import type { FhirClient } from './fhir-client.js';
import type { TestDatabase } from './databases.js';
import { startProcessPair } from './process-pair.js';
import { redisTestUrl } from './provided.js';

export interface TestApp {
  readonly app: FastifyInstance;
  readonly config: Config;
  readonly database: TestDatabase;
  readonly accounts: AccountStore;
  /** A fresh account with these scopes (default: everything) and a token for it from the token endpoint. */
  token(scopes?: string, options?: { rateLimit?: number }): Promise<string>;
  /** A client of the app with such a token. */
  client(scopes?: string, options?: { rateLimit?: number }): Promise<FhirClient>;
  close(): Promise<void>;
}

export const TEST_PUBLIC_URL = 'http://fhir.test:8080';

/**
 * AMBIENT_TEST_PROCESSES=2 (the `processes` vitest project): the app is two `serve` processes on one
 * PostgreSQL database, each request going to the other one than the last (support/process-pair.ts),
 * with Redis for their shared counters when there is one. SQLite allows one writing process, so every
 * suite runs on PostgreSQL there.
 */
export const TEST_PROCESSES = Number(process.env.AMBIENT_TEST_PROCESSES ?? '1');

export async function startTestApp(
  backend: 'sqlite' | 'postgres',
  env: Record<string, string> = {},
  options: { logger?: Logger } = {},
): Promise<TestApp> {
  const database = await testDatabase(TEST_PROCESSES > 1 ? 'postgres' : backend);
  const settings = {
    DATABASE_URL: database.url,
    AMBIENT_PUBLIC_URL: TEST_PUBLIC_URL,
    LOG_LEVEL: 'silent',
    ...env,
  };
  const config = loadConfig(settings);
  const app = TEST_PROCESSES > 1 ? await processPairApp(settings) : await assembleApp(config, options.logger);
  await app.ready();
  const adminDb = openDatabase(database.url);
  const accounts = new AccountStore(adminDb);
  const token: TestApp['token'] = async (scopes = 'system/*.cruds scribe.read scribe.write', options = {}) => {
    const username = `user-${randomUUID()}`;
    const password = `pw-${randomUUID()}`;
    await accounts.create({ username, password, scopes: scopes.split(' '), rateLimit: options.rateLimit ?? null });
    return passwordToken(app, username, password);
  };
  return {
    app,
    config,
    database,
    accounts,
    token,
    client: async (scopes, options) => fhirClient(app, await token(scopes, options)),
    async close() {
      await app.close();
      await adminDb.close();
      await database.dispose();
    },
  };
}

/** The two processes behind their front, as much of a FastifyInstance as the end-to-end suites use. */
async function processPairApp(settings: Record<string, string>): Promise<FastifyInstance> {
  const redisUrl = redisTestUrl();
  const pair = await startProcessPair({ ...settings, LOG_LEVEL: 'info', ...(redisUrl ? { REDIS_URL: redisUrl } : {}) });
  const app = {
    inject: pair.inject,
    ready: async () => app,
    listen: async () => pair.url,
    close: () => pair.close(),
  };
  return app as unknown as FastifyInstance;
}
