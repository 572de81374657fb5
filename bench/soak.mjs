// npm run soak: sustained mixed load against real `serve` processes, on SQLite and on PostgreSQL, then a
// SIGKILL in the middle of a write storm and a restart. Method and results: docs/reliability.md.
//
//   1. load:  32 concurrent clients (fetch, one connection each) for --seconds per database, a mix of
//             creates, updates, transaction Bundles, searches and reads; every answer other than the
//             expected status is an error, counted by operation and status. The server's RSS is sampled
//             every second from /proc/<pid>/status.
//   2. verify: every acknowledged write reads back exactly as it was answered (its last acknowledged
//             version), and a search for the run's identifiers counts exactly the acknowledged Patients.
//   3. crash: the same clients write (creates, updates, transactions) for --crash-after seconds, the
//             server is killed with SIGKILL, restarted on the same database, and every acknowledged write
//             must read back; every write in flight at the kill must be absent or whole (a transaction:
//             all of its entries or none; an update: the old version or the new one, complete).
//
// Usage: node bench/soak.mjs [--seconds 60] [--clients 32] [--backends sqlite,postgres]
//                            [--crash-after 5] [--json results.json]
// Needs `npm run build` first (npm install does it). Env: AMBIENT_SOAK_POSTGRES_URL (default
// postgres://postgres@127.0.0.1:5432/test; a fresh schema is created in it and dropped afterwards).
// Exit status 0 only when every check passed on every database.
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { freePort, requireBuild, run, serveArgs } from './processes.mjs';
import {
  countByIdentifierSystem,
  Ledger,
  verifyAcked,
  verifyHistory,
  verifyInFlight,
  writeClient,
} from './write-ledger.mjs';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const BIN = join(ROOT, 'bin', 'ambient-fhir.js');
const POSTGRES_URL = process.env.AMBIENT_SOAK_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

function option(name, fallback) {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && process.argv[i + 1] !== undefined ? process.argv[i + 1] : fallback;
}
const SECONDS = Number(option('seconds', '60'));
const CLIENTS = Number(option('clients', '32'));
const BACKENDS = option('backends', 'sqlite,postgres').split(',');
const CRASH_AFTER = Number(option('crash-after', '5'));
const JSON_OUT = option('json', undefined);

// ---------------------------------------------------------------------------------------------------
// Processes

