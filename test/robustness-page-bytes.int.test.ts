// Search, history and export pages are bounded in bytes as well as in count (AMBIENT_MAX_PAGE_BYTES):
// `_count` goes up to 1,000 and a resource up to AMBIENT_MAX_BODY_BYTES, so a page read whole could
// need gigabytes. Resources above INLINE_CONTENT_BYTES are left out of the page statements and fetched
// one at a time; a page ends early where the next resource would not fit, and its links walk on.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { INLINE_CONTENT_BYTES } from '../src/storage/page-content.js';
import { BulkClient } from './support/bulk-export-client.js';
import { BACKENDS } from './support/databases.js';
import { startTestApp } from './support/test-app.js';
import type { TestApp } from './support/test-app.js';
import { linkOf, pathOf } from './support/fhir-client.js';
import type { FhirClient } from './support/fhir-client.js';

const PAGE_BYTES = 300_000;
const LARGE = 100_000;
const SMALL = 1_000;

type Resource = { resourceType: string; id: string; [key: string]: unknown };
type Bundle = {
  type: string;
  link?: { relation: string; url: string }[];
  entry?: { resource: Resource; search?: { mode: string } }[];
};

const bytes = (resource: unknown) => Buffer.byteLength(JSON.stringify(resource));

describe.each(BACKENDS)('pages bounded in bytes on %s', (backend) => {
  let t: TestApp;
  let fhir: FhirClient;
  const run = randomUUID();
  /** Patient ids in creation order, with the size of their filler. */
  const patients: { id: string; filler: number }[] = [];

  const get = async (url: string): Promise<Bundle> => {
    const res = await fhir.get(pathOf(url));
    expect(res.statusCode, res.body).toBe(200);
    return res.json() as Bundle;
  };
  const write = async (method: 'POST' | 'PUT', url: string, resource: Record<string, unknown>) => {
    const res = await fhir.request(method, url, resource);
    expect(res.statusCode, res.body).toBeLessThan(300);
    return res.json() as Resource;
  };
  const patient = (filler: number, id?: string) => ({
    resourceType: 'Patient',
    ...(id ? { id } : {}),
    identifier: [{ system: 'urn:test:page-bytes', value: run }],
    extension: [{ url: 'http://example.org/filler', valueString: 'x'.repeat(filler) }],
  });
  /** Every page from `url` on, following `relation`. */
  const walk = async (url: string, relation = 'next'): Promise<Bundle[]> => {
    const pages: Bundle[] = [];
    for (let at: string | undefined = url; at; at = linkOf(pages[pages.length - 1], relation)) {
      pages.push(await get(at));
      expect(pages.length).toBeLessThan(50);
    }
    return pages;
  };
  const matchIds = (page: Bundle) =>
    (page.entry ?? []).filter((e) => e.search?.mode === 'match').map((e) => e.resource.id);

  beforeAll(async () => {
    t = await startTestApp(backend, { AMBIENT_MAX_PAGE_BYTES: String(PAGE_BYTES) });
    fhir = await t.client();
    // Large ones are left out of the page statements (> INLINE_CONTENT_BYTES); one is above the budget alone.
    for (const filler of [LARGE, LARGE, SMALL, LARGE, 2 * PAGE_BYTES, SMALL, SMALL, LARGE, LARGE, SMALL, LARGE]) {
      patients.push({ id: (await write('POST', '/fhir/Patient', patient(filler))).id, filler });
    }
    expect(LARGE).toBeGreaterThan(INLINE_CONTENT_BYTES);
  });
  afterAll(async () => t?.close());

  it('ends a search page where its bytes run out, and the next links visit every match once, whole', async () => {
    const pages = await walk(`/fhir/Patient?identifier=urn:test:page-bytes|${run}&_count=100`);
    expect(pages.map(matchIds).flat()).toEqual(patients.map((p) => p.id));
    // The count never ended a page: the bytes did, each page as full as the next resource allowed.
    expect(pages.length).toBeGreaterThan(3);
    for (const [i, page] of pages.entries()) {
      const resources = (page.entry ?? []).map((e) => e.resource);
      if (resources.length > 1) expect(resources.reduce((sum, r) => sum + bytes(r), 0)).toBeLessThanOrEqual(PAGE_BYTES);
      for (const resource of resources) {
        const filler = (resource.extension as { valueString: string }[])[0].valueString;
        expect(filler.length).toBe(patients.find((p) => p.id === resource.id)!.filler);
      }
      const following = pages[i + 1]?.entry?.[0]?.resource;
      if (following)
        expect(resources.reduce((sum, r) => sum + bytes(r), 0) + bytes(following)).toBeGreaterThan(PAGE_BYTES);
    }
    // The resource larger than the budget came, alone.
    expect(pages.some((page) => page.entry?.length === 1 && bytes(page.entry[0].resource) > PAGE_BYTES)).toBe(true);
  });

  it('walks back with the previous links over the same pages', async () => {
    const forward = await walk(`/fhir/Patient?identifier=urn:test:page-bytes|${run}&_count=100`);
    // Pages the bytes ended, or walking back would prove nothing.
    expect(forward.length).toBeGreaterThan(3);
    const last = forward[forward.length - 1];
    const back = await walk(linkOf(last, 'previous')!, 'previous');
    expect(back).toHaveLength(forward.length - 1);
    const seen = back.reverse().map(matchIds).flat();
    expect(seen).toEqual(patients.slice(0, seen.length).map((p) => p.id));
    expect(seen).toEqual(forward.slice(0, -1).map(matchIds).flat());
  });

  it('a sorted search ends its pages early the same way', async () => {
    const pages = await walk(`/fhir/Patient?identifier=urn:test:page-bytes|${run}&_sort=-_id&_count=100`);
    expect(pages.map(matchIds).flat()).toEqual(
      patients
        .map((p) => p.id)
        .sort()
        .reverse(),
    );
    expect(pages.length).toBeGreaterThan(3);
  });

  it('cuts the included resources where the budget runs out, with a warning, the matches all there', async () => {
    const tag = randomUUID();
    const subjects = patients.filter((p) => p.filler === LARGE).map((p) => p.id);
    for (const subject of subjects) {
      await write('POST', '/fhir/Encounter', {
        resourceType: 'Encounter',
        status: 'finished',
        class: { system: 'http://terminology.hl7.org/CodeSystem/v3-ActCode', code: 'AMB' },
        identifier: [{ system: 'urn:test:page-bytes', value: tag }],
        subject: { reference: `Patient/${subject}` },
      });
    }
    const bundle = await get(
      `/fhir/Encounter?identifier=urn:test:page-bytes|${tag}&_include=Encounter:subject&_count=100`,
    );
    expect(matchIds(bundle)).toHaveLength(subjects.length);
    const included = (bundle.entry ?? []).filter((e) => e.search?.mode === 'include').map((e) => e.resource);
    // Small matches, then 100 KB subjects while they fit in 300,000 bytes: two of them.
    expect(included.map((r) => r.id)).toEqual(subjects.slice(0, 2));
    const outcome = bundle.entry?.find((e) => e.search?.mode === 'outcome')?.resource as unknown as {
      issue: { code: string; diagnostics: string }[];
    };
    expect(outcome.issue).toEqual([
      expect.objectContaining({ code: 'too-costly', diagnostics: expect.stringContaining('AMBIENT_MAX_PAGE_BYTES') }),
    ]);
  });

  it('ends a history page where its bytes run out; the next links visit every version once', async () => {
    // Not among the searches' matches: no identifier.
    const id = (await write('POST', '/fhir/Patient', { ...patient(LARGE), identifier: undefined })).id;
    for (let i = 1; i < 5; i++) await write('PUT', `/fhir/Patient/${id}`, patient(LARGE + i, id));
    const pages = await walk(`/fhir/Patient/${id}/_history?_count=100`);
    const versions = pages.flatMap((page) =>
      (page.entry ?? []).map((e) => (e.resource as unknown as { meta: { versionId: string } }).meta.versionId),
    );
    expect(versions).toEqual(['5', '4', '3', '2', '1']);
    expect(pages.map((page) => page.entry?.length)).toEqual([2, 2, 1]);
    const fillers = pages.flatMap((page) =>
      (page.entry ?? []).map((e) => (e.resource.extension as { valueString: string }[])[0].valueString.length),
    );
    expect(fillers).toEqual([LARGE + 4, LARGE + 3, LARGE + 2, LARGE + 1, LARGE]);
  });

  it('exports the large resources whole', async () => {
    const client = new BulkClient(t.app, fhir.token!);
    const manifest = await client.manifest(await client.start('/fhir/$export?_type=Patient'));
    const exported = (await client.resources(manifest)).get('Patient') ?? [];
    for (const { id, filler } of patients) {
      const resource = exported.find((r) => r.id === id);
      expect((resource?.extension as { valueString: string }[])[0].valueString.length).toBe(filler);
    }
  });

  it('a batch of large reads performs entries while its response holds at most the budget, then answers 422', async () => {
    const large = patients.filter((p) => p.filler === LARGE).map((p) => p.id);
    const bundle = {
      resourceType: 'Bundle',
      type: 'batch',
      entry: large.slice(0, 5).map((id) => ({ request: { method: 'GET', url: `Patient/${id}` } })),
    };
    const res = await fhir.post('/fhir', bundle);
    expect(res.statusCode, res.body).toBe(200);
    const entries = (
      res.json() as { entry: { response: { status: string; outcome?: { issue: { code: string }[] } } }[] }
    ).entry;
    expect(entries.map((e) => e.response.status)).toEqual([
      '200 OK',
      '200 OK',
      '200 OK',
      '422 Unprocessable Entity',
      '422 Unprocessable Entity',
    ]);
    expect(entries[3].response.outcome?.issue[0].code).toBe('too-costly');
  });

  it('a transaction whose reads outgrow the budget fails whole', async () => {
    const large = patients.filter((p) => p.filler === LARGE).map((p) => p.id);
    const bundle = {
      resourceType: 'Bundle',
      type: 'transaction',
      entry: [
        {
          fullUrl: 'urn:uuid:0b6a6d3c-5a51-4f43-9c0e-2b9a1f0c0001',
          resource: patient(SMALL),
          request: { method: 'POST', url: 'Patient' },
        },
        ...large.slice(0, 4).map((id) => ({ request: { method: 'GET', url: `Patient/${id}` } })),
      ],
    };
    const search = `/fhir/Patient?identifier=urn:test:page-bytes|${run}&_count=100`;
    const before = (await walk(search)).map(matchIds).flat();
    const res = await fhir.post('/fhir', bundle);
    expect(res.statusCode, res.body).toBe(422);
    expect(res.json().issue[0].diagnostics).toContain('AMBIENT_MAX_PAGE_BYTES');
    // Nothing stored: the search finds the test's patients only.
    expect((await walk(search)).map(matchIds).flat()).toEqual(before);
  });
});
