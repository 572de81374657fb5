// The key ring's reloads, counted in statements on both databases (signing-keys.ts, KeyRing.reload):
// concurrent reloads for one auth state version share one query; a reload for a newer version waits for
// the one in flight and runs its own.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrate } from '../storage/migrate.js';
import { openDatabase } from '../storage/open-database.js';
import type { SqlDatabase } from '../storage/sql/database.js';
import { BACKENDS, testDatabase } from '../../test/support/databases.js';
import type { TestDatabase } from '../../test/support/databases.js';
import { logStatements } from '../../test/support/statement-log.js';
import type { StatementLog } from '../../test/support/statement-log.js';
import { addSigningKey, KeyRing } from './signing-keys.js';

const LOAD = /^SELECT .* FROM signing_key /;

describe.each(BACKENDS)('statements of the key ring on %s', (backend) => {
  let database: TestDatabase;
  let raw: SqlDatabase;
  let kid: string;
  const log: StatementLog = [];

  beforeAll(async () => {
    database = await testDatabase(backend);
    raw = openDatabase(database.url);
    await migrate(raw);
    kid = (await addSigningKey(raw)).kid;
  });

  afterAll(async () => {
    await raw?.close();
    await database?.dispose();
  });

  const freshRing = () => {
    log.length = 0;
    return new KeyRing(logStatements(raw, log));
  };

  it('shares one query between concurrent reloads for one version, and sends none once it holds that version', async () => {
    const ring = freshRing();
    await Promise.all(Array.from({ length: 16 }, () => ring.sync(1)));
    expect(log).toEqual([expect.stringMatching(LOAD)]);
    expect(ring.has(kid)).toBe(true);
    await Promise.all([ring.sync(1), ring.signingKey(1), ring.jwks(1)]);
    expect(log).toHaveLength(1);
  });

  it('runs one more query for a newer version asked for meanwhile, shared by its callers too', async () => {
    const ring = freshRing();
    await Promise.all([ring.sync(1), ring.sync(1), ring.sync(2), ring.sync(2), ring.sync(2)]);
    expect(log).toEqual([expect.stringMatching(LOAD), expect.stringMatching(LOAD)]);
  });
});