async function startServer(env) {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const child = spawn(process.execPath, serveArgs(ROOT), {
    env: { ...process.env, ...env, PORT: String(port), HOST: '127.0.0.1', AMBIENT_PUBLIC_URL: url, LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let log = '';
  child.stdout.on('data', (d) => (log = (log + d).slice(-20_000)));
  child.stderr.on('data', (d) => (log = (log + d).slice(-20_000)));
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve(signal ?? code)));
  for (let i = 0; i < 300; i++) {
    try {
      if ((await fetch(`${url}/readyz`)).ok) return { url, child, exited, log: () => log };
    } catch {
      // not listening yet
    }
    if (child.exitCode !== null) break;
    await sleep(100);
  }
  throw new Error(`server did not become ready:\n${log}`);
}

async function stopServer(server) {
  server.child.kill('SIGTERM');
  const code = await server.exited;
  if (code !== 0) throw new Error(`server exited with ${code} on SIGTERM:\n${server.log()}`);
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function rssMb(pid) {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    return Number(/VmRSS:\s+(\d+)/.exec(status)[1]) / 1024;
  } catch {
    return undefined;
  }
}

async function databaseUrl(backend) {
  if (backend === 'sqlite') {
    const dir = mkdtempSync(join(tmpdir(), 'ambient-soak-'));
    return {
      url: `sqlite:${join(dir, 'soak.db')}`,
      dispose: async () => rmSync(dir, { recursive: true, force: true }),
    };
  }
  const schema = `soak_${process.pid}_${Math.random().toString(36).slice(2, 8)}`;
  const client = new pg.Client({ connectionString: POSTGRES_URL });
  await client.connect();
  await client.query(`CREATE SCHEMA ${schema}`);
  await client.end();
  const url = new URL(POSTGRES_URL);
  url.searchParams.set('options', `-c search_path=${schema}`);
  return {
    url: url.toString(),
    dispose: async () => {
      const admin = new pg.Client({ connectionString: POSTGRES_URL });
      await admin.connect();
      await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      await admin.end();
    },
  };
}

async function token(url, username, password) {
  const res = await fetch(`${url}/v1/ambient/api/auth/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ username, password }),
  });
  if (res.status !== 200) throw new Error(`token: ${res.status} ${await res.text()}`);
  return (await res.json()).access_token;
}

// ---------------------------------------------------------------------------------------------------
// The workload

class Stats {
  constructor() {
    this.ops = new Map();
    this.errors = new Map();
    this.samples = [];
  }
  record(op, ms) {
    let s = this.ops.get(op);
    if (!s) this.ops.set(op, (s = []));
    s.push(ms);
  }
  error(op, status, detail) {
    const key = `${op} ${status}`;
    const e = this.errors.get(key) ?? { count: 0, example: detail };
    e.count++;
    this.errors.set(key, e);
  }
  get errorCount() {
    let n = 0;
    for (const e of this.errors.values()) n += e.count;
    return n;
  }
}

const percentile = (sorted, p) =>
  sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] : 0;

// ---------------------------------------------------------------------------------------------------
// Phases

/** Runs the clients until `seconds` have passed or stop() is called; samples the server's RSS every second. */
function drive(url, headers, ledger, stats, { seconds, mix, server }) {
  const started = performance.now();
  const deadline = Date.now() + seconds * 1000;
  let stopped = false;
  const sampler = setInterval(() => {
    const rss = rssMb(server.child.pid);
    if (rss !== undefined) stats.samples.push({ t: (performance.now() - started) / 1000, rss });
  }, 1000);
  const until = () => stopped || Date.now() >= deadline;
  const done = Promise.all(
    Array.from({ length: CLIENTS }, (_, n) => writeClient(n, { url, headers, ledger, stats, until, mix })),
  ).then(() => {
    clearInterval(sampler);
    return (performance.now() - started) / 1000;
  });
  return {
    done,
    stop: () => {
      stopped = true;
    },
  };
}

function memoryVerdict(samples) {
  // Flat memory: after the first quarter (warm-up: JIT, caches, connection pools, SQLite page cache), the
  // median RSS of the last quarter is within 10% (at least 30 MB) of the second quarter's. The least-squares
  // slope over the last three quarters is reported beside it.
  if (samples.length < 8) return { flat: undefined, note: 'too few samples' };
  const quarter = Math.floor(samples.length / 4);
  const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  const second = median(samples.slice(quarter, 2 * quarter).map((s) => s.rss));
  const last = median(samples.slice(3 * quarter).map((s) => s.rss));
  const tail = samples.slice(quarter);
  const mt = tail.reduce((a, s) => a + s.t, 0) / tail.length;
  const mr = tail.reduce((a, s) => a + s.rss, 0) / tail.length;
  const slope = tail.reduce((a, s) => a + (s.t - mt) * (s.rss - mr), 0) / tail.reduce((a, s) => a + (s.t - mt) ** 2, 0);
  const growth = last - second;
  return {
    startMb: Math.round(samples[0].rss),
    secondQuarterMb: Math.round(second),
    lastQuarterMb: Math.round(last),
    peakMb: Math.round(Math.max(...samples.map((s) => s.rss))),
    slopeMbPerMin: Math.round(slope * 60 * 10) / 10,
    flat: growth <= Math.max(30, second * 0.1),
  };
}

async function soakBackend(backend) {
  const database = await databaseUrl(backend);
  const env = { DATABASE_URL: database.url };
  const username = `soak-${Math.random().toString(36).slice(2, 8)}`;
  const password = `soak-${randomUUID()}`;
  await run(process.execPath, [BIN, 'account', 'create', username, '--password-stdin', '--scopes', 'system/*.cruds'], {
    env,
    input: `${password}\n`,
  });
  const result = { backend, checks: [] };
  const check = (name, problems, detail = '') => {
    result.checks.push({
      name,
      ok: problems.length === 0,
      problems: problems.slice(0, 20),
      count: problems.length,
      detail,
    });
    console.log(
      `  ${problems.length === 0 ? 'ok  ' : 'FAIL'} ${name}${detail ? ` (${detail})` : ''}${problems.length ? `: ${problems.length} problems, e.g.\n       ${problems.slice(0, 5).join('\n       ')}` : ''}`,
    );
  };
  try {
    // 1. Sustained mixed load.
    console.log(`\n${backend}: ${CLIENTS} clients for ${SECONDS} s`);
    let server = await startServer(env);
    let headers = { authorization: `Bearer ${await token(server.url, username, password)}` };
    const ledger = new Ledger(`urn:ambient-soak:${randomUUID()}`);
    const stats = new Stats();
    const mix = { create: 30, update: 20, transaction: 10, search: 30 }; // the rest (10) are reads
    const elapsed = await drive(server.url, headers, ledger, stats, { seconds: SECONDS, mix, server }).done;
    result.load = {
      seconds: Math.round(elapsed),
      operations: Object.fromEntries(
        [...stats.ops].map(([op, times]) => {
          const sorted = [...times].sort((a, b) => a - b);
          return [
            op,
            {
              count: times.length,
              perSec: Math.round(times.length / elapsed),
              p50: Math.round(percentile(sorted, 50)),
              p99: Math.round(percentile(sorted, 99)),
              max: Math.round(sorted[sorted.length - 1] ?? 0),
            },
          ];
        }),
      ),
      errors: Object.fromEntries([...stats.errors].map(([k, v]) => [k, v])),
      memory: memoryVerdict(stats.samples),
      rss: stats.samples.map((s) => [Math.round(s.t), Math.round(s.rss)]),
      acknowledged: ledger.acked.size,
    };
    const total = [...stats.ops.values()].reduce((a, t) => a + t.length, 0);
    check(
      'zero errors under load',
      [...stats.errors].map(([k, v]) => `${k} ×${v.count}: ${v.example}`),
      `${total} requests, ${Math.round(total / elapsed)}/s`,
    );
    const m = result.load.memory;
    check(
      'flat memory',
      m.flat === false ? [`RSS ${m.secondQuarterMb} MB → ${m.lastQuarterMb} MB (slope ${m.slopeMbPerMin} MB/min)`] : [],
      `RSS start ${m.startMb} MB, 2nd quarter ${m.secondQuarterMb} MB, last quarter ${m.lastQuarterMb} MB, peak ${m.peakMb} MB, slope ${m.slopeMbPerMin} MB/min`,
    );

    // 2. Every acknowledged write reads back; the index agrees.
    check(
      'every acknowledged write reads back',
      await verifyAcked(server.url, headers, ledger),
      `${ledger.acked.size} resources`,
    );
    const counted = await countByIdentifierSystem(server.url, headers, ledger.system, 'Patient');
    check(
      'search counts every acknowledged Patient',
      counted === ledger.patients ? [] : [`search total ${counted}, acknowledged ${ledger.patients}`],
      `${ledger.patients} Patients`,
    );
    await stopServer(server);

    // 3. SIGKILL in the middle of a write storm, restart, check.
    console.log(`${backend}: SIGKILL after ${CRASH_AFTER} s of writes, restart`);
    server = await startServer(env);
    headers = { authorization: `Bearer ${await token(server.url, username, password)}` };
    const crashLedger = new Ledger(`urn:ambient-soak-crash:${randomUUID()}`);
    const crashStats = new Stats();
    const writeMix = { create: 45, update: 35, transaction: 20, search: 0 };
    const storm = drive(server.url, headers, crashLedger, crashStats, { seconds: 3600, mix: writeMix, server });
    await sleep(CRASH_AFTER * 1000);
    storm.stop(); // no new requests: the ones in flight now are the ones the kill interrupts
    server.child.kill('SIGKILL');
    const signal = await server.exited;
    await storm.done;
    const writesBeforeKill = [...crashStats.ops.values()].reduce((a, t) => a + t.length, 0);
    const inFlight = crashLedger.inFlight.length;
    const restartStarted = Date.now();
    server = await startServer(env);
    const restartMs = Date.now() - restartStarted;
    headers = { authorization: `Bearer ${await token(server.url, username, password)}` };
    result.crash = {
      signal,
      crashAfterSeconds: CRASH_AFTER,
      writesBeforeKill,
      acknowledged: crashLedger.acked.size,
      inFlight,
      restartMs,
    };
    check('killed with SIGKILL', signal === 'SIGKILL' ? [] : [`exit ${signal}`]);
    check(
      'nothing acknowledged lost after SIGKILL',
      await verifyAcked(server.url, headers, crashLedger),
      `${crashLedger.acked.size} acknowledged writes, restart ${restartMs} ms`,
    );
    const { problems, outcome } = await verifyInFlight(server.url, headers, crashLedger);
    result.crash.inFlightOutcome = outcome;
    check(
      'nothing unacknowledged half-written',
      problems,
      `${inFlight} in flight: creates ${outcome.creates.committed} committed/${outcome.creates.absent} absent, updates ${outcome.updates.new} new/${outcome.updates.old} old, transactions ${outcome.transactions.committed} whole/${outcome.transactions.absent} absent`,
    );
    check('history whole after SIGKILL', await verifyHistory(server.url, headers, crashLedger));
    const crashCount = await countByIdentifierSystem(server.url, headers, crashLedger.system, 'Patient');
    check(
      'index agrees after SIGKILL',
      crashCount === crashLedger.patients ? [] : [`search total ${crashCount}, stored ${crashLedger.patients}`],
      `${crashLedger.patients} Patients`,
    );
    // The load phase's writes survived the kill too.
    check(
      'load-phase writes intact after SIGKILL',
      await verifyAcked(server.url, headers, ledger),
      `${ledger.acked.size} resources`,
    );
    await stopServer(server);
  } catch (error) {
    check('run completed', [String(error.stack ?? error)]);
  } finally {
    await database.dispose();
  }
  return result;
}

function printTable(results) {
  const ops = ['create', 'update', 'transaction', 'search', 'read'];
  console.log(
    `\nambient-fhir soak: ${CLIENTS} clients, ${SECONDS} s per database, ${cpus().length} cores (${cpus()[0].model}), ${Math.round(totalmem() / 2 ** 30)} GiB, Node ${process.version}\n`,
  );
  console.log(
    `| database | ${ops.map((o) => `${o} /s (p50/p99 ms)`).join(' | ')} | errors | RSS start → last quarter (peak) | acknowledged | crash: acked / in flight / lost / half-written |`,
  );
  console.log(`|---|${ops.map(() => '---').join('|')}|---|---|---|---|`);
  for (const r of results) {
    if (!r.load) {
      console.log(`| ${r.backend} | did not complete |`);
      continue;
    }
    const cells = ops.map((o) => {
      const s = r.load.operations[o];
      return s ? `${s.perSec} (${s.p50}/${s.p99})` : '–';
    });
    const errors = Object.values(r.load.errors).reduce((a, e) => a + e.count, 0);
    const m = r.load.memory;
    const lost = r.checks.find((c) => c.name === 'nothing acknowledged lost after SIGKILL');
    const half = r.checks.find((c) => c.name === 'nothing unacknowledged half-written');
    const crash = r.crash
      ? `${r.crash.acknowledged} / ${r.crash.inFlight} / ${lost?.count ?? '?'} / ${half?.count ?? '?'}`
      : '–';
    console.log(
      `| ${r.backend} | ${cells.join(' | ')} | ${errors} | ${m.startMb} → ${m.lastQuarterMb} MB (${m.peakMb}) | ${r.load.acknowledged} | ${crash} |`,
    );
  }
  const failed = results.flatMap((r) => r.checks.filter((c) => !c.ok).map((c) => `${r.backend}: ${c.name}`));
  console.log(failed.length ? `\nFAILED: ${failed.join('; ')}` : '\nAll checks passed.');
  return failed.length === 0;
}

requireBuild(ROOT);
const results = [];
for (const backend of BACKENDS) results.push(await soakBackend(backend));
const ok = printTable(results);
if (JSON_OUT)
  writeFileSync(
    JSON_OUT,
    JSON.stringify(
      { clients: CLIENTS, seconds: SECONDS, cpus: cpus().length, cpu: cpus()[0].model, node: process.version, results },
      null,
      2,
    ),
  );
process.exit(ok ? 0 : 1);
