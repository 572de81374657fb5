// Binary.securityContext (https://hl7.org/fhir/R4/binary.html, docs/api.md): a Binary with one is read
// only by a caller who may read what it points to, on every path that returns its content (read, vread,
// search, include, history, Bundle entries), and writing one that points at X needs read access to X.
// Over HTTP on both databases, with a Binary-only account as the attacker.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { assembleApp } from '../src/assemble.js';
import { loadConfig } from '../src/config.js';
import { BulkClient, ids as exportedIds } from './support/bulk-export-client.js';
import { BACKENDS } from './support/databases.js';
import { startTestApp, TEST_PUBLIC_URL } from './support/test-app.js';
import type { TestApp } from './support/test-app.js';
import { passwordToken } from './support/fhir-client.js';
import type { FhirClient, Reply } from './support/fhir-client.js';

const OWN_HTTPS_BASE = `${TEST_PUBLIC_URL.replace(/^http:/, 'https:')}/fhir`;

describe.each(BACKENDS)('Binary.securityContext on %s', (backend) => {
  let t: TestApp;
  let admin: FhirClient;
  let binaryOnly: FhirClient;
  let binaryAndTask: FhirClient;
  let patientReader: FhirClient;
  let patientId: string;
  /** Attached to the Patient (X-Security-Context), to it by an absolute https URL, to nothing, to another server. */
  let attached: string;
  let attachedAbsolute: string;
  let free: string;
  let external: string;
  const secret = `lab report ${randomUUID()}`;

  const raw = (client: FhirClient, body: string, headers: Record<string, string> = {}) =>
    client.post('/fhir/Binary', body, { 'content-type': 'text/plain', ...headers });
  const binaryWith = (reference: string) => ({
    resourceType: 'Binary',
    contentType: 'text/plain',
    securityContext: { reference },
    data: Buffer.from(secret).toString('base64'),
  });
  const ids = (bundle: { entry?: { resource?: { resourceType: string; id: string } }[] }) =>
    (bundle.entry ?? []).flatMap((e) => (e.resource ? [`${e.resource.resourceType}/${e.resource.id}`] : []));

  beforeAll(async () => {
    // No export runs in this process: the $export test starts a worker once its accounts are as it wants.
    t = await startTestApp(backend, { AMBIENT_EXPORT_WORKERS: '0' });
    admin = await t.client('system/*.cruds');
    binaryOnly = await t.client('system/Binary.cruds');
    binaryAndTask = await t.client('system/Binary.cruds system/Task.cruds');
    patientReader = await t.client('system/Binary.cruds system/Patient.r');
    patientId = (await admin.post('/fhir/Patient', { resourceType: 'Patient' })).json().id;
    attached = (await raw(admin, secret, { 'x-security-context': `Patient/${patientId}` })).json().id;
    attachedAbsolute = (await admin.post('/fhir/Binary', binaryWith(`${OWN_HTTPS_BASE}/Patient/${patientId}`))).json()
      .id;
    free = (await raw(admin, 'public leaflet')).json().id;
    external = (await admin.post('/fhir/Binary', binaryWith('https://other.example/fhir/Patient/1'))).json().id;
    for (const id of [attached, attachedAbsolute, free, external]) expect(typeof id).toBe('string');
  });
  afterAll(async () => t?.close());

  it('read and vread: 403 to a Binary-only account for content attached to a Patient, in any form', async () => {
    for (const id of [attached, attachedAbsolute]) {
      for (const url of [`/fhir/Binary/${id}`, `/fhir/Binary/${id}/_history/1`, `/fhir/Binary/${id}?_format=json`]) {
        const res = await binaryOnly.get(url);
        expect(res.statusCode, url).toBe(403);
        expect(res.body).not.toContain(secret);
        expect(res.body).not.toContain(Buffer.from(secret).toString('base64'));
        expect(res.json().issue[0].diagnostics).toContain('system/Patient.r');
      }
    }
    // Content attached to another server's resource: only a caller who may read every type.
    expect((await binaryOnly.get(`/fhir/Binary/${external}`)).statusCode).toBe(403);
    expect((await admin.get(`/fhir/Binary/${external}`)).body).toBe(secret);
    // Unattached content is anyone's with Binary.r.
    const open = await binaryOnly.get(`/fhir/Binary/${free}`);
    expect(open.statusCode).toBe(200);
    expect(open.body).toBe('public leaflet');
  });

  it('a caller who may read Patients reads it', async () => {
    for (const id of [attached, attachedAbsolute]) {
      const res = await patientReader.get(`/fhir/Binary/${id}`);
      expect(res.statusCode).toBe(200);
      expect(res.body).toBe(secret);
    }
  });

  it('search, history and Bundle entries leave it out for a Binary-only account', async () => {
    const all = [attached, attachedAbsolute, free, external].join(',');
    const search = await binaryOnly.get(`/fhir/Binary?_id=${all}`);
    expect(search.statusCode).toBe(200);
    expect(ids(search.json())).toEqual([`Binary/${free}`]);
    expect(search.body).not.toContain(Buffer.from(secret).toString('base64'));
    const asReader = await patientReader.get(`/fhir/Binary?_id=${all}`);
    expect(ids(asReader.json()).sort()).toEqual(
      [`Binary/${attached}`, `Binary/${attachedAbsolute}`, `Binary/${free}`].sort(),
    );
    for (const url of [`/fhir/Binary/${attached}/_history`, '/fhir/Binary/_history?_count=1000']) {
      const history = await binaryOnly.get(url);
      expect(history.statusCode).toBe(200);
      expect(history.body).not.toContain(Buffer.from(secret).toString('base64'));
    }
    const batch = await binaryOnly.post('/fhir', {
      resourceType: 'Bundle',
      type: 'batch',
      entry: [
        { request: { method: 'GET', url: `Binary/${attached}` } },
        { request: { method: 'GET', url: `Binary?_id=${attached}` } },
      ],
    });
    expect(batch.statusCode).toBe(200);
    expect(batch.json().entry[0].response.status).toMatch(/^403/);
    expect(batch.body).not.toContain(Buffer.from(secret).toString('base64'));
  });

  it('an include of it is left out: Task?_include=Task:focus:Binary', async () => {
    const task = (
      await admin.post('/fhir/Task', {
        resourceType: 'Task',
        status: 'requested',
        intent: 'order',
        focus: { reference: `Binary/${attached}` },
      })
    ).json().id;
    const res = await binaryAndTask.get(`/fhir/Task?_id=${task}&_include=Task:focus:Binary`);
    expect(res.statusCode).toBe(200);
    expect(ids(res.json())).toEqual([`Task/${task}`]);
    const asAdmin = await admin.get(`/fhir/Task?_id=${task}&_include=Task:focus:Binary`);
    expect(ids(asAdmin.json())).toEqual([`Task/${task}`, `Binary/${attached}`]);
  });

  it('attaching content to a Patient needs read access to Patients: 403, nothing stored', async () => {
    const before = (await admin.get('/fhir/Binary?_summary=count')).json().total;
    const header = await raw(binaryOnly, 'planted', { 'x-security-context': `Patient/${patientId}` });
    expect(header.statusCode).toBe(403);
    expect(header.json().issue[0].diagnostics).toContain('system/Patient.r');
    const body = await binaryOnly.post('/fhir/Binary', binaryWith(`${OWN_HTTPS_BASE}/Patient/${patientId}`));
    expect(body.statusCode).toBe(403);
    const update = await binaryOnly.put(`/fhir/Binary/${free}`, {
      ...binaryWith(`Patient/${patientId}`),
      id: free,
    });
    expect(update.statusCode).toBe(403);
    expect((await admin.get('/fhir/Binary?_summary=count')).json().total).toBe(before);
    expect((await binaryOnly.get(`/fhir/Binary/${free}`)).body).toBe('public leaflet');
    // With read access to Patients it is allowed.
    const allowed = await raw(patientReader, 'attached', { 'x-security-context': `Patient/${patientId}` });
    expect(allowed.statusCode).toBe(201);
  });

  it('versions written before the content was attached are ruled by its current context too', async () => {
    const id = (await raw(admin, 'leaflet, later attached')).json().id as string;
    expect((await binaryOnly.get(`/fhir/Binary/${id}/_history/1`)).statusCode).toBe(200);
    const attach = await admin.put(`/fhir/Binary/${id}`, { ...binaryWith(`Patient/${patientId}`), id });
    expect(attach.statusCode).toBe(200);
    const v1 = await binaryOnly.get(`/fhir/Binary/${id}/_history/1`);
    expect(v1.statusCode).toBe(403);
    expect(v1.body).not.toContain('leaflet');
    for (const url of [`/fhir/Binary/${id}/_history`, '/fhir/Binary/_history?_count=1000']) {
      const history = await binaryOnly.get(url);
      expect(history.statusCode, url).toBe(200);
      expect(ids(history.json()), url).not.toContain(`Binary/${id}`);
      expect(history.body, url).not.toContain(Buffer.from('leaflet, later attached').toString('base64'));
    }
    // A caller who may read Patients sees both versions.
    expect((await patientReader.get(`/fhir/Binary/${id}/_history/1`)).body).toBe('leaflet, later attached');
    const all = (await patientReader.get(`/fhir/Binary/${id}/_history`)).json();
    expect(all.entry).toHaveLength(2);
  });

  it('a conditional create that finds it answers without its content (If-None-Exist, ifNoneExist)', async () => {
    const base64 = Buffer.from(secret).toString('base64');
    const plain = await raw(binaryOnly, 'probe', {
      'if-none-exist': `_id=${attached}`,
      prefer: 'return=representation',
    });
    expect(plain.statusCode).toBe(200);
    expect(plain.headers.location).toContain(`/Binary/${attached}/_history/`);
    expect(plain.body).toBe('');
    const bundle = await binaryOnly.post('/fhir', {
      resourceType: 'Bundle',
      type: 'transaction',
      entry: [
        {
          resource: { resourceType: 'Binary', contentType: 'text/plain', data: 'eA==' },
          request: { method: 'POST', url: 'Binary', ifNoneExist: `_id=${attachedAbsolute}` },
        },
      ],
    });
    expect(bundle.statusCode).toBe(200);
    const entry = bundle.json().entry[0];
    expect(entry.response.status).toBe('200 OK');
    expect(entry.resource).toBeUndefined();
    expect(bundle.body).not.toContain(base64);
    // A caller who may read Patients gets the match as usual.
    const reader = await raw(patientReader, 'probe', {
      'if-none-exist': `_id=${attached}`,
      prefer: 'return=representation',
    });
    expect(reader.statusCode).toBe(200);
    expect(reader.json()).toMatchObject({ resourceType: 'Binary', id: attached, data: base64 });
  });

  /** A fresh Binary attached to the Patient, for a test that tries to change it. */
  const attachedTarget = async () => {
    const res = await raw(admin, secret, { 'x-security-context': `Patient/${patientId}` });
    expect(res.statusCode).toBe(201);
    return res.json().id as string;
  };
  /** As the admin sees it: still the first version, still the secret, still attached. */
  const expectUnchanged = async (id: string) => {
    const current = await admin.get(`/fhir/Binary/${id}?_format=json`);
    expect(current.statusCode).toBe(200);
    const binary = current.json();
    expect(binary.meta.versionId).toBe('1');
    expect(binary.securityContext).toEqual({ reference: `Patient/${patientId}` });
    expect(Buffer.from(binary.data, 'base64').toString()).toBe(secret);
  };
  const expectRefused = (res: { statusCode: number; body: string }, what: string) => {
    expect(res.statusCode, what).toBe(403);
    expect(JSON.parse(res.body).issue[0].diagnostics, what).toContain('system/Patient.r');
    expect(res.body, what).not.toContain(Buffer.from(secret).toString('base64'));
  };
  const jsonPatch = (ops: unknown[]) => JSON.stringify(ops);
  const fhirPathPatch = JSON.stringify({
    resourceType: 'Parameters',
    parameter: [
      {
        name: 'operation',
        part: [
          { name: 'type', valueCode: 'replace' },
          { name: 'path', valueString: 'Binary.contentType' },
          { name: 'value', valueCode: 'text/html' },
        ],
      },
    ],
  });

  it('update, patch and delete of a Binary attached to a Patient: 403 to a Binary-only account, nothing changed', async () => {
    const target = await attachedTarget();
    const detached = JSON.stringify({
      resourceType: 'Binary',
      id: target,
      contentType: 'text/plain',
      data: Buffer.from('overwritten').toString('base64'),
    });
    const sameContext = JSON.stringify({
      ...JSON.parse(detached),
      securityContext: { reference: `Patient/${patientId}` },
    });
    const attempts: [string, () => Promise<Reply>][] = [
      ['PUT without a context', () => binaryOnly.put(`/fhir/Binary/${target}`, detached)],
      ['PUT with its context', () => binaryOnly.put(`/fhir/Binary/${target}`, sameContext)],
      [
        'PUT of raw bytes',
        () => binaryOnly.put(`/fhir/Binary/${target}`, 'overwritten', { 'content-type': 'text/plain' }),
      ],
      ['PUT with If-Match', () => binaryOnly.put(`/fhir/Binary/${target}`, detached, { 'if-match': 'W/"1"' })],
      [
        'JSON Patch remove securityContext',
        () => binaryOnly.patch(`/fhir/Binary/${target}`, [{ op: 'remove', path: '/securityContext' }]),
      ],
      [
        'JSON Patch replace data',
        () => binaryOnly.patch(`/fhir/Binary/${target}`, [{ op: 'replace', path: '/data', value: 'AA==' }]),
      ],
      [
        'JSON Patch test (an oracle on the content)',
        () =>
          binaryOnly.patch(`/fhir/Binary/${target}`, [
            { op: 'test', path: '/data', value: Buffer.from(secret).toString('base64') },
          ]),
      ],
      [
        'JSON Patch copy of the content',
        () => binaryOnly.patch(`/fhir/Binary/${target}`, [{ op: 'copy', from: '/data', path: '/contentType' }]),
      ],
      [
        'JSON Patch move',
        () =>
          binaryOnly.patch(`/fhir/Binary/${target}`, [{ op: 'move', from: '/securityContext', path: '/extension' }]),
      ],
      ['FHIRPath Patch', () => binaryOnly.patch(`/fhir/Binary/${target}`, fhirPathPatch)],
      ['DELETE', () => binaryOnly.delete(`/fhir/Binary/${target}`)],
      [
        'conditional update',
        () => binaryOnly.put(`/fhir/Binary?_id=${target}`, JSON.stringify({ ...JSON.parse(detached), id: undefined })),
      ],
      ['conditional delete', () => binaryOnly.delete(`/fhir/Binary?_id=${target}`)],
    ];
    for (const [what, attempt] of attempts) {
      expectRefused(await attempt(), what);
      await expectUnchanged(target);
    }
  });

  it('the same through batch and transaction entries: 403, nothing changed', async () => {
    const target = await attachedTarget();
    const detached = {
      resourceType: 'Binary',
      id: target,
      contentType: 'text/plain',
      data: Buffer.from('overwritten').toString('base64'),
    };
    const patchBinary = {
      resourceType: 'Binary',
      contentType: 'application/json-patch+json',
      data: Buffer.from(jsonPatch([{ op: 'remove', path: '/securityContext' }])).toString('base64'),
    };
    const entries = [
      { resource: detached, request: { method: 'PUT', url: `Binary/${target}` } },
      { resource: patchBinary, request: { method: 'PATCH', url: `Binary/${target}` } },
      { resource: JSON.parse(fhirPathPatch), request: { method: 'PATCH', url: `Binary/${target}` } },
      { request: { method: 'DELETE', url: `Binary/${target}` } },
      { resource: { ...detached, id: undefined }, request: { method: 'PUT', url: `Binary?_id=${target}` } },
      { request: { method: 'DELETE', url: `Binary?_id=${target}` } },
    ];
    const batch = await binaryOnly.post('/fhir', { resourceType: 'Bundle', type: 'batch', entry: entries });
    expect(batch.statusCode).toBe(200);
    const outcomes = batch.json().entry as {
      response: { status: string; outcome: { issue: { diagnostics: string }[] } };
    }[];
    expect(outcomes.map((e) => e.response.status)).toEqual(entries.map(() => '403 Forbidden'));
    for (const e of outcomes) expect(e.response.outcome.issue[0].diagnostics).toContain('system/Patient.r');
    await expectUnchanged(target);
    for (const entry of entries) {
      const transaction = await binaryOnly.post('/fhir', {
        resourceType: 'Bundle',
        type: 'transaction',
        entry: [entry],
      });
      expectRefused(transaction, `transaction ${entry.request.method} ${entry.request.url}`);
      await expectUnchanged(target);
    }
  });

  it('a caller who may read Patients may change it; a Binary-only account changes unattached content', async () => {
    const target = await attachedTarget();
    const patched = await patientReader.patch(`/fhir/Binary/${target}`, [
      { op: 'replace', path: '/contentType', value: 'text/markdown' },
    ]);
    expect(patched.statusCode).toBe(200);
    expect(patched.json().contentType).toBe('text/markdown');
    expect((await patientReader.delete(`/fhir/Binary/${target}`)).statusCode).toBe(204);
    expect((await admin.get(`/fhir/Binary/${target}`)).statusCode).toBe(410);
    const leaflet = (await raw(admin, 'leaflet v1')).json().id;
    const replaced = await binaryOnly.put(`/fhir/Binary/${leaflet}`, 'leaflet v2', { 'content-type': 'text/plain' });
    expect(replaced.statusCode).toBe(200);
    expect((await binaryOnly.get(`/fhir/Binary/${leaflet}`)).body).toBe('leaflet v2');
    expect((await binaryOnly.delete(`/fhir/Binary/${leaflet}`)).statusCode).toBe(204);
  });

  /** An account with these scopes and a token from the token endpoint (narrowed to `tokenScopes` if given). */
  const account = async (scopes: string, tokenScopes?: string) => {
    const username = `exporter-${randomUUID()}`;
    const password = `pw-${randomUUID()}`;
    await t.accounts.create({ username, password, scopes: scopes.split(' ') });
    return { username, client: new BulkClient(t.app, await passwordToken(t.app, username, password, tokenScopes)) };
  };

  it('$export of Binary leaves out what the account may not read, with its scopes as the job runs', async () => {
    // Attached to the Patient at kick-off, detached afterwards: the export holds the attached version.
    const detachedLater = (await admin.post('/fhir/Binary', binaryWith(`Patient/${patientId}`))).json().id;
    const selected = [attached, attachedAbsolute, free, external, detachedLater];
    const kickoff = `/fhir/$export?_type=Binary&_typeFilter=${encodeURIComponent(`Binary?_id=${selected.join(',')}`)}`;
    const binaryOnlyAccount = await account('system/Binary.rs');
    const narrowedToken = await account('system/Binary.rs system/Patient.r', 'system/Binary.rs');
    const reader = await account('system/Binary.rs system/Patient.r');
    const shrunk = await account('system/Binary.rs system/Patient.r');
    const everything = await account('system/*.rs');
    const exports = new Map<string, string>();
    for (const [name, { client }] of Object.entries({ binaryOnlyAccount, narrowedToken, reader, shrunk, everything })) {
      exports.set(name, await client.start(kickoff));
    }
    const detach = { ...binaryWith(`Patient/${patientId}`), id: detachedLater, securityContext: undefined };
    expect((await admin.put(`/fhir/Binary/${detachedLater}`, detach)).statusCode).toBe(200);
    await t.accounts.update(shrunk.username, { scopes: ['system/Binary.rs'] });

    // Now a worker runs the queued jobs.
    const worker = await assembleApp(
      loadConfig({ DATABASE_URL: t.database.url, AMBIENT_PUBLIC_URL: TEST_PUBLIC_URL, LOG_LEVEL: 'silent' }),
    );
    await worker.ready();
    try {
      const exported = async (name: string, client: BulkClient) => {
        const files = await client.resources(await client.manifest(exports.get(name)!));
        const binaries = files.get('Binary') ?? [];
        return { ids: exportedIds(binaries), text: JSON.stringify(binaries) };
      };
      const secretData = Buffer.from(secret).toString('base64');
      for (const [name, { client }] of Object.entries({ binaryOnlyAccount, narrowedToken, shrunk })) {
        const { ids, text } = await exported(name, client);
        expect(ids, name).toEqual([free]);
        expect(text, name).not.toContain(secretData);
      }
      const asReader = await exported('reader', reader.client);
      expect(asReader.ids).toEqual([attached, attachedAbsolute, free, detachedLater].sort());
      const asEverything = await exported('everything', everything.client);
      expect(asEverything.ids).toEqual([...selected].sort());
      // The version at the export's transactionTime, still attached, is what the reader got.
      expect(asReader.text).toContain(`"securityContext":{"reference":"Patient/${patientId}"}`);
    } finally {
      await worker.close();
    }
  });
});
