// npm run bench -- --only scale (or: node --import tsx bench/scale.mjs [--quick]): the comparison workload
// on PostgreSQL three ways, on one primary this script starts itself (initdb, from the machine's
// PostgreSQL programs, as test/support/pg-servers.ts does for the failover and replica tests) with a
// streaming standby beside it:
//   1 process                         serve
//   2 processes                       serve --workers 2
//   1 process, searches on a replica  serve with DATABASE_READ_URLS=<the standby>
// Each on a fresh database of the primary. The calibration line (bench/calibrate.mjs) is printed first, so
// the numbers can be scaled to another machine. Everything runs on this one machine: with 2 cores the
// processes, PostgreSQL, the standby and the load generator share them (docs/benchmarks.md says what that means).
import { spawn } from 'node:child_process';
import { mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { freePort, run, serveArgs, waitReady } from './processes.mjs';
import { postgresServersUnavailable, removeServers, startPrimary, startStandby } from '../test/support/pg-servers.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const BIN = join(ROOT, 'bin', 'ambient-fhir.js');
const WORKLOAD = process.env.AMBIENT_BENCH_WORKLOAD ?? join(ROOT, 'bench', 'workload.mjs');
const quick = process.argv.includes('--quick');

const SETUPS = [
  { name: '1 process', args: [], replica: false },
  { name: '2 processes', args: ['--workers', '2'], replica: false },
  { name: '1 process + replica', args: [], replica: true },
];

async function freshDatabase(server, name) {
  const client = new pg.Client({ connectionString: server.url });
  await client.connect();
  await client.query(`DROP DATABASE IF EXISTS ${name}`);
  await client.query(`CREATE DATABASE ${name}`);
  await client.end();
  return server.url.replace(/\/postgres$/, `/${name}`);
}

async function runSetup(setup, primary, standby, index) {
  const database = `bench_scale_${index}`;
  const databaseUrl = await freshDatabase(primary, database);
  // Created on the primary: the standby has it once it has replayed the CREATE DATABASE.
  const env = {
    DATABASE_URL: databaseUrl,
    LOG_LEVEL: 'warn',
    ...(setup.replica ? { DATABASE_READ_URLS: standby.url.replace(/\/postgres$/, `/${database}`) } : {}),
  };
  const password = `bench-${Math.random().toString(36).slice(2)}-pw`;
  await run(process.execPath, [BIN, 'account', 'create', 'bench', '--password-stdin', '--scopes', 'system/*.cruds'], {
    env,
    input: `${password}\n`,
  });
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const server = spawn(process.execPath, serveArgs(ROOT, setup.args), {
    env: { ...process.env, ...env, PORT: String(port), AMBIENT_PUBLIC_URL: url },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  try {
    await waitReady(url);
    mkdirSync(join(ROOT, 'bench', 'out'), { recursive: true });
    const outFile = join(ROOT, 'bench', 'out', `scale-${index}.json`);
    const scale = quick ? { N_PAT: '200', N_SEARCH: '100', N_ENC: '200' } : {};
    await run(process.execPath, [WORKLOAD, url, outFile], {
      env: { AUTH: 'password', USERNAME: 'bench', PASSWORD: password, SERVER_PID: String(server.pid), ...scale },
    });
    return JSON.parse(readFileSync(outFile, 'utf8'));
  } finally {
    server.kill('SIGTERM');
    await new Promise((r) => server.on('exit', r));
  }
}

function table(results) {
  const phases = Object.keys(results[0].results).filter((k) => /^W\d_/.test(k));
  const header = ['phase', ...results.flatMap((r) => [`${r.name} ops/s`, 'p99 ms']), '2 processes / 1', 'replica / 1'];
  const lines = [`| ${header.join(' | ')} |`, `|${header.map(() => '---').join('|')}|`];
  for (const phase of phases) {
    const cells = results.flatMap((r) => [r.results[phase].perSec, r.results[phase].lat.p99]);
    const base = results[0].results[phase].perSec;
    const ratio = (r) => `${(r.results[phase].perSec / base).toFixed(2)}x`;
    lines.push(`| ${[phase, ...cells, ratio(results[1]), ratio(results[2])].join(' | ')} |`);
  }
  return lines.join('\n');
}

export async function benchScale() {
  const unavailable = postgresServersUnavailable();
  if (unavailable) {
    console.error(`scale part skipped: ${unavailable}`);
    return undefined;
  }
  const calibration = (await run(process.execPath, [join(ROOT, 'bench', 'calibrate.mjs')])).trim();
  const primary = await startPrimary();
  const standby = await startStandby(primary);
  try {
    const results = [];
    for (const [index, setup] of SETUPS.entries()) {
      console.error(`scale: ${setup.name}...`);
      results.push({ name: setup.name, results: await runSetup(setup, primary, standby, index) });
    }
    return { calibration, table: table(results) };
  } finally {
    removeServers([primary, standby]);
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const outcome = await benchScale();
  if (outcome) console.log(`${outcome.calibration}\n\n${outcome.table}`);
}
