// Issue 23 §2 and §12 over HTTP on both databases: the searches a write makes (conditional criteria:
// If-None-Exist, conditional update and delete, a Bundle's ifNoneExist and conditional references) and a
// transaction's search entries stop at the search budget with 422 `too-costly`, store nothing, and leave
// /healthz answering meanwhile (on SQLite they once ran on the writer, on the event loop, to their end);
// a conditional update that matches nothing never updates the resource its body's id names; a batch
// resolves its entries' conditional references.
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { assembleApp } from '../src/assemble.js';
import { loadConfig } from '../src/config.js';
import { openDatabase } from '../src/storage/open-database.js';
import { clonePatient } from './support/clone-rows.js';
import { BACKENDS } from './support/databases.js';
import { startTestApp, TEST_PUBLIC_URL } from './support/test-app.js';
import type { TestApp } from './support/test-app.js';
import { fhirClient } from './support/fhir-client.js';
import type { FhirClient, Reply } from './support/fhir-client.js';

/** Enough Patients that a `:contains` search over their names runs far past the budget. */
const CLONES = 200_000;
const BUDGET_MS = 300;
/**
 * Criteria that read every Patient's name rows and match none: 30 values (the limit is 32) that each
 * name row is compared with, so that the scan runs far past the budget however fast the machine (one
 * value over 200,000 short names ran within 300 ms now and then).
 */
const COSTLY = `name:contains=${Array.from({ length: 30 }, (_, i) => `zz${i}zz`).join(',')}`;

interface Outcome {
  resourceType: string;
  issue: { code: string; diagnostics: string; details?: { coding: { code: string }[] } }[];
}
interface BundleResponse {
  resourceType: string;
  type: string;
  entry: { resource?: Record<string, unknown>; response: { status: string; location?: string; outcome?: Outcome } }[];
}

