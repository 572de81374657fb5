// What a Subscription may be and whom it tells (docs/subscriptions.md), tested as a client and an attacker
// send them: scopes on create, on match and on delivery; endpoints, headers and payloads refused; the
// websocket's token and ownership; retries into `error`, `off`, and the bounds; every write path
// (transaction Bundles, the scribe) notifying.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { connect as connectSocket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import WebSocket from 'ws';
import { cliProcess } from './support/cli-process.js';
import { BACKENDS } from './support/databases.js';
import { bearer } from './support/fhir-client.js';
import type { FhirClient } from './support/fhir-client.js';
import { startHookReceiver } from './support/hook-receiver.js';
import type { HookReceiver, ReceivedHook } from './support/hook-receiver.js';
import { scribeClient } from './support/scribe-client.js';
import { startTestApp } from './support/test-app.js';
import type { TestApp } from './support/test-app.js';

async function until<T>(
  what: string,
  probe: () => Promise<T | undefined>,
  timeoutMs = 15_000,
  state: () => string = () => '',
): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what} ${state()}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

type Json = Record<string, any>;

describe.each(BACKENDS)('Subscription rules on %s', (backend) => {
  let t: TestApp;
  let receiver: HookReceiver;
  let admin: FhirClient;
  let base: string;

  beforeAll(async () => {
    receiver = await startHookReceiver();
    t = await startTestApp(backend, {
      AMBIENT_SUBSCRIPTION_ENDPOINTS: `${receiver.base}/hooks/`,
      AMBIENT_SUBSCRIPTION_POLL_MS: '50',
      AMBIENT_SUBSCRIPTION_RETRY_BASE_MS: '20',
      AMBIENT_SUBSCRIPTION_MAX_ATTEMPTS: '3',
      AMBIENT_SUBSCRIPTION_MAX_PER_ACCOUNT: '3',
      AMBIENT_SUBSCRIPTION_MAX_PENDING: '5',
      AMBIENT_SUBSCRIPTION_TIMEOUT_MS: '2000',
    });
    const address = await t.app.listen({ port: 0, host: '127.0.0.1' });
    base = address.replace(/^http/, 'ws');
  });
  // An account of its own per test: the per-account bound counts each one's subscriptions.
  beforeEach(async () => {
    admin = await t.client();
  });
  afterAll(async () => {
    await t?.close();
    await receiver?.close();
  });

  /** A receiver path of its own per test, so that tests never read each other's hooks. */
  let paths = 0;
  const hookPath = () => `/hooks/${++paths}`;
  const hooksAt = (path: string): ReceivedHook[] => receiver.received.filter((h) => h.path.startsWith(path));

  const restHook = (criteria: string, path: string, channel: Json = {}): Json & { resourceType: string } => ({
    resourceType: 'Subscription',
    status: 'requested',
    reason: 'test',
    criteria,
    channel: { type: 'rest-hook', endpoint: `${receiver.base}${path}`, ...channel },
  });

  async function statusOf(client: FhirClient, id: string, wanted: string): Promise<Json> {
    let last: Json = {};
    return until(
      `Subscription/${id} ${wanted}`,
      async () => {
        last = (await client.get(`/fhir/Subscription/${id}`)).json<Json>();
        return last.status === wanted ? last : undefined;
      },
      15_000,
      () => JSON.stringify(last),
    );
  }

  async function subscribe(client: FhirClient, resource: Json & { resourceType: string }): Promise<string> {
    const res = await client.create(resource);
    expect(res.statusCode, res.body).toBe(201);
    const id = res.json<Json>().id as string;
    await statusOf(client, id, 'active');
    return id;
  }

  /** Writes a marker that every subscription of `path`'s test matches, and waits for its hook: what came before it has come. */
  async function settled(
    client: FhirClient,
    path: string,
    criteriaMarker: () => Promise<void>,
  ): Promise<ReceivedHook[]> {
    const before = hooksAt(path).length;
    await criteriaMarker();
    await until(`the marker's hook at ${path}`, async () => (hooksAt(path).length > before ? true : undefined));
    return hooksAt(path);
  }

  it('refuses what it cannot serve, naming the element, and stores nothing', async () => {
    const bad: [Json & { resourceType: string }, string][] = [
      [restHook('Observation?no-such-param=1', '/hooks/x'), 'Subscription.criteria'],
      [restHook('Observation?_sort=date', '/hooks/x'), 'Subscription.criteria'],
      [restHook('NotAType?x=1', '/hooks/x'), 'Subscription.criteria'],
      [
        restHook('Observation?code=x', '/hooks/x', { type: 'email', endpoint: 'mailto:a@b.c' }),
        'Subscription.channel.type',
      ],
      [restHook('Observation?code=x', '/elsewhere'), 'Subscription.channel.endpoint'],
      [
        {
          ...restHook('Observation?code=x', '/x'),
          channel: { type: 'rest-hook', endpoint: `http://user:pw@${receiver.base.slice(7)}/hooks/` },
        },
        'Subscription.channel.endpoint',
      ],
      [restHook('Observation?code=x', '/hooks/x', { payload: 'application/fhir+xml' }), 'Subscription.channel.payload'],
      [
        restHook('Observation?code=x', '/hooks/x', { header: ['X-Ok: 1', 'Host: internal.example'] }),
        'Subscription.channel.header[1]',
      ],
      [
        restHook('Observation?code=x', '/hooks/x', { header: ['X-Evil: a\r\nX-Injected: b'] }),
        'Subscription.channel.header[0]',
      ],
      [restHook('Observation?code=x', '/hooks/x', { header: ['X-Note: 5 €'] }), 'Subscription.channel.header[0]'],
      [
        restHook('Observation?code=x', '/hooks/x', { header: ['X-Original-URL: /admin'] }),
        'Subscription.channel.header[0]',
      ],
      [restHook('Observation?code=x', '/hooks/..;/admin'), 'Subscription.channel.endpoint'],
      [restHook('Observation?code=x', '/hooks/..%2fadmin'), 'Subscription.channel.endpoint'],
      [restHook('Observation?code=x', '/hooks/%252e%252e/admin'), 'Subscription.channel.endpoint'],
      [
        restHook('Observation?code=x', '/hooks/x?a=1', { payload: 'application/fhir+json' }),
        'Subscription.channel.endpoint',
      ],
    ];
    for (const [resource, expression] of bad) {
      const res = await admin.create(resource);
      expect(res.statusCode, JSON.stringify(resource)).toBe(401);
      const outcome = res.json<{ issue: { expression?: string[]; diagnostics: string }[] }>();
      expect(
        outcome.issue.flatMap((i) => i.expression ?? []),
        res.body,
      ).toContain(expression);
    }
    const count = await admin.get('/fhir/Subscription?_summary=count&criteria:contains=code%3Dx');
    expect(count.json<Json>().total).toBe(0);
  });

  it('plans the criteria with the writer’s scopes: a type or chain it may not search is a 403', async () => {
    const noObservations = await t.client('system/Subscription.cruds system/Patient.rs');
    const direct = await noObservations.create(restHook('Observation?code=x', '/hooks/x'));
    expect(direct.statusCode).toBe(403);
    expect(direct.json<Json>().issue[0].diagnostics).toMatch(/Observation/);
    const chained = await (
      await t.client('system/Subscription.cruds system/Observation.rs')
    ).create(restHook('Observation?subject:Patient.name=secret', '/hooks/x'));
    expect(chained.statusCode).toBe(403);
    expect(chained.json<Json>().issue[0].diagnostics).toMatch(/Patient/);
  });

  it('never notifies about what the owner may no longer read, and says why in error', async () => {
    const username = `narrowed-${Date.now()}`;
    await t.accounts.create({
      username,
      password: 'pw-narrowed-123',
      scopes: ['system/Subscription.cruds', 'system/Observation.rs'],
    });
    const { passwordToken, fhirClient } = await import('./support/fhir-client.js');
    const owner = fhirClient(t.app, await passwordToken(t.app, username, 'pw-narrowed-123'));
    const path = hookPath();
    const id = await subscribe(owner, restHook('Observation?code=narrowed', path));
    await t.accounts.update(username, { scopes: ['system/Subscription.cruds'] });
    await admin.create({ resourceType: 'Observation', status: 'final', code: { coding: [{ code: 'narrowed' }] } });
    const errored = await statusOf(admin, id, 'error');
    expect(errored.error).toMatch(/no longer allow reading and searching Observation/);
    expect(hooksAt(path)).toEqual([]);
  });

  it('keeps a Binary from a subscriber who may not read what its securityContext points at', async () => {
    const binaryOnly = await t.client('system/Subscription.cruds system/Binary.crs');
    const path = hookPath();
    await subscribe(
      binaryOnly,
      restHook('Binary?_lastUpdated=gt2000-01-01', path, { payload: 'application/fhir+json' }),
    );
    const patient = (await admin.create({ resourceType: 'Patient' })).json<Json>();
    await admin.create({
      resourceType: 'Binary',
      contentType: 'text/plain',
      securityContext: { reference: `Patient/${patient.id}` },
      data: Buffer.from('secret').toString('base64'),
    });
    const open = (
      await admin.create({ resourceType: 'Binary', contentType: 'text/plain', data: 'b3Blbg==' })
    ).json<Json>();
    const hooks = await until('the open Binary', async () => (hooksAt(path).length >= 1 ? hooksAt(path) : undefined));
    await new Promise((resolve) => setTimeout(resolve, 400));
    expect(hooksAt(path).map((h) => h.path)).toEqual([`${path}/Binary/${open.id}`]);
    expect(JSON.parse(hooks[0].body).data).toBe('b3Blbg==');
  });

  it('retries with back-off, then sets error with the reason; a client re-enables it and the queue resumes', async () => {
    const path = hookPath();
    const id = await subscribe(admin, restHook('Observation?code=flaky', path));
    receiver.answer = 503;
    try {
      await admin.create({ resourceType: 'Observation', status: 'final', code: { coding: [{ code: 'flaky' }] } });
      const errored = await statusOf(admin, id, 'error');
      expect(errored.error).toMatch(/failed 3 times in a row; the last time the endpoint answered HTTP 503/);
      expect(hooksAt(path).length).toBe(3);
    } finally {
      receiver.answer = 200;
    }
    const current = (await admin.get(`/fhir/Subscription/${id}`)).json<Json>();
    const { error: _error, meta: _meta, ...rest } = current;
    const put = await admin.put(`/fhir/Subscription/${id}`, { ...rest, status: 'requested' });
    expect(put.statusCode, put.body).toBe(200);
    expect(put.json<Json>().status).toBe('requested');
    await statusOf(admin, id, 'active');
    await admin.create({ resourceType: 'Observation', status: 'final', code: { coding: [{ code: 'flaky' }] } });
    await until('a delivery after re-enabling', async () => (hooksAt(path).length >= 4 ? true : undefined));
    expect(hooksAt(path).map((h) => h.method)).toEqual(['POST', 'POST', 'POST', 'POST']);
    expect(hooksAt(path).every((h) => h.body === '')).toBe(true);
  });

  it('does not follow a redirect: the endpoint allowed is the one named', async () => {
    const path = hookPath();
    const id = await subscribe(admin, restHook('Observation?code=redirected', path));
    receiver.answer = 307;
    try {
      await admin.create({ resourceType: 'Observation', status: 'final', code: { coding: [{ code: 'redirected' }] } });
      const errored = await statusOf(admin, id, 'error');
      expect(errored.error).toMatch(/HTTP 307/);
    } finally {
      receiver.answer = 200;
    }
  });

  it('stops at off, and sends nothing about deletes', async () => {
    const path = hookPath();
    const id = await subscribe(admin, restHook('Patient?family=Offish', path));
    const patient = (await admin.create({ resourceType: 'Patient', name: [{ family: 'Offish' }] })).json<Json>();
    await until('the first hook', async () => (hooksAt(path).length === 1 ? true : undefined));
    await admin.delete(`/fhir/Patient/${patient.id}`);
    const current = (await admin.get(`/fhir/Subscription/${id}`)).json<Json>();
    expect((await admin.put(`/fhir/Subscription/${id}`, { ...current, status: 'off' })).statusCode).toBe(200);
    await admin.create({ resourceType: 'Patient', name: [{ family: 'Offish' }] });
    // Another subscription's hook for that write has come: this one's would have come with it.
    const witness = hookPath();
    await subscribe(admin, restHook('Patient?family=Offish', witness));
    await settled(
      admin,
      witness,
      async () => void (await admin.create({ resourceType: 'Patient', name: [{ family: 'Offish' }] })),
    );
    expect(hooksAt(path).length).toBe(1);
    expect((await admin.get(`/fhir/Subscription/${id}`)).json<Json>().status).toBe('off');
  });

  it('sets a subscription past the account’s bound to error instead of active', async () => {
    const client = await t.client();
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push(await subscribe(client, restHook(`Patient?family=Bound${i}`, hookPath())));
    const res = await client.create(restHook('Patient?family=Bound3', hookPath()));
    const errored = await statusOf(client, res.json<Json>().id, 'error');
    expect(errored.error).toMatch(/already has 3 active subscriptions \(AMBIENT_SUBSCRIPTION_MAX_PER_ACCOUNT\)/);
  });

  it('drops the queue of an endpoint that takes nothing once it passes the bound, with error', async () => {
    const client = await t.client();
    const path = hookPath();
    const id = await subscribe(client, restHook('Observation?code=pileup', path));
    receiver.answer = 'hang';
    try {
      const bundle = {
        resourceType: 'Bundle',
        type: 'transaction',
        entry: Array.from({ length: 8 }, () => ({
          resource: { resourceType: 'Observation', status: 'final', code: { coding: [{ code: 'pileup' }] } },
          request: { method: 'POST', url: 'Observation' },
        })),
      };
      expect((await client.post('/fhir', bundle)).statusCode).toBe(200);
      const errored = await statusOf(client, id, 'error');
      expect(errored.error).toMatch(/More than 5 notifications were waiting/);
    } finally {
      receiver.answer = 200;
    }
  });

  it('notifies about every entry of a transaction Bundle, in entry order', async () => {
    const path = hookPath();
    await subscribe(admin, restHook('Observation?code=bundled', path, { payload: 'application/fhir+json' }));
    const bundle = {
      resourceType: 'Bundle',
      type: 'transaction',
      entry: [1, 2, 3].map((n) => ({
        resource: {
          resourceType: 'Observation',
          status: 'final',
          code: { coding: [{ code: 'bundled' }] },
          valueInteger: n,
        },
        request: { method: 'POST', url: 'Observation' },
      })),
    };
    expect((await admin.post('/fhir', bundle)).statusCode).toBe(200);
    const hooks = await until('three hooks', async () => (hooksAt(path).length >= 3 ? hooksAt(path) : undefined));
    expect(hooks.map((h) => JSON.parse(h.body).valueInteger)).toEqual([1, 2, 3]);
  });

  it('tells a rest-hook about the scribe’s note for the patient it watches', async () => {
    const patient = (await admin.create({ resourceType: 'Patient', name: [{ family: 'Scribed' }] })).json<Json>();
    const path = hookPath();
    await subscribe(
      admin,
      restHook(`DocumentReference?subject=Patient/${patient.id}`, path, { payload: 'application/fhir+json' }),
    );
    const scribe = scribeClient(t.app, admin.token!);
    const submitted = await scribe.submit({
      transcripts: ['Doctor: What brings you in?\nPatient: A cough for three days.'],
      patient: `Patient/${patient.id}`,
      template_ids: [1],
    });
    expect(submitted.statusCode, submitted.body).toBe(202);
    const record = await scribe.finished(submitted.json<Json>().scribe_id);
    expect(record.status).toBe('COMPLETED');
    const hooks = await until('the note', async () => (hooksAt(path).length >= 1 ? hooksAt(path) : undefined));
    const document = JSON.parse(hooks[0].body);
    expect(document.resourceType).toBe('DocumentReference');
    expect(document.subject.reference).toBe(`Patient/${patient.id}`);
    expect(hooks[0].path).toBe(`${path}/DocumentReference/${document.id}`);
  });

  it('tells a rest-hook about what the import command writes, and leaves an imported Subscription ownerless', async () => {
    const path = hookPath();
    await subscribe(admin, restHook('Observation?code=imported', path, { payload: 'application/fhir+json' }));
    const dir = mkdtempSync(join(tmpdir(), 'ambient-subscription-import-'));
    try {
      const file = join(dir, 'resources.ndjson');
      const lines = [1, 2, 3].map((n) =>
        JSON.stringify({
          resourceType: 'Observation',
          status: 'final',
          code: { coding: [{ code: 'imported' }] },
          valueInteger: n,
        }),
      );
      lines.push(
        JSON.stringify({
          resourceType: 'Subscription',
          id: 'imported-subscription',
          status: 'requested',
          reason: 'imported',
          criteria: 'Patient?family=Imported',
          channel: { type: 'websocket' },
        }),
      );
      writeFileSync(file, lines.join('\n') + '\n');
      const result = await cliProcess(['import', file], { DATABASE_URL: t.database.url }, 60_000);
      expect(result.code, result.stderr).toBe(0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    const hooks = await until('three imported hooks', async () =>
      hooksAt(path).length >= 3 ? hooksAt(path) : undefined,
    );
    expect(hooks.map((h) => JSON.parse(h.body).valueInteger).sort()).toEqual([1, 2, 3]);
    const imported = await statusOf(admin, 'imported-subscription', 'error');
    expect(imported.error).toMatch(/written without an account \(the import command\)/);
  });

  it('records as owner the account that wrote each Subscription, whatever else is written at once', async () => {
    const [first, second] = [await t.client(), await t.client('system/Subscription.cruds system/Patient.rs')];
    const websocket = (n: number) => ({
      resourceType: 'Subscription',
      status: 'requested',
      reason: 'owners',
      criteria: `Patient?family=Owner${n}`,
      channel: { type: 'websocket' },
    });
    const created = await Promise.all(
      Array.from({ length: 16 }, (_, n) => (n % 2 === 0 ? first : second).create(websocket(n))),
    );
    const ids = created.map((res) => res.json<Json>().id as string);
    const sockets = await Promise.all([connect(first.auth), connect(second.auth)]);
    ids.forEach((id, n) => sockets[n % 2].socket.send(`bind ${id}`));
    await until('every bind answered', async () => (sockets.every((s) => s.messages.length >= 8) ? true : undefined));
    expect(sockets[0].messages.sort()).toEqual(
      ids
        .filter((_, n) => n % 2 === 0)
        .map((id) => `bound ${id}`)
        .sort(),
    );
    expect(sockets[1].messages.sort()).toEqual(
      ids
        .filter((_, n) => n % 2 === 1)
        .map((id) => `bound ${id}`)
        .sort(),
    );
    for (const { socket } of sockets) socket.close();
  });

  it('keeps a websocket subscription active however many notifications nobody was bound for', async () => {
    const websocket = {
      resourceType: 'Subscription',
      status: 'requested',
      reason: 'unbound',
      criteria: 'Patient?family=Unbound',
      channel: { type: 'websocket' },
    };
    const unbound = await subscribe(admin, websocket);
    // A bound one of the same criteria sees every write: once it has, so has the unbound one's queue.
    const witness = await subscribe(admin, websocket);
    const { socket, messages } = await connect(admin.auth);
    socket.send(`bind ${witness}`);
    await until('bound', async () => (messages.includes(`bound ${witness}`) ? true : undefined));
    for (let i = 0; i < 8; i++) await admin.create({ resourceType: 'Patient', name: [{ family: 'Unbound' }] });
    await until('8 pings', async () =>
      messages.filter((m) => m === `ping ${witness}`).length >= 8 ? true : undefined,
    );
    socket.close();
    expect((await admin.get(`/fhir/Subscription/${unbound}`)).json<Json>().status).toBe('active');
  });

  function connect(headers: Record<string, string>): Promise<{ socket: WebSocket; messages: string[] }> {
    const socket = new WebSocket(`${base}/fhir/$subscription-websocket`, { headers });
    const messages: string[] = [];
    socket.on('message', (data) => messages.push(data.toString()));
    return new Promise((resolve, reject) => {
      socket.once('open', () => resolve({ socket, messages }));
      socket.once('unexpected-response', (request, response) => {
        request.destroy();
        reject(new Error(`HTTP ${response.statusCode}`));
      });
      socket.once('error', reject);
    });
  }

  describe('the websocket', () => {
    it('needs a token to connect', async () => {
      await expect(connect({})).rejects.toThrow('HTTP 401');
      await expect(connect(bearer('not-a-token'))).rejects.toThrow('HTTP 401');
    });

    it('closes the connection of an upgrade it refuses, on any path', async () => {
      const { hostname, port } = new URL(base.replace(/^ws/, 'http'));
      const refused = async (path: string, headers: string): Promise<string> => {
        const socket = connectSocket(Number(port), hostname);
        let text = '';
        socket.on('data', (chunk) => (text += chunk.toString()));
        socket.write(
          `GET ${path} HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n${headers}\r\n`,
        );
        // The server closes it: otherwise this waits until the test times out.
        await new Promise((resolve) => socket.on('close', resolve));
        return text;
      };
      expect(await refused('/fhir/$subscription-websocket', '')).toMatch(/^HTTP\/1\.1 401/);
      expect(await refused('/fhir/Patient?_count=1', `Authorization: Bearer ${admin.token}\r\n`)).toMatch(
        /^HTTP\/1\.1 200/,
      );
    });

    it('answers a plain GET with a 400 that says how to connect', async () => {
      const res = await admin.get('/fhir/$subscription-websocket');
      expect(res.statusCode).toBe(400);
      expect(res.json<Json>().issue[0].diagnostics).toMatch(/websocket/);
    });

    it('binds only a websocket subscription of the token’s own account', async () => {
      const mine = await t.client();
      const theirs = await t.client();
      const theirId = await subscribe(theirs, {
        resourceType: 'Subscription',
        status: 'requested',
        reason: 'x',
        criteria: 'Patient?family=Theirs',
        channel: { type: 'websocket' },
      });
      const hookId = await subscribe(mine, restHook('Patient?family=Hooked', hookPath()));
      const { socket, messages } = await connect(mine.auth);
      socket.send(`bind ${theirId}`);
      socket.send(`bind ${hookId}`);
      socket.send('bind no-such-subscription');
      socket.send('hello');
      await until('four answers', async () => (messages.length >= 4 ? true : undefined));
      expect(messages.slice().sort()).toEqual(
        [
          `error ${theirId} is not a Subscription of this account`,
          `error ${hookId} is not a websocket Subscription (channel.type rest-hook)`,
          'error no-such-subscription is not a Subscription of this account',
          'error expected "bind <subscription id>"',
        ].sort(),
      );
      await theirs.create({ resourceType: 'Patient', name: [{ family: 'Theirs' }] });
      const { socket: theirSocket, messages: theirMessages } = await connect(theirs.auth);
      theirSocket.send(`bind ${theirId}`);
      await until('bound', async () => (theirMessages.includes(`bound ${theirId}`) ? true : undefined));
      await theirs.create({ resourceType: 'Patient', name: [{ family: 'Theirs' }] });
      await until('their ping', async () => (theirMessages.includes(`ping ${theirId}`) ? true : undefined));
      expect(messages.some((m) => m.startsWith('ping'))).toBe(false);
      socket.close();
      theirSocket.close();
    });

    it('closes a connection when the token it was opened with expires', async () => {
      const shortLived = await startTestApp(backend, { AMBIENT_TOKEN_TTL_SECONDS: '3' });
      try {
        const address = await shortLived.app.listen({ port: 0, host: '127.0.0.1' });
        // Bound before it is active (binding asks only that it exists): the token's seconds are for the socket.
        const client = await shortLived.client();
        const created = await client.create({
          resourceType: 'Subscription',
          status: 'requested',
          reason: 'x',
          criteria: 'Patient?family=Expiring',
          channel: { type: 'websocket' },
        });
        const id = created.json<Json>().id as string;
        const socket = new WebSocket(`${address.replace(/^http/, 'ws')}/fhir/$subscription-websocket`, {
          headers: client.auth,
        });
        const messages: string[] = [];
        socket.on('message', (data) => messages.push(data.toString()));
        const closed = new Promise<{ code: number; reason: string }>((resolve) =>
          socket.on('close', (code, reason) => resolve({ code, reason: reason.toString() })),
        );
        await new Promise((resolve) => socket.once('open', resolve));
        socket.send(`bind ${id}`);
        await until('bound', async () => (messages.includes(`bound ${id}`) ? true : undefined));
        expect(await closed).toEqual({ code: 1008, reason: 'access token expired' });
        // The same token is refused for a new connection too.
        await expect(
          new Promise((resolve, reject) => {
            const again = new WebSocket(`${address.replace(/^http/, 'ws')}/fhir/$subscription-websocket`, {
              headers: client.auth,
            });
            again.once('open', () => resolve('open'));
            again.once('unexpected-response', (request, response) => {
              request.destroy();
              reject(new Error(`HTTP ${response.statusCode}`));
            });
          }),
        ).rejects.toThrow('HTTP 401');
      } finally {
        await shortLived.close();
      }
    });

    it('is advertised in the CapabilityStatement', async () => {
      const statement = (await admin.get('/fhir/metadata')).json<Json>();
      const extension = statement.rest[0].extension.find(
        (e: Json) => e.url === 'http://hl7.org/fhir/StructureDefinition/capabilitystatement-websocket',
      );
      expect(extension.valueUri).toBe(`${t.config.publicUrl.replace(/^http/, 'ws')}/fhir/$subscription-websocket`);
    });
  });
});
