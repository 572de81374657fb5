import { describe, expect, it } from 'vitest';
import {
  contentLeftOut,
  fitPage,
  INLINE_CONTENT_BYTES,
  inlineContentBytes,
  MIN_INLINE_CONTENT_BYTES,
  pageContentColumns,
} from './page-content.js';

type TestRow = { pk: number; content: string | null; content_bytes: number | null };

const inline = (pk: number, bytes: number): TestRow => ({ pk, content: 'x'.repeat(bytes), content_bytes: bytes });
const large = (pk: number, bytes: number): TestRow => ({ pk, content: null, content_bytes: bytes });

/** A fetch that answers `x` × the row's size, remembering what it was asked for. */
function fetcher(gone: readonly number[] = []) {
  const asked: number[] = [];
  const fetch = async (row: TestRow) => {
    asked.push(row.pk);
    return gone.includes(row.pk) ? undefined : 'x'.repeat(Number(row.content_bytes));
  };
  return { asked, fetch };
}

describe('pageContentColumns', () => {
  it('selects the content only up to the inline limit (its one parameter), and its length and version always', () => {
    expect(pageContentColumns('r0')).toBe(
      'CASE WHEN octet_length(r0.content) <= ? THEN r0.content END AS content, octet_length(r0.content) AS content_bytes, r0.version AS content_version',
    );
  });

  it('tells a left-out content from a row without content (a deletion)', () => {
    expect(contentLeftOut(large(1, 70_000))).toBe(true);
    expect(contentLeftOut({ content: null, content_bytes: null })).toBe(false);
    expect(contentLeftOut(inline(1, 10))).toBe(false);
  });
});

describe('inlineContentBytes', () => {
  it('inlines up to 64 KiB while the budget covers that much for every row', () => {
    expect(inlineContentBytes(32 * 2 ** 20, 21)).toBe(INLINE_CONTENT_BYTES);
    expect(inlineContentBytes(32 * 2 ** 20, 512)).toBe(INLINE_CONTENT_BYTES);
    expect(inlineContentBytes(Number.POSITIVE_INFINITY, 1001)).toBe(INLINE_CONTENT_BYTES);
  });

  it("takes the budget's share per row as a power of two, so a statement holds no more than the budget", () => {
    expect(inlineContentBytes(32 * 2 ** 20, 1001)).toBe(32768);
    expect(inlineContentBytes(32 * 2 ** 20, 513)).toBe(32768);
    expect(inlineContentBytes(2 ** 20, 101)).toBe(8192);
    for (const [budget, rows] of [
      [32 * 2 ** 20, 1001],
      [2 ** 20, 101],
      [5_000_000, 333],
    ]) {
      expect(inlineContentBytes(budget, rows) * rows).toBeLessThanOrEqual(budget);
    }
  });

  it('never goes below 4 KiB, so that a page of small resources is not fetched one by one', () => {
    expect(inlineContentBytes(1024, 1001)).toBe(MIN_INLINE_CONTENT_BYTES);
    expect(inlineContentBytes(2 ** 20, 1001)).toBe(MIN_INLINE_CONTENT_BYTES);
    expect(inlineContentBytes(0, 0)).toBe(MIN_INLINE_CONTENT_BYTES);
  });
});

describe('fitPage', () => {
  it('keeps the leading rows within the budget, fetching only the left-out contents it keeps', async () => {
    const { asked, fetch } = fetcher();
    const budget = { remaining: 250 };
    const page = await fitPage(
      [inline(1, 50), large(2, 100), inline(3, 50), large(4, 100), inline(5, 10)],
      budget,
      fetch,
      true,
    );
    expect(page.rows.map((r) => r.pk)).toEqual([1, 2, 3]);
    expect(page.rows.map((r) => r.content?.length)).toEqual([50, 100, 50]);
    expect(page.cut).toBe('budget');
    expect(asked).toEqual([2]);
    expect(budget.remaining).toBe(50);
  });

  it('stops at the first row that does not fit, even when a later one would', async () => {
    const page = await fitPage([inline(1, 60), inline(2, 60), inline(3, 1)], { remaining: 100 }, fetcher().fetch, true);
    expect(page.rows.map((r) => r.pk)).toEqual([1]);
    expect(page.cut).toBe('budget');
  });

  it('takes a first row larger than the whole budget when asked to (paging moves on), not otherwise', async () => {
    const first = await fitPage([large(1, 500), inline(2, 1)], { remaining: 100 }, fetcher().fetch, true);
    expect(first.rows.map((r) => r.pk)).toEqual([1]);
    expect(first.cut).toBe('budget');
    const { asked, fetch } = fetcher();
    const none = await fitPage([large(1, 500), inline(2, 1)], { remaining: 100 }, fetch, false);
    expect(none.rows).toEqual([]);
    expect(none.cut).toBe('budget');
    expect(asked).toEqual([]);
  });

  it('ends the page before a content it cannot read (a replica behind), even the first', async () => {
    const { fetch } = fetcher([2]);
    const page = await fitPage([inline(1, 10), large(2, 20), inline(3, 1)], { remaining: 100 }, fetch, true);
    expect(page.rows.map((r) => r.pk)).toEqual([1]);
    expect(page.cut).toBe('unreadable');
    const none = await fitPage([large(2, 20), inline(3, 1)], { remaining: 100 }, fetch, true);
    expect(none).toEqual({ rows: [], cut: 'unreadable' });
  });

  it('keeps every row when the budget allows, rows without content costing nothing', async () => {
    const rows = [inline(1, 10), { pk: 2, content: null, content_bytes: null }, large(3, 20)];
    const page = await fitPage(rows, { remaining: 30 }, fetcher().fetch, true);
    expect(page.rows.map((r) => r.pk)).toEqual([1, 2, 3]);
    expect(page.cut).toBeUndefined();
  });
});
