// FHIR's asynchronous request pattern for searches (https://hl7.org/fhir/R4/async.html) over HTTP on
// both databases: `Prefer: respond-async` → 202 and a status URL; 202 with X-Progress until a worker has
// run it, then 200 with a batch-response Bundle holding the searchset (or the failure the search had);
// DELETE cancels (then 404). Checked at the kick-off like the synchronous search; bounded per account;
// only its account sees it, and only with a token that may search what it holds. The app under test runs
// no asynchronous requests itself (AMBIENT_ASYNC_WORKERS=0), so a request stays queued until a second
// app on the same database, with workers, is started: the tests see each state without timing.
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { assembleApp } from '../src/assemble.js';
import { BACKENDS } from './support/databases.js';
import { startTestApp, TEST_PUBLIC_URL } from './support/test-app.js';
import type { TestApp } from './support/test-app.js';
import type { FhirClient, Reply } from './support/fhir-client.js';
import { fhirClient, passwordToken, pathOf } from './support/fhir-client.js';

const ASYNC = { prefer: 'respond-async' };
const CODE = 'http://loinc.org|8867-4';

type Entry = {
  resource?: {
    resourceType: string;
    id: string;
    type?: string;
    total?: number;
    entry?: { resource: { id: string } }[];
  };
  response: { status: string; outcome?: { issue: { code: string }[] } };
};

