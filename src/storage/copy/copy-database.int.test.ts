// The copy engine of `db copy` on rows written straight into the tables, so that every edge is there on
// purpose: batches of three rows and a few kilobytes (a resource's index rows span many batches' worth,
// contents are larger than a batch's bytes), texts that the two databases order differently, doubles at
// the ends of their range, NULLs, composite keys. From SQLite and from PostgreSQL into PostgreSQL. The
// end-to-end suite (test/db-copy.int.test.ts) copies a database made through the API.
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { BACKENDS, postgresTestDatabase, testDatabase } from '../../../test/support/databases.js';
import type { TestDatabase } from '../../../test/support/databases.js';
import { migrate } from '../migrate.js';
import { MIGRATIONS } from '../migrations/index.js';
import { openDatabase } from '../open-database.js';
import type { Row, SqlDatabase, SqlValue } from '../sql/database.js';
import { copyDatabase, tableBatches, targetRefusal } from './copy-database.js';
import type { BatchLimits, CopyProgress } from './copy-database.js';
import { COPIED_TABLES, TABLES_NOT_COPIED } from './tables.js';

const LIMITS: BatchLimits = { rows: 3, bytes: 6_000 };
const ORDERED_DIFFERENTLY = ['alpha', 'Beta', 'émile', '_under', 'Zed', 'zed', '😀', 'a b', 'a-b'];

async function insert(db: SqlDatabase, table: string, row: Record<string, SqlValue>): Promise<void> {
  const columns = Object.keys(row);
  const identity = COPIED_TABLES.find((t) => t.name === table)?.identity ? db.dialect.identityInsert : '';
  await db.execute(
    `INSERT INTO ${table} (${columns.join(', ')})${identity} VALUES (${columns.map(() => '?').join(', ')})`,
    Object.values(row),
  );
}

