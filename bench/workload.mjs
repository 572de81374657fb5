// A copy of the team's fixed comparison workload (workload.mjs), kept verbatim below this header: the same
// requests for every server it is run against (Medplum's numbers in docs/benchmarks.md came from it).
// The side-by-side workload (W1 creates, W2 searches, W3 encounters + revinclude), the same for any
// FHIR R4 server. Usage: node peer-bench.mjs <baseUrl> <outJson>
// Env: FHIR_PATH (default /fhir; Medplum: /fhir/R4); AUTH=password (USERNAME, PASSWORD; ambient-fhir's
// token endpoint) or AUTH=client_credentials (TOKEN_FILE with client_id/client_secret; Medplum).
import { readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';

const BASE = (process.argv[2] ?? 'http://127.0.0.1:8103/').replace(/\/$/, '');
const OUT = process.argv[3] ?? 'results.json';
const FHIR = BASE + (process.env.FHIR_PATH ?? '/fhir');
const AUTH = process.env.AUTH ?? 'password';
const creds = AUTH === 'client_credentials' ? JSON.parse(readFileSync(process.env.TOKEN_FILE ?? 'client.json', 'utf8')) : null;
const N_PAT = Number(process.env.N_PAT ?? 2000);
const N_SEARCH = Number(process.env.N_SEARCH ?? 1000);
const N_ENC = Number(process.env.N_ENC ?? 2000);
const CONC = Number(process.env.CONC ?? 8);

// Deterministic PRNG (mulberry32)
function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const rand = rng(42);
const pick = (arr, r = rand) => arr[Math.floor(r() * arr.length)];

const GIVEN = ['James', 'Mary', 'John', 'Patricia', 'Robert', 'Jennifer', 'Michael', 'Linda', 'William', 'Elizabeth',
  'David', 'Barbara', 'Richard', 'Susan', 'Joseph', 'Jessica', 'Thomas', 'Sarah', 'Charles', 'Karen', 'Daniel', 'Nancy',
  'Matthew', 'Lisa', 'Anthony', 'Betty', 'Mark', 'Margaret', 'Donald', 'Sandra'];
const FAMILY = ['Smith', 'Johnson', 'Williams', 'Brown', 'Jones', 'Garcia', 'Miller', 'Davis', 'Rodriguez', 'Martinez',
  'Hernandez', 'Lopez', 'Gonzalez', 'Wilson', 'Anderson', 'Thomas', 'Taylor', 'Moore', 'Jackson', 'Martin', 'Lee',
  'Perez', 'Thompson', 'White', 'Harris', 'Sanchez', 'Clark', 'Ramirez', 'Lewis', 'Robinson', 'Walker', 'Young',
  'Allen', 'King', 'Wright', 'Scott', 'Torres', 'Nguyen', 'Hill', 'Flores', 'Green', 'Adams', 'Nelson', 'Baker',
  'Hall', 'Rivera', 'Campbell', 'Mitchell', 'Carter', 'Roberts'];
const POSTAL = Array.from({ length: 100 }, (_, i) => String(10000 + i * 37));
const CITIES = ['Springfield', 'Riverton', 'Lakeside', 'Fairview', 'Hillcrest'];

function makePatient(r) {
  const y = 1940 + Math.floor(r() * 80);
  const m = 1 + Math.floor(r() * 12);
  const d = 1 + Math.floor(r() * 28);
  return {
    resourceType: 'Patient',
    name: [{ given: [pick(GIVEN, r)], family: pick(FAMILY, r) }],
    gender: r() < 0.5 ? 'female' : 'male',
    birthDate: `${y}-${String(m).padStart(2, '0')}-${String(d).padStart(2, '0')}`,
    address: [{ line: [`${1 + Math.floor(r() * 999)} Main St`], city: pick(CITIES, r), postalCode: pick(POSTAL, r), country: 'US' }],
  };
}

function makeEncounter(r, patientId, i) {
  const minutes = 10 + Math.floor(r() * 110);
  const start = new Date(Date.UTC(2020, 0, 1) + Math.floor(r() * 4 * 365 * 86400) * 1000);
  const end = new Date(start.getTime() + minutes * 60000);
  return {
    resourceType: 'Encounter',
    status: 'finished',
    class: { system: 'http://terminology.hl7.org/CodeSystem/v3-ActCode', code: 'AMB', display: 'ambulatory' },
    subject: { reference: `Patient/${patientId}` },
    period: { start: start.toISOString(), end: end.toISOString() },
    length: { value: minutes, unit: 'min', system: 'http://unitsofmeasure.org', code: 'min' },
  };
}

let token;
let tokenAt = 0;
async function getToken() {
  if (token && performance.now() - tokenAt < 20 * 60 * 1000) return token;
  const body = AUTH === 'client_credentials'
    ? new URLSearchParams({ grant_type: 'client_credentials', client_id: creds.client_id, client_secret: creds.client_secret })
    : new URLSearchParams({ username: process.env.USERNAME, password: process.env.PASSWORD });
  const res = await fetch(BASE + (AUTH === 'client_credentials' ? '/oauth2/token' : '/v1/ambient/api/auth/token'), { method: 'POST', body, headers: { 'content-type': 'application/x-www-form-urlencoded' } });
  if (!res.ok) throw new Error('token failed ' + res.status + ' ' + (await res.text()));
  token = (await res.json()).access_token;
  tokenAt = performance.now();
  return token;
}

async function req(method, path, body) {
  const t0 = performance.now();
  const res = await fetch(FHIR + path, {
    method,
    headers: { authorization: 'Bearer ' + token, 'content-type': 'application/fhir+json', accept: 'application/fhir+json' },
    body: body ? JSON.stringify(body) : undefined,
  });
  const text = await res.text();
  const ms = performance.now() - t0;
  if (!res.ok) throw new Error(`${method} ${path} -> ${res.status} ${text.slice(0, 300)}`);
  return { json: JSON.parse(text), ms };
}

function stats(lat) {
  const s = [...lat].sort((a, b) => a - b);
  const q = (p) => s[Math.min(s.length - 1, Math.floor(p * s.length))];
  return { n: s.length, p50: +q(0.5).toFixed(2), p90: +q(0.9).toFixed(2), p99: +q(0.99).toFixed(2), max: +s[s.length - 1].toFixed(2), mean: +(s.reduce((a, b) => a + b, 0) / s.length).toFixed(2) };
}

// CPU accounting (Linux /proc, jiffies of 10 ms)
const SPID = process.env.SERVER_PID, PGPID = process.env.PG_PID, RPID = process.env.REDIS_PID;
function procTicks(pid, withChildren) {
  try {
    const st = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = st.slice(st.lastIndexOf(')') + 2).split(' ');
    // f[0]=state (field 3); utime=field14 -> f[11], stime f[12], cutime f[13], cstime f[14]
    let t = Number(f[11]) + Number(f[12]);
    if (withChildren) t += Number(f[13]) + Number(f[14]);
    return t;
  } catch { return 0; }
}
function pgTicks() {
  if (!PGPID) return 0;
  let t = procTicks(PGPID, true);
  for (const d of readdirSync('/proc')) {
    if (!/^[0-9]+$/.test(d)) continue;
    try {
      const st = readFileSync(`/proc/${d}/stat`, 'utf8');
      const f = st.slice(st.lastIndexOf(')') + 2).split(' ');
      if (f[1] === String(PGPID)) t += Number(f[11]) + Number(f[12]);
    } catch {}
  }
  return t;
}
function sysTicks() {
  const l = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
  const idle = l[3] + l[4];
  const total = l.slice(0, 8).reduce((a, b) => a + b, 0);
  return { busy: total - idle, total };
}
function cpuSnap() {
  const u = process.cpuUsage();
  return { sys: sysTicks(), srv: SPID ? procTicks(SPID) : 0, pg: pgTicks(), redis: RPID ? procTicks(RPID) : 0, client: (u.user + u.system) / 1000 };
}
function cpuDelta(a, b, n, secs) {
  const ms = (t) => t * 10;
  const srv = ms(b.srv - a.srv), pg = ms(b.pg - a.pg), redis = ms(b.redis - a.redis), client = b.client - a.client;
  const busy = ms(b.sys.busy - a.sys.busy);
  const foreign = Math.max(0, busy - srv - pg - redis - client);
  const wallMs = secs * 1000;
  return {
    serverCpuMsPerOp: +(srv / n).toFixed(2), pgCpuMsPerOp: +(pg / n).toFixed(2), redisCpuMsPerOp: +(redis / n).toFixed(2),
    clientCpuMsPerOp: +(client / n).toFixed(2),
    serverCores: +(srv / wallMs).toFixed(2), pgCores: +(pg / wallMs).toFixed(2), foreignCores: +(foreign / wallMs).toFixed(2),
  };
}

// Run tasks [0..n) with `conc` workers; fn(i) returns {ms, json}
async function runPool(n, conc, fn) {
  const lat = new Array(n);
  let next = 0;
  const results = new Array(n);
  const c0 = cpuSnap();
  const t0 = performance.now();
  await Promise.all(Array.from({ length: conc }, async () => {
    for (;;) {
      const i = next++;
      if (i >= n) return;
      const r = await fn(i);
      lat[i] = r.ms;
      results[i] = r.json;
    }
  }));
  const secs = (performance.now() - t0) / 1000;
  const cpu = cpuDelta(c0, cpuSnap(), n, secs);
  return { secs: +secs.toFixed(3), perSec: +(n / secs).toFixed(1), lat: stats(lat), cpu, results };
}

const out = { base: BASE, startedAt: new Date().toISOString(), params: { N_PAT, N_SEARCH, N_ENC, CONC } };
function log(k, v) {
  const { results, ...rest } = v;
  out[k] = rest;
  console.log(k, JSON.stringify(rest));
  writeFileSync(OUT, JSON.stringify(out, null, 2));
}

await getToken();
// Warm-up: a few reads/searches/creates not counted
for (let i = 0; i < 20; i++) {
  await req('POST', '/Patient', makePatient(rng(100000 + i)));
  await req('GET', '/Patient?name=Smi');
}

// W1: sequential, then concurrent patient creates
const patR = rng(7);
const seqPatients = Array.from({ length: N_PAT }, () => makePatient(patR));
const conPatients = Array.from({ length: N_PAT }, () => makePatient(patR));
await getToken();
const w1seq = await runPool(N_PAT, 1, (i) => req('POST', '/Patient', seqPatients[i]));
log('W1_create_patient_seq', w1seq);
await getToken();
const w1con = await runPool(N_PAT, CONC, (i) => req('POST', '/Patient', conPatients[i]));
log('W1_create_patient_c' + CONC, w1con);
const patientIds = [...w1seq.results, ...w1con.results].map((p) => p.id);
if (patientIds.some((x) => !x)) throw new Error('missing patient ids');

// W2: searches
const sR = rng(99);
const namePrefixes = Array.from({ length: N_SEARCH }, () => pick(FAMILY, sR).slice(0, 3));
const postals = Array.from({ length: N_SEARCH }, () => pick(POSTAL, sR));
const w2 = {
  name: (i) => `/Patient?name=${encodeURIComponent(namePrefixes[i])}`,
  postal: (i) => `/Patient?address-postalcode=${postals[i]}`,
  genderBirth: () => `/Patient?gender=female&birthdate=ge1980-01-01`,
};
const counts = {};
for (const [k, f] of Object.entries(w2)) {
  for (const conc of [1, CONC]) {
    await getToken();
    const r = await runPool(N_SEARCH, conc, (i) => req('GET', f(i)));
    counts[k] = r.results.reduce((a, b) => a + (b.entry?.length ?? 0), 0) / N_SEARCH;
    log(`W2_search_${k}_c${conc}`, { ...r, avgEntriesPerPage: counts[k] });
  }
}

// W3: encounters (patient i % 1000 => 1000 patients with 2 encounters each)
const eR = rng(2024);
const encPatients = patientIds.slice(0, Math.min(1000, patientIds.length));
const encs = Array.from({ length: N_ENC }, (_, i) => makeEncounter(eR, encPatients[i % encPatients.length], i));
await getToken();
const w3c = await runPool(N_ENC, CONC, (i) => req('POST', '/Encounter', encs[i]));
log('W3_create_encounter_c' + CONC, w3c);
const qR = rng(555);
const qPat = Array.from({ length: N_SEARCH }, () => pick(encPatients, qR));
const w3s = {
  encByPatient: (i) => `/Encounter?patient=Patient/${qPat[i]}`,
  patRevinclude: (i) => `/Patient?_id=${qPat[i]}&_revinclude=Encounter:patient`,
};
for (const [k, f] of Object.entries(w3s)) {
  for (const conc of [1, CONC]) {
    await getToken();
    const r = await runPool(N_SEARCH, conc, (i) => req('GET', f(i)));
    const avg = r.results.reduce((a, b) => a + (b.entry?.length ?? 0), 0) / N_SEARCH;
    log(`W3_search_${k}_c${conc}`, { ...r, avgEntriesPerPage: avg });
  }
}
out.finishedAt = new Date().toISOString();
writeFileSync(OUT, JSON.stringify(out, null, 2));
console.log('done');
