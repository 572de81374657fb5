// Bulk Data export (issue 12 §2, https://hl7.org/fhir/uv/bulkdata/STU2/export.html) over HTTP on both
// databases, as a client uses it: kick-off at the three levels, status, manifest, NDJSON files, the
// parameters (_since, _type, _typeFilter), who may see an export, cancel, and a second server process on
// the same database answering status and file requests and running the jobs another one queued.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FastifyInstance } from 'fastify';
import { assembleApp } from '../src/assemble.js';
import { loadConfig } from '../src/config.js';
import { GROUP_DRIVE_LIMIT } from '../src/export/selection.js';
import { openDatabase } from '../src/storage/open-database.js';
import type { SqlDatabase } from '../src/storage/sql/database.js';
import { BulkClient, ids, pathOf, storedOutputBytes } from './support/bulk-export-client.js';
import { BACKENDS } from './support/databases.js';
import { startTestApp, TEST_PUBLIC_URL } from './support/test-app.js';
import type { TestApp } from './support/test-app.js';
import { fhirClient } from './support/fhir-client.js';
import type { FhirClient } from './support/fhir-client.js';

const LOINC = 'http://loinc.org';

const seed = [
  { resourceType: 'Organization', id: 'org1', name: 'Clinic' },
  { resourceType: 'Practitioner', id: 'pr1', name: [{ family: 'Doc' }] },
  {
    resourceType: 'Patient',
    id: 'p1',
    name: [{ family: 'One' }],
    managingOrganization: { reference: 'Organization/org1' },
  },
  { resourceType: 'Patient', id: 'p2', name: [{ family: 'Two' }] },
  { resourceType: 'Patient', id: 'p3', name: [{ family: 'Three' }] },
  observation('o1', 'p1', '8867-4'),
  observation('o2', 'p2', '8310-5'),
  observation('o3', 'p3', '8867-4'),
  // In no patient's compartment.
  { resourceType: 'Observation', id: 'o4', status: 'final', code: { coding: [{ system: LOINC, code: '8867-4' }] } },
  {
    resourceType: 'Group',
    id: 'g1',
    type: 'person',
    actual: true,
    member: [{ entity: { reference: 'Patient/p1' } }, { entity: { reference: 'Patient/p2' } }],
  },
];

function observation(id: string, patient: string, code: string) {
  return {
    resourceType: 'Observation',
    id,
    status: 'final',
    code: { coding: [{ system: LOINC, code }] },
    subject: { reference: `Patient/${patient}` },
    performer: [{ reference: 'Practitioner/pr1' }],
  };
}

/** A second server process on the same database (as `serve` builds it), with its own settings. */
async function secondServer(t: TestApp, env: Record<string, string>): Promise<FastifyInstance> {
  const config = loadConfig({
    DATABASE_URL: t.database.url,
    AMBIENT_PUBLIC_URL: TEST_PUBLIC_URL,
    LOG_LEVEL: 'silent',
    ...env,
  });
  const app = await assembleApp(config);
  await app.ready();
  return app;
}