/** Rows of every kind the copy must carry over exactly. */
async function fill(db: SqlDatabase): Promise<void> {
  const content = (pk: number, size: number) =>
    JSON.stringify({ resourceType: 'Patient', id: `p${pk}`, pad: 'x'.repeat(size) });
  for (let pk = 1; pk <= 12; pk++) {
    const deleted = pk === 7;
    // pk 5's content alone is larger than a batch's bytes.
    const size = pk === 5 ? 20_000 : pk * 300;
    await insert(db, 'resource', {
      pk: pk * 10,
      type: 'Patient',
      id: `p${pk}`,
      version: deleted ? 3 : 2,
      last_updated: 1_700_000_000_000 + pk,
      deleted: deleted ? 1 : 0,
      content: deleted ? null : content(pk, size),
    });
    for (let version = 1; version <= (deleted ? 3 : 2); version++) {
      await insert(db, 'resource_history', {
        pk: pk * 10,
        type: 'Patient',
        id: `p${pk}`,
        version,
        last_updated: 1_700_000_000_000 + pk + version,
        operation: version === 3 ? 'delete' : version === 1 ? 'create' : 'update',
        content: version === 3 ? null : content(pk, size - version),
      });
    }
  }
  // pk 10 has many more index rows than a batch takes, some of them duplicates.
  for (let i = 0; i < 11; i++) {
    await insert(db, 'idx_token', {
      pk: 10,
      sp: 77,
      grp: i % 2,
      system: 'urn:s',
      code: `c${i % 9}`,
      text: i % 3 === 0 ? null : `Text ${i}`,
    });
  }
  for (const [i, code] of ORDERED_DIFFERENTLY.entries()) {
    await insert(db, 'idx_token', { pk: 20 + i * 10, sp: 77, grp: 0, system: 'urn:s', code, text: code });
    await insert(db, 'idx_string', { pk: 20 + i * 10, sp: 5, grp: 0, norm: code.toLowerCase(), exact: code });
  }
  await insert(db, 'idx_token', {
    pk: 30,
    sp: 78,
    grp: 0,
    system: 'urn:s',
    code: 'k'.repeat(256),
    text: null,
    code_full: 'k'.repeat(5_000),
  });
  for (const [i, value] of [-Number.MAX_VALUE, Number.MAX_VALUE, 0.1, 1e-7, -0.5, 12345678.125].entries()) {
    await insert(db, 'idx_number', { pk: 40, sp: 9, grp: i, lo: value, hi: value });
  }
  await insert(db, 'idx_date', { pk: 40, sp: 10, grp: 0, lo: -62135596800000, hi: 253402300799999 });
  await insert(db, 'resource_link', { source_pk: 40, target_type: 'Patient', target_id: 'p1' });
  await insert(db, 'resource_link', { source_pk: 40, target_type: 'Patient', target_id: 'p1' });
  for (const [i, name] of ORDERED_DIFFERENTLY.entries()) {
    await insert(db, 'account', {
      id: `acct-${name}`,
      username: name,
      password_hash: '$argon2id$v=19$m=19456,t=2,p=1$c2FsdA$aGFzaA',
      active: i % 2,
      api_access: 1,
      scopes: 'system/*.rs',
      rate_limit: i % 3 === 0 ? null : i * 10,
      tokens_not_before: 0,
      created_at: '2024-01-01T00:00:00.000Z',
      updated_at: '2024-01-02T00:00:00.000Z',
      login_lock_epoch: i,
      jwks: i === 2 ? JSON.stringify({ keys: [{ kty: 'EC', pad: 'y'.repeat(7_000) }] }) : null,
      token_generation: i * 2,
    });
    await insert(db, 'client_assertion_jti', { client_id: name, jti: `j-${name}`, expires_at: 2_000_000_000 });
    await insert(db, 'client_assertion_jti', { client_id: name, jti: `J-${name}`, expires_at: 2_000_000_001 });
  }
  await insert(db, 'signing_key', {
    kid: 'kid-1',
    algorithm: 'ES384',
    private_jwk: '{"d":"secret"}',
    public_jwk: '{"x":"1"}',
    created_at: '2024-01-01T00:00:00.000Z',
    retired_at: null,
  });
  await insert(db, 'auth_secret', { name: 'username-hmac', secret: 'abc', created_at: '2024-01-01T00:00:00.000Z' });
  await db.execute('UPDATE auth_state SET version = 41 WHERE id = 1');
  await insert(db, 'scribe_template', {
    id: 1000,
    definition: '{"name":"Custom"}',
    created_at: '2024-01-01',
    updated_at: '2024-01-01',
  });
  for (let id = 3; id <= 5; id++) {
    await insert(db, 'scribe_record', {
      id,
      account_id: 'acct-alpha',
      status: 'COMPLETED',
      submitted_at: '2024-01-01T00:00:00.000Z',
      template_ids: '[1]',
      transcripts: JSON.stringify(['t'.repeat(id * 1_000)]),
    });
    await insert(db, 'scribe_audio', {
      id: id + 100,
      record_id: id,
      position: 0,
      filename: 'a.wav',
      content_type: 'audio/wav',
      data: 'QUJD',
    });
    await insert(db, 'scribe_job', {
      id: id + 200,
      record_id: id,
      state: 'done',
      run_after: 0,
      created_at: 1,
      updated_at: 2,
    });
  }
  // Left out of the copy.
  await insert(db, 'export_job', {
    id: 'job-1',
    account_id: 'acct-alpha',
    request: '/fhir/$export',
    params: '{}',
    state: 'completed',
    transaction_time: 1,
    created_at: 1,
    updated_at: 1,
  });
}

/** A table's rows as JSON texts with their columns in name order, sorted: equal whatever each side's order. */
async function contents(db: SqlDatabase, table: string): Promise<string[]> {
  const rows = await db.query<Row>(`SELECT * FROM ${table}`);
  return rows
    .map((row) => JSON.stringify(Object.fromEntries(Object.entries(row).sort(([a], [b]) => (a < b ? -1 : 1)))))
    .sort();
}

async function tablesOf(db: SqlDatabase): Promise<string[]> {
  return (await db.query<{ name: string }>(db.dialect.listTables)).map((r) => r.name).sort();
}

