// The executor's byte-bounded page (execute.ts with storage/page-content.ts), against a scripted
// statement runner: which statements it runs for contents the page statement left out, and what it
// does when one cannot be read (a read replica behind the one that answered the page statement).
import { describe, expect, it } from 'vitest';
import { loadR4Definitions } from '../definitions/registry.js';
import { AppError } from '../errors.js';
import { sqliteDialect } from '../storage/sql/dialect.js';
import { executeSearch } from './execute.js';
import type { Row } from './execute.js';
import { parseSearch } from './parse.js';
import type { Plan } from './plan.js';
import { MAX_INCLUDED } from './sql/compile.js';
import type { CompiledInclude, CompiledSearch } from './sql/compile.js';
import { sql } from './sql/fragment.js';
import type { Sql } from './sql/fragment.js';

const registry = loadR4Definitions();
const plan: Plan = { types: ['Patient'], criteria: [], sort: [], includes: [], ignored: [], linkParams: [] };
const compiled: CompiledSearch = {
  page: [Object.assign(sql`SELECT page LIMIT ${21}`, { limitParam: 0 })],
  pageLimit: 21,
  includes: [],
};

const small = (pk: number): Row => {
  const content = JSON.stringify({ resourceType: 'Patient', id: `p${pk}` });
  return { pk, id: `p${pk}`, type: 'Patient', content, content_bytes: content.length, content_version: 1 };
};
/** A row whose content the page statement left out: version 3, 100,000 bytes. */
const large = (pk: number): Row => ({
  pk,
  id: `p${pk}`,
  type: 'Patient',
  content: null,
  content_bytes: 100_000,
  content_version: 3,
});

/** An _include directive whose statement the runner answers with its `included` rows. */
const include: CompiledInclude = {
  reverse: false,
  iterate: false,
  from: 'any',
  statement: sql`SELECT included ${'frontier'} ${0}`,
  frontierParam: 0,
  keysParam: -1,
  limitParam: 1,
};

/**
 * Answers the page statement with `page`, the include statement with `included`, and a history fetch
 * with the content unless `unreadable`.
 */
function runner(page: Row[], unreadable: readonly number[] = [], included: Row[] = []) {
  const fetched: unknown[][] = [];
  const run = async (statement: Sql): Promise<Row[]> => {
    if (statement.text === 'SELECT page LIMIT ?') return page.map((row) => ({ ...row }));
    if (statement.text === 'SELECT included ? ?') return included.map((row) => ({ ...row }));
    expect(statement.text).toBe('SELECT content FROM resource_history WHERE pk = ? AND version = ?');
    fetched.push([...statement.params]);
    const [pk, version] = statement.params as number[];
    if (unreadable.includes(pk)) return [];
    const content = JSON.stringify({ resourceType: 'Patient', id: `p${pk}`, meta: { versionId: String(version) } });
    return [{ content } as unknown as Row];
  };
  return { run, fetched };
}

function search(run: (statement: Sql) => Promise<Row[]>, maxPageBytes = 1_000_000, statements = compiled) {
  const context = {
    run,
    dialect: sqliteDialect,
    registry,
    baseUrl: 'https://x/fhir',
    secret: 's',
    path: 'Patient',
    maxPageBytes,
    mayReadBinary: () => true,
  };
  return executeSearch(context, parseSearch([]), plan, statements, undefined);
}

/** The Patients of the Bundle (not the OperationOutcome of its warnings), as id@version. */
const ids = (body: unknown) =>
  (
    (
      JSON.parse(String(body)) as {
        entry?: { resource: { resourceType: string; id: string; meta?: { versionId: string } } }[];
      }
    ).entry ?? []
  )
    .filter((e) => e.resource.resourceType === 'Patient')
    .map((e) => `${e.resource.id}@${e.resource.meta?.versionId ?? '-'}`);
const next = (body: unknown) =>
  (JSON.parse(String(body)) as { link: { relation: string }[] }).link.some((l) => l.relation === 'next');

