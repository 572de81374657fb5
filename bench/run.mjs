// npm run bench: the comparison workload (bench/workload.mjs, a copy of the one shared with other servers' runs) against our server, on SQLite
// and on PostgreSQL, then the targets (bench/targets.mjs): each phase's server-side CPU per request and p99
// against Medplum's from the same workload, scaled to this machine by the calibration line of this run
// (bench/calibrate.mjs, run before and after), the import rates and the memory, each marked met or NOT MET.
// Then, on a fresh database of its own, a synthetic data set of N resources (bench/synthetic.mjs): ingest
// rate, size on disk and a search mix; and the same searches on a data set of 10,000 (the same generator),
// interleaved with the large one's, for the server side's CPU per search at both sizes.
// Usage: node bench/run.mjs [--backends sqlite,postgres] [--quick] [--synthetic N] [--seed N]
//                           [--no-workload] [--no-synthea] [--no-scale] [--no-profiles]
//                           [--only workload,synthea,synthetic,scale,profiles]
//                           [--keep-synthetic]
//                           [--no-governance]
//   With the workload on SQLite, the workload runs a second time with AMBIENT_SEARCH_WORKERS=0 (searches
//   on the event loop, unbounded, as before the time budget: "sqlite-inline") and a table shows what
//   running searches on the read workers costs; --no-governance skips that run.
//   --quick: 10x fewer requests and 20,000 synthetic resources (a smoke run; the numbers are not comparable).
//   --synthetic N: resources in the synthetic data set (default 1,000,000; 0 skips that part); the small
//   one it is compared with has a tenth of that, at most 10,000.
//   --only synthetic: just the synthetic part (same as --no-workload --no-synthea).
//   Scale (bench/scale.mjs, PostgreSQL): the workload with 1 process, 2 processes and searches on a replica,
//   on a primary and standby of its own (needs the machine's PostgreSQL programs; skipped without them).
//   Profiles (bench/profiles.mjs, on the same backends): Observation creates without a profile and naming
//   the R4 vital signs profiles, their CPU per create against the R4 validation alone (--quick: its
//   --quick).
//   --keep-synthetic: keep the generated NDJSON and the synthetic SQLite database (their paths are printed).
// Env: AMBIENT_BENCH_POSTGRES_URL (default postgres://postgres@127.0.0.1:5432/test; schemas "bench",
// "bench_synthetic", "bench_synthetic_small" and "bench_profiles" are recreated in it), AMBIENT_BENCH_WORKLOAD (default bench/workload.mjs),
// AMBIENT_FIXTURES (default test/fixtures: the Synthea bundles and NDJSON, when present).
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir, totalmem } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { syntheticExport } from './export.mjs';
import {
  freshDatabase,
  postgresPid,
  printUsage,
  reachableBackends,
  requireBuild,
  run,
  startServer as startProcess,
} from './processes.mjs';
import { importSynthea, searchMix } from './synthea-mix.mjs';
import { calibrate, serverSideCpuMsPerOp, targetsReport } from './targets.mjs';
import { cpuMs, postgresCpuMs } from './measure.mjs';
import {
  databaseBytes,
  generateSynthetic,
  sizeComparison,
  syntheticChecks,
  syntheticMix,
  timedImport,
} from './synthetic.mjs';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const BIN = join(ROOT, 'bin', 'ambient-fhir.js');
// The comparison workload is carried in bench/ (a verbatim copy of the shared one); another copy can be named.
const WORKLOAD = process.env.AMBIENT_BENCH_WORKLOAD ?? join(ROOT, 'bench', 'workload.mjs');
// The Synthea fixtures the tests carry (test/fixtures), or AMBIENT_FIXTURES; without them the Synthea part
// is skipped and the synthetic data set stands in.
const FIXTURES = process.env.AMBIENT_FIXTURES ?? join(ROOT, 'test', 'fixtures');
const POSTGRES_URL = process.env.AMBIENT_BENCH_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const args = process.argv.slice(2);
// The usage is the header comment of this file.
if (args.includes('--help') || args.includes('-h')) printUsage(import.meta.url);
const quick = args.includes('--quick');
const backendsArg = args[args.indexOf('--backends') + 1];
const backends = args.includes('--backends') ? backendsArg.split(',') : ['sqlite', 'postgres'];
const option = (name, fallback) => (args.includes(name) ? args[args.indexOf(name) + 1] : fallback);
const only = args.includes('--only') ? option('--only').split(',') : undefined;
const parts = {
  workload: only ? only.includes('workload') : !args.includes('--no-workload'),
  synthea: only ? only.includes('synthea') : !args.includes('--no-synthea'),
  synthetic: only ? only.includes('synthetic') : true,
  scale: only ? only.includes('scale') : !args.includes('--no-scale') && backends.includes('postgres'),
  profiles: only ? only.includes('profiles') : !args.includes('--no-profiles'),
};
if (
  parts.synthea &&
  !existsSync(join(FIXTURES, 'synthea-r4-bundles')) &&
  !existsSync(join(FIXTURES, 'synthea-bulk-ndjson'))
) {
  console.error(`No Synthea fixtures in ${FIXTURES}: the Synthea part is skipped (the synthetic data set stands in).`);
  parts.synthea = false;
}
const syntheticTotal = Number(option('--synthetic', quick ? 20_000 : 1_000_000));
const syntheticSeed = Number(option('--seed', 1));
// The data set the large one's cost per search is compared with.
const SMALL_SYNTHETIC = 10_000;
if (!Number.isInteger(syntheticTotal) || syntheticTotal < 0 || !Number.isInteger(syntheticSeed)) {
  console.error('--synthetic and --seed take whole numbers.');
  process.exit(2);
}
if (syntheticTotal === 0) parts.synthetic = false;
// What the search time budget costs: the same workload with searches on the event loop (no workers).
if (parts.workload && backends.includes('sqlite') && !args.includes('--no-governance')) {
  backends.splice(backends.indexOf('sqlite') + 1, 0, 'sqlite-inline');
}
/** The database a bench run uses: `sqlite-inline` is SQLite with AMBIENT_SEARCH_WORKERS=0. */
const databaseOf = (backend) => (backend.startsWith('sqlite') ? 'sqlite' : 'postgres');

