// What R4 Subscriptions cost and deliver (docs/benchmarks.md, "Subscriptions"), on SQLite and on PostgreSQL:
// the built server (`npm start`'s command line) on a fresh database, one account, and an HTTP receiver in
// this process that answers every hook 200 at once.
//   1. Write path: Observation creates one at a time and with 8 clients, with no subscription and then with
//      SUBS active rest-hook subscriptions `Observation?subject=Patient/<id>&code=<code>` (one per Patient,
//      so each write matches one): ops/s, p50/p99, the server's CPU per create (/proc/<pid>/stat) and, on
//      PostgreSQL, the database's; then how long the notifications took to arrive after the last write.
//   2. Notifications sustained: N matching creates from 8 clients as fast as they go; the time from the
//      first write until the receiver has all N, the backlog when the writes finished (notifications not
//      yet received, and of those the writes not yet matched and the notifications queued), without a
//      payload and then with `application/fhir+json` (each subscription rewritten, re-activated).
//   3. Latency under light load: one create at a time, each waited for at the receiver, then a pause of
//      50 ms plus a random part of the poll interval: the time from the create's response to the hook.
// The account's subscription limit is raised for the run (AMBIENT_SUBSCRIPTION_MAX_PER_ACCOUNT = 2 x SUBS);
// every other setting is the default (AMBIENT_SUBSCRIPTION_POLL_MS 250, AMBIENT_SUBSCRIPTION_WORKERS 8).
// The calibration line (bench/calibrate.mjs) is taken before and after, and the commit is printed.
//
// Usage: node bench/subscriptions.mjs [--backends sqlite,postgres] [--quick] [--subscriptions 1000]
//          [--writes 2000] [--notifications 2000] [--light 200]
//   --quick: 50 subscriptions, 200 writes per phase, 400 notifications, 20 light-load writes (a smoke run).
// Env: AMBIENT_BENCH_POSTGRES_URL (default postgres://postgres@127.0.0.1:5432/test; the schema
// "bench_subscriptions" is recreated in it).
import { createServer } from 'node:http';
import { cpus, totalmem } from 'node:os';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import Database from 'better-sqlite3';
import pg from 'pg';
import { concurrently, cpuMs, markdown, percentiles, postgresCpuMs, round } from './measure.mjs';
import {
  commitOf,
  connect,
  createAccount,
  freePort,
  freshDatabase,
  postgresPid,
  printUsage,
  reachableBackends,
  requireBuild,
  startServer,
} from './processes.mjs';
import { calibrate } from './targets.mjs';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const SCHEMA = 'bench_subscriptions';

const { values } = parseArgs({
  options: {
    backends: { type: 'string', default: 'sqlite,postgres' },
    quick: { type: 'boolean', default: false },
    subscriptions: { type: 'string' },
    writes: { type: 'string' },
    notifications: { type: 'string' },
    light: { type: 'string' },
    help: { type: 'boolean', short: 'h', default: false },
  },
});
if (values.help) printUsage(import.meta.url);
const quick = values.quick;
const size = (name, full, small) => {
  const n = Number(values[name] ?? (quick ? small : full));
  if (!Number.isInteger(n) || n <= 0) {
    console.error(`--${name} takes a positive whole number.`);
    process.exit(2);
  }
  return n;
};
const SUBS = size('subscriptions', 1000, 50);
const WRITES = size('writes', 2000, 200);
const NOTIFICATIONS = size('notifications', 2000, 400);
const LIGHT = size('light', 200, 20);
const CLIENTS = 8;
/** The server's AMBIENT_SUBSCRIPTION_POLL_MS (its default unless this process's environment sets it). */
const POLL_MS = Number(process.env.AMBIENT_SUBSCRIPTION_POLL_MS ?? 250);
/** No progress at the receiver for this long: the run stops and says where the notifications were. */
const STALL_MS = 120_000;
const CODE = { system: 'http://loinc.org', code: '8867-4' };
let backends = values.backends.split(',');

const log = (message) => console.error(message);

// ---- the receiver ----------------------------------------------------------------------------------------

