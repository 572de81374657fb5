// The Synthea part of `npm run bench`: how fast `import` loads the Synthea fixtures (through the API's
// write path), then p50/p99 of a fixed search mix over that data: the specification's searches, name, identifier,
// token, date, reference, chain, _has, include and sorted paging.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { timedImport } from './synthetic.mjs';
import { getJson, timeSearch } from './timed-search.mjs';

/** Loads the fixtures with the import command; answers resources, resources/s and the import's peak RSS. */
export async function importSynthea(bin, env, fixtures, quick) {
  const bundles = join(fixtures, 'synthea-r4-bundles');
  const ndjson = join(fixtures, 'synthea-bulk-ndjson', '10-patients');
  const paths = [ndjson, bundles].filter((p) => existsSync(p));
  if (quick) paths.splice(paths.indexOf(bundles), 1);
  return timedImport(bin, env, paths);
}

/** Runs each search of the mix `n` times with `concurrency` clients. */
export async function searchMix(baseUrl, token, { n = 200, concurrency = 8 } = {}) {
  const fhir = `${baseUrl}/fhir`;
  // Real values to search for, taken from the loaded data.
  const patient = (
    await getJson(`${fhir}/Patient?identifier:missing=false&_has:Encounter:patient:status=finished&_count=1`, token)
  ).entry[0].resource;
  const identifier = patient.identifier.find((i) => i.system && i.value);
  const prefix = patient.name[0].family.slice(0, 3);
  const mix = {
    'Patient?name (prefix)': `Patient?name=${encodeURIComponent(prefix)}`,
    'Patient?identifier': `Patient?identifier=${encodeURIComponent(`${identifier.system}|${identifier.value}`)}`,
    'Patient?gender&birthdate=ge': 'Patient?gender=female&birthdate=ge1980-01-01',
    'Observation?code (token)': `Observation?code=${encodeURIComponent('http://loinc.org|8302-2')}`,
    'Observation?code&date=ge': `Observation?code=${encodeURIComponent('http://loinc.org|8302-2')}&date=ge2019-01-01`,
    'Encounter?patient': `Encounter?patient=Patient/${patient.id}`,
    'Observation?subject:Patient.name (chain)': `Observation?subject:Patient.name=${encodeURIComponent(prefix)}&_count=10`,
    'Patient?_has:Observation (reverse chain)': `Patient?_has:Observation:patient:code=${encodeURIComponent('http://loinc.org|8302-2')}&_count=10`,
    'Encounter?patient&_include': `Encounter?patient=Patient/${patient.id}&_include=Encounter:patient`,
    'Observation?patient&_sort=-date (3 pages)': `Observation?patient=Patient/${patient.id}&_sort=-date&_count=20`,
  };
  const rows = [];
  for (const [name, query] of Object.entries(mix)) {
    // Sorted paging: three pages, following the next link.
    const { perSec, p50, p99 } = await timeSearch(baseUrl, token, query, {
      n,
      concurrency,
      pages: name.includes('pages') ? 3 : 1,
    });
    rows.push({ name, perSec, p50, p99 });
  }
  return rows;
}
