import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readlinkSync, realpathSync, statSync, symlinkSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { sqliteTestDatabase } from '../../../test/support/databases.js';
import type { TestDatabase } from '../../../test/support/databases.js';
import { ReferenceParser } from '../../fhir/references.js';
import { LinkWriter } from '../link-writer.js';
import { migrate } from '../migrate.js';
import { sqliteDialect } from '../sql/dialect.js';
import { SqlResourceStore } from '../sql-resource-store.js';
import { sqliteFileName } from '../database-url.js';
import { SqliteDatabase } from './sqlite-database.js';

describe('SqliteDatabase group commit', () => {
  let testDb: TestDatabase;
  let db: SqliteDatabase;
  beforeAll(async () => {
    testDb = sqliteTestDatabase();
    db = new SqliteDatabase(testDb.url);
    await db.executeScript('CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL UNIQUE)');
  });
  afterAll(async () => {
    await db.close();
    await testDb.dispose();
  });

  it('commits concurrent transactions together, rolling back only the one that fails', async () => {
    const results = await Promise.allSettled(
      Array.from({ length: 20 }, (_, i) =>
        db.transaction(async (tx) => {
          await tx.execute('INSERT INTO t (v) VALUES (?)', [`row-${i}`]);
          if (i === 7) {
            await tx.execute('INSERT INTO t (v) VALUES (?)', ['row-7-extra']);
            throw new Error('fail 7');
          }
          return i;
        }),
      ),
    );
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(19);
    expect(results[7]).toMatchObject({ status: 'rejected', reason: new Error('fail 7') });
    const rows = await db.query<{ v: string }>('SELECT v FROM t ORDER BY id');
    expect(rows.map((r) => r.v)).toHaveLength(19);
    expect(rows.map((r) => r.v)).not.toContain('row-7');
    expect(rows.map((r) => r.v)).not.toContain('row-7-extra');
  });

  it('reports a unique violation to its own transaction only', async () => {
    const [first, duplicate] = await Promise.allSettled([
      db.transaction((tx) => tx.execute('INSERT INTO t (v) VALUES (?)', ['dup'])),
      db.transaction((tx) => tx.execute('INSERT INTO t (v) VALUES (?)', ['dup'])),
    ]);
    expect(first.status).toBe('fulfilled');
    expect(duplicate).toMatchObject({ status: 'rejected' });
    expect((duplicate as PromiseRejectedResult).reason.constructor.name).toBe('UniqueViolationError');
  });
});

/** Files this process has open whose name marks them as SQLite's temporary files (Linux only). */
function sqliteTempFilesOpen(): string[] {
  return readdirSync('/proc/self/fd').flatMap((fd) => {
    try {
      const target = readlinkSync(`/proc/self/fd/${fd}`);
      return target.includes('etilqs_') ? [target] : [];
    } catch {
      return []; // closed since the listing
    }
  });
}

