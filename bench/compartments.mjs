// Compartment search and Patient $everything against a running server (docs/search.md "Compartments"):
//   BASE_URL=http://127.0.0.1:8080 TOKEN=<bearer> node bench/compartments.mjs [patients, default 20]
// per patient of the database, a walk of `$everything` with `_count=100` (every page timed) and three
// compartment searches, p50/p99 per shape in ms;
//   BASE_URL=... TOKEN=... node bench/compartments.mjs --walk '<path relative to /fhir>'
// one search followed along `next` to its end, per-page times (p50, first and last 10 pages);
//   node bench/compartments.mjs --big-patient <file.ndjson> [observations, default 20000]
// writes Patient/big and its Observations as NDJSON, for `ambient-fhir import`.
import { performance } from 'node:perf_hooks';
import { getJson } from './timed-search.mjs';

import { writeFileSync } from 'node:fs';

if (process.argv[2] === '--big-patient') {
  const lines = [JSON.stringify({ resourceType: 'Patient', id: 'big', name: [{ family: 'Big' }] })];
  for (let i = 0; i < Number(process.argv[4] ?? 20000); i++) {
    const code = i % 2 ? '8302-2' : '29463-7';
    lines.push(
      JSON.stringify({
        resourceType: 'Observation',
        id: `bo${i}`,
        status: 'final',
        code: { coding: [{ system: 'http://loinc.org', code }] },
        subject: { reference: 'Patient/big' },
        effectiveDateTime: '2021-01-01',
      }),
    );
  }
  writeFileSync(process.argv[3], `${lines.join('\n')}\n`);
  process.exit(0);
}

const base = process.env.BASE_URL ?? 'http://127.0.0.1:8080';
const token = process.env.TOKEN;
if (!token) throw new Error('TOKEN is required (a bearer token with system/*.rs)');
const patients = Number(process.argv[2] ?? 20);

const local = (url) => url.replace(/^https?:\/\/[^/]+/, base);
const percentile = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))];
const timings = new Map();
async function timed(shape, url) {
  const t0 = performance.now();
  const bundle = await getJson(url, token);
  const ms = performance.now() - t0;
  if (!timings.has(shape)) timings.set(shape, []);
  timings.get(shape).push(ms);
  return bundle;
}

if (process.argv[2] === '--walk') {
  let url = `${base}/fhir/${process.argv[3]}`;
  const times = [];
  let matches = 0;
  while (url) {
    const t0 = performance.now();
    const page = await getJson(url, token);
    times.push(performance.now() - t0);
    matches += (page.entry ?? []).filter((e) => e.search?.mode === 'match').length;
    url = page.link?.find((l) => l.relation === 'next')?.url;
    url = url && local(url);
  }
  const mean = (values) => (values.reduce((a, b) => a + b, 0) / values.length).toFixed(1);
  const sorted = [...times].sort((a, b) => a - b);
  console.log(
    `${process.argv[3]}: ${matches} matches, ${times.length} pages, p50 ${percentile(sorted, 0.5).toFixed(1)} ms, ` +
      `first 10 pages ${mean(times.slice(0, 10))} ms, last 10 ${mean(times.slice(-10))} ms, ` +
      `${(times.reduce((a, b) => a + b, 0) / 1000).toFixed(1)} s in all`,
  );
  process.exit(0);
}

const list = await getJson(`${base}/fhir/Patient?_count=${patients}&_elements=id`, token);
let resources = 0;
let pages = 0;
for (const { resource } of list.entry ?? []) {
  if (resource.resourceType !== 'Patient') continue;
  const id = resource.id;
  let url = `${base}/fhir/Patient/${id}/$everything?_count=100`;
  const seen = new Set();
  while (url) {
    const page = await timed('$everything?_count=100 (a page)', url);
    pages++;
    for (const e of page.entry ?? []) {
      if (e.search?.mode !== 'match') continue;
      const key = `${e.resource.resourceType}/${e.resource.id}`;
      if (seen.has(key)) throw new Error(`${key} came twice in the walk of Patient/${id}`);
      seen.add(key);
    }
    url = page.link?.find((l) => l.relation === 'next')?.url;
    url = url && local(url);
  }
  resources += seen.size;
  // The plain search with the same answer, for comparison.
  await timed('Observation?subject=Patient/{id} (plain search)', `${base}/fhir/Observation?subject=Patient/${id}`);
  await timed('Patient/{id}/Observation', `${base}/fhir/Patient/${id}/Observation`);
  await timed('Patient/{id}/*', `${base}/fhir/Patient/${id}/*`);
  await timed(
    'Patient/{id}/Observation?category=vital-signs&_sort=-date',
    `${base}/fhir/Patient/${id}/Observation?category=vital-signs&_sort=-date`,
  );
}
console.log(`${list.entry?.length ?? 0} patients, ${resources} resources walked in ${pages} $everything pages`);
for (const [shape, values] of timings) {
  values.sort((a, b) => a - b);
  console.log(
    `${shape.padEnd(60)} n=${String(values.length).padStart(4)} p50 ${percentile(values, 0.5).toFixed(1).padStart(6)} ms  p99 ${percentile(values, 0.99).toFixed(1).padStart(6)} ms`,
  );
}
