// Rest-hook Subscriptions with real `serve` processes (docs/configuration.md "Subscriptions"): each
// notification goes out once however many processes share the database, and in order per resource; the
// queue survives a stop (SIGTERM) and a crash (SIGKILL) of the process that holds it; an endpoint that
// never answers holds up neither the writes nor a stop. The endpoint is test/support/hook-receiver.ts;
// the servers run from source (test/support/server-process.ts), as in the other suites that kill them.
import { randomUUID } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { AccountStore } from '../src/auth/accounts.js';
import { migrate } from '../src/storage/migrate.js';
import { openDatabase } from '../src/storage/open-database.js';
import { backendsQuickOn, testDatabase } from './support/databases.js';
import { FULL } from './support/full-tests.js';
import { fhirClient, passwordToken } from './support/fhir-client.js';
import type { FhirClient } from './support/fhir-client.js';
import { startHookReceiver } from './support/hook-receiver.js';
import type { HookReceiver, ReceivedHook } from './support/hook-receiver.js';
import { httpInject } from './support/http-inject.js';
import { startServerProcess } from './support/server-process.js';
import type { ServerProcess } from './support/server-process.js';

const PAYLOAD = 'application/fhir+json';

async function until<T>(what: () => string, probe: () => Promise<T | undefined>, timeoutMs = 20_000): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what()}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

interface Setup {
  readonly databaseUrl: string;
  readonly username: string;
  readonly password: string;
}

/** Databases, receivers, processes and connections made by a suite, ended after it. */
function resources() {
  const cleanups: (() => Promise<unknown>)[] = [];
  afterAll(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup().catch(() => undefined);
  });
  return {
    /** A fresh database, migrated, with one account (all scopes). */
    async database(backend: 'sqlite' | 'postgres'): Promise<Setup> {
      const database = await testDatabase(backend);
      cleanups.push(() => database.dispose());
      const db = openDatabase(database.url);
      try {
        await migrate(db);
        const username = `hooks-${randomUUID()}`;
        const password = `pw-${randomUUID()}`;
        await new AccountStore(db).create({ username, password });
        return { databaseUrl: database.url, username, password };
      } finally {
        await db.close();
      }
    },
    async receiver(): Promise<HookReceiver> {
      const receiver = await startHookReceiver();
      cleanups.push(() => receiver.close());
      return receiver;
    },
    async server(env: Record<string, string>): Promise<ServerProcess> {
      const server = await startServerProcess(env);
      cleanups.push(async () => {
        if (server.child.exitCode === null && server.child.signalCode === null) server.child.kill('SIGKILL');
        await server.exited;
      });
      return server;
    },
    /** A client of `server` with a token of the set-up's account. */
    async client(server: ServerProcess, setup: Setup): Promise<FhirClient> {
      const transport = httpInject(server.url);
      cleanups.push(async () => transport.close());
      return fhirClient(transport, await passwordToken(transport, setup.username, setup.password));
    },
  };
}

/** The settings of every server here: a quick loop, the receiver allowed, failures retried soon. */
function serverEnv(setup: Setup, receiver: HookReceiver, extra: Record<string, string> = {}): Record<string, string> {
  return {
    DATABASE_URL: setup.databaseUrl,
    AMBIENT_SUBSCRIPTION_ENDPOINTS: `${receiver.base}/hook/`,
    AMBIENT_SUBSCRIPTION_POLL_MS: '50',
    AMBIENT_SUBSCRIPTION_RETRY_BASE_MS: '50',
    AMBIENT_SUBSCRIPTION_MAX_ATTEMPTS: '1000',
    ...extra,
  };
}

interface SubscriptionBody {
  id: string;
  status: string;
  error?: string;
}

async function readSubscription(client: FhirClient, id: string): Promise<SubscriptionBody> {
  const res = await client.get(`/fhir/Subscription/${id}`);
  expect(res.statusCode).toBe(200);
  return res.json<SubscriptionBody>();
}