function peakRssMb(pid) {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Math.round(Number(/VmHWM:\s+(\d+)/.exec(status)[1]) / 1024);
}

/** A fresh, empty database: a new temporary SQLite file, or the PostgreSQL schema `schema`, recreated. */
async function databaseUrl(backend, schema = 'bench') {
  return (await freshDatabase(backend, schema)).url;
}

async function tokenFor(url, password) {
  const res = await fetch(`${url}/v1/ambient/api/auth/token`, {
    method: 'POST',
    body: new URLSearchParams({ username: 'bench', password }),
  });
  return (await res.json()).access_token;
}

async function createAccount(env) {
  const password = `bench-${Math.random().toString(36).slice(2)}-pw`;
  await run(process.execPath, [BIN, 'account', 'create', 'bench', '--password-stdin', '--scopes', 'system/*.cruds'], {
    env,
    input: `${password}\n`,
  });
  return password;
}

async function startServer(env) {
  const server = await startProcess(ROOT, env);
  return { ...server, peakRssMb: () => peakRssMb(server.pid) };
}

/** The comparison workload, then the Synthea import and mix, on one fresh database. */
async function workloadAndSynthea(backend) {
  const env = {
    DATABASE_URL: await databaseUrl(databaseOf(backend)),
    LOG_LEVEL: 'warn',
    ...(backend === 'sqlite-inline' ? { AMBIENT_SEARCH_WORKERS: '0' } : {}),
  };
  const password = await createAccount(env);
  const server = await startServer(env);
  try {
    let results;
    if (parts.workload) {
      mkdirSync(join(ROOT, 'bench', 'out'), { recursive: true });
      const outFile = join(ROOT, 'bench', 'out', `${backend}.json`);
      const scale = quick ? { N_PAT: '200', N_SEARCH: '100', N_ENC: '200' } : {};
      await run(process.execPath, [WORKLOAD, server.url, outFile], {
        env: {
          AUTH: 'password',
          USERNAME: 'bench',
          PASSWORD: password,
          SERVER_PID: String(server.pid),
          ...(databaseOf(backend) === 'postgres' && postgresPid() ? { PG_PID: postgresPid() } : {}),
          ...scale,
        },
      });
      results = JSON.parse(readFileSync(outFile, 'utf8'));
    }
    let synthea;
    if (parts.synthea && backend !== 'sqlite-inline') {
      const ingest = await importSynthea(BIN, env, FIXTURES, quick);
      const token = await tokenFor(server.url, password);
      const mix = await searchMix(server.url, token, { n: quick ? 40 : 200 });
      synthea = { ingest, mix };
    }
    return { results, synthea, peakRssMb: server.peakRssMb() };
  } finally {
    await server.stop();
  }
}

