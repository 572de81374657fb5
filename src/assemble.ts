// The composition root: config → database → definitions → auth → app. Used by `serve` and by the
// end-to-end tests, so what the tests run is what production runs.
import { readFileSync } from 'node:fs';
import type { FastifyInstance } from 'fastify';
import { buildApp } from './app.js';
import { AccountStore } from './auth/accounts.js';
import { createAuthModule } from './auth/auth-module.js';
import type { AuthModule } from './auth/principal.js';
import type { Config } from './config.js';
import { loadR4Definitions } from './definitions/registry.js';
import type { Logger } from './logger.js';
import { migrate } from './storage/migrate.js';
import { openDatabase } from './storage/open-database.js';

declare module 'fastify' {
  interface FastifyInstance {
    /** The accounts the database held at start-up (serve's start-up line). */
    accountCount?: number;
  }
}

export async function assembleApp(config: Config, logger?: Logger): Promise<FastifyInstance> {
  const definitions = loadR4Definitions();
  const db = openDatabase(config.databaseUrl, config);
  let auth: AuthModule | undefined;
  try {
    await migrate(db);
    // What searches need, started now where the first search's budget would be spent starting it.
    await db.warmUp();
    const https =
      config.tlsCertFile && config.tlsKeyFile
        ? { cert: readFileSync(config.tlsCertFile), key: readFileSync(config.tlsKeyFile) }
        : undefined;
    auth = await createAuthModule(config, db, logger);
    const accountCount = await new AccountStore(db).count();
    const app = await buildApp({ config, db, definitions, auth, logger, https });
    app.decorate('accountCount', accountCount);
    return app;
  } catch (error) {
    await auth?.close().catch(() => undefined);
    await db.close().catch(() => undefined);
    throw error;
  }
}