/** A rest-hook on the final Observations, PUT to `<receiver>/hook/<channel>/Observation/<id>`; waits until it is active. */
async function subscribe(client: FhirClient, receiver: HookReceiver, channel: string): Promise<string> {
  const res = await client.create({
    resourceType: 'Subscription',
    status: 'requested',
    reason: `processes test, channel ${channel}`,
    criteria: 'Observation?status=final',
    channel: { type: 'rest-hook', endpoint: `${receiver.base}/hook/${channel}`, payload: PAYLOAD },
  });
  expect(res.statusCode).toBe(201);
  const { id } = res.json<{ id: string }>();
  await until(
    () => `Subscription/${id} active`,
    async () => {
      const body = await readSubscription(client, id);
      if (body.status === 'error') throw new Error(`Subscription/${id} went to error: ${String(body.error)}`);
      return body.status === 'active' ? true : undefined;
    },
  );
  return id;
}

/** Version `version` of an Observation: its value is its version, so that a payload shows which it is. */
function observation(status: 'final' | 'preliminary', version: number, id?: string) {
  return {
    resourceType: 'Observation',
    ...(id === undefined ? {} : { id }),
    status,
    code: { text: 'processes' },
    valueQuantity: { value: version },
  };
}

/** Writes version `version` (1: a create) and checks the answer; answers the id. */
async function write(
  client: FhirClient,
  status: 'final' | 'preliminary',
  version: number,
  id?: string,
): Promise<string> {
  const res =
    version === 1
      ? await client.create(observation(status, 1))
      : await client.put(`/fhir/Observation/${id}`, observation(status, version, id));
  if (res.statusCode !== (version === 1 ? 201 : 200)) {
    throw new Error(`write of version ${version}: HTTP ${res.statusCode} ${res.body}`);
  }
  const body = res.json<{
    id: string;
    status: string;
    meta: { versionId: string };
    valueQuantity: { value: number };
  }>();
  expect(body.meta.versionId).toBe(String(version));
  expect(body.status).toBe(status);
  expect(body.valueQuantity.value).toBe(version);
  if (id !== undefined) expect(body.id).toBe(id);
  return body.id;
}

/** A hook as a notification: which channel, which resource version; checks that the payload is that version. */
interface Notice {
  readonly channel: string;
  readonly id: string;
  readonly version: number;
}

function notice(hook: ReceivedHook): Notice {
  const match = /^\/hook\/([^/]+)\/Observation\/([^/]+)$/.exec(hook.path);
  if (!match || hook.method !== 'PUT') throw new Error(`unexpected hook ${hook.method} ${hook.path}`);
  expect(hook.headers['content-type']).toMatch(/^application\/fhir\+json/);
  const body = JSON.parse(hook.body) as {
    resourceType: string;
    id: string;
    status: string;
    meta: { versionId: string };
    valueQuantity: { value: number };
  };
  expect(body.resourceType).toBe('Observation');
  expect(body.id).toBe(match[2]);
  expect(body.status).toBe('final');
  const version = Number(body.meta.versionId);
  expect(body.valueQuantity.value).toBe(version);
  return { channel: match[1], id: body.id, version };
}

/** The versions each resource's notifications carried on `channel`, in the order they arrived. */
function versionsById(notices: readonly Notice[], channel: string): Record<string, number[]> {
  const result: Record<string, number[]> = {};
  for (const n of notices) if (n.channel === channel) (result[n.id] ??= []).push(n.version);
  return result;
}

/** Runs `count` tasks, `concurrency` at a time. */
async function inParallel(count: number, concurrency: number, task: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < count) await task(next++);
    }),
  );
}