/** The synthetic data set on a database of its own: import, size on disk, correctness checks, search mix. */
async function benchSynthetic(backend, generated) {
  const large = await syntheticServer(backend, 'bench_synthetic', generated.large);
  const small = await syntheticServer(backend, 'bench_synthetic_small', generated.small);
  try {
    const bytes = await databaseBytes(backend === 'sqlite' ? large.databaseUrl : POSTGRES_URL, 'bench_synthetic');
    const checks = await syntheticChecks(large.url, large.token, generated.large.facts);
    const mix = await syntheticMix(large.url, large.token, { facts: generated.large.facts, n: quick ? 40 : 200 });
    console.error(
      `${backend}: the same searches on ${generated.small.resources} and ${generated.large.resources} resources...`,
    );
    const sizes = await sizeComparison(small, large, { n: quick ? 100 : 500 });
    console.error(`${backend}: exporting the synthetic data set ($export)...`);
    const exported = await syntheticExport(large.url, large.token, large.pid);
    return {
      ingest: large.ingest,
      megabytes: Math.round(bytes / 2 ** 20),
      checks,
      mix,
      sizes,
      exported,
      serverPeakRssMb: large.peakRssMb(),
    };
  } finally {
    await Promise.all([large.stop(), small.stop()]);
  }
}

/**
 * A fresh database with `generated` imported into it and a server on it: `{ url, token, facts, ingest,
 * cpuMs, pid, peakRssMb, stop }`, `cpuMs()` being the server's CPU and its database's (PostgreSQL's
 * every process) so far. `stop` also removes a SQLite database unless --keep-synthetic.
 */
async function syntheticServer(backend, schema, generated) {
  const databaseUrlText = await databaseUrl(backend, schema);
  const env = { DATABASE_URL: databaseUrlText, LOG_LEVEL: 'warn' };
  const password = await createAccount(env);
  console.error(`${backend}: importing ${generated.resources} synthetic resources...`);
  const ingest = await timedImport(BIN, env, generated.files);
  const server = await startServer(env);
  const pgPid = backend === 'postgres' ? postgresPid() : undefined;
  return {
    ...server,
    databaseUrl: databaseUrlText,
    token: await tokenFor(server.url, password),
    facts: generated.facts,
    ingest,
    cpuMs: () => cpuMs(server.pid) + postgresCpuMs(pgPid),
    stop: async () => {
      await server.stop();
      if (backend !== 'sqlite') return;
      const path = databaseUrlText.slice('sqlite:'.length);
      if (args.includes('--keep-synthetic')) console.error(`sqlite: synthetic database kept at ${path}`);
      else rmSync(dirname(path), { recursive: true, force: true });
    },
  };
}

