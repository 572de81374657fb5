// The soak's writers and its checks, shared by bench/soak.mjs and the power-cut suite
// (test/power-cut.int.test.ts): clients that create, update and send transaction Bundles with urn:uuid
// references, a ledger of what the server acknowledged and what was in flight, and the checks run after
// a crash (every acknowledged write reads back exactly, nothing in flight is half there, history 1..n,
// the index counts what is stored). Types: write-ledger.d.mts.
import { randomUUID } from 'node:crypto';

const FHIR_JSON = 'application/fhir+json';

/** Everything the clients were told was written, and what was in flight. */
export class Ledger {
  constructor(system) {
    this.system = system;
    /** `Type/id` → the last acknowledged body (parsed), per resource. */
    this.acked = new Map();
    /** Writes sent but not answered when the server died: { kind, ... } */
    this.inFlight = [];
    this.patients = 0;
  }
  ack(resource) {
    if (resource.resourceType === 'Patient' && resource.meta?.versionId === '1') this.patients++;
    this.acked.set(`${resource.resourceType}/${resource.id}`, resource);
  }
}

export function patientBody(ledger, client, seq, extra = {}) {
  return {
    resourceType: 'Patient',
    identifier: [{ system: ledger.system, value: `c${client}-${seq}` }],
    active: true,
    name: [{ family: `Soak${client}`, given: [`G${seq}`] }],
    gender: ['male', 'female', 'other', 'unknown'][seq % 4],
    birthDate: `19${String(10 + (seq % 89)).padStart(2, '0')}-0${1 + (seq % 9)}-1${seq % 9}`,
    ...extra,
  };
}

export function observationBody(ledger, client, seq, subject) {
  return {
    resourceType: 'Observation',
    identifier: [{ system: ledger.system, value: `c${client}-${seq}` }],
    status: 'final',
    code: { coding: [{ system: 'http://loinc.org', code: '8867-4', display: 'Heart rate' }] },
    subject: { reference: subject },
    effectiveDateTime: new Date(Date.UTC(2020, 0, 1) + seq * 60_000).toISOString(),
    valueQuantity: { value: 50 + (seq % 100), unit: 'beats/minute', system: 'http://unitsofmeasure.org', code: '/min' },
  };
}

/**
 * One client: a loop of weighted operations until `until()` says stop. Only updates its own resources.
 * `random` (default Math.random) draws the operations, so a seeded one repeats a workload; `beforeWrite`
 * is called just before each write is sent.
 */