/** The processes whose access lines show Observation writes (each line carries its process id). */
function writingPids(output: string): Set<number> {
  const pids = output
    .split('\n')
    .filter(
      (line) => line.includes('"event":"access"') && /"method":"(POST|PUT)","path":"\/fhir\/Observation/.test(line),
    )
    .map((line) => (JSON.parse(line) as { pid: number }).pid);
  return new Set(pids);
}

// Each resource: versions 1, 2, 4 and 5 match; version 3 does not, and must not be notified even though
// the resource matches again by the time the dispatcher looks at it.
const PLAN: readonly ('final' | 'preliminary')[] = ['final', 'final', 'preliminary', 'final', 'final'];
const MATCHING = PLAN.flatMap((status, i) => (status === 'final' ? [i + 1] : []));
/** 100 matching writes (200 in `npm run test:full`), each notified on every channel. */
const RESOURCES = FULL ? 50 : 25;
const CHANNELS = ['a', 'b', 'c'];

// Two processes on different ports, as two hosts behind a load balancer, with the writes sent to each in
// turn. (`serve --workers 2` runs the same loop in each worker; it leaves the spread of the writes to the
// cluster module, so it proves less.)
describe('rest-hooks once only, on PostgreSQL with two server processes', () => {
  const made = resources();

  it('delivers every matching version exactly once, in order per resource, whichever process wrote it', async () => {
    const setup = await made.database('postgres');
    const receiver = await made.receiver();
    // One delivery at a time per process: with three subscriptions, the processes have to share them.
    const env = serverEnv(setup, receiver, { AMBIENT_SUBSCRIPTION_WORKERS: '1' });
    const servers = await Promise.all([made.server(env), made.server(env)]);
    const clients = await Promise.all(servers.map((server) => made.client(server, setup)));
    const subscriptions = [];
    for (const channel of CHANNELS) subscriptions.push(await subscribe(clients[0], receiver, channel));

    let turn = 0;
    const ids: string[] = [];
    await inParallel(RESOURCES, 8, async (r) => {
      let id: string | undefined;
      for (const [i, status] of PLAN.entries()) {
        id = await write(clients[turn++ % clients.length], status, i + 1, id);
      }
      ids[r] = id!;
    });
    const expectedTotal = CHANNELS.length * RESOURCES * MATCHING.length;
    await receiver.waitFor(expectedTotal, 60_000);
    // One more write, to each channel after all the others: once it is in, anything sent twice would be too.
    const last = await write(clients[clients.length - 1], 'final', 1);
    await receiver.waitFor(expectedTotal + CHANNELS.length, 20_000);

    const notices = receiver.received.map(notice);
    expect(notices).toHaveLength(expectedTotal + CHANNELS.length);
    const expected = Object.fromEntries([...ids.map((id) => [id, MATCHING]), [last, [1]]]);
    for (const channel of CHANNELS) expect(versionsById(notices, channel)).toEqual(expected);
    // Both processes did write.
    for (const server of servers) expect(writingPids(server.output())).toEqual(new Set([server.child.pid]));
    for (const id of subscriptions) expect((await readSubscription(clients[0], id)).status).toBe('active');
  });
});

