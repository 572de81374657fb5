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
import type { TestDatabase } from './databases.js';

export interface TestApp {
  readonly app: FastifyInstance;
  readonly config: Config;
  readonly database: TestDatabase;
  readonly accounts: AccountStore;
  /** A fresh account with these scopes (default: everything) and a token for it from the token endpoint. */
  token(scopes?: string, options?: { rateLimit?: number }): Promise<string>;
  close(): Promise<void>;
}

export const TEST_PUBLIC_URL = 'http://fhir.test:8080';

export async function startTestApp(
  backend: 'sqlite' | 'postgres',
  env: Record<string, string> = {},
  options: { logger?: Logger } = {},
): Promise<TestApp> {
  const database = await testDatabase(backend);
  const config = loadConfig({
    DATABASE_URL: database.url,
    AMBIENT_PUBLIC_URL: TEST_PUBLIC_URL,
    LOG_LEVEL: 'silent',
    ...env,
  });
  const app = await assembleApp(config, options.logger);
  await app.ready();
  const adminDb = openDatabase(database.url);
  const accounts = new AccountStore(adminDb);
  return {
    app,
    config,
    database,
    accounts,
    async token(scopes = 'system/*.cruds scribe.read scribe.write', options = {}) {
      const username = `user-${randomUUID()}`;
      const password = `pw-${randomUUID()}`;
      await accounts.create({ username, password, scopes: scopes.split(' '), rateLimit: options.rateLimit ?? null });
      const res = await app.inject({
        method: 'POST',
        url: '/v1/ambient/api/auth/token',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        payload: new URLSearchParams({ username, password }).toString(),
      });
      if (res.statusCode !== 200) throw new Error(`token request failed: ${res.statusCode} ${res.body}`);
      return (res.json() as { access_token: string }).access_token;
    },
    async close() {
      await app.close();
      await adminDb.close();
      await database.dispose();
    },
  };
}
