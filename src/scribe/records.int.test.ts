// The records list on both databases: pages bounded in count and in bytes (sizes read before the records are
// loaded), at least one record per page, and following nextBefore visits every record exactly once.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrate } from '../storage/migrate.js';
import { openDatabase } from '../storage/open-database.js';
import type { SqlDatabase } from '../storage/sql/database.js';
import { BACKENDS, testDatabase } from '../../test/support/databases.js';
import type { TestDatabase } from '../../test/support/databases.js';
import { ScribeRecords } from './records.js';

const KB = 1024;

describe.each(BACKENDS)('scribe record list on %s', (backend) => {
  let database: TestDatabase;
  let db: SqlDatabase;

  beforeAll(async () => {
    database = await testDatabase(backend);
    db = openDatabase(database.url);
    await migrate(db);
  });
  afterAll(async () => {
    await db?.close();
    await database?.dispose();
  });

  /** Records of these transcript sizes (in KiB), oldest first; returns their ids. */
  async function submit(records: ScribeRecords, account: string, sizesKb: number[]): Promise<number[]> {
    const ids: number[] = [];
    for (const [i, kb] of sizesKb.entries()) {
      // Non-ASCII text: the budget counts bytes, not characters.
      const transcript = `Patient: visit ${i}. ${'é'.repeat((kb * KB) / 2)}`;
      ids.push((await records.submit(account, { transcripts: [transcript], templateIds: [1], audio: [] })).id);
    }
    return ids;
  }

  async function walk(records: ScribeRecords, account: string, limit: number): Promise<number[][]> {
    const pages: number[][] = [];
    let before: number | undefined;
    do {
      const page = await records.list(account, limit, before);
      pages.push(page.records.map((r) => r.id));
      before = page.nextBefore;
    } while (before !== undefined && pages.length < 50);
    return pages;
  }

  it('stops a page once the next record would pass the byte budget, with at least one record per page', async () => {
    const records = new ScribeRecords(db, undefined, 1024 * KB);
    const account = `acct-${randomUUID()}`;
    // 300 KiB each, but one of 1.5 MiB: more than the budget alone.
    const [a, b, c, d, e, f] = await submit(records, account, [300, 300, 300, 1536, 300, 300]);
    expect(await walk(records, account, 100)).toEqual([[f, e], [d], [c, b, a]]);
  });

  it('still bounds pages by count, and every record is visited once, newest first', async () => {
    const records = new ScribeRecords(db, undefined, 1024 * KB);
    const account = `acct-${randomUUID()}`;
    const ids = await submit(records, account, [1, 1, 1, 400, 400, 400, 1, 1]);
    const pages = await walk(records, account, 2);
    expect(pages.every((page) => page.length >= 1 && page.length <= 2)).toBe(true);
    expect(pages.flat()).toEqual([...ids].reverse());
    // Another account's records never appear.
    expect((await records.list(`acct-${randomUUID()}`, 100)).records).toEqual([]);
  });
});