describe.each(BACKENDS)('bulk export on %s', (backend) => {
  let t: TestApp;
  let token: string;
  let fhir: FhirClient;
  let client: BulkClient;
  /** A process that only takes kick-offs and answers status and files (AMBIENT_EXPORT_WORKERS=0). */
  let idle: FastifyInstance;
  let idleClient: BulkClient;
  let db: SqlDatabase;

  const put = async (resource: { resourceType: string; id: string }) => {
    const res = await fhir.put(`/fhir/${resource.resourceType}/${resource.id}`, resource);
    expect([200, 201], res.body).toContain(res.statusCode);
    return res.json() as { meta: { versionId: string; lastUpdated: string } };
  };
  const jobRows = async (statusUrl: string) => {
    const id = statusUrl.split('/').pop()!;
    const [{ n: jobs }] = await db.query<{ n: number }>('SELECT COUNT(*) AS n FROM export_job WHERE id = ?', [id]);
    return { jobs: Number(jobs), stored: await storedOutputBytes(db, id) };
  };

  beforeAll(async () => {
    t = await startTestApp(backend, { AMBIENT_EXPORT_LEASE_SECONDS: '2' });
    token = await t.token();
    fhir = fhirClient(t.app, token);
    client = new BulkClient(t.app, token);
    for (const resource of seed) await put(resource);
    idle = await secondServer(t, { AMBIENT_EXPORT_WORKERS: '0' });
    idleClient = new BulkClient(idle, token);
    db = openDatabase(t.database.url);
  });
  afterAll(async () => {
    await idle?.close();
    await db?.close();
    await t?.close();
  });

  it('is in the CapabilityStatement: the IG capability and $export at system, Patient and Group level', async () => {
    const statement = (await t.app.inject({ method: 'GET', url: '/fhir/metadata' })).json();
    expect(statement.instantiates).toContain('http://hl7.org/fhir/uv/bulkdata/CapabilityStatement/bulk-data');
    const [rest] = statement.rest;
    expect(rest.operation).toContainEqual({
      name: 'export',
      definition: 'http://hl7.org/fhir/uv/bulkdata/OperationDefinition/export',
    });
    const operations = (type: string) =>
      rest.resource
        .find((r: { type: string }) => r.type === type)
        .operation.map((o: { definition: string }) => o.definition);
    expect(operations('Patient')).toContain('http://hl7.org/fhir/uv/bulkdata/OperationDefinition/patient-export');
    expect(operations('Group')).toContain('http://hl7.org/fhir/uv/bulkdata/OperationDefinition/group-export');
    expect(operations('Observation').some((d: string) => d.includes('bulkdata'))).toBe(false);
  });

  it('exports the system level: 202 + Content-Location, then the manifest and the NDJSON files', async () => {
    const kick = await client.kickoff('/fhir/$export?_type=Patient,Observation,Organization,Group,Practitioner');
    expect(kick.statusCode, kick.body).toBe(202);
    const statusUrl = String(kick.headers['content-location']);
    expect(statusUrl).toMatch(new RegExp(`^${TEST_PUBLIC_URL}/fhir/_export/[0-9a-f-]{36}$`));
    const manifest = await client.manifest(statusUrl);
    expect(manifest.requiresAccessToken).toBe(true);
    expect(manifest.request).toBe(
      `${TEST_PUBLIC_URL}/fhir/$export?_type=Patient,Observation,Organization,Group,Practitioner`,
    );
    expect(Date.parse(manifest.transactionTime)).toBeLessThanOrEqual(Date.now());
    expect(manifest.error).toEqual([]);
    const counts = Object.fromEntries(manifest.output.map((o) => [o.type, o.count]));
    expect(counts).toEqual({ Patient: 3, Observation: 4, Organization: 1, Group: 1, Practitioner: 1 });
    for (const output of manifest.output) expect(output.url).toBe(`${statusUrl}/${output.type}-1.ndjson`);

    const file = await client.file(manifest.output.find((o) => o.type === 'Observation')!.url);
    expect(file.statusCode).toBe(200);
    expect(file.headers['content-type']).toMatch(/^application\/fhir\+ndjson/);
    expect(file.body.endsWith('\n')).toBe(true);
    const lines = file.body.trimEnd().split('\n');
    expect(lines).toHaveLength(4);
    const o1 = lines.map((l) => JSON.parse(l)).find((r) => r.id === 'o1');
    expect(o1).toMatchObject({
      resourceType: 'Observation',
      subject: { reference: 'Patient/p1' },
      meta: { versionId: '1' },
    });

    const resources = await client.resources(manifest);
    expect(ids(resources.get('Patient'))).toEqual(['p1', 'p2', 'p3']);
    expect(ids(resources.get('Organization'))).toEqual(['org1']);
  });

  it('answers status 202 with X-Progress and Retry-After until a process runs the job; any process answers', async () => {
    // Queued on the process that runs no exports: it stays queued until the other one claims it.
    const statusUrl = await idleClient.start('/fhir/$export?_type=Patient');
    const first = await idleClient.status(statusUrl);
    expect([200, 202]).toContain(first.statusCode);
    if (first.statusCode === 202) {
      expect(first.headers['retry-after']).toBe('2');
      expect(String(first.headers['x-progress'])).toMatch(/queued|Patient \(type 1 of 1\)/);
      expect(first.body).toBe('');
    }
    // The manifest and the files from either process.
    const fromIdle = await idleClient.manifest(statusUrl);
    const fromWorker = await client.manifest(statusUrl);
    expect(fromIdle).toEqual(fromWorker);
    const [patients] = fromIdle.output;
    const a = await idleClient.file(patients.url);
    const b = await client.file(patients.url);
    expect(a.statusCode).toBe(200);
    expect(a.body).toBe(b.body);
    expect(patients.count).toBe(3);
  });

  it('exports the Patient compartment of every patient at the Patient level', async () => {
    const manifest = await client.manifest(await client.start('/fhir/Patient/$export'));
    const resources = await client.resources(manifest);
    // The Group is in its members' compartments (Group.member); Organization and Practitioner are in none.
    expect([...resources.keys()].sort()).toEqual(['Group', 'Observation', 'Patient']);
    expect(ids(resources.get('Patient'))).toEqual(['p1', 'p2', 'p3']);
    expect(ids(resources.get('Group'))).toEqual(['g1']);
    // o4 names no patient.
    expect(ids(resources.get('Observation'))).toEqual(['o1', 'o2', 'o3']);
    expect(manifest.request).toBe(`${TEST_PUBLIC_URL}/fhir/Patient/$export`);
  });

  it("exports a Group's member patients and their compartments at the Group level (POST with Parameters)", async () => {
    const kick = await client.kickoff('/fhir/Group/g1/$export', {}, 'POST', {
      resourceType: 'Parameters',
      parameter: [
        { name: '_outputFormat', valueString: 'application/fhir+ndjson' },
        { name: '_type', valueString: 'Patient,Observation' },
      ],
    });
    expect(kick.statusCode, kick.body).toBe(202);
    const resources = await client.resources(await client.manifest(String(kick.headers['content-location'])));
    expect(ids(resources.get('Patient'))).toEqual(['p1', 'p2']);
    expect(ids(resources.get('Observation'))).toEqual(['o1', 'o2']);

    const unknown = await client.kickoff('/fhir/Group/nope/$export');
    expect(unknown.statusCode).toBe(404);
    expect(unknown.json().resourceType).toBe('OperationOutcome');
  });

  it('exports a Group of more members than GROUP_DRIVE_LIMIT by walking each type, with the same result', async () => {
    // p1 and p2, and more patients that do not exist (references are not checked by default): past the
    // limit, so each type is walked and probed instead of read from the members (selection.ts); g1 above
    // took the other way.
    const member = ['p1', 'p2', ...Array.from({ length: GROUP_DRIVE_LIMIT - 1 }, (_, i) => `ghost-${i}`)].map((id) => ({
      entity: { reference: `Patient/${id}` },
    }));
    await put({ resourceType: 'Group', id: 'g-large', type: 'person', actual: true, member } as never);
    const statusUrl = await client.start('/fhir/Group/g-large/$export?_type=Patient,Observation');
    const [row] = await db.query<{ params: string }>('SELECT params FROM export_job WHERE id = ?', [
      statusUrl.split('/').pop()!,
    ]);
    expect((JSON.parse(row.params) as { groupMembers: number }).groupMembers).toBe(GROUP_DRIVE_LIMIT + 1);
    const resources = await client.resources(await client.manifest(statusUrl));
    expect(ids(resources.get('Patient'))).toEqual(['p1', 'p2']);
    expect(ids(resources.get('Observation'))).toEqual(['o1', 'o2']);
    const deleted = await fhir.delete('/fhir/Group/g-large');
    expect(deleted.statusCode).toBeLessThan(300);
  });

  it('filters with _typeFilter through the search engine (several filters on a type are ORed)', async () => {
    const one = await client.resources(
      await client.manifest(
        await client.start(
          `/fhir/$export?_type=Observation&_typeFilter=${encodeURIComponent('Observation?code=8310-5')}`,
        ),
      ),
    );
    expect(ids(one.get('Observation'))).toEqual(['o2']);
    const two = await client.resources(
      await client.manifest(
        await client.start(
          `/fhir/Patient/$export?_type=Observation,Patient&_typeFilter=${encodeURIComponent(`Observation?code=${LOINC}|8867-4`)}&_typeFilter=${encodeURIComponent('Observation?subject=Patient/p2')}&_typeFilter=${encodeURIComponent('Patient?family=Two')}`,
        ),
      ),
    );
    // o4 matches the code but is in no compartment.
    expect(ids(two.get('Observation'))).toEqual(['o1', 'o2', 'o3']);
    expect(ids(two.get('Patient'))).toEqual(['p2']);
  });

  it('refuses bad kick-offs with 400 and an OperationOutcome; Prefer: handling=lenient ignores unknown parameters', async () => {
    const cases: [string, Record<string, string>, RegExp][] = [
      ['/fhir/$export', { prefer: '' }, /respond-async/],
      ['/fhir/$export?_outputFormat=text/csv', {}, /_outputFormat/],
      ['/fhir/$export?_since=yesterday', {}, /instant/],
      ['/fhir/$export?_type=Nope', {}, /Nope/],
      ['/fhir/$export?foo=bar', {}, /foo/],
      ['/fhir/$export?_elements=id', {}, /_elements is not supported/],
      [`/fhir/$export?_typeFilter=${encodeURIComponent('Observation?nope=1')}`, {}, /nope/],
      [`/fhir/$export?_typeFilter=${encodeURIComponent('Observation?_count=5')}`, {}, /_count cannot filter/],
      ['/fhir/$export?_typeFilter=Observation', {}, /Type\?search-parameters/],
      ['/fhir/Patient/$export?_type=Organization', {}, /Patient compartment/],
    ];
    for (const [url, headers, message] of cases) {
      const res = await client.kickoff(url, headers);
      expect(res.statusCode, url).toBe(400);
      expect(res.json().resourceType).toBe('OperationOutcome');
      expect(res.json().issue[0].diagnostics, url).toMatch(message);
    }
    const lenient = await client.kickoff('/fhir/$export?_type=Organization&foo=bar', {
      prefer: 'respond-async, handling=lenient',
    });
    expect(lenient.statusCode, lenient.body).toBe(202);
    const manifest = await client.manifest(String(lenient.headers['content-location']));
    expect(manifest.output.map((o) => o.type)).toEqual(['Organization']);
    // Other methods on the kick-off path are 405, not an unsupported operation.
    const put = await fhir.put('/fhir/$export');
    expect(put.statusCode).toBe(405);
  });

  it('never exports types outside the read scopes: 403 when _type names one, skipped otherwise', async () => {
    const narrow = new BulkClient(t.app, await t.token('system/Patient.rs'));
    const refused = await narrow.kickoff('/fhir/$export?_type=Patient,Observation');
    expect(refused.statusCode).toBe(403);
    expect(refused.json().issue[0].diagnostics).toMatch(/Observation/);
    const manifest = await narrow.manifest(await narrow.start('/fhir/Patient/$export'));
    expect(manifest.output.map((o) => o.type)).toEqual(['Patient']);
    const none = new BulkClient(t.app, await t.token('scribe.read'));
    expect((await none.kickoff('/fhir/$export')).statusCode).toBe(403);
  });

  it('hides an export from every other account (404 for status, files and DELETE) and needs a token', async () => {
    const statusUrl = await client.start('/fhir/$export?_type=Patient');
    const manifest = await client.manifest(statusUrl);
    const other = new BulkClient(t.app, await t.token());
    expect((await other.status(statusUrl)).statusCode).toBe(404);
    expect((await other.file(manifest.output[0].url)).statusCode).toBe(404);
    expect((await other.cancel(statusUrl)).statusCode).toBe(404);
    const anonymous = await t.app.inject({ method: 'GET', url: pathOf(manifest.output[0].url) });
    expect(anonymous.statusCode).toBe(401);
    // Still there for its owner.
    expect((await client.file(manifest.output[0].url)).statusCode).toBe(200);
  });

  it('cancels with DELETE: 202, then 404, and the job and its files are gone from the database', async () => {
    const queued = await idleClient.start('/fhir/$export?_type=Patient');
    const cancelled = await idleClient.cancel(queued);
    expect(cancelled.statusCode).toBe(202);
    expect((await client.status(queued)).statusCode).toBe(404);
    expect(await jobRows(queued)).toEqual({ jobs: 0, stored: 0 });

    const done = await client.start('/fhir/$export?_type=Patient,Observation');
    const manifest = await client.manifest(done);
    expect((await jobRows(done)).stored).toBeGreaterThan(0);
    expect((await client.cancel(done)).statusCode).toBe(202);
    expect((await client.status(done)).statusCode).toBe(404);
    expect((await client.file(manifest.output[0].url)).statusCode).toBe(404);
    expect(await jobRows(done)).toEqual({ jobs: 0, stored: 0 });
  });

  it('limits the exports an account may have queued at once (429)', async () => {
    // A database of its own with no export worker anywhere: on the shared one the other server's runner
    // could finish one of the three before the fourth arrives (it did once in CI).
    const alone = await startTestApp(backend, { AMBIENT_EXPORT_WORKERS: '0' });
    try {
      const account = new BulkClient(alone.app, await alone.token());
      const queued = [];
      for (let i = 0; i < 3; i++) queued.push(await account.start('/fhir/$export?_type=Patient'));
      const fourth = await account.kickoff('/fhir/$export?_type=Patient');
      expect(fourth.statusCode).toBe(429);
      expect(fourth.json().issue[0].diagnostics).toMatch(/3 exports/);
      expect(fourth.headers['retry-after']).toBe('60');
      await account.cancel(queued[0]);
      // One fewer queued: the next kick-off is accepted.
      expect((await account.kickoff('/fhir/$export?_type=Patient')).statusCode).toBe(202);
    } finally {
      await alone.close();
    }
  });

  it('exports only what changed after _since, and each resource as it was at transactionTime', async () => {
    const before = new Date(Date.now() - 1).toISOString();
    await new Promise((resolve) => setTimeout(resolve, 5));
    await put({ resourceType: 'Patient', id: 'p3', name: [{ family: 'Three-b' }] } as never);
    const since = await client.resources(
      await client.manifest(await client.start(`/fhir/$export?_type=Patient&_since=${encodeURIComponent(before)}`)),
    );
    expect(ids(since.get('Patient'))).toEqual(['p3']);

    // Queued where no export runs, then changed: the export still holds the state at kick-off.
    const statusUrl = await idleClient.start('/fhir/$export?_type=Patient');
    await put({ resourceType: 'Patient', id: 'p1', name: [{ family: 'One-b' }] } as never);
    await put({ resourceType: 'Patient', id: 'p-late', name: [{ family: 'Late' }] } as never);
    const deleted = await fhir.delete('/fhir/Patient/p2');
    expect(deleted.statusCode).toBeLessThan(300);
    const snapshot = await client.resources(await client.manifest(statusUrl));
    const patients = snapshot.get('Patient')!;
    expect(ids(patients)).toEqual(['p1', 'p2', 'p3']);
    expect(patients.find((p) => p.id === 'p1')).toMatchObject({ meta: { versionId: '1' }, name: [{ family: 'One' }] });
    expect(patients.find((p) => p.id === 'p3')).toMatchObject({ meta: { versionId: '2' } });
  });
});
