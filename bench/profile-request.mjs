// Where one request's CPU goes, step by step: the built server as `npm start` runs it, with V8's sampling
// profiler on its main thread (--cpu-prof), on a fresh database seeded like the comparison workload (4,000
// Patients, 2,000 Encounters of 1,000 of them); then N requests of one kind from 8 clients, and a table of
// the main thread's samples by step, each step in µs of the main thread's CPU per request (its share of
// the busy samples times the thread's CPU from /proc), beside the CPU of the server's other threads and,
// on PostgreSQL, of the database's processes. docs/benchmarks.md, "A request, step by step".
// Usage: node bench/profile-request.mjs [--backends sqlite,postgres] [--kinds name,encounters,create]
//                                       [--requests N] [--clients N] [--keep]
//   kinds: name (Patient?name=<3 letters>), postal (Patient?address-postalcode=), gender-birthdate,
//          encounters (Encounter?patient=), revinclude (Patient?_id=&_revinclude=Encounter:patient),
//          read (Patient/<id>), create (POST Patient).
//   --keep: keep the .cpuprofile files (their folder is printed), for Chrome's DevTools or speedscope.
// Env: AMBIENT_BENCH_POSTGRES_URL (schema "bench_profile" recreated in it).
// The profiler's own cost slows the server by about a tenth; compare tables of one run, or of runs on
// one machine, and read the µs as shares of a whole, not as the workload's numbers.
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { concurrently, cpuMs, markdown, postgresCpuMs, threadCpuMs } from './measure.mjs';
import {
  commitOf,
  connect,
  createAccount,
  freshDatabase,
  postgresPid,
  printUsage,
  reachableBackends,
  requireBuild,
  startServer,
} from './processes.mjs';
import { calibrate } from './targets.mjs';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const args = process.argv.slice(2);
if (args.includes('--help') || args.includes('-h')) printUsage(import.meta.url);
requireBuild(ROOT);
const option = (name, fallback) => (args.includes(name) ? args[args.indexOf(name) + 1] : fallback);
const backends = await reachableBackends(option('--backends', 'sqlite,postgres').split(','));
const kinds = option('--kinds', 'name,encounters,create').split(',');
const requests = Number(option('--requests', 6000));
const clients = Number(option('--clients', 8));

const FAMILY = ['Smith', 'Johnson', 'Williams', 'Brown', 'Jones', 'Garcia', 'Miller', 'Davis', 'Rodriguez', 'Wilson'];
const GIVEN = ['James', 'Mary', 'John', 'Patricia', 'Robert', 'Jennifer'];
const postal = (i) => String(10000 + (i % 100) * 37);
const patient = (i) => ({
  resourceType: 'Patient',
  name: [{ given: [GIVEN[i % GIVEN.length]], family: FAMILY[(i * 7) % FAMILY.length] }],
  gender: i % 2 ? 'male' : 'female',
  birthDate: `${1940 + (i % 80)}-${String(1 + (i % 12)).padStart(2, '0')}-${String(1 + (i % 28)).padStart(2, '0')}`,
  address: [{ line: [`${i} Main St`], city: 'Springfield', postalCode: postal(i), country: 'US' }],
});
const encounter = (patientId, i) => ({
  resourceType: 'Encounter',
  status: 'finished',
  class: { system: 'http://terminology.hl7.org/CodeSystem/v3-ActCode', code: 'AMB', display: 'ambulatory' },
  subject: { reference: `Patient/${patientId}` },
  period: { start: new Date(Date.UTC(2020, 0, 1) + i * 3_600_000).toISOString() },
});

/** Each kind: the request `i` makes (method, path, body). */
const KINDS = {
  name: (i) => ['GET', `/Patient?name=${FAMILY[i % FAMILY.length].slice(0, 3)}`],
  postal: (i) => ['GET', `/Patient?address-postalcode=${postal(i)}`],
  'gender-birthdate': () => ['GET', '/Patient?gender=female&birthdate=ge1980-01-01'],
  encounters: (i, ids) => ['GET', `/Encounter?patient=Patient/${ids[i % 1000]}`],
  revinclude: (i, ids) => ['GET', `/Patient?_id=${ids[i % 1000]}&_revinclude=Encounter:patient`],
  read: (i, ids) => ['GET', `/Patient/${ids[i % ids.length]}`],
  create: (i) => ['POST', '/Patient', patient(100_000 + i)],
};
for (const kind of kinds) {
  if (!KINDS[kind]) {
    console.error(`Unknown kind ${kind}: one of ${Object.keys(KINDS).join(', ')}`);
    process.exit(2);
  }
}

/**
 * The step a sample belongs to: named by the first frame of ours or of a package, from the sampled
 * function outwards (Node's internals and native frames are charged to whoever called them: a socket
 * write to the HTTP reply or to the database client, a zlib call to compression).
 */
