// Compartment search and Patient $everything against a running server (docs/search.md "Compartments"):
// per patient of the database, a walk of `$everything` with `_count=100` (every page timed), and three
// compartment searches. Usage: BASE_URL=http://127.0.0.1:8080 TOKEN=<bearer> node bench/compartments.mjs
// [patients, default 20]. Prints p50/p99 per shape in ms, and the resources and pages walked.
import { performance } from 'node:perf_hooks';
import { getJson } from './timed-search.mjs';

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