describe.each(BACKENDS)('asynchronous searches on %s', (backend) => {
  let t: TestApp;
  let fhir: FhirClient;
  const observations: string[] = [];
  let patient: string;

  /** A second app on the same database that runs asynchronous requests, for the length of `fn`. */
  async function withWorker<T>(
    fn: (worker: FastifyInstance) => Promise<T>,
    maxBytesPerAccount?: number,
    requestWorkers = 2,
  ): Promise<T> {
    const settings = {
      ...t.config.export,
      requestWorkers,
      maxBytesPerAccount: maxBytesPerAccount ?? t.config.export.maxBytesPerAccount,
    };
    const worker = await assembleApp({ ...t.config, export: settings });
    await worker.ready();
    try {
      return await fn(worker);
    } finally {
      await worker.close();
    }
  }

  const kickoff = async (url: string, client = fhir, headers: Record<string, string> = ASYNC): Promise<string> => {
    const res = await client.get(url, headers);
    expect(res.statusCode, res.body).toBe(202);
    expect(res.body).toBe('');
    const location = res.headers['content-location'] as string;
    expect(location).toMatch(new RegExp(`^${TEST_PUBLIC_URL}/fhir/_async/[0-9a-f-]{36}$`));
    return pathOf(location);
  };
  /** Runs the queued requests on a worker and answers the status once done. */
  const completed = async (status: string, client = fhir): Promise<Reply> =>
    withWorker(async () => {
      await expect.poll(async () => (await client.get(status)).statusCode, { timeout: 20_000 }).toBe(200);
      return client.get(status);
    });

  beforeAll(async () => {
    t = await startTestApp(backend, { AMBIENT_ASYNC_WORKERS: '0', AMBIENT_ASYNC_MAX_ACTIVE: '4' });
    fhir = await t.client();
    patient = (await fhir.create({ resourceType: 'Patient', name: [{ family: 'Async' }] })).json().id;
    for (let i = 0; i < 5; i++) {
      const res = await fhir.create({
        resourceType: 'Observation',
        status: 'final',
        code: { coding: [{ system: 'http://loinc.org', code: '8867-4' }] },
        subject: { reference: `Patient/${patient}` },
        valueQuantity: { value: 60 + i },
      });
      observations.push(res.json().id);
    }
  }, 60_000);
  afterAll(() => t?.close());

  it('counts with _summary=count: 202 and X-Progress while queued, then a batch-response Bundle', async () => {
    const status = await kickoff(`/fhir/Observation?code=${encodeURIComponent(CODE)}&_summary=count`);
    const queued = await fhir.get(status);
    expect(queued.statusCode).toBe(202);
    expect(queued.headers['x-progress']).toBe('queued');
    expect(queued.headers['retry-after']).toBe('2');

    const done = await completed(status);
    expect(done.headers['content-type']).toBe('application/fhir+json; charset=utf-8');
    expect(done.headers.expires).toBeDefined();
    const bundle = done.json();
    expect(bundle).toMatchObject({ resourceType: 'Bundle', type: 'batch-response' });
    expect(bundle.entry).toHaveLength(1);
    const [entry] = bundle.entry as Entry[];
    expect(entry.response.status).toBe('200 OK');
    expect(entry.resource).toMatchObject({ resourceType: 'Bundle', type: 'searchset', total: 5 });
    // Kept until it expires: asked again, the same answer.
    expect((await fhir.get(status)).json().entry[0].resource.total).toBe(5);
  });

  it('answers what the synchronous search answers, for type, POST, compartment and system searches', async () => {
    const sync = (await fhir.get(`/fhir/Observation?subject=Patient/${patient}&_count=3`)).json();
    const kicked = [
      await kickoff(`/fhir/Observation?subject=Patient/${patient}&_count=3`),
      pathOf(
        (await fhir.postForm('/fhir/Observation/_search', `subject=Patient/${patient}&_count=3`, ASYNC)).headers[
          'content-location'
        ] as string,
      ),
      await kickoff(`/fhir/Patient/${patient}/Observation?_count=3`),
      await kickoff(`/fhir?_type=Observation&subject=Patient/${patient}&_count=3`),
    ];
    await withWorker(async () => {
      for (const status of kicked) {
        await expect.poll(async () => (await fhir.get(status)).statusCode, { timeout: 20_000 }).toBe(200);
        const [entry] = (await fhir.get(status)).json().entry as Entry[];
        expect(entry.resource!.type, status).toBe('searchset');
        expect(
          entry.resource!.entry!.map((e) => e.resource.id),
          status,
        ).toEqual(sync.entry.map((e: { resource: { id: string } }) => e.resource.id));
      }
    });
  });

  it('cancels: DELETE is 202 and the status URL is gone (404 not-found)', async () => {
    const status = await kickoff(`/fhir/Observation?code=${encodeURIComponent(CODE)}&_summary=count`);
    const cancelled = await fhir.delete(status);
    expect(cancelled.statusCode).toBe(202);
    expect(cancelled.json().resourceType).toBe('OperationOutcome');
    const gone = await fhir.get(status);
    expect(gone.statusCode).toBe(404);
    expect(gone.json().issue[0].code).toBe('not-found');
    expect((await fhir.delete(status)).statusCode).toBe(404);
    // A worker started now finds nothing to run.
    await withWorker(async () => expect((await fhir.get(status)).statusCode).toBe(404));
  });

  it('checks the search at the kick-off, as the synchronous one would be', async () => {
    expect(
      (await fhir.get('/fhir/Observation?nonsense=1', { prefer: 'respond-async, handling=strict' })).statusCode,
    ).toBe(400);
    expect((await fhir.get('/fhir/NoSuchType?x=1', ASYNC)).statusCode).toBe(404);
    expect((await fhir.get('/fhir/Observation?date=notadate', ASYNC)).statusCode).toBe(400);
    const narrow = await t.client('system/Patient.rs');
    const refused = await narrow.get('/fhir/Observation?code=x', ASYNC);
    expect(refused.statusCode).toBe(403);
    const tooMany = Array.from({ length: 33 }, (_, i) => `name${i}=x`).join('&');
    expect((await fhir.get(`/fhir/Patient?${tooMany}`, ASYNC)).statusCode).toBe(422);
    // Inside a batch the entry answers in the Bundle: Prefer applies to the request as a whole.
    const batch = await fhir.post(
      '/fhir',
      {
        resourceType: 'Bundle',
        type: 'batch',
        entry: [{ request: { method: 'GET', url: 'Observation?_summary=count' } }],
      },
      ASYNC,
    );
    expect(batch.statusCode).toBe(200);
  });

  it("runs with the request's handling: unknown parameters are warned about in the searchset", async () => {
    const lenient = await kickoff('/fhir/Observation?nonsense=1&_count=1');
    const bundle = (await completed(lenient)).json();
    const searchset = (bundle.entry as Entry[])[0].resource as unknown as {
      entry: { resource: { resourceType: string } }[];
    };
    expect(searchset.entry.map((e) => e.resource.resourceType)).toContain('OperationOutcome');
  });

  it('bounds the requests an account has queued or running (429), and their space', async () => {
    const client = await t.client();
    const url = '/fhir/Observation?_summary=count';
    const statuses: string[] = [];
    for (let i = 0; i < 4; i++) statuses.push(await kickoff(url, client));
    const refused = await client.get(url, ASYNC);
    expect(refused.statusCode).toBe(429);
    expect(refused.headers['retry-after']).toBeDefined();
    expect(refused.json().issue[0].diagnostics).toContain('AMBIENT_ASYNC_MAX_ACTIVE');
    // Another account is not held up; a cancelled request frees its place.
    await kickoff(url);
    expect((await client.delete(statuses[0])).statusCode).toBe(202);
    statuses[0] = await kickoff(url, client);
    for (const status of statuses) expect((await client.delete(status)).statusCode).toBe(202);
  });

  it("counts its answer against the account's stored bytes: past the bound the request fails with 422", async () => {
    const username = `async-space-${Date.now()}`;
    await t.accounts.create({ username, password: 'pw-async-1', scopes: ['system/*.cruds'] });
    const client = fhirClient(t.app, await passwordToken(t.app, username, 'pw-async-1'));
    const own = (await client.create({ resourceType: 'Patient', name: [{ family: 'Space' }] })).json().id;
    for (let i = 0; i < 40; i++) {
      await client.create({
        resourceType: 'Observation',
        status: 'final',
        code: { text: `reading ${i} ${Math.random().toString(36)}` },
        subject: { reference: `Patient/${own}` },
      });
    }
    // The first answer fits (the account stored nothing); the next finds the bound already reached.
    const first = await kickoff(`/fhir/Observation?subject=Patient/${own}&_count=100`, client);
    const second = await kickoff(`/fhir/Observation?subject=Patient/${own}&_count=100`, client);
    await withWorker(
      async () => {
        await expect.poll(async () => (await client.get(first)).statusCode, { timeout: 20_000 }).toBe(200);
        await expect.poll(async () => (await client.get(second)).statusCode, { timeout: 20_000 }).toBe(422);
        // One worker: the requests run in the order they came, so the first is the one that fits.
      },
      1024,
      1,
    );
    const refused = (await client.get(second)).json();
    expect(refused.issue[0].code).toBe('too-costly');
    expect(refused.issue[0].diagnostics).toContain('AMBIENT_EXPORT_MAX_BYTES_PER_ACCOUNT');
    // Its space comes back with a DELETE.
    expect((await client.delete(first)).statusCode).toBe(202);
    expect((await client.delete(second)).statusCode).toBe(202);
  });

  it("is its account's only: others get 404, a token of it that may not search what it holds 403", async () => {
    const username = `async-own-${Date.now()}`;
    await t.accounts.create({ username, password: 'pw-async-1', scopes: ['system/*.cruds'] });
    const owner = fhirClient(t.app, await passwordToken(t.app, username, 'pw-async-1'));
    const status = await kickoff(`/fhir/Observation?subject=Patient/${patient}`, owner);
    const other = await t.client();
    expect((await other.get(status)).statusCode).toBe(404);
    expect((await other.delete(status)).statusCode).toBe(404);
    expect((await owner.get(status)).statusCode).toBe(202);
    const done = await completed(status, owner);
    expect(((done.json().entry as Entry[])[0].resource!.entry ?? []).map((e) => e.resource.id).sort()).toEqual(
      [...observations].sort(),
    );
    expect((await other.get(status)).statusCode).toBe(404);
    expect((await owner.withToken(undefined).get(status)).statusCode).toBe(401);
    // The same account with a token for Patients only may not see the Observations it holds.
    const narrow = owner.withToken(await passwordToken(t.app, username, 'pw-async-1', 'system/Patient.rs'));
    const refused = await narrow.get(status);
    expect(refused.statusCode).toBe(403);
    expect(refused.json().issue[0].diagnostics).toContain('Observation');
  });

  it('answers a search that fails when it runs with its status and OperationOutcome in the entry', async () => {
    const username = `async-${Date.now()}`;
    await t.accounts.create({ username, password: 'pw-async-1', scopes: ['system/*.rs'] });
    const client = fhirClient(t.app, await passwordToken(t.app, username, 'pw-async-1'));
    const status = await kickoff('/fhir/Observation?_summary=count', client);
    // The account loses Observation before a worker runs the request: it runs as the account now may.
    await t.accounts.update(username, { scopes: ['system/Patient.rs'] });
    const [entry] = (await completed(status, client)).json().entry as Entry[];
    expect(entry.resource).toBeUndefined();
    expect(entry.response.status).toBe('403 Forbidden');
    expect(entry.response.outcome!.issue[0].code).toBe('forbidden');
  });
});