describe('SqliteDatabase statement and savepoint journals', () => {
  let testDb: TestDatabase;
  let db: SqliteDatabase;
  const ROWS = 3000;
  const rowsOf = (count: number, bad?: number) =>
    Array.from({ length: count }, (_, i) => [i, i === bad ? null : `value ${i} ${'x'.repeat(40)}`]);
  const insert = (rows: (number | string | null)[][]) =>
    sqliteDialect.insertRows([{ table: 'r', columns: ['n', 'v'], pgTypes: ['bigint', 'text'], rows }]);
  beforeAll(async () => {
    testDb = sqliteTestDatabase();
    db = new SqliteDatabase(testDb.url);
    await db.executeScript('CREATE TABLE r (n INTEGER NOT NULL, v TEXT NOT NULL); CREATE INDEX r_v ON r (v, n)');
    await db.transaction(async (tx) => {
      for (const statement of insert(rowsOf(ROWS))) await tx.execute(statement.sql, statement.params);
    });
  });
  afterAll(async () => {
    await db.close();
    await testDb.dispose();
  });

  it.runIf(existsSync('/proc/self/fd'))(
    'writes a lone transaction without a journal file beside the WAL (no savepoint, no statement journal)',
    async () => {
      let during: string[] = [];
      await db.transaction(async (tx) => {
        // Lands on every leaf of the index: far past the 64 KiB a journal keeps in memory.
        for (const statement of insert(rowsOf(ROWS))) await tx.execute(statement.sql, statement.params);
        during = sqliteTempFilesOpen();
      });
      expect(during).toEqual([]);
      expect((await db.query<{ n: number }>('SELECT count(*) AS n FROM r'))[0].n).toBe(2 * ROWS);
    },
  );

  it.runIf(existsSync('/proc/self/fd'))(
    "writes a transaction's thousand held-back creates, their history and rows, without a journal file",
    async () => {
      const storeDb = sqliteTestDatabase();
      const resources = new SqliteDatabase(storeDb.url);
      try {
        await migrate(resources);
        const store = new SqlResourceStore(resources, [
          new LinkWriter(new ReferenceParser('http://localhost/fhir', (t) => /^[A-Z]/.test(t))),
        ]);
        let during: string[] = ['not checked'];
        await store.transaction(async (tx, executor) => {
          for (let i = 0; i < 1000; i++) {
            // 2 KB each: one INSERT of 64 changes far more than the 64 KiB a journal keeps in memory.
            const note = [{ text: `${i} ${'x'.repeat(2000)}` }];
            await tx.create({ resourceType: 'Observation', subject: { reference: `Patient/p${i}` }, note });
          }
          await executor.query('SELECT 1'); // writes the held-back creates
          during = sqliteTempFilesOpen();
        });
        expect(during).toEqual([]);
        const [counts] = await resources.query<{ r: number; h: number; l: number }>(
          'SELECT (SELECT count(*) FROM resource) AS r, (SELECT count(*) FROM resource_history) AS h, (SELECT count(*) FROM resource_link) AS l',
        );
        expect(counts).toEqual({ r: 1000, h: 1000, l: 1000 });
      } finally {
        await resources.close();
        await storeDb.dispose();
      }
    },
  );

  it('rolls back a lone transaction whose multi-row INSERT fails half-way, with that error', async () => {
    const before = (await db.query<{ n: number }>('SELECT count(*) AS n FROM r'))[0].n;
    const failed = db.transaction(async (tx) => {
      await tx.execute('INSERT INTO r (n, v) VALUES (?, ?)', [-1, 'first']);
      for (const statement of insert(rowsOf(100, 50))) await tx.execute(statement.sql, statement.params);
    });
    await expect(failed).rejects.toThrow(/NOT NULL/);
    expect((await db.query<{ n: number }>('SELECT count(*) AS n FROM r'))[0].n).toBe(before);
  });

  it('rolls back only the failing one of a group, rows written before its failing INSERT included', async () => {
    const before = (await db.query<{ n: number }>('SELECT count(*) AS n FROM r'))[0].n;
    const results = await Promise.allSettled(
      [undefined, 50, undefined].map((bad, i) =>
        db.transaction(async (tx) => {
          await tx.execute('INSERT INTO r (n, v) VALUES (?, ?)', [-10 - i, `group ${i}`]);
          for (const statement of insert(rowsOf(100, bad))) await tx.execute(statement.sql, statement.params);
        }),
      ),
    );
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    const after = await db.query<{ v: string }>("SELECT v FROM r WHERE v LIKE 'group %' ORDER BY v");
    expect(after.map((r) => r.v)).toEqual(['group 0', 'group 2']);
    expect((await db.query<{ n: number }>('SELECT count(*) AS n FROM r'))[0].n).toBe(before + 202);
  });
});

describe('SqliteDatabase durability (synchronous=full)', () => {
  it('acknowledges a commit only once the WAL fsync after it has finished, without holding up the next one', async () => {
    const testDb = sqliteTestDatabase();
    const fsyncs: (() => void)[] = [];
    let held = true;
    const db = new SqliteDatabase(testDb.url, {
      fsync: () => (held ? new Promise<void>((resolve) => fsyncs.push(resolve)) : Promise.resolve()),
    });
    try {
      const created = db.executeScript('CREATE TABLE d (v TEXT)');
      await vi.waitFor(() => expect(fsyncs).toHaveLength(1));
      fsyncs.shift()!();
      await created;
      let acknowledged = false;
      const write = db
        .transaction((tx) => tx.execute('INSERT INTO d (v) VALUES (?)', ['a']))
        .then(() => {
          acknowledged = true;
        });
      await vi.waitFor(() => expect(fsyncs).toHaveLength(1));
      // Committed (a reader sees it) but not yet durable: not acknowledged.
      expect(await db.query<{ v: string }>('SELECT v FROM d')).toEqual([{ v: 'a' }]);
      expect(acknowledged).toBe(false);
      // The writer is free meanwhile: the next transaction commits while the first fsync runs.
      const next = db.transaction((tx) => tx.execute('INSERT INTO d (v) VALUES (?)', ['b']));
      await vi.waitFor(async () =>
        expect(await db.query<{ v: string }>('SELECT v FROM d ORDER BY v')).toEqual([{ v: 'a' }, { v: 'b' }]),
      );
      fsyncs.shift()!();
      await write;
      expect(acknowledged).toBe(true);
      // The second commit waits for its own fsync.
      await vi.waitFor(() => expect(fsyncs).toHaveLength(1));
      fsyncs.shift()!();
      await next;
    } finally {
      held = false;
      fsyncs.forEach((f) => f());
      await db.close();
      await testDb.dispose();
    }
  });

  it('fsyncs the WAL SQLite really writes when the database path is a symbolic link', async () => {
    const testDb = sqliteTestDatabase();
    const real = sqliteFileName(testDb.url);
    const link = join(dirname(real), 'link.db');
    symlinkSync(real, link);
    const db = new SqliteDatabase(`sqlite:${link}`);
    try {
      await db.executeScript('CREATE TABLE s (v TEXT)');
      await db.transaction((tx) => tx.execute('INSERT INTO s (v) VALUES (?)', ['x']));
      expect(db.walPath).toBe(`${realpathSync(real)}-wal`);
      expect(existsSync(db.walPath!)).toBe(true);
      expect(existsSync(`${link}-wal`)).toBe(false);
    } finally {
      await db.close();
      await testDb.dispose();
    }
  });

  it('refuses every write and fails the readiness check after an fsync error', async () => {
    const testDb = sqliteTestDatabase();
    let fail = false;
    const db = new SqliteDatabase(testDb.url, {
      fsync: () => (fail ? Promise.reject(new Error('EIO')) : Promise.resolve()),
    });
    try {
      await db.executeScript('CREATE TABLE f (v TEXT)');
      fail = true;
      await expect(db.transaction((tx) => tx.execute('INSERT INTO f (v) VALUES (?)', ['a']))).rejects.toThrow('EIO');
      fail = false;
      await expect(db.transaction((tx) => tx.execute('INSERT INTO f (v) VALUES (?)', ['b']))).rejects.toThrow('EIO');
      await expect(db.execute('INSERT INTO f (v) VALUES (?)', ['c'])).rejects.toThrow('EIO');
      await expect(db.ping()).rejects.toThrow('EIO');
      // Only the write whose fsync failed was committed (and answered with the error); none after it.
      expect(await db.query<{ v: string }>('SELECT v FROM f')).toEqual([{ v: 'a' }]);
    } finally {
      await db.close().catch(() => undefined);
      await testDb.dispose();
    }
  });

  it('fsyncs the real WAL file by default, after each commit', async () => {
    const testDb = sqliteTestDatabase();
    const db = new SqliteDatabase(testDb.url);
    // Every FileHandle shares one prototype: count the fsyncs made through any of them.
    const probe = await open(testDb.url.slice('sqlite:'.length).replace(/test\.db$/, 'probe'), 'w');
    const sync = vi.spyOn(Object.getPrototypeOf(probe) as { sync: () => Promise<void> }, 'sync');
    await probe.close();
    try {
      await db.executeScript('CREATE TABLE w (v TEXT)');
      const before = sync.mock.calls.length;
      await db.transaction((tx) => tx.execute('INSERT INTO w (v) VALUES (?)', ['x']));
      expect(sync.mock.calls.length).toBe(before + 1);
      expect(await db.query('SELECT v FROM w')).toEqual([{ v: 'x' }]);
    } finally {
      sync.mockRestore();
      await db.close();
      await testDb.dispose();
    }
  });
});