export async function writeClient(n, ctx) {
  const { url, headers, ledger, stats, until, mix, random = Math.random, beforeWrite } = ctx;
  const own = []; // keys of this client's Patients (it alone updates them, so its last ack is the truth)
  let seq = 0;
  /** One request; the parsed body when the status is the expected one, else undefined (counted as an error). */
  const call = async (op, method, path, body, expected) => {
    const started = performance.now();
    if (method !== 'GET') beforeWrite?.();
    let res;
    try {
      res = await fetch(`${url}${path}`, {
        method,
        headers: body ? { ...headers, 'content-type': FHIR_JSON } : headers,
        body: body ? JSON.stringify(body) : undefined,
      });
    } catch (error) {
      if (!until()) stats.error(op, 'network', String(error.cause?.code ?? error.message));
      return undefined;
    }
    const text = await res.text().catch(() => '');
    stats.record(op, performance.now() - started);
    if (!expected.includes(res.status)) {
      stats.error(op, res.status, text.slice(0, 300));
      return undefined;
    }
    return text ? JSON.parse(text) : {};
  };
  /** A write stays in flight (outcome unknown) unless it is acknowledged. */
  const settle = (flight, acknowledged) => {
    if (acknowledged) ledger.inFlight.splice(ledger.inFlight.indexOf(flight), 1);
  };
  while (!until()) {
    seq++;
    const roll = random() * 100;
    if (roll < mix.create) {
      const sent = patientBody(ledger, n, seq);
      const flight = { kind: 'create', type: 'Patient', identifier: `c${n}-${seq}`, sent };
      ledger.inFlight.push(flight);
      const stored = await call('create', 'POST', '/fhir/Patient', sent, [201]);
      settle(flight, stored);
      if (stored) {
        ledger.ack(stored);
        own.push(`Patient/${stored.id}`);
      }
    } else if (roll < mix.create + mix.update && own.length > 0) {
      const key = own[Math.floor(random() * own.length)];
      const { meta: _meta, ...current } = ledger.acked.get(key);
      const sent = {
        ...current,
        active: !current.active,
        name: [{ family: `Soak${n}`, given: [`G${seq}`, 'updated'] }],
      };
      const before = ledger.acked.get(key);
      const flight = { kind: 'update', key, before, sent };
      ledger.inFlight.push(flight);
      const stored = await call('update', 'PUT', `/fhir/${key}`, sent, [200]);
      settle(flight, stored);
      if (stored) ledger.ack(stored);
    } else if (roll < mix.create + mix.update + mix.transaction) {
      const patientUrl = `urn:uuid:${randomUUID()}`;
      const entries = [
        { fullUrl: patientUrl, resource: patientBody(ledger, n, seq), request: { method: 'POST', url: 'Patient' } },
        {
          resource: observationBody(ledger, n, seq * 1000 + 1, patientUrl),
          request: { method: 'POST', url: 'Observation' },
        },
        {
          resource: observationBody(ledger, n, seq * 1000 + 2, patientUrl),
          request: { method: 'POST', url: 'Observation' },
        },
      ];
      const identifiers = entries.map((e) => e.resource.identifier[0].value);
      const flight = { kind: 'transaction', identifiers, types: ['Patient', 'Observation', 'Observation'] };
      ledger.inFlight.push(flight);
      const response = await call(
        'transaction',
        'POST',
        '/fhir',
        { resourceType: 'Bundle', type: 'transaction', entry: entries },
        [200],
      );
      settle(flight, response);
      if (response) {
        // The response names each new resource by its location; the acknowledged content is read back once
        // (a transaction-response carries no bodies by default).
        for (const entry of response.entry ?? []) {
          const location = entry.response?.location ?? '';
          const match = /(?:^|\/)([A-Z][A-Za-z]+)\/([A-Za-z0-9\-.]{1,64})\/_history\/(\d+)/.exec(location);
          if (!match) {
            stats.error('transaction', 'no-location', JSON.stringify(entry).slice(0, 200));
            continue;
          }
          const resource =
            entry.resource ?? (await call('read', 'GET', `/fhir/${match[1]}/${match[2]}`, undefined, [200]));
          if (resource) {
            ledger.ack(resource);
            if (match[1] === 'Patient') own.push(`Patient/${match[2]}`);
          }
        }
      }
    } else if (roll < mix.create + mix.update + mix.transaction + mix.search) {
      const kind = seq % 4;
      const path =
        kind === 0
          ? `/fhir/Patient?family=Soak${n}&_count=10`
          : kind === 1
            ? `/fhir/Patient?identifier=${encodeURIComponent(`${ledger.system}|c${n}-${seq - 1}`)}`
            : kind === 2
              ? `/fhir/Observation?code=http://loinc.org|8867-4&value-quantity=gt100&_count=10`
              : `/fhir/Patient?birthdate=ge1950&gender=female&_sort=-_lastUpdated&_count=20`;
      const bundle = await call('search', 'GET', path, undefined, [200]);
      if (bundle && bundle.resourceType !== 'Bundle')
        stats.error('search', 'not-a-bundle', JSON.stringify(bundle).slice(0, 200));
    } else if (own.length > 0) {
      const key = own[Math.floor(random() * own.length)];
      await call('read', 'GET', `/fhir/${key}`, undefined, [200]);
    }
  }
}

/** Compares two resources as JSON values (key order aside). */
export function sameJson(a, b) {
  const canonical = (v) =>
    Array.isArray(v)
      ? v.map(canonical)
      : v && typeof v === 'object'
        ? Object.fromEntries(
            Object.keys(v)
              .sort()
              .map((k) => [k, canonical(v[k])]),
          )
        : v;
  return JSON.stringify(canonical(a)) === JSON.stringify(canonical(b));
}

export const withoutMeta = (r) => {
  const { id: _id, meta: _meta, ...rest } = r;
  return rest;
};

export async function get(url, headers, path) {
  const res = await fetch(`${url}${path}`, { headers });
  return { status: res.status, body: res.status === 200 ? await res.json() : await res.text() };
}

