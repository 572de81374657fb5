// What a write sends to the database, counted rather than timed, on both databases: the promises of the
// write path's comments. On PostgreSQL a create outside a transaction is one statement without BEGIN and
// COMMIT (Dialect.createIsOneStatement), a transaction's creates are one statement whatever their count
// (Dialect.insertNewResources, TransactionWrites), and an update's index rows and its links are one
// statement each, of a text that does not change with the row count (Dialect.insertRows). On SQLite
// they are multi-row INSERTs of at most SQLITE_ROWS_PER_INSERT rows. Inside a transaction, the rows of
// the resources it will update are read in one statement per type (ResourceStore.readAhead).
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../config.js';
import { loadR4Definitions } from '../definitions/registry.js';
import { createFhirServices } from '../services.js';
import { BACKENDS, testDatabase } from '../../test/support/databases.js';
import type { TestDatabase } from '../../test/support/databases.js';
import { logStatements } from '../../test/support/statement-log.js';
import type { StatementLog } from '../../test/support/statement-log.js';
import { migrate } from './migrate.js';
import { openDatabase } from './open-database.js';
import { SQLITE_ROWS_PER_INSERT } from './sql/dialect.js';
import type { SqlDatabase } from './sql/database.js';
import type { FhirResource, ResourceStore } from './store.js';

const patient = (names: number, practitioners = 0): FhirResource => ({
  resourceType: 'Patient',
  name: Array.from({ length: names }, (_, i) => ({ family: `Family${i}` })),
  ...(practitioners > 0
    ? { generalPractitioner: Array.from({ length: practitioners }, (_, i) => ({ reference: `Practitioner/p${i}` })) }
    : {}),
});

/** The statements of `log` that insert into `table` (on PostgreSQL also as a part of a WITH). */
const insertsInto = (log: StatementLog, table: string) =>
  log.filter((sql) => new RegExp(`INSERT (OR FAIL )?INTO ${table} `).test(sql));

/** Rows of a SQLite multi-row INSERT: its VALUES tuples. */
const rowsOf = (sql: string) => sql.split('), (').length;

describe.each(BACKENDS)('statements of a write on %s', (backend) => {
  let database: TestDatabase;
  let raw: SqlDatabase;
  let store: ResourceStore;
  const log: StatementLog = [];

  beforeAll(async () => {
    database = await testDatabase(backend);
    raw = openDatabase(database.url);
    await migrate(raw);
    const config = loadConfig({ DATABASE_URL: database.url });
    store = createFhirServices(config, logStatements(raw, log), loadR4Definitions()).store;
  });

  afterAll(async () => {
    await raw?.close();
    await database?.dispose();
  });

  /** The statements `work` sends. */
  async function statementsOf(work: () => Promise<unknown>): Promise<StatementLog> {
    log.length = 0;
    await work();
    return [...log];
  }

  it('a create outside a transaction: one statement on PostgreSQL, no BEGIN or COMMIT; one INSERT per table on SQLite', async () => {
    const sent = await statementsOf(() => store.create(patient(2, 1)));
    if (backend === 'postgres') {
      expect(sent).toHaveLength(1);
      expect(sent[0]).toMatch(/^WITH /);
      return;
    }
    expect([sent[0], sent.at(-1)]).toEqual(['BEGIN', 'COMMIT']);
    const tables = ['resource', 'resource_history', 'idx_string', 'idx_token', 'idx_reference', 'resource_link'];
    for (const table of tables) expect(insertsInto(sent, table), table).toHaveLength(1);
    expect(sent).toHaveLength(2 + tables.length);
  });

  it("a transaction's creates: one statement of one text on PostgreSQL whatever their count; SQLite's in INSERTs of 64 rows", async () => {
    const creates = (count: number) =>
      statementsOf(() =>
        store.transaction(async (tx) => {
          for (let i = 0; i < count; i++) await tx.create(patient(1));
        }),
      );
    const few = await creates(3);
    const many = await creates(300);
    if (backend === 'postgres') {
      expect(few).toHaveLength(3);
      expect(many).toEqual(few);
      expect(many.slice(1, -1)).toEqual([expect.stringMatching(/^WITH /)]);
      return;
    }
    const resourceRows = insertsInto(many, 'resource').map(rowsOf);
    expect(resourceRows).toEqual([64, 64, 64, 64, 44]);
    expect(Math.max(...resourceRows)).toBe(SQLITE_ROWS_PER_INSERT);
    // A history row each: a statement that may write several rows and checks a foreign key would open
    // a statement journal (dialect.ts).
    expect(insertsInto(many, 'resource_history')).toHaveLength(300);
  });

  it("an update's index rows and links: one statement each of one text on PostgreSQL whatever the rows; SQLite's in chunks of 64", async () => {
    const { stored } = await store.create(patient(1));
    const update = (names: number, practitioners: number) =>
      statementsOf(() => store.update({ ...patient(names, practitioners), id: stored.id }));
    const small = await update(2, 3);
    const large = await update(400, 3000);
    const indexInserts = (sent: StatementLog) => sent.filter((sql) => /INTO idx_/.test(sql));
    if (backend === 'postgres') {
      for (const sent of [small, large]) {
        expect(indexInserts(sent)).toHaveLength(1);
        expect(insertsInto(sent, 'resource_link')).toHaveLength(1);
      }
      expect(large).toEqual(small);
      return;
    }
    const links = insertsInto(large, 'resource_link').map(rowsOf);
    expect(links).toHaveLength(Math.ceil(3000 / SQLITE_ROWS_PER_INSERT));
    expect(links.reduce((sum, rows) => sum + rows, 0)).toBe(3000);
    const names = insertsInto(large, 'idx_string').map(rowsOf);
    const nameRows = names.reduce((sum, rows) => sum + rows, 0);
    expect(nameRows).toBeGreaterThanOrEqual(800);
    expect(names).toHaveLength(Math.ceil(nameRows / SQLITE_ROWS_PER_INSERT));
    expect(Math.max(...names)).toBe(SQLITE_ROWS_PER_INSERT);
  });

  it('reads ahead the rows a transaction will update in one statement per type, and then reads none of them', async () => {
    const ids = async (type: 'Patient' | 'Basic', count: number) => {
      const created: string[] = [];
      for (let i = 0; i < count; i++) {
        const resource = type === 'Patient' ? patient(1) : { resourceType: 'Basic', code: { text: randomUUID() } };
        created.push((await store.create(resource)).stored.id);
      }
      return created.map((id) => ({ type, id }));
    };
    const keys = [...(await ids('Patient', 20)), ...(await ids('Basic', 20))];
    const reads = (sent: StatementLog) => sent.filter((sql) => /^SELECT .* FROM resource /.test(sql));
    const sent = await statementsOf(() =>
      store.transaction(async (tx) => {
        await tx.readAhead(keys);
        for (const { type, id } of keys) {
          await tx.update({
            ...(type === 'Patient' ? patient(2) : { resourceType: 'Basic', code: { text: 'x' } }),
            id,
          });
        }
      }),
    );
    expect(reads(sent)).toHaveLength(2);
  });
});