describe('SqliteDatabase checkpoints', () => {
  it('leaves checkpoints to a worker thread, which copies every committed frame into the database file', async () => {
    const testDb = sqliteTestDatabase();
    const db = new SqliteDatabase(testDb.url);
    try {
      await db.executeScript('CREATE TABLE c (v TEXT)');
      await Promise.all(
        Array.from({ length: 50 }, (_, i) =>
          db.transaction((tx) => tx.execute('INSERT INTO c (v) VALUES (?)', ['x'.repeat(2000) + i])),
        ),
      );
      const result = await db.checkpointer!.checkpoint();
      expect(result.ok).toBe(true);
      expect(result.log).toBeGreaterThan(0);
      expect(result.checkpointed).toBe(result.log);
      expect(await db.query<{ n: number }>('SELECT COUNT(*) AS n FROM c')).toEqual([{ n: 50 }]);
    } finally {
      await db.close();
      await testDb.dispose();
    }
  });
});

describe('SqliteDatabase WAL size', () => {
  it('stays bounded under a steady stream of writes (the writer finishes what the worker cannot)', async () => {
    const testDb = sqliteTestDatabase();
    const db = new SqliteDatabase(testDb.url);
    try {
      await db.executeScript('CREATE TABLE big (v TEXT)');
      const blob = 'x'.repeat(100_000);
      // 48 MB written in 480 commits, 8 at a time.
      for (let round = 0; round < 60; round++) {
        await Promise.all(
          Array.from({ length: 8 }, (_, i) =>
            db.transaction((tx) => tx.execute('INSERT INTO big (v) VALUES (?)', [blob + round + i])),
          ),
        );
      }
      const wal = statSync(`${sqliteFileName(testDb.url)}-wal`).size;
      expect(wal).toBeLessThan(30_000_000);
    } finally {
      await db.close();
      await testDb.dispose();
    }
  });
});

describe('SqliteDatabase close', () => {
  it('lets a process that awaits close() after checkpoints finish normally', () => {
    const testDb = sqliteTestDatabase();
    const script = `
      import { SqliteDatabase } from './src/storage/sqlite/sqlite-database.ts';
      const db = new SqliteDatabase(${JSON.stringify(testDb.url)});
      await db.executeScript('CREATE TABLE k (v TEXT)');
      for (let i = 0; i < 70; i++) await db.transaction((tx) => tx.execute('INSERT INTO k (v) VALUES (?)', [String(i)]));
      await db.checkpointer.checkpoint();
      await db.close();
      console.log('closed');
    `;
    const result = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
      cwd: fileURLToPath(new URL('../../../', import.meta.url)),
      encoding: 'utf8',
    });
    void testDb.dispose();
    expect(result.stderr).toBe('');
    expect(result.stdout.trim()).toBe('closed');
    expect(result.status).toBe(0);
  });
});
