// GET /v1/ambient/api/scribe pages are bounded in bytes as well as in count (issue 10: eight 15 MB
// transcripts made one page of 120 MB), on both databases, with the real 4 MiB budget and multi-MB transcripts.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LIST_PAGE_BYTES } from '../src/scribe/records.js';
import { scribeClient } from './support/scribe-client.js';
import type { ScribeClient } from './support/scribe-client.js';
import { BACKENDS } from './support/databases.js';
import { startTestApp } from './support/test-app.js';
import type { TestApp } from './support/test-app.js';

const MB = 1024 * 1024;

describe.each(BACKENDS)('scribe list pages bounded in bytes on %s', (backend) => {
  let t: TestApp;
  let client: ScribeClient;

  beforeAll(async () => {
    // No workers: the records stay as submitted, so their sizes are known.
    t = await startTestApp(backend, { AMBIENT_SCRIBE_WORKERS: '0' });
    client = scribeClient(t.app, await t.token());
  });
  afterAll(async () => t?.close());

  it('walks next_cursor over multi-MB records in pages of at most 4 MiB (or one record), each record once', async () => {
    const ids: number[] = [];
    // 1.5 MB, 1.5 MB, 5 MB (alone above the budget), 1.5 MB, 1.5 MB.
    for (const [i, size] of [1.5, 1.5, 5, 1.5, 1.5].entries()) {
      const transcript = `Patient: visit ${i}. ${'x'.repeat(size * MB)}`;
      const res = await client.submit({ transcripts: [transcript], template_ids: [1] });
      expect(res.statusCode).toBe(202);
      ids.push(res.json().scribe_id);
    }
    const pages: number[][] = [];
    let cursor: string | null = null;
    do {
      const res = await client.list(`?limit=100${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
      expect(res.statusCode).toBe(200);
      const page = res.json() as { items: { scribe_id: number; transcripts: string[] }[]; next_cursor: string | null };
      expect(page.items.length).toBeGreaterThanOrEqual(1);
      if (page.items.length > 1) expect(res.rawPayload.length).toBeLessThanOrEqual(LIST_PAGE_BYTES);
      // Items are the records as GET /scribe/{id} shows them, transcripts included.
      for (const item of page.items) expect(item.transcripts[0].length).toBeGreaterThan(MB);
      pages.push(page.items.map((item) => item.scribe_id));
      cursor = page.next_cursor;
    } while (cursor && pages.length < 20);
    const [a, b, c, d, e] = ids;
    expect(pages).toEqual([[e, d], [c], [b, a]]);
  }, 60_000);
});
