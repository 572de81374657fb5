// What enforcing stored profiles costs (docs/benchmarks.md, "Profiles"), on SQLite and on PostgreSQL: the
// built server (`npm start`'s command line) on a fresh database, one account, and the R4 vital signs
// profiles (test/fixtures/profiles/hl7-r4-examples: vitalsigns, heartrate, bp) stored through the API,
// with a second heart rate profile stored as its differential alone (another url; its base vitalsigns
// is stored, so the server merges the snapshot itself).
//   1. The first create naming each profile (the profile read and compiled, then cached), each timed.
//   2. Phases of N Observation creates, one client and then 8: (a) the heart rate example without
//      meta.profile (the R4 base validation alone), (b) naming the published heartrate profile (its
//      snapshot), (c) naming the differential-only copy, (d) the blood pressure example naming bp
//      (components sliced by code), (e) the same without meta.profile, (f) the heart rate naming a
//      profile the server does not hold (looked up and ignored: what naming one costs before any check).
//      Each phase's creates are made in 4 slices, the phases taking turns. Per phase: ops/s, p50/p99, the
//      server's CPU per create (/proc/<pid>/stat), on PostgreSQL the database's, and the ratio of the
//      server's CPU per create to the same example's without a profile; then the server's RSS.
//   3. In this process, without HTTP or a database (dist/): the R4 validation of each example alone and
//      with the profile walk and its required bindings (the terminology engine, no stored value sets),
//      CPU per resource and the ratio; how long compiling each profile takes; what a compiled profile
//      holds on the heap per element (the cache's bound is counted in elements).
// A broken heart rate (a unit code the profile fixes otherwise) is refused under each heart rate profile
// before the phases run, so the phases measure profiles that are enforced; an example the server refuses
// under its profile is reported (NOT MEASURED, with the server's issues) and its phases are left out.
// The calibration line (bench/calibrate.mjs) is taken before and after, and the commit is printed.
//
// Usage: node bench/profiles.mjs [--backends sqlite,postgres] [--quick] [--writes 2000] [--no-in-process]
//   --quick: 200 creates per phase and fewer in-process rounds (a smoke run).
// Env: AMBIENT_BENCH_POSTGRES_URL (default postgres://postgres@127.0.0.1:5432/test; the schema
// "bench_profiles" is recreated in it).
import { readFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { concurrently, cpuMs, markdown, percentiles, postgresCpuMs, round, rssMb } from './measure.mjs';
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
const SCHEMA = 'bench_profiles';
const EXAMPLES = join(ROOT, 'test', 'fixtures', 'profiles', 'hl7-r4-examples');

const { values } = parseArgs({
  options: {
    backends: { type: 'string', default: 'sqlite,postgres' },
    quick: { type: 'boolean', default: false },
    writes: { type: 'string' },
    'no-in-process': { type: 'boolean', default: false },
    help: { type: 'boolean', short: 'h', default: false },
  },
});
if (values.help) printUsage(import.meta.url);
const quick = values.quick;
const WRITES = Number(values.writes ?? (quick ? 200 : 2000));
if (!Number.isInteger(WRITES) || WRITES <= 0) {
  console.error('--writes takes a positive whole number.');
  process.exit(2);
}
/** In-process: resources checked per timed batch, and batches of each kind (alternating, the median kept). */
const BATCH = 200;
const ROUNDS = quick ? 5 : 25;
const CLIENTS = 8;
/** Each phase's creates are made in this many slices, the phases taking turns (writePhases). */
const SLICES = 4;
let backends = values.backends.split(',');

const log = (message) => console.error(message);

// ---- the resources ---------------------------------------------------------------------------------------

const example = (name) => JSON.parse(readFileSync(join(EXAMPLES, name), 'utf8'));
const withoutId = ({ id: _, ...rest }) => rest;
const vitalsigns = example('StructureDefinition-vitalsigns.json');
const heartrate = example('StructureDefinition-heartrate.json');
const bp = example('StructureDefinition-bp.json');
/** The heart rate profile as its differential alone, under a url of its own. */
const DIFFERENTIAL_URL = 'http://example.org/fhir/StructureDefinition/heartrate-differential-only';
/** A profile the server does not hold. */
const UNKNOWN_URL = 'http://example.org/fhir/StructureDefinition/not-stored';
const { snapshot: _, text: __, ...heartrateDifferential } = withoutId(heartrate);
const PROFILES = [vitalsigns, heartrate, bp, { ...heartrateDifferential, url: DIFFERENTIAL_URL }].map(withoutId);

/** The example as published, without its id, naming `profiles` in meta.profile (none: no meta). */
const claiming = (name, profiles) => {
  const { meta: _, ...resource } = withoutId(example(name));
  return profiles.length === 0 ? resource : { ...resource, meta: { profile: profiles } };
};
const HEART = 'Observation-heart-rate.json';
const PRESSURE = 'Observation-blood-pressure.json';
/** The phases, in the order they run; `base` names the phase without a profile each is compared with. */
const PHASES = [
  { key: 'a', label: 'heart rate, no profile', resource: claiming(HEART, []) },
  { key: 'b', label: 'heart rate, heartrate (snapshot)', resource: claiming(HEART, [heartrate.url]), base: 'a' },
  { key: 'c', label: 'heart rate, differential only', resource: claiming(HEART, [DIFFERENTIAL_URL]), base: 'a' },
  { key: 'd', label: 'blood pressure, bp', resource: claiming(PRESSURE, [bp.url]), base: 'e' },
  { key: 'e', label: 'blood pressure, no profile', resource: claiming(PRESSURE, []) },
  // What naming a profile costs before any walk: the server looks it up on every write, finds nothing and
  // ignores it; the resource is indexed under _profile like (b)'s.
  { key: 'f', label: 'heart rate, a profile not stored', resource: claiming(HEART, [UNKNOWN_URL]), base: 'a' },
];
/** A heart rate each heart rate profile refuses: its unit code is not the /min the profile fixes. */
const brokenHeartRate = (profile) => {
  const resource = claiming(HEART, [profile]);
  return { ...resource, valueQuantity: { ...resource.valueQuantity, code: 'mm' } };
};

// ---- over HTTP -------------------------------------------------------------------------------------------

/** `n` creates of the phase's resource from `clients` clients: their durations, seconds and CPU. */
async function writeSlice(ctx, phase, n, clients) {
  const { api, server, pgPid } = ctx;
  const cpu0 = cpuMs(server.pid);
  const pg0 = postgresCpuMs(pgPid);
  const started = performance.now();
  const durations = await concurrently(n, clients, () => api.request('POST', '/Observation', phase.resource));
  return {
    durations,
    seconds: (performance.now() - started) / 1000,
    serverCpuMs: cpuMs(server.pid) - cpu0,
    pgCpuMs: postgresCpuMs(pgPid) - pg0,
  };
}

/**
 * WRITES creates of each phase from `clients` clients, in SLICES rounds that take the phases in turn, so
 * that the machine's speed drifting over the minutes weighs on every phase alike.
 */
async function writePhases(ctx, phases, clients) {
  const slices = phases.map(() => []);
  for (let round = 0; round < SLICES; round++) {
    const n = Math.floor(WRITES / SLICES) + (round < WRITES % SLICES ? 1 : 0);
    for (const [i, phase] of phases.entries()) slices[i].push(await writeSlice(ctx, phase, n, clients));
  }
  return phases.map((phase, i) => {
    const sum = (key) => slices[i].reduce((total, slice) => total + slice[key], 0);
    return {
      key: phase.key,
      label: phase.label,
      base: phase.base,
      clients,
      perSec: round(WRITES / sum('seconds'), 1),
      ...percentiles(slices[i].flatMap((slice) => slice.durations)),
      serverCpuMsPerOp: round(sum('serverCpuMs') / WRITES, 3),
      pgCpuMsPerOp: ctx.pgPid ? round(sum('pgCpuMs') / WRITES, 3) : undefined,
    };
  });
}

/** Resolves when `promise` is refused with a 4xx whose body names `text`; throws otherwise. */
async function expectRefused(promise, text) {
  const error = await promise.then(
    () => undefined,
    (e) => e,
  );
  if (!error || !/HTTP 4\d\d/.test(error.message) || !error.message.includes(text)) {
    throw new Error(`expected a refusal naming ${text}, got ${error ? error.message : 'a success'}`);
  }
}

async function benchBackend(backend) {
  const database = await freshDatabase(backend, SCHEMA);
  const env = { DATABASE_URL: database.url, LOG_LEVEL: 'warn' };
  const password = await createAccount(ROOT, env);
  const server = await startServer(ROOT, env);
  const pgPid = backend === 'postgres' ? postgresPid() : undefined;
  const result = { backend };
  try {
    const { request } = await connect(server.url, password);
    const ctx = { api: { request }, server, pgPid };
    for (const profile of PROFILES) await request('POST', '/StructureDefinition', profile);

    // The first create naming each profile reads and compiles it (the differential: merged over vitalsigns).
    // An example the server refuses under its profile is reported, and its phases are not run.
    result.first = [];
    result.refused = new Map();
    for (const phase of PHASES.filter((p) => p.base)) {
      const started = performance.now();
      try {
        await request('POST', '/Observation', phase.resource);
        result.first.push({ label: phase.label, ms: round(performance.now() - started) });
      } catch (error) {
        result.refused.set(phase.key, error.message);
      }
    }
    for (const url of [heartrate.url, DIFFERENTIAL_URL]) {
      await expectRefused(request('POST', '/Observation', brokenHeartRate(url)), url);
    }
    const phases = PHASES.filter((p) => !result.refused.has(p.key));

    log(`${backend}: warm-up, then ${phases.length} phases of ${WRITES} creates, 1 client and ${CLIENTS}...`);
    for (const phase of phases) await writeSlice(ctx, phase, Math.min(100, WRITES), CLIENTS);
    result.phases = [];
    for (const clients of [1, CLIENTS]) result.phases.push(...(await writePhases(ctx, phases, clients)));
    result.rss = rssMb(server.pid);
    return result;
  } finally {
    await server.stop();
    database.dispose();
  }
}

// ---- in process ------------------------------------------------------------------------------------------

/**
 * What StoredProfiles.check (src/profiles/profiles.ts) does for a resource once its profiles are compiled
 * and cached, without the database: the walk of each profile named, then the required bindings' codes
 * through the terminology engine (no stored ValueSets: the R4 ones). The server's check adds a read of the
 * profile table per profile named, one per stored base, and a search for each value set.
 */
async function inProcess() {
  const dist = (path) => import(pathToFileURL(join(ROOT, 'dist', path)).href);
  const { loadR4Definitions } = await dist('definitions/registry.js');
  const { validateResource } = await dist('validation/validate.js');
  const { ReferenceParser } = await dist('fhir/references.js');
  const { readElements, mergeDifferential } = await dist('profiles/elements.js');
  const { compileProfile, InvariantBudget } = await dist('profiles/compile.js');
  const { ProfileWalk } = await dist('profiles/conformance.js');
  const { RequestFhirPathBudget } = await dist('request-fhirpath/request-fhirpath.js');
  const { TerminologyEngine } = await dist('terminology/engine.js');

  const registry = loadR4Definitions();
  // As the server's: its own base counts as local (services.ts passes the search catalog's parser).
  const references = new ReferenceParser('http://127.0.0.1/fhir', (t) => registry.isResourceType(t));
  const budget = new InvariantBudget();
  const elementsOf = (sd) => readElements(sd.snapshot.element, 'StructureDefinition.snapshot', sd.type);
  const compile = (sd, elements) =>
    compileProfile(registry, { url: sd.url, version: sd.version, type: sd.type }, elements, budget);
  const merged = () =>
    mergeDifferential(
      elementsOf(vitalsigns),
      readElements(heartrateDifferential.differential.element, 'StructureDefinition.differential', 'Observation'),
    );
  const compiled = new Map([
    [vitalsigns.url, compile(vitalsigns, elementsOf(vitalsigns))],
    [heartrate.url, compile(heartrate, elementsOf(heartrate))],
    [bp.url, compile(bp, elementsOf(bp))],
    [DIFFERENTIAL_URL, compile({ ...heartrateDifferential, url: DIFFERENTIAL_URL }, merged())],
  ]);
  const engine = new TerminologyEngine({ valueSets: async () => [], codeSystems: async () => [] });
  const validate = (resource) => validateResource(resource, registry, references);
  const withProfiles = async (resource) => {
    const issues = validate(resource);
    const walk = new ProfileWalk(registry, references, (url) => compiled.get(url), budget, new RequestFhirPathBudget());
    for (const url of resource.meta.profile) walk.check(compiled.get(url), resource, resource.resourceType);
    for (const binding of walk.bindings) {
      const vs = await engine.findValueSet(binding.valueSet);
      if (vs) await engine.validateInValueSet(vs, binding.codings);
    }
    return [...issues, ...walk.issues].filter((i) => i.severity === 'error');
  };

  /** CPU µs per call of `fn` over BATCH calls: the median of ROUNDS batches, alternating with `other`'s. */
  const cpuMicros = async (fn, other) => {
    // One batch of each first, not counted: the JIT's warm-up.
    for (let j = 0; j < BATCH; j++) {
      await fn();
      await other();
    }
    const times = [[], []];
    for (let r = 0; r < ROUNDS; r++) {
      for (const [i, f] of [fn, other].entries()) {
        const before = process.cpuUsage();
        for (let j = 0; j < BATCH; j++) await f();
        const used = process.cpuUsage(before);
        times[i].push((used.user + used.system) / BATCH);
      }
    }
    const median = (xs) => xs.sort((a, b) => a - b)[Math.floor(xs.length / 2)];
    return times.map(median);
  };

  const validation = [];
  for (const phase of PHASES.filter((p) => p.base && compiled.has(p.resource.meta.profile[0]))) {
    const plain = PHASES.find((p) => p.key === phase.base).resource;
    const [base, profiled] = await cpuMicros(
      () => validate(plain),
      () => withProfiles(phase.resource),
    );
    const errors = await withProfiles(phase.resource);
    validation.push({ label: phase.label, base: round(base, 1), profiled: round(profiled, 1), errors: errors.length });
  }

  // Compiling (reading the elements, merging a differential, compiling): what a miss of the cache costs.
  const compiling = [];
  for (const [label, sd, elements] of [
    ['vitalsigns (snapshot)', vitalsigns, () => elementsOf(vitalsigns)],
    ['heartrate (snapshot)', heartrate, () => elementsOf(heartrate)],
    ['heartrate (differential merged over vitalsigns)', heartrate, merged],
    ['bp (snapshot)', bp, () => elementsOf(bp)],
  ]) {
    const n = quick ? 20 : 100;
    const before = process.cpuUsage();
    for (let i = 0; i < n; i++) compile(sd, elements());
    const used = process.cpuUsage(before);
    compiling.push({ label, elements: elements().length, ms: round((used.user + used.system) / n / 1000, 2) });
  }

  // The heap a cached profile holds (its elements and its compiled tree, as the cache keeps both), per element.
  setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc');
  const copies = quick ? 20 : 100;
  gc();
  const heap0 = process.memoryUsage().heapUsed;
  const held = [];
  for (let i = 0; i < copies; i++) {
    const elements = elementsOf(heartrate);
    held.push({ elements, profile: compile(heartrate, elements) });
  }
  gc();
  const perElement = (process.memoryUsage().heapUsed - heap0) / (copies * held[0].elements.length);
  return { validation, compiling, bytesPerElement: Math.round(perElement), elements: held[0].elements.length };
}

// ---- the report ------------------------------------------------------------------------------------------

function report(result) {
  const pgCols = result.backend === 'postgres';
  const byKey = (clients, key) => result.phases.find((p) => p.clients === clients && p.key === key);
  const rows = result.phases.map((p) => [
    `(${p.key}) ${p.label}`,
    p.clients,
    p.perSec,
    p.p50,
    p.p99,
    p.serverCpuMsPerOp,
    p.base ? `${round(p.serverCpuMsPerOp / byKey(p.clients, p.base).serverCpuMsPerOp)}x (${p.base})` : '',
    ...(pgCols ? [p.pgCpuMsPerOp] : []),
  ]);
  return [
    `\n### ${result.backend}\n`,
    `First create naming each profile (read, compiled, cached): ${result.first.map((f) => `${f.label} ${f.ms} ms`).join('; ')}.\n`,
    markdown(
      [
        `Observation creates (${WRITES} each)`,
        'clients',
        'ops/s',
        'p50 ms',
        'p99 ms',
        'server CPU ms/create',
        'vs no profile',
        ...(pgCols ? ['PostgreSQL CPU ms/create'] : []),
      ],
      rows,
    ),
    '',
    `Server RSS after the phases: ${result.rss.rss} MB (peak ${result.rss.peak} MB).`,
    ...[...result.refused].map(
      ([key, message]) =>
        `\nNOT MEASURED: (${key}) ${PHASES.find((p) => p.key === key).label}: the server refuses the example under its profile: ${message}`,
    ),
  ].join('\n');
}

function inProcessReport(r) {
  return [
    '\n### In process (dist/, no HTTP, no database)\n',
    markdown(
      ['resource, profile', 'R4 validation µs CPU', 'with the profile µs CPU', 'ratio', 'verdict'],
      r.validation.map((v) => [
        v.label,
        v.base,
        v.profiled,
        `${round(v.profiled / v.base)}x`,
        v.errors === 0 ? 'conforms' : `REFUSED (${v.errors} errors)`,
      ]),
    ),
    '',
    markdown(
      ['compiling', 'elements', 'ms CPU'],
      r.compiling.map((c) => [c.label, c.elements, c.ms]),
    ),
    '',
    `A cached profile holds about ${r.bytesPerElement} bytes of heap per element (heartrate's ${r.elements} elements, read and compiled).`,
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
let local;
if (!values['no-in-process']) {
  log('in process: the R4 validation with and without the profile walk...');
  local = await inProcess();
}
const minutes = round((performance.now() - began) / 60_000, 1);
calibrations.push(await calibrate(ROOT));
console.log(
  `\nambient-fhir ${commit}, ${cpus().length} cores (${cpus()[0].model}), ${Math.round(totalmem() / 2 ** 30)} GiB, Node ${process.version}${quick ? ', QUICK run' : ''}`,
);
console.log(
  `calibration (bench/calibrate.mjs): ${calibrations.map((c) => `http_rps ${c.http_rps}, fsync_per_s ${c.fsync_per_s}`).join(' before; ')} after`,
);
console.log(`${WRITES} creates per phase; ${minutes} min`);
for (const result of results) console.log(report(result));
if (local) console.log(inProcessReport(local));