/** Answers every request 200 at once and remembers when each arrived, by path. */
async function startReceiver() {
  const port = await freePort();
  const byPath = new Map();
  const waiters = new Set();
  const receiver = {
    base: `http://127.0.0.1:${port}`,
    total: 0,
    bytes: 0,
    lastAt: performance.now(),
    /** The times hooks arrived at `path` (`/hook/<i>`, or below it with a payload). */
    arrivals: (path) => byPath.get(path) ?? [],
    /** Resolves when `ready()` holds (checked after each hook); rejects after `timeoutMs` without a hook. */
    until(ready, stallMs) {
      if (ready()) return Promise.resolve();
      return new Promise((resolve, reject) => {
        const waiter = { ready, resolve };
        const check = setInterval(() => {
          if (performance.now() - receiver.lastAt > stallMs) {
            clearInterval(check);
            waiters.delete(waiter);
            reject(new Error(`no hook for ${stallMs} ms (${receiver.total} received)`));
          }
        }, 500);
        waiter.resolve = () => {
          clearInterval(check);
          resolve();
        };
        waiters.add(waiter);
      });
    },
    close: () => new Promise((resolve) => (server.closeAllConnections(), server.close(resolve))),
  };
  const server = createServer((request, response) => {
    let bytes = 0;
    request.on('data', (chunk) => (bytes += chunk.length));
    request.on('end', () => {
      const at = performance.now();
      // `/hook/<i>` without a payload, `/hook/<i>/Observation/<id>` with one: both are subscription i's.
      const path = (request.url ?? '').split('/').slice(0, 3).join('/');
      if (!byPath.has(path)) byPath.set(path, []);
      byPath.get(path).push(at);
      receiver.total += 1;
      receiver.bytes += bytes;
      receiver.lastAt = at;
      response.statusCode = 200;
      response.end();
      for (const waiter of waiters) {
        if (waiter.ready()) {
          waiters.delete(waiter);
          waiter.resolve();
        }
      }
    });
  });
  server.keepAliveTimeout = 60_000;
  await new Promise((resolve) => server.listen(port, '127.0.0.1', resolve));
  return receiver;
}

// ---- the server ------------------------------------------------------------------------------------------

/** Where the notifications are, read from the database itself: writes not yet matched, notifications queued. */
async function openBacklog(backend, database) {
  if (backend === 'sqlite') {
    const db = new Database(database.path, { readonly: true, fileMustExist: true });
    const count = (table) => db.prepare(`SELECT COUNT(*) AS n FROM ${table}`).get().n;
    return {
      read: async () => ({ unmatched: count('subscription_event'), queued: count('subscription_notification') }),
      close: async () => db.close(),
    };
  }
  const client = new pg.Client({ connectionString: database.url });
  await client.connect();
  const count = async (table) => Number((await client.query(`SELECT COUNT(*) AS n FROM ${table}`)).rows[0].n);
  return {
    read: async () => ({
      unmatched: await count('subscription_event'),
      queued: await count('subscription_notification'),
    }),
    close: () => client.end(),
  };
}

// ---- the workload ----------------------------------------------------------------------------------------

let written = 0;
/** Creates answered so far (the sampler's count of writes done). */
let acked = 0;
const observation = (patient) => ({
  resourceType: 'Observation',
  status: 'final',
  code: { coding: [CODE], text: 'Heart rate' },
  subject: { reference: `Patient/${patient}` },
  effectiveDateTime: new Date(Date.UTC(2026, 0, 1) + written * 1000).toISOString(),
  valueQuantity: { value: 60 + (written++ % 40), unit: '/min', system: 'http://unitsofmeasure.org', code: '/min' },
});

const subscription = (receiver, patient, i, payload) => ({
  resourceType: 'Subscription',
  status: 'requested',
  reason: 'bench/subscriptions.mjs',
  criteria: `Observation?subject=Patient/${patient}&code=${CODE.system}|${CODE.code}`,
  channel: {
    type: 'rest-hook',
    endpoint: `${receiver.base}/hook/${i}`,
    ...(payload ? { payload: 'application/fhir+json' } : {}),
  },
});

/** `n` Observation creates, each for the Patient `patients[i % SUBS]`, with their timing and CPU. */
async function writePhase(ctx, n, clients) {
  const { api, server, pgPid, patients } = ctx;
  const cpu0 = cpuMs(server.pid);
  const pg0 = postgresCpuMs(pgPid);
  const started = performance.now();
  const durations = await concurrently(n, clients, async (i) => {
    await api.request('POST', '/Observation', observation(patients[i % patients.length]));
    acked += 1;
  });
  const seconds = (performance.now() - started) / 1000;
  return {
    n,
    clients,
    perSec: round(n / seconds, 1),
    ...percentiles(durations),
    serverCpuMsPerOp: round((cpuMs(server.pid) - cpu0) / n),
    pgCpuMsPerOp: pgPid ? round((postgresCpuMs(pgPid) - pg0) / n) : undefined,
    endedAt: performance.now(),
    /** The server's CPU per create from the phase's start until now (call once its hooks are in). */
    totalCpuMsPerOp: () => round((cpuMs(server.pid) - cpu0) / n),
  };
}