describe.each(BACKENDS)('copyDatabase from %s into PostgreSQL', (backend) => {
  let sourceDb: TestDatabase;
  let source: SqlDatabase;
  let targetDb: TestDatabase | undefined;
  let target: SqlDatabase | undefined;

  beforeAll(async () => {
    sourceDb = await testDatabase(backend);
    source = openDatabase(sourceDb.url);
    await migrate(source);
    await fill(source);
  });
  afterAll(async () => {
    await source?.close();
    await sourceDb?.dispose();
  });

  beforeEach(async () => {
    targetDb = await postgresTestDatabase();
    target = openDatabase(targetDb.url);
  });
  afterEach(async () => {
    await target?.close();
    await targetDb?.dispose();
  });

  it('lists every table of the schema as copied or as left out, once', async () => {
    const listed = [...COPIED_TABLES.map((t) => t.name), ...Object.keys(TABLES_NOT_COPIED)];
    expect(new Set(listed).size).toBe(listed.length);
    expect(await tablesOf(source)).toEqual([...listed].sort());
  });

  it('reads a table in batches bounded by rows and bytes, a resource’s index rows never split', async () => {
    const resource = COPIED_TABLES.find((t) => t.name === 'resource')!;
    const batches: Row[][] = [];
    for await (const batch of tableBatches(source, resource, LIMITS)) batches.push(batch);
    expect(batches.flat().map((r) => Number(r.pk))).toEqual(Array.from({ length: 12 }, (_, i) => (i + 1) * 10));
    for (const batch of batches) {
      expect(batch.length).toBeLessThanOrEqual(LIMITS.rows);
      const bytes = batch.reduce((sum, r) => sum + Buffer.byteLength(String(r.content ?? '')), 0);
      if (batch.length > 1) expect(bytes).toBeLessThanOrEqual(LIMITS.bytes);
    }
    // The 20 kB content came in a batch of its own.
    expect(batches.some((b) => b.length === 1 && Number(b[0].pk) === 50)).toBe(true);

    const tokens = COPIED_TABLES.find((t) => t.name === 'idx_token')!;
    const pksByBatch: number[][] = [];
    for await (const batch of tableBatches(source, tokens, LIMITS)) pksByBatch.push(batch.map((r) => Number(r.pk)));
    // Three rows a batch, and the rest of the last resource's: pk 10's eleven rows come in one.
    expect(pksByBatch).toEqual([Array<number>(11).fill(10), [20, 30, 30], [40, 50, 60], [70, 80, 90], [100]]);
  });

  it('copies every row exactly, keeps what it leaves out out, and numbers new rows after the copied ones', async () => {
    expect(await targetRefusal(target!)).toBeUndefined();
    await migrate(target!);
    const seen: CopyProgress[] = [];
    const report = await copyDatabase(source, target!, { limits: LIMITS, onProgress: (p) => seen.push(p) });
    expect(report.tables.filter((t) => !t.agrees)).toEqual([]);
    expect(report.agrees).toBe(true);
    expect(report.tables.map((t) => t.table)).toEqual(COPIED_TABLES.map((t) => t.name));
    for (const table of COPIED_TABLES) {
      expect(await contents(target!, table.name), table.name).toEqual(await contents(source, table.name));
      const counted = report.tables.find((t) => t.table === table.name)!;
      expect(counted.target.rows, table.name).toBe((await contents(source, table.name)).length);
    }
    expect(report.tables.find((t) => t.table === 'account')!.source.rows).toBe(ORDERED_DIFFERENTLY.length);
    expect(await contents(target!, 'export_job')).toEqual([]);
    // Progress: every table, its rows counting up to its total.
    const last = seen.filter((p) => p.phase === 'copy' && p.table === 'idx_token').at(-1)!;
    expect(last.rows).toBe(last.total);
    expect(last.total).toBe((await contents(source, 'idx_token')).length);

    // Identity columns go on after the largest copied value.
    const [created] = await target!.query<{ pk: number }>(
      `INSERT INTO resource (type, id, version, last_updated, deleted, content) VALUES ('Patient', 'new', 1, 1, 0, '{}') RETURNING pk`,
    );
    expect(Number(created.pk)).toBe(121);
    const [record] = await target!.query<{ id: number }>(
      `INSERT INTO scribe_record (account_id, status, submitted_at, template_ids, transcripts) VALUES ('a', 'QUEUED', 'x', '[]', '[]') RETURNING id`,
    );
    expect(Number(record.id)).toBe(6);
    const [seq] = await target!.query<{ seq: number }>(
      `INSERT INTO resource_history (pk, type, id, version, last_updated, operation, content) VALUES (?, 'Patient', 'new', 1, 1, 'create', '{}') RETURNING seq`,
      [created.pk],
    );
    expect(Number(seq.seq)).toBe(26);

    // Now it holds rows: a second copy is refused.
    expect(await targetRefusal(target!)).toMatch(
      /^is not empty: resource, resource_history, idx_string, .* hold rows$/,
    );
  });

  it('keeps nothing when the source changes during the copy, so that it can run again', async () => {
    await migrate(target!);
    // A server still writing: a row changed once its table was copied. The copy's later reads wait for
    // the write, so that it is in the source before the verification reads it, however loaded the machine.
    let write: Promise<unknown> | undefined;
    const writing = Object.create(source) as SqlDatabase;
    writing.query = (async (text: string, params?: unknown[]) => {
      await write;
      return source.query(text, params as never);
    }) as SqlDatabase['query'];
    const report = await copyDatabase(writing, target!, {
      limits: LIMITS,
      onProgress: (p) => {
        if (!write && p.phase === 'copy' && p.table === 'account' && p.rows === p.total) {
          write = source.execute(`UPDATE account SET scopes = 'system/*.cruds' WHERE username = 'Zed'`);
        }
      },
    });
    try {
      expect(report.agrees).toBe(false);
      const account = report.tables.find((t) => t.table === 'account')!;
      expect(account.agrees).toBe(false);
      expect(account.source.rows).toBe(account.target.rows);
      expect(account.source.checksum).not.toBe(account.target.checksum);
      expect(report.tables.filter((t) => !t.agrees).map((t) => t.table)).toEqual(['account']);
      expect(await targetRefusal(target!)).toBeUndefined();
      expect(await contents(target!, 'resource')).toEqual([]);
    } finally {
      await source.execute(`UPDATE account SET scopes = 'system/*.rs' WHERE username = 'Zed'`);
    }
  });
});

