// The bound on index rows per resource (src/storage/index-limits.ts; docs/search.md, "Limits"), through
// HTTP on both databases: a resource over it is refused whole with 422 too-costly and leaves nothing
// behind (no resource, no rows, the previous version intact); one just under it is stored and found,
// including its 25,000 resource_link rows (more bound parameters than one PostgreSQL statement takes).
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_INDEX_ROWS_PER_RESOURCE } from '../src/storage/index-limits.js';
import { BACKENDS } from './support/databases.js';
import { startTestApp } from './support/test-app.js';
import type { TestApp } from './support/test-app.js';
import type { FhirClient } from './support/fhir-client.js';

const SYSTEM = 'urn:test:index-limits';

/**
 * A Patient whose index rows are known: two per name (`family` and `name`: the assembled name is the
 * family again, stored once), one per practitioner (`general-practitioner`, plus a resource_link row),
 * and two more (`identifier`, and `deceased`, which is false when absent).
 */
function patient(tag: string, names: number, practitioners = 0): Record<string, unknown> {
  return {
    resourceType: 'Patient',
    identifier: [{ system: SYSTEM, value: tag }],
    name: Array.from({ length: names }, (_, i) => ({ family: `${tag}-${i}` })),
    ...(practitioners > 0
      ? { generalPractitioner: Array.from({ length: practitioners }, (_, i) => ({ reference: `Practitioner/p${i}` })) }
      : {}),
  };
}
const rowsOf = (names: number, practitioners = 0) => 2 * names + practitioners + 2;

/** Just over the bound: the extra names cross it. */
const OVER_NAMES = MAX_INDEX_ROWS_PER_RESOURCE / 2;

describe.each(BACKENDS)('index rows per resource on %s', (backend) => {
  let t: TestApp;
  let fhir: FhirClient;

  beforeAll(async () => {
    t = await startTestApp(backend);
    fhir = await t.client();
  });
  afterAll(async () => t?.close());

  const found = async (query: string) => {
    const res = await fhir.get(`/fhir/Patient?${query}`);
    expect(res.statusCode).toBe(200);
    return ((res.json().entry ?? []) as { resource: { id: string } }[]).map((e) => e.resource.id);
  };

  const expectTooCostly = (res: { statusCode: number; json(): unknown }) => {
    expect(res.statusCode).toBe(422);
    const outcome = res.json() as { resourceType: string; issue: Record<string, unknown>[] };
    expect(outcome.resourceType).toBe('OperationOutcome');
    expect(outcome.issue[0]).toMatchObject({
      severity: 'error',
      code: 'too-costly',
      details: { coding: [{ system: 'https://ambient-fhir.dev/errors', code: 'too-many-index-rows' }] },
    });
    expect(outcome.issue[0].diagnostics).toContain(
      `more than ${MAX_INDEX_ROWS_PER_RESOURCE.toLocaleString('en-US')} search`,
    );
  };

  it('refuses a create over the bound with 422 too-costly, storing nothing', async () => {
    const tag = randomUUID();
    expect(rowsOf(OVER_NAMES)).toBeGreaterThan(MAX_INDEX_ROWS_PER_RESOURCE);
    expectTooCostly(await fhir.post('/fhir/Patient', patient(tag, OVER_NAMES)));
    expect(await found(`identifier=${SYSTEM}|${tag}`)).toEqual([]);
    expect(await found(`family:exact=${tag}-0`)).toEqual([]);

    const id = randomUUID();
    expectTooCostly(await fhir.put(`/fhir/Patient/${id}`, { ...patient(tag, OVER_NAMES), id }));
    expect((await fhir.get(`/fhir/Patient/${id}`)).statusCode).toBe(404);
  });

  it('refuses an update over the bound and keeps the previous version and its index rows', async () => {
    const tag = randomUUID();
    const created = await fhir.post('/fhir/Patient', patient(tag, 1));
    expect(created.statusCode).toBe(201);
    const { id } = created.json() as { id: string };
    expectTooCostly(await fhir.put(`/fhir/Patient/${id}`, { ...patient(`${tag}-x`, OVER_NAMES), id }));
    const read = await fhir.get(`/fhir/Patient/${id}`);
    expect(read.json()).toMatchObject({ meta: { versionId: '1' }, name: [{ family: `${tag}-0` }] });
    expect(await found(`identifier=${SYSTEM}|${tag}`)).toEqual([id]);
    expect(await found(`family:exact=${tag}-0`)).toEqual([id]);
    expect(await found(`identifier=${SYSTEM}|${tag}-x`)).toEqual([]);
  });

  it('refuses a transaction with one entry over the bound, storing none of its entries', async () => {
    const tag = randomUUID();
    const res = await fhir.post('/fhir', {
      resourceType: 'Bundle',
      type: 'transaction',
      entry: [
        { request: { method: 'POST', url: 'Patient' }, resource: patient(`${tag}-small`, 1) },
        { request: { method: 'POST', url: 'Patient' }, resource: patient(tag, OVER_NAMES) },
      ],
    });
    expectTooCostly(res);
    expect(await found(`identifier=${SYSTEM}|${tag}-small`)).toEqual([]);
  });

  it('stores and finds a resource just under the bound, with 25,000 references (resource_link rows)', async () => {
    const tag = randomUUID();
    const practitioners = 25_000;
    const names = (MAX_INDEX_ROWS_PER_RESOURCE - practitioners) / 2 - 10;
    expect(rowsOf(names, practitioners)).toBeLessThanOrEqual(MAX_INDEX_ROWS_PER_RESOURCE);
    expect(rowsOf(names, practitioners)).toBeGreaterThan(MAX_INDEX_ROWS_PER_RESOURCE - 100);
    const res = await fhir.post('/fhir/Patient', patient(tag, names, practitioners));
    expect(res.statusCode, res.body.slice(0, 500)).toBe(201);
    const { id } = res.json() as { id: string };
    expect(await found(`identifier=${SYSTEM}|${tag}`)).toEqual([id]);
    expect(await found(`family:exact=${tag}-${names - 1}`)).toEqual([id]);
    expect(await found(`identifier=${SYSTEM}|${tag}&general-practitioner=Practitioner/p${practitioners - 1}`)).toEqual([
      id,
    ]);
  });
});
