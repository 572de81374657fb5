// npm run bench: the comparison workload of ../shared/bench/workload.mjs against our server, on SQLite
// and on PostgreSQL, printed as a table beside Medplum's numbers from the same workload.
// Usage: node bench/run.mjs [--backends sqlite,postgres] [--quick]
//   --quick: 10x fewer requests (a smoke run; the numbers are not comparable).
// Env: AMBIENT_BENCH_POSTGRES_URL (default postgres://postgres@127.0.0.1:5432/test; a schema "bench" is
// recreated in it), AMBIENT_BENCH_WORKLOAD (default ../shared/bench/workload.mjs).
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { cpus, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { freePort, run } from './processes.mjs';
import { importSynthea, searchMix } from './synthea-mix.mjs';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const BIN = join(ROOT, 'bin', 'ambient-fhir.js');
const BESIDE = join(ROOT, '..', 'shared', 'bench', 'workload.mjs');
const WORKLOAD =
  process.env.AMBIENT_BENCH_WORKLOAD ?? (existsSync(BESIDE) ? BESIDE : '/work/shared/bench/workload.mjs');
const FIXTURES_BESIDE = join(ROOT, '..', 'shared', 'fixtures');
const FIXTURES =
  process.env.AMBIENT_FIXTURES ?? (existsSync(FIXTURES_BESIDE) ? FIXTURES_BESIDE : '/work/shared/fixtures');
const POSTGRES_URL = process.env.AMBIENT_BENCH_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const args = process.argv.slice(2);
const quick = args.includes('--quick');
const backendsArg = args[args.indexOf('--backends') + 1];
const backends = args.includes('--backends') ? backendsArg.split(',') : ['sqlite', 'postgres'];

// Medplum 5.0.10 on a machine of the same kind, medians of 4 runs (../shared/bench/README.md).
const MEDPLUM = {
  W1_create_patient_seq: 222,
  W1_create_patient_c8: 431,
  W2_search_name_c8: 444,
  W2_search_postal_c8: 444,
  W2_search_genderBirth_c8: 609,
  W3_create_encounter_c8: 491,
  W3_search_encByPatient_c8: 919,
  W3_search_patRevinclude_c8: 785,
};

async function waitReady(url) {
  for (let i = 0; i < 300; i++) {
    try {
      if ((await fetch(`${url}/readyz`)).ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error('server did not become ready');
}

function peakRssMb(pid) {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Math.round(Number(/VmHWM:\s+(\d+)/.exec(status)[1]) / 1024);
}

/** The PostgreSQL postmaster's pid, so the workload can report the database's CPU too. */
function postgresPid() {
  const dir = '/var/run/postgresql';
  try {
    const pidFile = readdirSync(dir).find((f) => f.endsWith('.pid'));
    return pidFile ? readFileSync(join(dir, pidFile), 'utf8').split('\n')[0].trim() : undefined;
  } catch {
    return undefined;
  }
}

async function databaseUrl(backend) {
  if (backend === 'sqlite') return `sqlite:${join(mkdtempSync(join(tmpdir(), 'ambient-bench-')), 'bench.db')}`;
  const client = new pg.Client({ connectionString: POSTGRES_URL });
  await client.connect();
  await client.query('DROP SCHEMA IF EXISTS bench CASCADE');
  await client.query('CREATE SCHEMA bench');
  await client.end();
  const url = new URL(POSTGRES_URL);
  url.searchParams.set('options', '-c search_path=bench');
  return url.toString();
}

async function tokenFor(url, password) {
  const res = await fetch(`${url}/v1/ambient/api/auth/token`, {
    method: 'POST',
    body: new URLSearchParams({ username: 'bench', password }),
  });
  return (await res.json()).access_token;
}

async function benchBackend(backend) {
  const env = { DATABASE_URL: await databaseUrl(backend), LOG_LEVEL: 'warn' };
  const password = `bench-${Math.random().toString(36).slice(2)}-pw`;
  await run(process.execPath, [BIN, 'account', 'create', 'bench', '--password-stdin', '--scopes', 'system/*.cruds'], {
    env,
    input: `${password}\n`,
  });
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const server = spawn(process.execPath, [BIN, 'serve'], {
    env: { ...process.env, ...env, PORT: String(port), AMBIENT_PUBLIC_URL: url },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  try {
    await waitReady(url);
    mkdirSync(join(ROOT, 'bench', 'out'), { recursive: true });
    const outFile = join(ROOT, 'bench', 'out', `${backend}.json`);
    const scale = quick ? { N_PAT: '200', N_SEARCH: '100', N_ENC: '200' } : {};
    await run(process.execPath, [WORKLOAD, url, outFile], {
      env: {
        AUTH: 'password',
        USERNAME: 'bench',
        PASSWORD: password,
        SERVER_PID: String(server.pid),
        ...(backend === 'postgres' && postgresPid() ? { PG_PID: postgresPid() } : {}),
        ...scale,
      },
    });
    const results = JSON.parse(readFileSync(outFile, 'utf8'));
    let synthea;
    if (!args.includes('--no-synthea')) {
      const ingest = await importSynthea(BIN, env, FIXTURES, quick);
      const token = await tokenFor(url, password);
      const mix = await searchMix(url, token, { n: quick ? 40 : 200 });
      synthea = { ingest, mix };
    }
    return { backend, results, synthea, peakRssMb: peakRssMb(server.pid) };
  } finally {
    server.kill('SIGTERM');
    await new Promise((r) => server.on('exit', r));
  }
}

function table(runs) {
  const phases = Object.keys(runs[0].results).filter((k) => /^W\d_/.test(k));
  const header = [
    'phase',
    ...runs.flatMap((r) => [`${r.backend} ops/s`, 'p50 ms', 'p99 ms', 'server CPU ms/op']),
    'Medplum ops/s',
    ...runs.map((r) => `${r.backend} / Medplum`),
  ];
  const lines = [`| ${header.join(' | ')} |`, `|${header.map(() => '---').join('|')}|`];
  for (const phase of phases) {
    const cells = runs.flatMap((r) => {
      const p = r.results[phase];
      return [p.perSec, p.lat.p50, p.lat.p99, p.cpu.serverCpuMsPerOp];
    });
    const medplum = MEDPLUM[phase];
    const ratios = runs.map((r) => (medplum ? `${(r.results[phase].perSec / medplum).toFixed(1)}x` : ''));
    lines.push(`| ${[phase, ...cells, medplum ?? '', ...ratios].join(' | ')} |`);
  }
  lines.push('', runs.map((r) => `${r.backend}: server peak RSS ${r.peakRssMb} MB`).join('; '));
  return lines.join('\n');
}

if (!existsSync(join(ROOT, 'dist', 'main.js'))) {
  console.error('Build first: npm install (or npm run build).');
  process.exit(1);
}
if (!existsSync(WORKLOAD)) {
  console.error(`The comparison workload is not at ${WORKLOAD} (set AMBIENT_BENCH_WORKLOAD).`);
  process.exit(1);
}
const runs = [];
for (const backend of backends) runs.push(await benchBackend(backend));
console.log(
  `\nambient-fhir, ${cpus().length} cores (${cpus()[0].model}), ${Math.round(totalmem() / 2 ** 30)} GiB, Node ${process.version}${quick ? ', QUICK run' : ''}\n`,
);
console.log(table(runs));
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