// Restarting server processes is long on each database: `npm test` runs the stops and crashes on PostgreSQL
// (the database several processes share) and the silent endpoint on SQLite, `npm run test:full` both on both.
describe.each(backendsQuickOn('postgres'))('rest-hooks through a stop and a crash, on %s', (backend) => {
  const made = resources();

  it('keeps the notifications an endpoint refused through SIGTERM, and sends them all after the restart', async () => {
    const setup = await made.database(backend);
    const receiver = await made.receiver();
    receiver.answer = 503;
    const env = serverEnv(setup, receiver);
    const first = await made.server(env);
    const before = await made.client(first, setup);
    const subscription = await subscribe(before, receiver, 'a');
    const ids: string[] = [];
    for (let r = 0; r < 15; r++) ids.push(await write(before, 'final', 1));
    for (const id of ids) await write(before, 'final', 2, id);
    await receiver.waitFor(3); // a few refusals: the first notification, retried
    first.child.kill('SIGTERM');
    expect(await first.exited).toBe(0);

    const refused = receiver.received.length;
    // Nothing gets past a notification the endpoint refused: every attempt was the first one, again.
    expect(receiver.received.map(notice)).toEqual(Array(refused).fill({ channel: 'a', id: ids[0], version: 1 }));
    receiver.answer = 200;
    const second = await made.server(env);
    const after = await made.client(second, setup);
    await receiver.waitFor(refused + 30);
    const last = await write(after, 'final', 1);
    await receiver.waitFor(refused + 31);

    const delivered = receiver.received.slice(refused).map(notice);
    expect(delivered).toHaveLength(31);
    expect(versionsById(delivered, 'a')).toEqual(Object.fromEntries([...ids.map((id) => [id, [1, 2]]), [last, [1]]]));
    // In queue order: every first version (written first) before every second one.
    expect(delivered.slice(0, 15).map((n) => [n.id, n.version])).toEqual(ids.map((id) => [id, 1]));
    const body = await readSubscription(after, subscription);
    expect(body.status).toBe('active');
    expect(body.error).toBeUndefined();
  });

  it('delivers every committed version at least once after a SIGKILL mid-delivery, again only the one in flight', async () => {
    const setup = await made.database(backend);
    const receiver = await made.receiver();
    // A short time-out keeps the delivery lease the killed process leaves short (twice the time-out and
    // 5 s: 11 s, within the 15 s of the lease on matching it leaves too).
    const env = serverEnv(setup, receiver, { AMBIENT_SUBSCRIPTION_TIMEOUT_MS: '3000' });
    const first = await made.server(env);
    const client = await made.client(first, setup);
    await subscribe(client, receiver, 'a');

    // Writers go on until the process dies under them: resources of three versions each.
    const acknowledged: string[] = [];
    let killed = false;
    const writers = Array.from({ length: 4 }, async () => {
      while (!killed) {
        try {
          let id: string | undefined;
          for (let version = 1; version <= 3; version++) {
            id = await write(client, 'final', version, id);
            acknowledged.push(`${id}/${version}`);
          }
        } catch (error) {
          if (!killed) throw error;
          return; // the process died under this write: it was not acknowledged
        }
      }
    });
    await until(
      () => `60 acknowledged writes (${acknowledged.length})`,
      async () => (acknowledged.length >= 60 ? true : undefined),
    );
    // The next notification the endpoint gets is held unanswered: the process dies with it in flight,
    // with more queued behind it, and writes not matched yet.
    receiver.answer = 'hang';
    const answered = receiver.received.length;
    const hooks = await receiver.waitFor(answered + 1);
    killed = true;
    first.child.kill('SIGKILL');
    expect(await first.exited).toBe('SIGKILL');
    await Promise.all(writers);
    const inFlight = notice(hooks[answered]);
    receiver.answer = 200;

    const second = await made.server(env);
    const after = await made.client(second, setup);
    // What was committed: the history after the restart (a write in flight at the kill may be there).
    const committed = new Set<string>();
    for (const page of await after.pages('/fhir/Observation/_history?_count=500')) {
      for (const entry of page.entry ?? []) {
        const versionId = (entry.resource?.meta as { versionId?: string } | undefined)?.versionId;
        committed.add(`${entry.resource?.id}/${versionId}`);
      }
    }
    expect(acknowledged.filter((key) => !committed.has(key))).toEqual([]);
    const keys = () => receiver.received.map((hook) => notice(hook)).map((n) => `${n.id}/${n.version}`);
    let missing: string[] = [];
    await until(
      () => `every committed version notified; missing ${missing.length}: ${missing.slice(0, 10).join(', ')}`,
      async () => {
        const received = new Set(keys());
        missing = [...committed].filter((key) => !received.has(key));
        return missing.length === 0 ? true : undefined;
      },
      60_000,
    );

    const received = keys();
    expect(received.filter((key) => !committed.has(key))).toEqual([]);
    const duplicates = [...new Set(received.filter((key, i) => received.indexOf(key) !== i))];
    expect(duplicates).toEqual([`${inFlight.id}/${inFlight.version}`]);
    // Per resource, the versions first arrived in order.
    const firsts: Record<string, number[]> = {};
    for (const key of new Set(received)) {
      const [id, version] = key.split('/');
      (firsts[id] ??= []).push(Number(version));
    }
    for (const versions of Object.values(firsts)) expect(versions).toEqual([...versions].sort((x, y) => x - y));
  });
});

