// _include and _revinclude never return a resource of a type the caller may not search, on both
// databases (issue 23 item 1): an absolute reference on the server's own base (http or https) is
// type-checked on write like a relative one, and the include statements keep only the types the
// caller may search in SQL, so that reference rows of another type (stored before that check, or by
// an earlier release) bring in nothing. Each route a search takes is tried, as an attacker would.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadR4Definitions } from '../src/definitions/registry.js';
import { createFhirServices } from '../src/services.js';
import { openDatabase } from '../src/storage/open-database.js';
import type { SqlDatabase } from '../src/storage/sql/database.js';
import type { FhirResource } from '../src/storage/store.js';
import { BACKENDS } from './support/databases.js';
import { startTestApp, TEST_PUBLIC_URL } from './support/test-app.js';
import type { TestApp } from './support/test-app.js';
import type { FhirClient } from './support/fhir-client.js';

const HTTPS_BASE = `${TEST_PUBLIC_URL.replace(/^http:/, 'https:')}/fhir`;
const HTTP_BASE = `${TEST_PUBLIC_URL}/fhir`;

interface Entry {
  resource: { resourceType: string; id: string };
  search?: { mode: string };
}

describe.each(BACKENDS)('includes keep to the caller’s scopes on %s', (backend) => {
  let t: TestApp;
  let db: SqlDatabase;
  let admin: FhirClient;
  let taskOnly: FhirClient;
  let encounterOnly: FhirClient;
  /** The secrets: a Patient (name, birth date, MRN) and a Condition the narrow accounts may not search. */
  let patientId: string;
  let conditionId: string;
  /** Tasks: `top` is part of `middle` (a Task, lawfully), which is part of the Patient and the Condition. */
  let topTask: string;
  let middleTask: string;
  let staleEncounter: string;
  let parentEncounter: string;

  const as = (scopes: string) => t.client(scopes);
  const created = async (body: { resourceType: string; [k: string]: unknown }): Promise<string> => {
    const res = await admin.create(body);
    expect(res.statusCode, res.body).toBe(201);
    return res.json().id as string;
  };

  /**
   * Stores `resource` as the store does, without the write path's validation: how rows written before
   * own-base references were type-checked look in the database.
   */
  const storedWithoutValidation = async (resource: Record<string, unknown>): Promise<string> => {
    const services = createFhirServices(t.config, db, loadR4Definitions());
    const result = await services.store.create(resource as FhirResource);
    return result.stored.id;
  };

  const task = (partOf: string[]) => ({
    resourceType: 'Task',
    status: 'requested',
    intent: 'order',
    ...(partOf.length ? { partOf: partOf.map((reference) => ({ reference })) } : {}),
  });
  const encounter = (partOf?: string) => ({
    resourceType: 'Encounter',
    status: 'finished',
    class: { system: 'http://terminology.hl7.org/CodeSystem/v3-ActCode', code: 'AMB' },
    ...(partOf ? { partOf: { reference: partOf } } : {}),
  });

  beforeAll(async () => {
    t = await startTestApp(backend);
    db = openDatabase(t.database.url);
    admin = await as('system/*.cruds');
    taskOnly = await as('system/Task.cruds');
    encounterOnly = await as('system/Encounter.cruds');
    patientId = await created({
      resourceType: 'Patient',
      name: [{ family: `Secret-${randomUUID()}` }],
      birthDate: '1970-01-01',
      identifier: [{ system: 'urn:mrn', value: randomUUID() }],
    });
    conditionId = await created({ resourceType: 'Condition', subject: { reference: `Patient/${patientId}` } });
    middleTask = await storedWithoutValidation(
      task([`${HTTP_BASE}/Patient/${patientId}`, `${HTTPS_BASE}/Condition/${conditionId}`]),
    );
    topTask = await created(task([`Task/${middleTask}`]));
    parentEncounter = await created(encounter());
    staleEncounter = await storedWithoutValidation(encounter(`${HTTPS_BASE}/Condition/${conditionId}`));
  });
  afterAll(async () => {
    await t?.close();
    await db?.close();
  });

  /** The Bundle's resources as `Type/id`, after checking it is a 200 searchset. */
  const returned = (res: { statusCode: number; body: string; json: () => unknown }): string[] => {
    expect(res.statusCode, res.body).toBe(200);
    const bundle = res.json() as { resourceType: string; entry?: Entry[] };
    expect(bundle.resourceType).toBe('Bundle');
    return (bundle.entry ?? [])
      .filter((e) => e.search?.mode !== 'outcome')
      .map((e) => `${e.resource.resourceType}/${e.resource.id}`);
  };
  const secrets = () => [`Patient/${patientId}`, `Condition/${conditionId}`];

  describe('an absolute reference on the own base is type-checked like a relative one', () => {
    it.each([
      ['http', HTTP_BASE],
      ['https', HTTPS_BASE],
    ])('Encounter.partOf → %s own-base Condition: refused as invalid, nothing stored', async (_scheme, base) => {
      const reference = `${base}/Condition/${conditionId}`;
      const res = await encounterOnly.post('/fhir/Encounter', encounter(reference));
      expect(res.statusCode, res.body).toBe(401);
      const issue = res.json().issue[0];
      expect(issue.expression).toEqual(['Encounter.partOf.reference']);
      expect(issue.diagnostics).toContain('reference to a Condition is not allowed here');
      // Nothing of it was stored: no Encounter refers to the Condition.
      const search = await admin.get(`/fhir/Encounter?part-of=Condition/${conditionId}`);
      expect(returned(search)).toEqual([`Encounter/${staleEncounter}`]);
    });

    it('Task.partOf → own-base Patient, in an update and inside a transaction: refused', async () => {
      const reference = `${HTTPS_BASE}/Patient/${patientId}`;
      const update = await taskOnly.put(`/fhir/Task/${topTask}`, { ...task([reference]), id: topTask });
      expect(update.statusCode, update.body).toBe(401);
      expect(update.json().issue[0].diagnostics).toContain('reference to a Patient is not allowed here');
      const transaction = await taskOnly.post('/fhir', {
        resourceType: 'Bundle',
        type: 'transaction',
        entry: [{ resource: task([`${HTTP_BASE}/Patient/${patientId}`]), request: { method: 'POST', url: 'Task' } }],
      });
      expect(transaction.statusCode, transaction.body).toBe(401);
    });

    it('own-base references of an allowed type, and other servers’ URLs, are accepted as before', async () => {
      const own = await taskOnly.post('/fhir/Task', task([`${HTTPS_BASE}/Task/${middleTask}`]));
      expect(own.statusCode, own.body).toBe(201);
      const elsewhere = await taskOnly.post('/fhir/Task', task(['https://other.example/fhir/Patient/1']));
      expect(elsewhere.statusCode, elsewhere.body).toBe(201);
    });
  });

  describe('include statements return only types the caller may search, whatever the stored rows say', () => {
    it('Encounter-only: _include=Encounter:part-of of an Encounter stored pointing at a Condition', async () => {
      const res = await encounterOnly.get(`/fhir/Encounter?_id=${staleEncounter}&_include=Encounter:part-of`);
      expect(returned(res)).toEqual([`Encounter/${staleEncounter}`]);
    });

    it('Encounter-only: a lawful part-of is still included', async () => {
      const child = (
        await encounterOnly.post('/fhir/Encounter', encounter(`${HTTPS_BASE}/Encounter/${parentEncounter}`))
      ).json().id as string;
      const res = await encounterOnly.get(`/fhir/Encounter?_id=${child}&_include=Encounter:part-of`);
      expect(returned(res)).toEqual([`Encounter/${child}`, `Encounter/${parentEncounter}`]);
    });

    const taskSearch = `_id=${'TOP'}&_include:iterate=Task:part-of&_revinclude=Task:part-of`;
    const query = () => taskSearch.replace('TOP', topTask);
    /** What a Task-only caller lawfully gets: the top Task and the Task it is part of, nothing more. */
    const expectTasksOnly = (types: string[]) => {
      expect(types).toEqual([`Task/${topTask}`, `Task/${middleTask}`]);
      for (const secret of secrets()) expect(types).not.toContain(secret);
    };

    it('Task-only: _include, _include:iterate and _revinclude by GET', async () => {
      const plain = await taskOnly.get(`/fhir/Task?_id=${middleTask}&_include=Task:part-of`);
      expect(returned(plain)).toEqual([`Task/${middleTask}`]);
      const res = await taskOnly.get(`/fhir/Task?${query()}`);
      expectTasksOnly(returned(res));
    });

    it('Task-only: the same with Prefer: handling=strict', async () => {
      const res = await taskOnly.get(`/fhir/Task?${query()}`, { prefer: 'handling=strict' });
      expectTasksOnly(returned(res));
    });

    it('Task-only: a system search GET /fhir?_type=Task', async () => {
      const res = await taskOnly.get(`/fhir?_type=Task&${query()}`);
      expectTasksOnly(returned(res));
    });

    it('Task-only: POST _search', async () => {
      const res = await taskOnly.postForm('/fhir/Task/_search', query());
      expectTasksOnly(returned(res));
    });

    it.each(['batch', 'transaction'])('Task-only: a %s GET entry', async (type) => {
      const res = await taskOnly.post('/fhir', {
        resourceType: 'Bundle',
        type,
        entry: [{ request: { method: 'GET', url: `Task?${query()}` } }],
      });
      expect(res.statusCode, res.body).toBe(200);
      const [entry] = res.json().entry as { response: { status: string }; resource: unknown }[];
      expect(entry.response.status).toMatch(/^200/);
      const bundle = entry.resource as { entry?: Entry[] };
      expectTasksOnly(
        (bundle.entry ?? [])
          .filter((e) => e.search?.mode !== 'outcome')
          .map((e) => `${e.resource.resourceType}/${e.resource.id}`),
      );
    });

    it('a caller who may search Patients and Conditions sees the stored references followed only to Tasks', async () => {
      // Task:part-of names Tasks only: a row of another type is never an include of it, for anyone.
      const res = await admin.get(`/fhir/Task?${query()}`);
      expectTasksOnly(returned(res));
    });
  });
});