async function benchBackend(backend, generated) {
  const result = { backend };
  if (parts.workload || parts.synthea) Object.assign(result, await workloadAndSynthea(backend));
  if (generated && backend !== 'sqlite-inline') result.synthetic = await benchSynthetic(backend, generated);
  return result;
}

function table(runs) {
  const phases = Object.keys(runs[0].results).filter((k) => /^W\d_/.test(k));
  const header = [
    'phase',
    ...runs.flatMap((r) => [`${r.backend} ops/s`, 'p50 ms', 'p99 ms', 'server CPU ms/op', 'server side CPU ms/op']),
  ];
  const lines = [`| ${header.join(' | ')} |`, `|${header.map(() => '---').join('|')}|`];
  for (const phase of phases) {
    const cells = runs.flatMap((r) => {
      const p = r.results[phase];
      return [p.perSec, p.lat.p50, p.lat.p99, p.cpu.serverCpuMsPerOp, serverSideCpuMsPerOp(p).toFixed(2)];
    });
    lines.push(`| ${[phase, ...cells].join(' | ')} |`);
  }
  lines.push('', runs.map((r) => `${r.backend}: server peak RSS ${r.peakRssMb} MB`).join('; '));
  return lines.join('\n');
}

/** Searches on the read workers (time budget, stoppable) against searches on the event loop, per phase. */
function governanceTable(runs) {
  const pool = runs.find((r) => r.backend === 'sqlite');
  const inline = runs.find((r) => r.backend === 'sqlite-inline');
  if (!pool?.results || !inline?.results) return '';
  const header = [
    'phase (SQLite)',
    'read workers ops/s',
    'p50 ms',
    'p99 ms',
    'event loop ops/s',
    'p50 ms',
    'p99 ms',
    'workers / event loop',
  ];
  const lines = [
    '\nWhat the search time budget costs (searches on read worker threads vs on the event loop):\n',
    `| ${header.join(' | ')} |`,
    `|${header.map(() => '---').join('|')}|`,
  ];
  for (const phase of Object.keys(pool.results).filter((k) => /^W\d_search/.test(k))) {
    const a = pool.results[phase];
    const b = inline.results[phase];
    const cost = `${(a.perSec / b.perSec).toFixed(2)}x`;
    lines.push(`| ${[phase, a.perSec, a.lat.p50, a.lat.p99, b.perSec, b.lat.p50, b.lat.p99, cost].join(' | ')} |`);
  }
  return lines.join('\n');
}