/** Reads back every acknowledged write, with a few readers in parallel. Returns the problems. */
export async function verifyAcked(url, headers, ledger) {
  const problems = [];
  const keys = [...ledger.acked.keys()];
  let next = 0;
  const reader = async () => {
    while (next < keys.length) {
      const key = keys[next++];
      const expected = ledger.acked.get(key);
      const { status, body } = await get(url, headers, `/fhir/${key}`);
      if (status !== 200) problems.push(`${key}: acknowledged, read answers ${status}`);
      else if (!sameJson(body, expected)) {
        // An update in flight at a crash may have committed after the acknowledged version.
        const flight = ledger.inFlight.find((f) => f.kind === 'update' && f.key === key);
        const newer =
          flight &&
          Number(body.meta.versionId) === Number(expected.meta.versionId) + 1 &&
          sameJson(withoutMeta(body), withoutMeta(flight.sent));
        if (!newer)
          problems.push(
            `${key}: reads back as version ${body.meta?.versionId}, acknowledged ${expected.meta?.versionId} differs`,
          );
      }
    }
  };
  await Promise.all(Array.from({ length: 8 }, reader));
  return problems;
}

/** Searches by identifier: the resources of `type` carrying `system|value`. */
export async function byIdentifier(url, headers, system, type, value) {
  const { status, body } = await get(
    url,
    headers,
    `/fhir/${type}?identifier=${encodeURIComponent(`${system}|${value}`)}`,
  );
  if (status !== 200) throw new Error(`search ${type} ${value}: ${status} ${String(body).slice(0, 200)}`);
  return (body.entry ?? []).map((e) => e.resource);
}

export async function countByIdentifierSystem(url, headers, system, type) {
  const { status, body } = await get(
    url,
    headers,
    `/fhir/${type}?identifier=${encodeURIComponent(`${system}|`)}&_summary=count&_total=accurate`,
  );
  return status === 200 ? body.total : `HTTP ${status}`;
}

/** Writes in flight at the kill: absent or whole; a transaction all or nothing. */
export async function verifyInFlight(url, headers, ledger) {
  const problems = [];
  const outcome = {
    creates: { committed: 0, absent: 0 },
    updates: { old: 0, new: 0 },
    transactions: { committed: 0, absent: 0 },
  };
  for (const flight of ledger.inFlight) {
    if (flight.kind === 'create') {
      const found = await byIdentifier(url, headers, ledger.system, 'Patient', flight.identifier);
      if (found.length === 0) outcome.creates.absent++;
      else if (found.length === 1 && sameJson(withoutMeta(found[0]), flight.sent)) {
        outcome.creates.committed++;
        ledger.patients++;
      } else problems.push(`create in flight ${flight.identifier}: ${found.length} resources, not the one sent`);
    } else if (flight.kind === 'update') {
      const { status, body } = await get(url, headers, `/fhir/${flight.key}`);
      if (status !== 200) problems.push(`update in flight ${flight.key}: read answers ${status}`);
      else if (sameJson(body, flight.before)) outcome.updates.old++;
      else if (
        Number(body.meta.versionId) === Number(flight.before.meta.versionId) + 1 &&
        sameJson(withoutMeta(body), withoutMeta(flight.sent))
      )
        outcome.updates.new++;
      else
        problems.push(
          `update in flight ${flight.key}: neither the old version nor the new one (version ${body.meta?.versionId})`,
        );
    } else {
      const found = await Promise.all(
        flight.identifiers.map((value, i) => byIdentifier(url, headers, ledger.system, flight.types[i], value)),
      );
      const counts = found.map((f) => f.length);
      if (counts.every((c) => c === 0)) outcome.transactions.absent++;
      else if (counts.every((c) => c === 1)) {
        outcome.transactions.committed++;
        ledger.patients++;
        const patientId = found[0][0].id;
        for (const observation of [found[1][0], found[2][0]]) {
          if (observation.subject?.reference !== `Patient/${patientId}`)
            problems.push(
              `transaction in flight ${flight.identifiers[0]}: a reference left unresolved (${observation.subject?.reference})`,
            );
        }
      } else
        problems.push(
          `transaction in flight ${flight.identifiers[0]}: half-written (${counts.join('/')} of its entries exist)`,
        );
    }
  }
  return { problems, outcome };
}

/** Every version in the history of a sample of acknowledged resources reads back (no torn version). */
export async function verifyHistory(url, headers, ledger, sample = 200) {
  const problems = [];
  const keys = [...ledger.acked.keys()].filter((k) => k.startsWith('Patient/')).slice(0, sample);
  for (const key of keys) {
    const { status, body } = await get(url, headers, `/fhir/${key}/_history`);
    if (status !== 200) {
      problems.push(`${key}/_history: ${status}`);
      continue;
    }
    const versions = (body.entry ?? []).map((e) => Number(e.resource?.meta?.versionId)).sort((a, b) => a - b);
    if (versions.some((v, i) => v !== i + 1))
      problems.push(`${key}: history versions ${versions.join(',')} are not 1..n`);
  }
  return problems;
}