describe('targetRefusal', () => {
  let targetDb: TestDatabase;
  let target: SqlDatabase;

  beforeAll(async () => {
    targetDb = await postgresTestDatabase();
    target = openDatabase(targetDb.url);
  });
  afterAll(async () => {
    await target?.close();
    await targetDb?.dispose();
  });

  it('takes a database with no tables, or with tables of another application, or freshly migrated', async () => {
    expect(await targetRefusal(target)).toBeUndefined();
    await target.execute('CREATE TABLE someone_elses (x INTEGER)');
    await target.execute('INSERT INTO someone_elses (x) VALUES (1)');
    expect(await targetRefusal(target)).toBeUndefined();
    await migrate(target);
    expect(await targetRefusal(target)).toBeUndefined();
  });

  it('refuses a row in any of our tables, those the copy leaves out included, and a newer schema', async () => {
    await target.execute(
      `INSERT INTO export_job (id, account_id, request, params, state, transaction_time, created_at, updated_at) VALUES ('j', 'a', 'r', '{}', 'queued', 1, 1, 1)`,
    );
    expect(await targetRefusal(target)).toBe('is not empty: export_job holds rows');
    await target.execute('DELETE FROM export_job');
    const newer = Math.max(...MIGRATIONS.map((m) => m.version)) + 1;
    await target.execute(`INSERT INTO schema_migration (version, name, applied_at) VALUES (?, 'future', 'x')`, [newer]);
    expect(await targetRefusal(target)).toBe(
      `has the schema of a newer ambient-fhir (migration ${newer}; this one knows up to ${newer - 1})`,
    );
  });
});