const STEPS = [
  [/\/dist\/storage\/sqlite\/read-pool\.js$/, 'SQLite: hand-off to a read worker'],
  [/\/dist\/storage\/sqlite\/|\/node_modules\/better-sqlite3\//, 'SQLite: statements and COMMIT'],
  [/\/node_modules\/pg[^/]*\/|\/dist\/storage\/postgres\//, 'PostgreSQL: client, pool, round trips'],
  [/\/dist\/auth\//, 'authentication (token, account, audit)'],
  [
    /\/dist\/(fhir\/bundle|search\/execute|search\/cursor|page-cursor|storage\/page-content)\.js$/,
    'Bundle assembly (entries, links, cursor)',
  ],
  [/\/dist\/search\//, 'search: parse, plan, estimate, compile'],
  [/\/dist\/validation\/|\/dist\/definitions\/|\/dist\/profiles\//, 'validation'],
  [/\/dist\/storage\//, 'storage: write, index rows'],
  [/\/node_modules\/@fastify\/compress\//, 'compression'],
  [/\/node_modules\/pino/, 'logging'],
  [/\/dist\/(http|fhir)\//, 'routing, hooks and replies of ours'],
  [/\/node_modules\/(fastify|find-my-way|avvio|@fastify\/)/, 'HTTP: Fastify (hooks, reply, the socket write)'],
];

function stepOf(byId, parent, leaf) {
  for (let id = leaf.id; id !== undefined; id = parent.get(id)) {
    const { url } = byId.get(id).callFrame;
    if (!url || url.startsWith('node:')) continue;
    for (const [pattern, step] of STEPS) if (pattern.test(url)) return step;
    const pkg = /\/node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
    return pkg ? `npm: ${pkg[1]}` : 'other code of ours';
  }
  const name = leaf.callFrame.functionName;
  if (name === '(garbage collector)') return 'garbage collection';
  if (name === '(idle)') return '(idle)';
  return 'HTTP: Node (parser, sockets, timers)';
}

/** Busy samples of the profile after `fromUs` (its own clock), by step: { step: ms }. */
function stepsOf(profile, fromUs) {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const steps = new Map();
  let time = profile.startTime;
  for (let i = 0; i < profile.samples.length; i++) {
    time += profile.timeDeltas[i];
    if (time < fromUs) continue;
    const step = stepOf(byId, parent, byId.get(profile.samples[i]));
    steps.set(step, (steps.get(step) ?? 0) + (profile.timeDeltas[i + 1] ?? 0) / 1000);
  }
  steps.delete('(idle)');
  return steps;
}

async function profileKind(backend, kind) {
  const database = await freshDatabase(backend, 'bench_profile');
  const env = { DATABASE_URL: database.url, LOG_LEVEL: 'warn' };
  const password = await createAccount(ROOT, env);
  const profileDir = mkdtempSync(join(tmpdir(), `ambient-profile-${backend}-${kind}-`));
  const server = await startServer(ROOT, env, { nodeArgs: ['--cpu-prof', `--cpu-prof-dir=${profileDir}`] });
  try {
    const client = await connect(server.url, password);
    const ids = [];
    await concurrently(
      4000,
      clients,
      async (i) => (ids[i] = (await client.request('POST', '/Patient', patient(i))).id),
    );
    await concurrently(2000, clients, (i) => client.request('POST', '/Encounter', encounter(ids[i % 1000], i)));
    // Warm: the searches' statements prepared, their estimates cached, V8's code optimised.
    await concurrently(500, clients, (i) => client.request(...KINDS[kind](i, ids)));
    // The profile's clock is the server's monotonic clock in µs, as is this machine's: the measured
    // requests start after this mark.
    const mark = process.hrtime.bigint() / 1000n;
    const cpu0 = {
      process: cpuMs(server.pid),
      main: threadCpuMs(server.pid, server.pid),
      pg: postgresCpuMs(backend === 'postgres' ? postgresPid() : undefined),
    };
    const started = performance.now();
    await concurrently(requests, clients, (i) => client.request(...KINDS[kind](10_000 + i, ids)));
    const seconds = (performance.now() - started) / 1000;
    const per = (ms) => (ms * 1000) / requests;
    const cpu = {
      process: per(cpuMs(server.pid) - cpu0.process),
      main: per(threadCpuMs(server.pid, server.pid) - cpu0.main),
      pg: per(postgresCpuMs(backend === 'postgres' ? postgresPid() : undefined) - cpu0.pg),
    };
    // V8 writes the profile as the server exits.
    await server.stop();
    const file = readdirSync(profileDir).find((f) => f.endsWith('.cpuprofile'));
    const steps = stepsOf(JSON.parse(readFileSync(join(profileDir, file), 'utf8')), Number(mark));
    if (args.includes('--keep')) console.error(`${backend} ${kind}: profile kept in ${profileDir}`);
    else rmSync(profileDir, { recursive: true, force: true });
    return { backend, kind, perSec: requests / seconds, cpu, steps };
  } finally {
    await server.stop();
    database.dispose();
  }
}

const calibration = await calibrate(ROOT);
const results = [];
for (const backend of backends) {
  for (const kind of kinds) {
    console.error(`${backend}: ${kind}, ${requests} requests from ${clients} clients...`);
    results.push(await profileKind(backend, kind));
  }
}

console.log(
  `\nOne request, step by step: commit ${commitOf(ROOT)}, Node ${process.version}, calibration ${JSON.stringify(calibration)}\n`,
);
for (const r of results) {
  const busy = [...r.steps.values()].reduce((a, b) => a + b, 0);
  const rows = [...r.steps]
    .sort((a, b) => b[1] - a[1])
    .map(([step, ms]) => [step, `${((100 * ms) / busy).toFixed(1)}%`, Math.round((r.cpu.main * ms) / busy)]);
  console.log(
    `${r.backend}, ${r.kind}: ${Math.round(r.perSec)}/s under the profiler; CPU per request: server ${Math.round(r.cpu.process)} µs (main thread ${Math.round(r.cpu.main)}, other threads ${Math.round(r.cpu.process - r.cpu.main)})${r.backend === 'postgres' ? `, PostgreSQL ${Math.round(r.cpu.pg)} µs` : ''}\n`,
  );
  console.log(markdown(['main thread step', 'share', 'µs per request'], rows));
  console.log('');
}