describe.each(backendsQuickOn('sqlite'))('an endpoint that never answers, on %s', (backend) => {
  const made = resources();

  it('holds up no write, and its subscriptions stay active until the attempts run out', async () => {
    const setup = await made.database(backend);
    const receiver = await made.receiver();
    receiver.answer = 'hang';
    const server = await made.server(
      serverEnv(setup, receiver, {
        AMBIENT_SUBSCRIPTION_TIMEOUT_MS: '600000',
        AMBIENT_SUBSCRIPTION_MAX_ATTEMPTS: '3',
        AMBIENT_SUBSCRIPTION_WORKERS: '2',
      }),
    );
    const client = await made.client(server, setup);
    const subscriptions = [];
    for (const channel of CHANNELS) subscriptions.push(await subscribe(client, receiver, channel));
    await write(client, 'final', 1);
    await receiver.waitFor(2); // both delivery workers are stuck on it

    const ids: string[] = [];
    await inParallel(100, 4, async (i) => {
      ids[i] = await write(client, 'final', 1);
    });
    expect(new Set(ids).size).toBe(100);
    const count = await client.get('/fhir/Observation?status=final&_summary=count');
    expect(count.json<{ total: number }>().total).toBe(101);
    expect(receiver.received).toHaveLength(2);
    for (const id of subscriptions) {
      const body = await readSubscription(client, id);
      expect(body.status).toBe('active');
      expect(body.error).toBeUndefined();
    }

    // The endpoint goes away: the stuck deliveries fail, then every retry, and after three the subscriptions stop.
    await receiver.close();
    for (const id of subscriptions) {
      const body = await until(
        () => `Subscription/${id} in error`,
        async () => {
          const current = await readSubscription(client, id);
          return current.status === 'error' ? current : undefined;
        },
      );
      expect(body.error).toMatch(/^Delivery failed 3 times in a row; the last time the endpoint could not be reached/);
    }
    expect((await client.create(observation('final', 1))).statusCode).toBe(201);
  });

  it('stops on SIGTERM without waiting for a delivery that hangs, and sends it after the restart', async () => {
    const setup = await made.database(backend);
    const receiver = await made.receiver();
    receiver.answer = 'hang';
    const env = serverEnv(setup, receiver, {
      AMBIENT_SUBSCRIPTION_TIMEOUT_MS: '600000',
      AMBIENT_SHUTDOWN_TIMEOUT_MS: '3000',
    });
    const first = await made.server(env);
    const client = await made.client(first, setup);
    await subscribe(client, receiver, 'a');
    const id = await write(client, 'final', 1);
    await receiver.waitFor(1);
    first.child.kill('SIGTERM');
    const code = await first.exited;
    const errors = first
      .output()
      .split('\n')
      .filter((line) => line.includes('"level":50'))
      .map((line) => (JSON.parse(line) as { msg: string }).msg);
    expect(errors).toEqual([]);
    expect(code).toBe(0);

    receiver.answer = 200;
    await made.server(env);
    const hooks = await receiver.waitFor(2, 20_000);
    expect(hooks.map(notice)).toEqual([
      { channel: 'a', id, version: 1 },
      { channel: 'a', id, version: 1 },
    ]);
  });
});