function syntheticReport(runs, generated) {
  const withSynthetic = runs.filter((r) => r.synthetic);
  const lines = [
    `\nSynthetic data set (seed ${generated.facts.seed}): ${generated.resources} resources (${Object.entries(
      generated.counts,
    )
      .map(([type, count]) => `${count} ${type}`)
      .join(', ')}), generated in ${generated.seconds} s`,
    `Synthetic import (through the API's write path): ${withSynthetic
      .map(
        (r) =>
          `${r.backend} ${r.synthetic.ingest.resources} resources in ${r.synthetic.ingest.seconds} s (${r.synthetic.ingest.perSec}/s, import process peak RSS ${r.synthetic.ingest.peakRssMb} MB), ${r.synthetic.megabytes} MB on disk`,
      )
      .join('; ')}`,
    withSynthetic.map((r) => `${r.backend}: server peak RSS ${r.synthetic.serverPeakRssMb} MB`).join('; '),
    ...withSynthetic.map(({ backend, synthetic: { exported: e, ingest } }) =>
      [
        `${backend}: $export of everything: ${e.resources} resources in ${e.files} files (${e.megabytes} MB NDJSON)`,
        `in ${e.exportSeconds} s (${e.perSec}/s) until the manifest, downloaded in ${e.downloadSeconds} s (${e.downloadMbPerSec} MB/s);`,
        `server RSS ${e.rssBeforeMb} MB before, at most ${e.peakRssDuringMb} MB during`,
        e.resources === ingest.resources ? '(every resource)' : `(EXPECTED ${ingest.resources})`,
      ].join(' '),
    ),
  ];
  for (const r of withSynthetic) {
    const wrong = r.synthetic.checks.filter((c) => c.actual !== c.expected);
    lines.push(
      wrong.length === 0
        ? `${r.backend}: all ${r.synthetic.checks.length} count checks right`
        : `${r.backend}: WRONG COUNTS: ${wrong.map((c) => `${c.name} expected ${c.expected}, got ${c.actual}`).join('; ')}`,
    );
  }
  const header = [
    'search (8 clients)',
    'matches',
    ...withSynthetic.flatMap((r) => [`${r.backend} ops/s`, 'p50 ms', 'p99 ms']),
  ];
  lines.push('', `| ${header.join(' | ')} |`, `|${header.map(() => '---').join('|')}|`);
  withSynthetic[0].synthetic.mix.forEach((row, i) => {
    const cells = withSynthetic.flatMap((r) => {
      const m = r.synthetic.mix[i];
      // Fewer requests than asked: the search hit the time limit, so its p99 rests on few samples.
      return [m.requests < (quick ? 40 : 200) ? `${m.perSec} (${m.requests} req)` : m.perSec, m.p50, m.p99];
    });
    const counts = [...new Set(withSynthetic.map((r) => r.synthetic.mix[i].matches))].join('/');
    lines.push(`| ${[row.name, counts, ...cells].join(' | ')} |`);
  });
  const empty = withSynthetic.flatMap((r) =>
    r.synthetic.mix.filter((m) => m.matches === 0).map((m) => `${r.backend} ${m.query}`),
  );
  if (empty.length > 0) lines.push('', `MATCHED NOTHING (useless rows, or a search bug): ${empty.join('; ')}`);
  return lines.join('\n');
}