/** Waits until the receiver has `total` hooks; answers the seconds from `since` (a performance.now()). */
async function drained(ctx, total, since) {
  await ctx.receiver
    .until(() => ctx.receiver.total >= total, STALL_MS)
    .catch(async (error) => {
      const backlog = await ctx.backlog.read();
      throw new Error(
        `${error.message}; expected ${total}; ${backlog.unmatched} writes unmatched, ${backlog.queued} queued`,
      );
    });
  if (ctx.receiver.total > total) throw new Error(`${ctx.receiver.total} hooks arrived, ${total} expected`);
  return round((ctx.receiver.lastAt - since) / 1000);
}

/** What the dispatcher says of a Subscription whose row has no owner (written outside the API). */
const NO_OWNER = 'This Subscription was written without an account';

/**
 * Waits until every subscription is active; answers the seconds it took and how many had to be written
 * again because they were stored without their owner (on SQLite, at 09f70af, a Subscription created in
 * a group commit that another write started is recorded with that write's account, or with none when the
 * server's own status write started it). Any other error stops the run.
 */
async function allActive(api, rewrite) {
  const started = performance.now();
  let rewritten = 0;
  for (;;) {
    const errors = await api.request('GET', '/Subscription?status=error&_count=1000');
    for (const { resource } of errors.entry ?? []) {
      if (!String(resource.error).startsWith(NO_OWNER)) {
        throw new Error(`Subscription/${resource.id} went to error: ${resource.error ?? '(no text)'}`);
      }
      await rewrite(resource.id);
      rewritten += 1;
    }
    const [{ total: active }, { total: all }] = await Promise.all([
      api.request('GET', '/Subscription?status=active&_summary=count'),
      api.request('GET', '/Subscription?_summary=count'),
    ]);
    if (active === all) return { active: round((performance.now() - started) / 1000), rewritten };
    if (performance.now() - started > 10 * 60_000) throw new Error(`only ${active} of ${all} active after 10 minutes`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

/**
 * N matching creates from 8 clients; the time until every notification arrived, the backlog when the
 * writes ended, and (sampled every 250 ms from the database) when the last write was matched.
 */
async function sustained(ctx, n) {
  const { receiver, server, pgPid } = ctx;
  const base = receiver.total;
  const cpu0 = cpuMs(server.pid);
  const pg0 = postgresCpuMs(pgPid);
  const bytes0 = receiver.bytes;
  const acked0 = acked;
  const started = performance.now();
  let matchedAt;
  let sampling = Promise.resolve();
  const sampler = setInterval(() => {
    sampling = sampling.then(async () => {
      if (matchedAt !== undefined) return;
      const writes = acked - acked0;
      const { unmatched } = await ctx.backlog.read();
      if (writes === n && unmatched === 0) matchedAt = performance.now();
    });
  }, 250);
  const writes = await writePhase(ctx, n, CLIENTS);
  const atEnd = { received: receiver.total - base, ...(await ctx.backlog.read()) };
  let seconds;
  try {
    seconds = await drained(ctx, base + n, started);
  } finally {
    clearInterval(sampler);
    await sampling;
  }
  matchedAt ??= receiver.lastAt;
  return {
    n,
    writeSeconds: round((writes.endedAt - started) / 1000),
    writesPerSec: writes.perSec,
    writeP99: writes.p99,
    matchedSeconds: round((matchedAt - started) / 1000),
    seconds,
    perSec: round(n / seconds, 1),
    backlog: { undelivered: n - atEnd.received, unmatched: atEnd.unmatched, queued: atEnd.queued },
    serverCpuMsPerNotification: round((cpuMs(server.pid) - cpu0) / n),
    pgCpuMsPerNotification: pgPid ? round((postgresCpuMs(pgPid) - pg0) / n) : undefined,
    bytesPerHook: Math.round((receiver.bytes - bytes0) / n),
  };
}

/** One create at a time, each waited for at the receiver, then a pause: ack-to-hook delay. */
async function lightLoad(ctx, n) {
  const { api, receiver, patients } = ctx;
  const delays = [];
  for (let i = 0; i < n; i++) {
    const sub = i % patients.length;
    const path = `/hook/${sub}`;
    const before = receiver.arrivals(path).length;
    await api.request('POST', '/Observation', observation(patients[sub]));
    const acked = performance.now();
    await receiver.until(() => receiver.arrivals(path).length > before, STALL_MS);
    delays.push(receiver.arrivals(path)[before] - acked);
    // A pause of 50 ms and a random part of one poll interval: the writes fall anywhere in the
    // dispatcher's cycle, not always at the same distance from its next pass.
    await new Promise((resolve) => setTimeout(resolve, 50 + Math.random() * POLL_MS));
  }
  return percentiles(delays);
}

async function benchBackend(backend) {
  const database = await freshDatabase(backend, SCHEMA);
  const receiver = await startReceiver();
  const env = {
    DATABASE_URL: database.url,
    LOG_LEVEL: 'warn',
    AMBIENT_SUBSCRIPTION_ENDPOINTS: `${receiver.base}/hook/`,
    AMBIENT_SUBSCRIPTION_MAX_PER_ACCOUNT: String(2 * SUBS),
  };
  const password = await createAccount(ROOT, env);
  const server = await startServer(ROOT, env);
  const pgPid = backend === 'postgres' ? postgresPid() : undefined;
  const backlog = await openBacklog(backend, database);
  const result = { backend };
  try {
    const { request } = await connect(server.url, password);
    const api = { request };
    // One Patient per subscription, in transactions of 100.
    const patients = [];
    for (let i = 0; i < SUBS; i += 100) {
      const bundle = await request('POST', '', {
        resourceType: 'Bundle',
        type: 'transaction',
        entry: Array.from({ length: Math.min(100, SUBS - i) }, (_, j) => ({
          resource: { resourceType: 'Patient', name: [{ family: 'Subscriber', given: [`P${i + j}`] }] },
          request: { method: 'POST', url: 'Patient' },
        })),
      });
      for (const entry of bundle.entry) patients.push(entry.response.location.split('/')[1]);
    }
    const ctx = { api, server, pgPid, patients, receiver, backlog };

    log(`${backend}: warm-up, then ${WRITES} creates x 2 without subscriptions...`);
    await writePhase(ctx, Math.min(200, WRITES), CLIENTS);
    result.without = [await writePhase(ctx, WRITES, 1), await writePhase(ctx, WRITES, CLIENTS)];

    log(`${backend}: creating ${SUBS} subscriptions...`);
    let started = performance.now();
    const ids = [];
    await concurrently(SUBS, CLIENTS, async (i) => {
      ids[i] = (await request('POST', '/Subscription', subscription(receiver, patients[i], i, false))).id;
    });
    const created = round((performance.now() - started) / 1000);
    const index = (id) => ids.indexOf(id);
    result.setup = {
      created,
      ...(await allActive(api, (id) =>
        request('PUT', `/Subscription/${id}`, { ...subscription(receiver, patients[index(id)], index(id), false), id }),
      )),
    };
    if (receiver.total !== 0) throw new Error(`${receiver.total} hooks before any matching write`);

    log(`${backend}: ${WRITES} creates x 2 with ${SUBS} subscriptions...`);
    result.with = [];
    for (const clients of [1, CLIENTS]) {
      const base = receiver.total;
      const phase = await writePhase(ctx, WRITES, clients);
      phase.drainSeconds = await drained(ctx, base + WRITES, phase.endedAt);
      phase.withNotifyingCpuMsPerOp = phase.totalCpuMsPerOp();
      result.with.push(phase);
    }

    log(`${backend}: ${NOTIFICATIONS} notifications sustained, no payload...`);
    result.sustained = [{ payload: 'none', ...(await sustained(ctx, NOTIFICATIONS)) }];

    log(`${backend}: ${LIGHT} writes one at a time (latency)...`);
    result.light = await lightLoad(ctx, LIGHT);

    log(`${backend}: rewriting the ${SUBS} subscriptions with a payload...`);
    started = performance.now();
    const withPayload = (i) =>
      request('PUT', `/Subscription/${ids[i]}`, { ...subscription(receiver, patients[i], i, true), id: ids[i] });
    await concurrently(SUBS, CLIENTS, withPayload);
    result.payloadSetup = {
      created: round((performance.now() - started) / 1000),
      ...(await allActive(api, (id) => withPayload(index(id)))),
    };
    log(`${backend}: ${NOTIFICATIONS} notifications sustained, application/fhir+json...`);
    result.sustained.push({ payload: 'application/fhir+json', ...(await sustained(ctx, NOTIFICATIONS)) });
    return result;
  } finally {
    await backlog.close().catch(() => undefined);
    await server.stop();
    await receiver.close();
    database.dispose();
  }
}

// ---- the report ------------------------------------------------------------------------------------------

function report(result) {
  const pgCols = result.backend === 'postgres';
  const writeRows = [...result.without.map((p) => ['none', p]), ...result.with.map((p) => [String(SUBS), p])].map(
    ([subs, p]) => [
      p.clients === 1 ? `${p.n} creates, 1 client` : `${p.n} creates, ${p.clients} clients`,
      subs,
      p.perSec,
      p.p50,
      p.p99,
      p.serverCpuMsPerOp,
      ...(pgCols ? [p.pgCpuMsPerOp] : []),
      p.drainSeconds ?? '',
      p.withNotifyingCpuMsPerOp ?? '',
    ],
  );
  const sustainedRows = result.sustained.map((s) => [
    s.payload,
    s.n,
    `${s.writeSeconds} s (${s.writesPerSec}/s)`,
    `${s.matchedSeconds} s`,
    `${s.seconds} s`,
    s.perSec,
    `${s.backlog.undelivered} (${s.backlog.unmatched} unmatched, ${s.backlog.queued} queued)`,
    s.serverCpuMsPerNotification,
    ...(pgCols ? [s.pgCpuMsPerNotification] : []),
    s.bytesPerHook,
  ]);
  return [
    `\n### ${result.backend}\n`,
    `${SUBS} subscriptions created in ${result.setup.created} s (8 clients), all active ${result.setup.active} s later` +
      ` (${result.setup.rewritten} stored without their owner and written again); rewritten with a payload in` +
      ` ${result.payloadSetup.created} s, all active again ${result.payloadSetup.active} s later` +
      ` (${result.payloadSetup.rewritten} written again).\n`,
    markdown(
      [
        'Observation creates',
        'subscriptions',
        'ops/s',
        'p50 ms',
        'p99 ms',
        'server CPU ms/op',
        ...(pgCols ? ['PostgreSQL CPU ms/op'] : []),
        'last hook after last write, s',
        'server CPU ms/op until last hook',
      ],
      writeRows,
    ),
    '',
    markdown(
      [
        'payload',
        'notifications',
        'writes took (8 clients)',
        'first write to last matched',
        'first write to last hook',
        'notifications/s',
        'not yet received when the writes ended',
        'server CPU ms/notification',
        ...(pgCols ? ['PostgreSQL CPU ms/notification'] : []),
        'bytes/hook',
      ],
      sustainedRows,
    ),
    '',
    `Write acknowledged to hook received, one write at a time (${LIGHT} writes): p50 ${result.light.p50} ms, p99 ${result.light.p99} ms, max ${result.light.max} ms.`,
  ].join('\n');
}

// ---- main ------------------------------------------------------------------------------------------------

requireBuild(ROOT);
backends = await reachableBackends(backends);
const commit = commitOf(ROOT);
log('calibrating (bench/calibrate.mjs)...');
const calibrations = [await calibrate(ROOT)];
const began = performance.now();
const results = [];
for (const backend of backends) results.push(await benchBackend(backend));
const minutes = round((performance.now() - began) / 60_000, 1);
calibrations.push(await calibrate(ROOT));
console.log(
  `\nambient-fhir ${commit}, ${cpus().length} cores (${cpus()[0].model}), ${Math.round(totalmem() / 2 ** 30)} GiB, Node ${process.version}${quick ? ', QUICK run' : ''}`,
);
console.log(
  `calibration (bench/calibrate.mjs): ${calibrations.map((c) => `http_rps ${c.http_rps}, fsync_per_s ${c.fsync_per_s}`).join(' before; ')} after`,
);
const settings = Object.entries(process.env).filter(
  ([name]) => name.startsWith('AMBIENT_SUBSCRIPTION_') && !/_(ENDPOINTS|MAX_PER_ACCOUNT)$/.test(name),
);
console.log(
  `AMBIENT_SUBSCRIPTION_MAX_PER_ACCOUNT=${2 * SUBS}, endpoints under the receiver; ${
    settings.length === 0
      ? 'other settings default'
      : `from the environment: ${settings.map(([k, v]) => `${k}=${v}`).join(' ')}`
  }`,
);
console.log(
  `${SUBS} subscriptions, ${WRITES} creates per write phase, ${NOTIFICATIONS} notifications per sustained run, ${LIGHT} light-load writes; ${minutes} min`,
);
for (const result of results) console.log(report(result));
