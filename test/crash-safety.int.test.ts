// An acknowledged write survives kill -9: writes stream into a real server process, which is killed
// with SIGKILL mid-stream; after a restart every acknowledged write reads back exactly as answered, and
// the history holds no version the server did not finish writing.
import { randomUUID } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { AccountStore } from '../src/auth/accounts.js';
import { migrate } from '../src/storage/migrate.js';
import { openDatabase } from '../src/storage/open-database.js';
import { BACKENDS, testDatabase } from './support/databases.js';
import type { TestDatabase } from './support/databases.js';
import { fhirClient, passwordToken } from './support/fhir-client.js';
import { httpInject } from './support/http-inject.js';
import { startServerProcess } from './support/server-process.js';

const CASES = [
  ...BACKENDS.map((backend) => ({ backend, name: backend, env: {} })),
  { backend: 'sqlite' as const, name: 'sqlite, synchronous=normal', env: { AMBIENT_SQLITE_SYNCHRONOUS: 'normal' } },
];

describe.each(CASES)('crash safety on $name', ({ backend, env: extraEnv }) => {
  const databases: TestDatabase[] = [];
  afterAll(async () => {
    for (const db of databases) await db.dispose();
  });

  it('keeps every acknowledged write after SIGKILL', async () => {
    const database = await testDatabase(backend);
    databases.push(database);
    const db = openDatabase(database.url);
    await migrate(db);
    const username = `crash-${randomUUID()}`;
    const password = `pw-${randomUUID()}`;
    await new AccountStore(db).create({ username, password });
    await db.close();

    const env = { DATABASE_URL: database.url, ...extraEnv };
    const first = await startServerProcess(env);
    const toFirst = httpInject(first.url);
    const fhir = fhirClient(toFirst, await passwordToken(toFirst, username, password));
    const acknowledged = new Map<string, string>();
    let stop = false;
    const writer = async (n: number) => {
      for (let i = 0; !stop; i++) {
        try {
          const res = await fhir.create({
            resourceType: 'Patient',
            name: [{ family: `Crash${n}`, given: [String(i)] }],
          });
          if (res.statusCode !== 201) throw new Error(`unexpected ${res.statusCode}`);
          const body = res.json<{ id: string }>();
          acknowledged.set(body.id, JSON.stringify(body));
        } catch {
          return; // the server died under us: this write was never acknowledged
        }
      }
    };
    const writers = Array.from({ length: 8 }, (_, n) => writer(n));
    while (acknowledged.size < 150) await new Promise((r) => setTimeout(r, 10));
    first.child.kill('SIGKILL');
    expect(await first.exited).toBe('SIGKILL');
    stop = true;
    await Promise.all(writers);

    toFirst.close();

    const second = await startServerProcess(env);
    const toSecond = httpInject(second.url);
    try {
      const after = fhirClient(toSecond, await passwordToken(toSecond, username, password));
      for (const [id, body] of acknowledged) {
        const res = await after.get(`/fhir/Patient/${id}`);
        expect(res.statusCode).toBe(200);
        expect(res.body).toBe(body);
      }
      // Everything in the history is whole: each version reads back, with its content.
      const history = await after.get('/fhir/Patient/_history?_count=1000');
      const entries = history.json<{ entry?: { resource?: { id: string } }[] }>().entry ?? [];
      expect(entries.length).toBeGreaterThanOrEqual(acknowledged.size);
      for (const entry of entries) expect(entry.resource?.id).toBeTypeOf('string');
    } finally {
      toSecond.close();
      second.child.kill('SIGTERM');
      expect(await second.exited).toBe(0);
    }
  });
});