requireBuild(ROOT);
if (parts.workload && !existsSync(WORKLOAD)) {
  console.error(`The comparison workload is not at ${WORKLOAD} (set AMBIENT_BENCH_WORKLOAD).`);
  process.exit(1);
}
// The calibration line of this run (bench/calibrate.mjs), before the servers run and again after: the
// targets compare against numbers from other machines only through it.
console.error('calibrating (bench/calibrate.mjs)...');
const calibrations = [await calibrate(ROOT)];
// Generated once for every backend: the same seed gives the same files anyway.
let generated;
if (parts.synthetic) {
  const generate = async (total) => {
    const dir = mkdtempSync(join(tmpdir(), 'ambient-synthetic-'));
    console.error(`Generating ${total} synthetic resources (seed ${syntheticSeed}) in ${dir}...`);
    return generateSynthetic(dir, total, syntheticSeed);
  };
  generated = {
    large: await generate(syntheticTotal),
    small: await generate(Math.min(SMALL_SYNTHETIC, Math.round(syntheticTotal / 10))),
  };
}
// A bare machine has no PostgreSQL: the SQLite part still runs, and the run says what it left out.
const reachable = await reachableBackends(backends);
backends.splice(0, backends.length, ...reachable);
if (backends.length === 0) {
  console.error('No database left to run the benchmark on.');
  process.exit(1);
}
const runs = [];
try {
  for (const backend of backends) runs.push(await benchBackend(backend, generated));
} finally {
  for (const set of generated ? [generated.large, generated.small] : []) {
    if (!args.includes('--keep-synthetic')) rmSync(set.dir, { recursive: true, force: true });
    else console.error(`Synthetic NDJSON kept in ${set.dir}`);
  }
}
calibrations.push(await calibrate(ROOT));
console.log(
  `\nambient-fhir, ${cpus().length} cores (${cpus()[0].model}), ${Math.round(totalmem() / 2 ** 30)} GiB, Node ${process.version}${quick ? ', QUICK run' : ''}\n`,
);
if (parts.workload) {
  console.log(table(runs));
  console.log(governanceTable(runs));
}
const withSynthea = runs.filter((r) => r.synthea);
if (withSynthea.length > 0) {
  console.log(
    `\nSynthea import (through the API's write path): ${withSynthea
      .map(
        (r) =>
          `${r.backend} ${r.synthea.ingest.resources} resources in ${r.synthea.ingest.seconds} s (${r.synthea.ingest.perSec}/s)`,
      )
      .join('; ')}\n`,
  );
  const header = ['search (8 clients)', ...withSynthea.flatMap((r) => [`${r.backend} ops/s`, 'p50 ms', 'p99 ms'])];
  console.log(`| ${header.join(' | ')} |\n|${header.map(() => '---').join('|')}|`);
  withSynthea[0].synthea.mix.forEach((row, i) => {
    const cells = withSynthea.flatMap((r) => [r.synthea.mix[i].perSec, r.synthea.mix[i].p50, r.synthea.mix[i].p99]);
    console.log(`| ${[row.name, ...cells].join(' | ')} |`);
  });
}
if (generated) {
  console.log(syntheticReport(runs, generated.large));
  mkdirSync(join(ROOT, 'bench', 'out'), { recursive: true });
  writeFileSync(
    join(ROOT, 'bench', 'out', 'synthetic.json'),
    JSON.stringify(
      {
        generated: { ...generated.large, files: undefined },
        small: { ...generated.small, files: undefined },
        runs: runs.map((r) => ({ backend: r.backend, ...r.synthetic })),
      },
      null,
      2,
    ),
  );
}
console.log(
  targetsReport({
    calibrations,
    workloads: Object.fromEntries(
      runs.filter((r) => r.results && r.backend !== 'sqlite-inline').map((r) => [r.backend, r.results]),
    ),
    imports: runs.flatMap((r) => [
      ...(r.synthea ? [{ backend: r.backend, label: 'the Synthea fixtures', ...r.synthea.ingest }] : []),
      ...(r.synthetic
        ? [{ backend: r.backend, label: `${r.synthetic.ingest.resources} synthetic resources`, ...r.synthetic.ingest }]
        : []),
    ]),
    sizes: runs
      .filter((r) => r.synthetic)
      .map((r) => ({
        backend: r.backend,
        small: generated.small.resources,
        large: generated.large.resources,
        rows: r.synthetic.sizes,
      })),
    serverRss: runs.flatMap((r) => [
      ...(r.peakRssMb && r.backend !== 'sqlite-inline'
        ? [{ backend: r.backend, label: 'the comparison workload and the Synthea mix', peakRssMb: r.peakRssMb }]
        : []),
      ...(r.synthetic
        ? [
            {
              backend: r.backend,
              label: 'the synthetic data set (mix and export)',
              peakRssMb: r.synthetic.serverPeakRssMb,
            },
          ]
        : []),
    ]),
  }),
);
if (parts.scale) {
  // Its own process, through tsx: it shares the test suites' PostgreSQL server set-up (TypeScript).
  console.error('scale: the workload with 1 and 2 processes and with a replica, on PostgreSQL...');
  const scaleArgs = ['--import', 'tsx', join(ROOT, 'bench', 'scale.mjs'), ...(quick ? ['--quick'] : [])];
  const report = (await run(process.execPath, scaleArgs))
    .split('\n')
    .filter((line) => !line.startsWith('scale: '))
    .join('\n');
  console.log(`\nScale (PostgreSQL): processes and replicas\n\n${report.trim()}`);
}
if (parts.profiles) {
  // Its own process, with its own databases (the schema bench_profiles) and calibration lines.
  console.error('profiles: Observation creates with and without the R4 vital signs profiles...');
  const profileArgs = [
    join(ROOT, 'bench', 'profiles.mjs'),
    '--backends',
    backends.filter((b) => b !== 'sqlite-inline').join(','),
    ...(quick ? ['--quick'] : []),
  ];
  const report = await run(process.execPath, profileArgs, { stderr: 'inherit' });
  console.log(`\nProfiles: what enforcing stored profiles costs\n${report.trimEnd()}`);
}
