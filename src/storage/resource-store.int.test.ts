// The storage contract: one suite, run against SQLite and PostgreSQL (needs the PostgreSQL server).
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AppError } from '../errors.js';
import { BACKENDS, testDatabase } from '../../test/support/databases.js';
import type { TestDatabase } from '../../test/support/databases.js';
import { migrate } from './migrate.js';
import { openDatabase } from './open-database.js';
import type { SqlDatabase } from './sql/database.js';
import { readAheadStatement, SqlResourceStore } from './sql-resource-store.js';
import type { FhirResource, IndexWriter } from './store.js';

const patient = (family: string): FhirResource => ({ resourceType: 'Patient', name: [{ family }] });

describe.each(BACKENDS)('ResourceStore on %s', (backend) => {
  let testDb: TestDatabase;
  let db: SqlDatabase;
  let store: SqlResourceStore;

  beforeAll(async () => {
    testDb = await testDatabase(backend);
    db = openDatabase(testDb.url);
    await migrate(db);
    store = new SqlResourceStore(db);
  });

  afterAll(async () => {
    await db.close();
    await testDb.dispose();
  });

  it('migrates once: a second run applies nothing', async () => {
    expect(await migrate(db)).toEqual([]);
  });

  it('creates with a server id, version 1 and meta set by the server', async () => {
    const { stored, created } = await store.create({
      ...patient('Create'),
      id: 'client-id',
      meta: { versionId: '99', lastUpdated: '2000-01-01T00:00:00Z', tag: [{ code: 'keep' }] },
    });
    expect(created).toBe(true);
    expect(stored.id).not.toBe('client-id');
    expect(stored.versionId).toBe(1);
    const body = JSON.parse(stored.content!);
    expect(body).toEqual({
      resourceType: 'Patient',
      id: stored.id,
      meta: { versionId: '1', lastUpdated: new Date(stored.lastUpdated).toISOString(), tag: [{ code: 'keep' }] },
      name: [{ family: 'Create' }],
    });
    const read = await store.read('Patient', stored.id);
    expect(read?.content).toBe(stored.content);
    expect(read?.deleted).toBe(false);
  });

  it('updates to version 2 and keeps version 1 for vread', async () => {
    const { stored: v1 } = await store.create(patient('Before'));
    const { stored: v2, created } = await store.update({ ...patient('After'), id: v1.id });
    expect(created).toBe(false);
    expect(v2.versionId).toBe(2);
    expect(JSON.parse((await store.vread('Patient', v1.id, 1))!.content!).name[0].family).toBe('Before');
    expect(JSON.parse((await store.vread('Patient', v1.id, 2))!.content!).name[0].family).toBe('After');
    expect(await store.vread('Patient', v1.id, 3)).toBeUndefined();
  });

  it('update-as-create takes the client id', async () => {
    const id = `uac-${randomUUID()}`;
    const { stored, created } = await store.update({ ...patient('Uac'), id });
    expect(created).toBe(true);
    expect(stored.id).toBe(id);
    expect(stored.versionId).toBe(1);
  });

  it('refuses a stale If-Match with 412 and changes nothing', async () => {
    const { stored } = await store.create(patient('Match'));
    await store.update({ ...patient('Match2'), id: stored.id }, { ifMatch: 1 });
    const stale = store.update({ ...patient('Lost'), id: stored.id }, { ifMatch: 1 });
    await expect(stale).rejects.toMatchObject({ code: 'precondition-failed' });
    await expect(stale).rejects.toBeInstanceOf(AppError);
    const current = await store.read('Patient', stored.id);
    expect(current?.versionId).toBe(2);
    expect(JSON.parse(current!.content!).name[0].family).toBe('Match2');
  });

  it('never loses one of many concurrent updates of one resource', async () => {
    const { stored } = await store.create(patient('Race'));
    const writers = 16;
    const results = await Promise.all(
      Array.from({ length: writers }, (_, i) => store.update({ ...patient(`Race${i}`), id: stored.id })),
    );
    const versions = results.map((r) => r.stored.versionId).sort((a, b) => a - b);
    expect(versions).toEqual(Array.from({ length: writers }, (_, i) => i + 2));
    const history = await store.history({ type: 'Patient', id: stored.id, count: 100 });
    expect(history.versions.map((v) => v.versionId)).toEqual(
      Array.from({ length: writers + 1 }, (_, i) => writers + 1 - i),
    );
  });

  it('lets concurrent update-as-creates of one new id both land, as versions 1 and 2', async () => {
    const id = `race-${randomUUID()}`;
    const results = await Promise.all([store.update({ ...patient('A'), id }), store.update({ ...patient('B'), id })]);
    expect(results.map((r) => r.stored.versionId).sort()).toEqual([1, 2]);
    expect(results.filter((r) => r.created)).toHaveLength(1);
  });

  it('deletes as a new version; deleting again changes nothing; unknown ids are undefined', async () => {
    const { stored } = await store.create(patient('Gone'));
    const deleted = await store.delete('Patient', stored.id);
    expect(deleted?.versionId).toBe(2);
    const current = await store.read('Patient', stored.id);
    expect(current?.deleted).toBe(true);
    expect(current?.content).toBeNull();
    expect((await store.delete('Patient', stored.id))?.versionId).toBe(2);
    expect(await store.delete('Patient', `never-${randomUUID()}`)).toBeUndefined();
    expect((await store.vread('Patient', stored.id, 2))?.operation).toBe('delete');
    // An update after a delete brings the resource back as a new version.
    const { stored: back, created } = await store.update({ ...patient('Back'), id: stored.id });
    expect(back.versionId).toBe(3);
    expect(created).toBe(true);
  });

  it('pages history newest first by a cursor, with _since, at type and system level', async () => {
    const type = 'Basic';
    const start = Date.now();
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      const { stored } = await store.create({ resourceType: type, code: { text: `h${i}` } });
      ids.push(stored.id);
    }
    const seen: string[] = [];
    let after;
    do {
      const page = await store.history({ type, since: start, count: 2, after });
      expect(page.versions.length).toBeLessThanOrEqual(2);
      seen.push(...page.versions.map((v) => v.id));
      after = page.next;
    } while (after);
    expect(seen).toEqual([...ids].reverse());
    const system = await store.history({ since: start, count: 1000 });
    expect(system.versions.map((v) => v.id)).toEqual(expect.arrayContaining(ids));
  });

  it('writes nothing when an index writer fails inside the transaction', async () => {
    const failing: IndexWriter = {
      write: async () => {
        throw new Error('index failure');
      },
      newRows: () => {
        throw new Error('index failure');
      },
    };
    const failingStore = new SqlResourceStore(db, [failing]);
    const id = `atomic-${randomUUID()}`;
    await expect(failingStore.update({ ...patient('Atomic'), id })).rejects.toThrow('index failure');
    expect(await store.read('Patient', id)).toBeUndefined();
    expect((await store.history({ type: 'Patient', id, count: 10 })).versions).toEqual([]);
  });

  it('gives index writers the stored resource: its rows when created, then its removal in the same transaction', async () => {
    const seen: { pk?: number; meta: unknown }[] = [];
    const recording: IndexWriter = {
      write: async (tx, pk, _type, resource) => {
        const [row] = await tx.query<{ deleted: number }>('SELECT deleted FROM resource WHERE pk = ?', [pk]);
        expect(row.deleted).toBe(1);
        seen.push({ pk, meta: resource?.meta ?? null });
      },
      newRows: (_type, resource) => {
        seen.push({ meta: resource.meta });
        return [];
      },
    };
    const recordingStore = new SqlResourceStore(db, [recording]);
    const { stored } = await recordingStore.create(patient('Indexed'));
    await recordingStore.delete('Patient', stored.id);
    expect(seen).toHaveLength(2);
    expect(seen[0].meta).toEqual({ versionId: '1', lastUpdated: new Date(stored.lastUpdated).toISOString() });
    expect(seen[1].meta).toBeNull();
  });

  it('writes nothing of a create whose index rows the database refuses', async () => {
    const refused: IndexWriter = {
      write: async () => undefined,
      // A NULL where idx_string requires a value: the database refuses the row, and with it the create.
      newRows: () => [
        {
          table: 'idx_string',
          pkColumn: 'pk',
          columns: ['sp', 'grp', 'norm', 'exact'],
          pgTypes: ['bigint', 'int', 'text', 'text'],
          rows: [[1, 0, null, 'x']],
        },
      ],
    };
    const id = `refused-${randomUUID()}`;
    await expect(new SqlResourceStore(db, [refused]).create(patient('Refused'), { id })).rejects.toThrow();
    expect(await store.read('Patient', id)).toBeUndefined();
    expect((await store.history({ type: 'Patient', id, count: 10 })).versions).toEqual([]);
  });

  it('commits a multi-resource transaction together, or nothing of it', async () => {
    const ok = await store.transaction(async (tx) => {
      const a = await tx.create(patient('TxA'));
      const b = await tx.update({ ...patient('TxB'), id: `tx-${randomUUID()}` });
      return [a.stored.id, b.stored.id];
    });
    for (const id of ok) expect((await store.read('Patient', id))?.versionId).toBe(1);
    const lostId = `tx-lost-${randomUUID()}`;
    await expect(
      store.transaction(async (tx) => {
        await tx.update({ ...patient('Lost'), id: lostId });
        throw new Error('abort');
      }),
    ).rejects.toThrow('abort');
    expect(await store.read('Patient', lostId)).toBeUndefined();
  });

  it("writes a transaction's creates together, each with its own content, history and rows, seen by its next statement", async () => {
    const linking: IndexWriter = {
      write: async () => undefined,
      newRows: (_type, resource) => [
        {
          table: 'resource_link',
          pkColumn: 'source_pk',
          columns: ['target_type', 'target_id'],
          pgTypes: ['text', 'text'],
          // The family too: the tricky texts below go through the database's array parameters as well.
          rows: [
            ['Group', `of-${String(resource.id)}`],
            ['Group', (resource.name as { family: string }[])[0].family],
          ],
        },
      ],
    };
    const linkingStore = new SqlResourceStore(db, [linking]);
    // Quotes, backslashes, a separator character and text outside the BMP, in each content.
    const tricky = [
      'a "quoted" \\ name',
      'record\u001eseparator',
      'emoji \u{1F600} and \u00e9',
      '',
      '{}',
      'NULL',
      'a, {b}',
    ];
    const alone = (await linkingStore.create(patient(tricky[0]))).stored.id; // a lone create, outside a transaction
    const { ids, seenInside } = await linkingStore.transaction(async (tx, executor) => {
      const created = [];
      for (const family of tricky) created.push((await tx.create(patient(family))).stored.id);
      const [{ n }] = await executor.query<{ n: number | string }>(
        `SELECT COUNT(*) AS n FROM resource WHERE id IN (${created.map(() => '?').join(', ')})`,
        created,
      );
      return { ids: created, seenInside: Number(n) };
    });
    expect(seenInside).toBe(tricky.length);
    for (const [i, id] of [...ids.entries(), [0, alone] as const]) {
      const read = await store.read('Patient', id);
      expect(JSON.parse(read!.content!).name).toEqual([{ family: tricky[i] }]);
      expect((await store.history({ type: 'Patient', id, count: 10 })).versions.map((v) => v.versionId)).toEqual([1]);
      const links = await db.query<{ target_id: string }>(
        'SELECT l.target_id FROM resource_link l JOIN resource r ON r.pk = l.source_pk WHERE r.type = ? AND r.id = ?',
        ['Patient', id],
      );
      expect(links.map((l) => l.target_id).sort()).toEqual([`of-${id}`, tricky[i]].sort());
    }
  });

  it('reads rows ahead for the updates and deletes of a transaction, each write then seeing the one before', async () => {
    const { stored: a } = await store.create(patient('AheadA'));
    const { stored: b } = await store.create(patient('AheadB'));
    const missing = `ahead-${randomUUID()}`;
    const results = await store.transaction(async (tx) => {
      await tx.readAhead([
        { type: 'Patient', id: a.id },
        { type: 'Patient', id: b.id },
        { type: 'Patient', id: missing },
      ]);
      const first = await tx.update({ ...patient('AheadA2'), id: a.id });
      const second = await tx.update({ ...patient('AheadA3'), id: a.id }, { ifMatch: 2 });
      const deleted = await tx.delete('Patient', b.id);
      const created = await tx.update({ ...patient('AheadNew'), id: missing });
      const again = await tx.update({ ...patient('AheadNew2'), id: missing });
      return [first, second, { stored: deleted! }, created, again].map((r) => r.stored.versionId);
    });
    expect(results).toEqual([2, 3, 2, 1, 2]);
    expect(JSON.parse((await store.read('Patient', a.id))!.content!).name).toEqual([{ family: 'AheadA3' }]);
    expect((await store.read('Patient', b.id))?.deleted).toBe(true);
    expect((await store.read('Patient', missing))?.versionId).toBe(2);
    // A stale If-Match is still refused against the row read ahead.
    await expect(
      store.transaction(async (tx) => {
        await tx.readAhead([{ type: 'Patient', id: a.id }]);
        await tx.update({ ...patient('Stale'), id: a.id }, { ifMatch: 1 });
      }),
    ).rejects.toThrow(/Version conflict/);
  });

  it('reads ahead through the (type, id) index, never walking the rows of the type', async () => {
    // Enough rows of the type that walking them would cost: PostgreSQL plans by its statistics.
    await store.transaction(async (tx) => {
      for (let i = 0; i < 2000; i++) await tx.create(patient(`Many${i}`));
    });
    for (const statement of db.dialect.refreshStatistics(['resource'], false)) await db.execute(statement);
    const { sql, params } = readAheadStatement(db.dialect, 'Patient', ['a', 'b']);
    const explain = db.dialect.name === 'sqlite' ? 'EXPLAIN QUERY PLAN' : 'EXPLAIN';
    const rows = await db.transaction(async (tx) => {
      // PostgreSQL takes a table of 2,000 rows whole (it expects 100 ids); on 1M it probes (type, id) per
      // id (docs/benchmarks.md). Here: that the statement allows the probe at all.
      for (const method of db.dialect.name === 'sqlite' ? [] : ['seqscan', 'bitmapscan', 'hashjoin', 'mergejoin']) {
        await tx.execute(`SET LOCAL enable_${method} = off`);
      }
      return tx.query<Record<string, string>>(`${explain} ${sql}`, params);
    });
    const plan = rows.map((row) => row.detail ?? row['QUERY PLAN']).join('\n');
    if (db.dialect.name === 'sqlite') {
      expect(plan).toContain('sqlite_autoindex_resource_1 (type=? AND id=?)');
      expect(plan).not.toContain('resource_type_pk');
    } else {
      expect(plan).toMatch(/Index Scan using resource_type_id on resource/);
      expect(plan).toMatch(/LockRows/);
    }
  });
});
