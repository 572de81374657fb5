// Issue 10 §1, resource governance, over HTTP on both databases: a search beyond the cost limits is
// refused before it runs, one past its time budget is stopped with 422 `too-costly`, the event loop
// answers /healthz while a long search runs, and a Bundle's searches share one budget.
import { request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { assembleApp } from '../src/assemble.js';
import { loadConfig } from '../src/config.js';
import { openDatabase } from '../src/storage/open-database.js';
import type { SqlDatabase } from '../src/storage/sql/database.js';
import { clonePatient } from './support/clone-rows.js';
import { BACKENDS } from './support/databases.js';
import { FULL } from './support/full-tests.js';
import { postgresTestUrl } from './support/provided.js';
import { startTestApp, TEST_PUBLIC_URL } from './support/test-app.js';
import type { TestApp } from './support/test-app.js';
import { fhirClient } from './support/fhir-client.js';
import type { FhirClient } from './support/fhir-client.js';

/** Patients cloned straight into the tables: enough that a search probing each one takes a while. */
const CLONES = FULL ? 200_000 : 100_000;

interface Outcome {
  resourceType: string;
  issue: { severity: string; code: string; diagnostics: string; details?: { coding: { code: string }[] } }[];
}

describe.each(BACKENDS)('search governance on %s', (backend) => {
  let t: TestApp;
  let fhir: FhirClient;
  let seeder: SqlDatabase;
  /** The same database served with a budget of a minute, for searches meant to finish. */
  let loose: FastifyInstance;
  let looseFhir: FhirClient;
  let seedId: string;
  const BUDGET_MS = 30;

  beforeAll(async () => {
    t = await startTestApp(backend, { AMBIENT_SEARCH_TIMEOUT_MS: String(BUDGET_MS) });
    fhir = await t.client();
    const created = await fhir.post('/fhir/Patient', {
      resourceType: 'Patient',
      name: [{ family: 'Governance', given: ['Bulk'] }],
    });
    expect(created.statusCode).toBe(201);
    seedId = created.json().id as string;
    seeder = openDatabase(t.database.url);
    // Cloned once per database for both apps: under a loaded CI machine each clone takes a while.
    await clonePatient(seeder, seedId, CLONES);
    loose = await assembleApp(
      loadConfig({
        DATABASE_URL: t.database.url,
        AMBIENT_PUBLIC_URL: TEST_PUBLIC_URL,
        LOG_LEVEL: 'silent',
        AMBIENT_SEARCH_TIMEOUT_MS: '60000',
      }),
    );
    await loose.ready();
    looseFhir = fhirClient(loose, fhir.token);
  }, 240_000);

  afterAll(async () => {
    await loose?.close();
    await seeder?.close();
    await t?.close();
  });

  const search = (query: string, headers: Record<string, string> = {}) => fhir.get(`/fhir/Patient?${query}`, headers);

  function expectTooCostly(res: { statusCode: number; json(): unknown }, diagnostics: RegExp): void {
    expect(res.statusCode).toBe(422);
    const outcome = res.json() as Outcome;
    expect(outcome.resourceType).toBe('OperationOutcome');
    expect(outcome.issue[0].code).toBe('too-costly');
    expect(outcome.issue[0].diagnostics).toMatch(diagnostics);
  }

  describe('limits, refused before anything runs', () => {
    it('refuses the 99-chain :contains search of the attack', async () => {
      const chain = `subject:Patient.name:contains=${Array.from({ length: 10 }, () => 'a').join(',')}`;
      const res = await fhir.get(
        `/fhir/Observation?${Array.from({ length: 99 }, () => chain).join('&')}&_sort=-value-quantity`,
      );
      expectTooCostly(res, /limited to 32 search parameters/);
    });

    it('refuses more chained or _has parameters than a search may join', async () => {
      const chains = Array.from({ length: 9 }, (_, i) => `general-practitioner:Practitioner.name=n${i}`).join('&');
      expectTooCostly(await search(chains), /at most 8 chained or _has parameters/);
    });

    it('refuses chains deeper than four links, too many values and too many includes', async () => {
      expectTooCostly(
        await search('general-practitioner:Practitioner.organization.partof.partof.partof.name=x'),
        /limited to 4 links/,
      );
      expectTooCostly(
        await search(`name=${Array.from({ length: 1001 }, (_, i) => `n${i}`).join(',')}`),
        /at most 1000 values/,
      );
      const values = Array.from({ length: 900 }, (_, i) => `n${i}`).join(',');
      expectTooCostly(await search(`name=${values}&family=${values}&given=${values}`), /at most 2000 values/);
      const includes = Array.from(
        { length: 17 },
        (_, i) => `_include=Patient:general-practitioner&_revinclude=Observation:subject${'x'.repeat(i)}`,
      );
      expectTooCostly(await search(includes.join('&')), /at most 16 directives|limited to 16 directives/);
    });
  });

  describe('the time budget', () => {
    it('stops a search past AMBIENT_SEARCH_TIMEOUT_MS with 422 too-costly naming the budget', async () => {
      const res = await search('name:contains=zzzz&_total=accurate');
      expectTooCostly(res, new RegExp(`time budget of ${BUDGET_MS} ms`));
      expect((res.json() as Outcome).issue[0].details?.coding[0].code).toBe('search-timeout');
    });

    it('gives the searches of one batch one budget together', async () => {
      const entries = Array.from({ length: 20 }, () => ({
        request: { method: 'GET', url: 'Patient?name:contains=zzzz&_total=accurate' },
      }));
      const res = await fhir.post('/fhir', { resourceType: 'Bundle', type: 'batch', entry: entries });
      expect(res.statusCode).toBe(200);
      const statuses = (res.json().entry as { response: { status: string; outcome?: Outcome } }[]).map(
        (e) => e.response,
      );
      expect(statuses).toHaveLength(20);
      for (const response of statuses) {
        expect(response.status).toMatch(/^422/);
        expect(response.outcome?.issue[0].code).toBe('too-costly');
      }
    });
  });

  describe('the event loop during a long search', () => {
    // Here, with a budget of a minute: the 30 ms one above is for searches meant to overrun it, and a
    // cheap search on a loaded machine can take longer than that.
    it('answers cheap searches, and eight chained parameters (the most a search may join)', async () => {
      const cheap = await looseFhir.get('/fhir/Patient?name=governance&_count=1');
      expect(cheap.statusCode).toBe(200);
      expect(cheap.json().entry).toHaveLength(1);
      expect(cheap.json().entry[0].resource.name[0].family).toBe('Governance');
      const eight = Array.from({ length: 8 }, (_, i) => `general-practitioner:Practitioner.name=n${i}`).join('&');
      const allowed = await looseFhir.get(`/fhir/Patient?${eight}&_id=none`);
      expect(allowed.statusCode, allowed.body).toBe(200);
      expect(allowed.json().entry ?? []).toHaveLength(0);
    });

    it('answers /healthz and a read by id while a search scans every Patient', async () => {
      let searchDone = false;
      const slow = looseFhir.get('/fhir/Patient?name:contains=zzzz&_total=accurate').finally(() => (searchDone = true));
      // Long enough for the search to be in the database; on the event loop it would block this timer.
      await new Promise((resolve) => setTimeout(resolve, 30));
      const health = await loose.inject({ method: 'GET', url: '/healthz' });
      const read = await looseFhir.get(`/fhir/Patient/${seedId}`);
      const answeredDuringSearch = !searchDone;
      expect(health.statusCode).toBe(200);
      expect(read.statusCode).toBe(200);
      expect(read.json().name[0].family).toBe('Governance');
      const res = await slow;
      expect(res.statusCode).toBe(200);
      expect(res.json().total).toBe(0);
      expect(answeredDuringSearch).toBe(true);
    });
  });
});

describe('a search whose client goes away, on postgres', () => {
  let t: TestApp;
  let fhir: FhirClient;

  beforeAll(async () => {
    t = await startTestApp('postgres', { AMBIENT_SEARCH_TIMEOUT_MS: '60000' });
    fhir = await t.client();
    const created = await fhir.create({ resourceType: 'Patient', name: [{ family: 'Gone' }] });
    const seeder = openDatabase(t.database.url);
    // Enough rows that the search below runs for seconds, in the quick run too.
    await clonePatient(seeder, created.json().id as string, 800_000);
    await seeder.close();
    await t.app.listen({ host: '127.0.0.1', port: 0 });
  }, 180_000);

  afterAll(async () => t?.close());

  it('is cancelled in the database, not left running', async () => {
    const admin = new pg.Client({ connectionString: postgresTestUrl() });
    await admin.connect();
    // Search statements that started before `before` and still run (other test files' are short).
    const longSearches = async (before = "now() - interval '500 milliseconds'") =>
      Number(
        (
          await admin.query(
            `SELECT COUNT(*) AS n FROM pg_stat_activity WHERE state = 'active' AND query LIKE '/*adhoc*/%' AND query_start < ${before}`,
          )
        ).rows[0].n,
      );
    try {
      const { port } = t.app.server.address() as AddressInfo;
      const client = httpRequest({
        host: '127.0.0.1',
        port,
        // One statement of seconds: every name index row in order, each probed for the `:contains`.
        path: '/fhir/Patient?name:contains=zzzz&_sort=name',
        headers: fhir.auth,
      });
      client.on('error', () => undefined);
      client.end();
      let seen = false;
      for (let i = 0; i < 100 && !seen; i++) {
        await new Promise((resolve) => setTimeout(resolve, 50));
        seen = (await longSearches()) > 0;
      }
      expect(seen).toBe(true);
      const [{ now }] = (await admin.query('SELECT now()::text AS now')).rows as { now: string }[];
      client.destroy();
      // Left running, the statement that was active when the client went away would still be there.
      await new Promise((resolve) => setTimeout(resolve, 1000));
      expect(await longSearches(`'${now}'::timestamptz`)).toBe(0);
    } finally {
      await admin.end();
    }
  });
});