describe('a search page bounded in bytes', () => {
  it('fetches a left-out content as the version the page statement matched, from the history', async () => {
    const { run, fetched } = runner([small(1), large(2), small(3)]);
    const response = await search(run);
    expect(ids(response.body)).toEqual(['p1@-', 'p2@3', 'p3@-']);
    expect(fetched).toEqual([[2, 3]]);
    expect(next(response.body)).toBe(false);
  });

  it('ends the page before a content it cannot read, with a next link to go on from there', async () => {
    const { run } = runner([small(1), large(2), small(3)], [2]);
    const response = await search(run);
    expect(ids(response.body)).toEqual(['p1@-']);
    expect(next(response.body)).toBe(true);
  });

  it('answers 503 to retry when not even the first match can be read', async () => {
    const { run } = runner([large(1), small(2)], [1]);
    const error = await search(run).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(AppError);
    expect((error as AppError).code).toBe('database-unavailable');
  });

  it('ends the page where the next match would pass the budget, the first coming whatever its size', async () => {
    const { run, fetched } = runner([large(1), large(2), small(3)]);
    const response = await search(run, 150_000);
    expect(ids(response.body)).toEqual(['p1@3']);
    expect(fetched).toEqual([[1, 3]]);
    expect(next(response.body)).toBe(true);
  });

  const warnings = (body: unknown) =>
    (
      (JSON.parse(String(body)) as { entry: { resource: { resourceType: string; issue?: unknown[] } }[] }).entry.find(
        (e) => e.resource.resourceType === 'OperationOutcome',
      )?.resource.issue ?? []
    ).map((i) => (i as { code: string }).code);

  it('cuts the included resources where the budget runs out, saying so', async () => {
    const { run } = runner([small(1)], [], [large(20), large(21)]);
    const response = await search(run, 150_000, { ...compiled, includes: [include] });
    expect(ids(response.body)).toEqual(['p1@-', 'p20@3']);
    expect(warnings(response.body)).toEqual(['too-costly']);
  });

  it('cuts the included resources at one a replica cannot read yet, saying to repeat the search', async () => {
    const { run } = runner([small(1)], [21], [large(20), large(21)]);
    const response = await search(run, 1_000_000, { ...compiled, includes: [include] });
    expect(ids(response.body)).toEqual(['p1@-', 'p20@3']);
    expect(warnings(response.body)).toEqual(['transient']);
  });

  it('says the includes were capped when their statement reached its limit, rows already on the page counted', async () => {
    // 1,001 rows (the statement's limit) of which one is the match itself: 1,000 new, the cap, and maybe more.
    const included = [small(1), ...Array.from({ length: MAX_INCLUDED }, (_, i) => small(100 + i))];
    const { run } = runner([small(1)], [], included);
    const response = await search(run, 1_000_000, { ...compiled, includes: [include] });
    expect(ids(response.body)).toHaveLength(1 + MAX_INCLUDED);
    expect(warnings(response.body)).toEqual(['too-costly']);
    // Under the limit, nothing to say.
    const { run: fewer } = runner([small(1)], [], included.slice(0, 500));
    expect(warnings((await search(fewer, 1_000_000, { ...compiled, includes: [include] })).body)).toEqual([]);
  });

  it("reads a continuation's rows only up to what the statements before it left of the page", async () => {
    const limits: unknown[] = [];
    const continued: CompiledSearch = {
      ...compiled,
      page: [compiled.page[0], Object.assign(sql`SELECT more LIMIT ${21}`, { limitParam: 0 })],
    };
    const run = async (statement: Sql): Promise<Row[]> => {
      limits.push(statement.params[0]);
      return statement.text === 'SELECT page LIMIT ?' ? [small(1), small(2)] : [small(3)];
    };
    const response = await search(run, 1_000_000, continued);
    expect(ids(response.body)).toEqual(['p1@-', 'p2@-', 'p3@-']);
    expect(limits).toEqual([21, 19]);
  });
});