describe.each(BACKENDS)('the searches of a write, on %s', (backend) => {
  let t: TestApp;
  /** An account that may create, update, delete and search Patients and Observations, nothing else. */
  let writer: FhirClient;
  let admin: FhirClient;
  /** The same database served with a budget of a minute, for requests meant to finish. */
  let loose: FastifyInstance;
  let looseWriter: FhirClient;

  beforeAll(async () => {
    t = await startTestApp(backend, { AMBIENT_SEARCH_TIMEOUT_MS: String(BUDGET_MS) });
    admin = await t.client();
    writer = await t.client('system/Patient.cruds system/Observation.cruds');
    const seed = await admin.post('/fhir/Patient', { resourceType: 'Patient', name: [{ family: 'Budgeted' }] });
    expect(seed.statusCode).toBe(201);
    const seeder = openDatabase(t.database.url);
    try {
      await clonePatient(seeder, (seed.json() as { id: string }).id, CLONES);
    } finally {
      await seeder.close();
    }
    loose = await assembleApp(
      loadConfig({
        DATABASE_URL: t.database.url,
        AMBIENT_PUBLIC_URL: TEST_PUBLIC_URL,
        LOG_LEVEL: 'silent',
        AMBIENT_SEARCH_TIMEOUT_MS: '60000',
      }),
    );
    await loose.ready();
    looseWriter = fhirClient(loose, writer.token);
  }, 240_000);
  afterAll(async () => {
    await loose?.close();
    await t?.close();
  });

  /**
   * Sends the request and, while it runs, /healthz: answers the request's reply and whether /healthz was
   * answered before it (it cannot be while a statement holds the event loop).
   */
  async function whileHealthy(send: () => Promise<Reply>): Promise<Reply> {
    let done = false;
    const pending = send().finally(() => (done = true));
    // Long enough for the request to be in the database (its body parsed, its plan made).
    await new Promise((resolve) => setTimeout(resolve, 40));
    const health = await t.app.inject({ method: 'GET', url: '/healthz' });
    const answeredMeanwhile = !done;
    expect(health.statusCode).toBe(200);
    const reply = await pending;
    expect(answeredMeanwhile, 'GET /healthz answered while the request ran').toBe(true);
    return reply;
  }

  function expectTooCostly(reply: Reply, where?: RegExp): void {
    expect(reply.statusCode, reply.body.slice(0, 500)).toBe(422);
    const outcome = reply.json() as Outcome;
    expect(outcome.resourceType).toBe('OperationOutcome');
    expect(outcome.issue[0].code).toBe('too-costly');
    expect(outcome.issue[0].details?.coding[0].code).toBe('search-timeout');
    expect(outcome.issue[0].diagnostics).toContain(`time budget of ${BUDGET_MS} ms`);
    if (where) expect(outcome.issue[0].diagnostics).toMatch(where);
  }

  /** The resources of `type` whose identifier is `system|value` (a cheap, indexed search). */
  async function stored(type: string, identifier: string): Promise<Record<string, unknown>[]> {
    const res = await admin.get(`/fhir/${type}?identifier=${encodeURIComponent(identifier)}`);
    expect(res.statusCode, res.body).toBe(200);
    return ((res.json() as BundleResponse).entry ?? []).map((e) => e.resource!);
  }

  const patient = (value: string) => ({
    resourceType: 'Patient',
    identifier: [{ system: 'urn:test:budget', value }],
    name: [{ family: 'Attacker' }],
  });

  it('stops a conditional create whose If-None-Exist is costly at the budget, storing nothing', async () => {
    const reply = await whileHealthy(() =>
      writer.post('/fhir/Patient', patient('ifnoneexist'), { 'if-none-exist': COSTLY }),
    );
    expectTooCostly(reply);
    expect(await stored('Patient', 'urn:test:budget|ifnoneexist')).toEqual([]);
  });

  it('stops a conditional update and a conditional delete whose criteria are costly', async () => {
    const update = await whileHealthy(() => writer.put(`/fhir/Patient?${COSTLY}`, patient('condupdate')));
    expectTooCostly(update);
    expect(await stored('Patient', 'urn:test:budget|condupdate')).toEqual([]);
    const remove = await whileHealthy(() => writer.delete(`/fhir/Patient?${COSTLY}`));
    expectTooCostly(remove);
  });

  it("stops a read-only account's transaction of costly GET entries at the budget", async () => {
    // The attack of the issue (there a system/Observation.rs account over its Observations).
    const patientReader = await t.client('system/Patient.rs');
    const entries = [
      { request: { method: 'GET', url: `Patient?${COSTLY}&_total=accurate` } },
      { request: { method: 'GET', url: `Patient?${COSTLY}` } },
    ];
    const reply = await whileHealthy(() =>
      patientReader.post('/fhir', { resourceType: 'Bundle', type: 'transaction', entry: entries }),
    );
    expectTooCostly(reply, /^Bundle\.entry\[0\]/);
  });

  it('stops a transaction whose ifNoneExist or conditional reference is costly, storing nothing', async () => {
    const ifNoneExist = await whileHealthy(() =>
      writer.post('/fhir', {
        resourceType: 'Bundle',
        type: 'transaction',
        entry: [
          { resource: patient('tx-plain'), request: { method: 'POST', url: 'Patient' } },
          { resource: patient('tx-ifnoneexist'), request: { method: 'POST', url: 'Patient', ifNoneExist: COSTLY } },
        ],
      }),
    );
    expectTooCostly(ifNoneExist, /^Bundle\.entry\[1\]/);
    const reference = await whileHealthy(() =>
      writer.post('/fhir', {
        resourceType: 'Bundle',
        type: 'transaction',
        entry: [
          { resource: patient('tx-plain'), request: { method: 'POST', url: 'Patient' } },
          {
            resource: {
              resourceType: 'Observation',
              status: 'final',
              code: { text: 'budget' },
              identifier: [{ system: 'urn:test:budget', value: 'tx-reference' }],
              subject: { reference: `Patient?${COSTLY}` },
            },
            request: { method: 'POST', url: 'Observation' },
          },
        ],
      }),
    );
    expectTooCostly(reference, /^Bundle\.entry\[1\]/);
    expect(await stored('Patient', 'urn:test:budget|tx-plain')).toEqual([]);
    expect(await stored('Patient', 'urn:test:budget|tx-ifnoneexist')).toEqual([]);
    expect(await stored('Observation', 'urn:test:budget|tx-reference')).toEqual([]);
  });

  it("bounds a transaction's costly search beside its writes", async () => {
    const reply = await whileHealthy(() =>
      writer.post('/fhir', {
        resourceType: 'Bundle',
        type: 'transaction',
        entry: [
          { resource: patient('tx-with-search'), request: { method: 'POST', url: 'Patient' } },
          { request: { method: 'GET', url: `Patient?${COSTLY}&_total=accurate` } },
        ],
      }),
    );
    if (backend === 'postgres') {
      // Inside the transaction, stopped there by statement_timeout: the transaction fails whole.
      expectTooCostly(reply, /^Bundle\.entry\[1\]/);
      expect(await stored('Patient', 'urn:test:budget|tx-with-search')).toEqual([]);
    } else {
      // After the commit, as a bounded read: the write stands, the search answers its entry with 422.
      expect(reply.statusCode, reply.body.slice(0, 300)).toBe(200);
      const bundle = reply.json() as BundleResponse;
      expect(bundle.type).toBe('transaction-response');
      expect(bundle.entry[0].response.status).toBe('201 Created');
      expect(bundle.entry[1].response.status).toBe('422 Unprocessable Entity');
      expect(bundle.entry[1].response.outcome?.issue[0].code).toBe('too-costly');
      expect(bundle.entry[1].response.outcome?.issue[0].diagnostics).toMatch(/^Bundle\.entry\[1\].*time budget/);
      const [created] = await stored('Patient', 'urn:test:budget|tx-with-search');
      expect(bundle.entry[0].response.location).toContain(`Patient/${created.id as string}/_history/1`);
    }
  });

  it('refuses, before the transaction, a search entry it would run after the commit and cannot', async () => {
    const reply = await writer.post('/fhir', {
      resourceType: 'Bundle',
      type: 'transaction',
      entry: [
        { resource: patient('tx-forbidden-search'), request: { method: 'POST', url: 'Patient' } },
        { request: { method: 'GET', url: 'Encounter?status=finished' } },
      ],
    });
    expect(reply.statusCode).toBe(403);
    expect((reply.json() as Outcome).issue[0].diagnostics).toMatch(/^Bundle\.entry\[1\].*Encounter/);
    expect(await stored('Patient', 'urn:test:budget|tx-forbidden-search')).toEqual([]);
  });

  it('finds what the same transaction wrote before its conditional update', async () => {
    const reply = await writer.post('/fhir', {
      resourceType: 'Bundle',
      type: 'transaction',
      entry: [
        { resource: patient('tx-own-write'), request: { method: 'POST', url: 'Patient' } },
        {
          resource: { ...patient('tx-own-write'), name: [{ family: 'Updated' }] },
          request: { method: 'PUT', url: 'Patient?identifier=urn:test:budget|tx-own-write' },
        },
      ],
    });
    expect(reply.statusCode, reply.body.slice(0, 300)).toBe(200);
    const bundle = reply.json() as BundleResponse;
    expect(bundle.entry.map((e) => e.response.status)).toEqual(['201 Created', '200 OK']);
    const matches = await stored('Patient', 'urn:test:budget|tx-own-write');
    expect(matches).toHaveLength(1);
    expect(matches[0].meta).toMatchObject({ versionId: '2' });
    expect(matches[0].name).toEqual([{ family: 'Updated' }]);
  });

  it('sees a resource committed between the search ahead and the write: one conditional create wins', async () => {
    // Sixteen conditional creates of one identifier at once: each searches ahead before any commits, so
    // every one but the first must find, inside its transaction, what another committed meanwhile.
    // On the same database with a budget of a minute: on PostgreSQL the sixteen queue on the criteria's
    // lock, and under load the last could wait past the 300 ms the costly searches here are given.
    const replies = await Promise.all(
      Array.from({ length: 16 }, () =>
        looseWriter.post('/fhir/Patient', patient('race'), { 'if-none-exist': 'identifier=urn:test:budget|race' }),
      ),
    );
    const statuses = replies.map((r) => r.statusCode);
    expect(statuses.filter((s) => s === 201)).toHaveLength(1);
    expect(statuses.filter((s) => s === 200)).toHaveLength(15);
    const matches = await stored('Patient', 'urn:test:budget|race');
    expect(matches).toHaveLength(1);
    for (const reply of replies) expect((reply.json() as { id: string }).id).toBe(matches[0].id);
  });

  it('refuses a conditional update that matches nothing whose body names an existing resource (409)', async () => {
    const victim = await admin.post('/fhir/Patient', { ...patient('victim'), name: [{ family: 'Victim' }] });
    expect(victim.statusCode).toBe(201);
    const id = (victim.json() as { id: string }).id;
    const reply = await writer.put('/fhir/Patient?identifier=urn:test:budget|nobody', {
      ...patient('nobody'),
      id,
      name: [{ family: 'Overwritten' }],
    });
    expect(reply.statusCode, reply.body).toBe(409);
    const outcome = reply.json() as Outcome;
    expect(outcome.issue[0].code).toBe('conflict');
    expect(outcome.issue[0].diagnostics).toContain(`Patient/${id}`);
    const read = await admin.get(`/fhir/Patient/${id}`);
    expect(read.json()).toMatchObject({ meta: { versionId: '1' }, name: [{ family: 'Victim' }] });
    expect(await stored('Patient', 'urn:test:budget|nobody')).toEqual([]);
    // An id nothing holds yet is an update-as-create with that id (R4 http.html#cond-update).
    const fresh = `budget-fresh-${backend}`;
    const created = await writer.put('/fhir/Patient?identifier=urn:test:budget|fresh', {
      ...patient('fresh'),
      id: fresh,
    });
    expect(created.statusCode, created.body).toBe(201);
    expect((created.json() as { id: string }).id).toBe(fresh);
  });

  it('resolves the conditional references of batch entries, each on its own', async () => {
    const target = await admin.post('/fhir/Patient', patient('batch-target'));
    const targetId = (target.json() as { id: string }).id;
    const observation = (value: string, subject: string) => ({
      resource: {
        resourceType: 'Observation',
        status: 'final',
        code: { text: 'batch' },
        identifier: [{ system: 'urn:test:budget', value }],
        subject: { reference: subject },
      },
      request: { method: 'POST', url: 'Observation' },
    });
    const reply = await writer.post('/fhir', {
      resourceType: 'Bundle',
      type: 'batch',
      entry: [
        observation('batch-one', 'Patient?identifier=urn:test:budget|batch-target'),
        observation('batch-none', 'Patient?identifier=urn:test:budget|nobody-at-all'),
        observation('batch-costly', `Patient?${COSTLY}`),
      ],
    });
    expect(reply.statusCode, reply.body.slice(0, 300)).toBe(200);
    const bundle = reply.json() as BundleResponse;
    expect(bundle.entry.map((e) => e.response.status)).toEqual([
      '201 Created',
      '412 Precondition Failed',
      '422 Unprocessable Entity',
    ]);
    expect(bundle.entry[1].response.outcome?.issue[0].diagnostics).toContain('matches no resource');
    expect(bundle.entry[2].response.outcome?.issue[0].code).toBe('too-costly');
    const [one] = await stored('Observation', 'urn:test:budget|batch-one');
    expect(one.subject).toEqual({ reference: `Patient/${targetId}` });
    expect(await stored('Observation', 'urn:test:budget|batch-none')).toEqual([]);
    expect(await stored('Observation', 'urn:test:budget|batch-costly')).toEqual([]);
  });
});
