// The import command's loader over real fixtures, on both databases: Synthea transaction Bundles
// (urn:uuid references) and bulk NDJSON (conditional references), through the API's write path.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMINISTRATOR } from '../auth/administrator.js';
import { loadConfig } from '../config.js';
import { loadR4Definitions } from '../definitions/registry.js';
import { createFhirServices } from '../services.js';
import type { FhirServices } from '../fhir/services.js';
import { migrate } from '../storage/migrate.js';
import { openDatabase } from '../storage/open-database.js';
import type { SqlDatabase } from '../storage/sql/database.js';
import { BACKENDS, testDatabase } from '../../test/support/databases.js';
import type { TestDatabase } from '../../test/support/databases.js';
import { fixturesDir } from '../../test/support/fixtures.js';
import { FULL } from '../../test/support/full-tests.js';
import { Importer } from './importer.js';
import { findSourceFiles, loadOrder } from './sources.js';
import { ValidationPool } from './validation-pool.js';

const NDJSON = join(fixturesDir(), 'synthea-bulk-ndjson', '10-patients');
const BUNDLES = join(fixturesDir(), 'synthea-r4-bundles');

describe('findSourceFiles', () => {
  it('orders referenced types first and skips the bulk-export log', () => {
    const files = findSourceFiles([NDJSON]).map((f) => f.path.split('/').pop());
    expect(files.slice(0, 5)).toEqual([
      'Organization.000.ndjson.gz',
      'Location.000.ndjson.gz',
      'Practitioner.000.ndjson.gz',
      'PractitionerRole.000.ndjson.gz',
      'Patient.000.ndjson.gz',
    ]);
    expect(files).not.toContain('log.ndjson.gz');
    expect(files).toHaveLength(13);
    expect(loadOrder('practitionerInformation1559319163815.json.gz')).toBe(0);
  });
});

describe.each(BACKENDS)('Importer on %s', (backend) => {
  let database: TestDatabase;
  let db: SqlDatabase;
  let services: FhirServices;
  beforeAll(async () => {
    database = await testDatabase(backend);
    db = openDatabase(database.url);
    await migrate(db);
    services = createFhirServices(loadConfig({ DATABASE_URL: database.url }), db, loadR4Definitions());
  });
  afterAll(async () => {
    await db.close();
    await database.dispose();
  });

  const search = async (type: string, query: string) => {
    const response = await services.search.search(
      { services, principal: ADMINISTRATOR },
      type,
      [...new URLSearchParams(query)],
      {
        strict: true,
      },
    );
    return JSON.parse(response.body as string) as { total?: number; entry?: { resource: Record<string, any> }[] };
  };

  /** Services whose validate() (the writer's) counts the calls made inside a write transaction and before. */
  const countingValidations = () => {
    let inTransaction = false;
    const validated = { ahead: 0, inside: 0 };
    const store = Object.create(services.store, {
      transaction: {
        value: async (fn: Parameters<FhirServices['store']['transaction']>[0]) => {
          inTransaction = true;
          try {
            return await services.store.transaction(fn);
          } finally {
            inTransaction = false;
          }
        },
      },
    }) as FhirServices['store'];
    const counting: FhirServices = {
      ...services,
      store,
      validate: (resource) => {
        validated[inTransaction ? 'inside' : 'ahead']++;
        return services.validate(resource);
      },
    };
    return { counting, validated };
  };

  // The whole export on SQLite; on PostgreSQL the types Encounter needs (the rest in test:full).
  const wholeExport = backend === 'sqlite' || FULL;

  it('loads the 10-patient bulk export, resolving its conditional references', async () => {
    const files = findSourceFiles([NDJSON]).filter(
      (f) => wholeExport || /\/(Organization|Location|Practitioner|Patient|Encounter)\./.test(f.path),
    );
    const summary = await new Importer(services).importFiles(files);
    expect(summary.failures).toEqual([]);
    // Counts from the fixture's README: 13 + 1215 + 1745 + 2056 + 1215 + 555 + 161 + 43 * 3 + 44 + 11 + 16.
    expect(summary.resources).toBe(wholeExport ? 7160 : 43 + 44 + 43 + 13 + 1215);
    const encounters = await search('Encounter', '_count=5');
    for (const { resource } of encounters.entry ?? []) {
      for (const participant of resource.participant ?? []) {
        expect(participant.individual.reference).toMatch(/^Practitioner\/[^?]+$/);
      }
      expect(resource.serviceProvider.reference).toMatch(/^Organization\/[^?]+$/);
    }
    // Loading again is an upsert (ids kept): nothing new appears.
    const again = await new Importer(services).importFiles(findSourceFiles([join(NDJSON, 'Patient.000.ndjson.gz')]));
    expect(again.resources).toBe(13);
    expect((await search('Patient', '_total=accurate&_count=0')).total).toBe(13);
  });

  it('loads Synthea transaction Bundles with their urn:uuid references resolved', async () => {
    const files = findSourceFiles([BUNDLES]).slice(0, 3);
    const summary = await new Importer(services).importFiles(files);
    expect(summary.failures).toEqual([]);
    expect(summary.resources).toBeGreaterThan(500);
    const patients = await search('Patient', '_tag=https://smarthealthit.org/tags|synthea-5-2019&_count=10');
    expect(patients.entry?.length).toBeGreaterThanOrEqual(2);
    const patientId = patients.entry![0].resource.id;
    const encounters = await search('Encounter', `patient=Patient/${patientId}&_count=1`);
    expect(encounters.entry?.[0].resource.subject.reference).toBe(`Patient/${patientId}`);
  });

  it('reports failures by file and line and keeps the good lines', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ambient-import-'));
    const file = join(dir, 'Basic.ndjson');
    writeFileSync(
      file,
      [
        JSON.stringify({ resourceType: 'Basic', id: 'imp-ok-1', code: { text: 'a' } }),
        '{ not json',
        JSON.stringify({ resourceType: 'Basic', id: 'imp-bad' }),
        JSON.stringify({ resourceType: 'Basic', id: 'imp-ok-2', code: { text: 'b' } }),
      ].join('\n'),
    );
    const summary = await new Importer(services).importFiles(findSourceFiles([file]));
    expect(summary.resources).toBe(2);
    expect(summary.failures.map((f) => [f.line, f.reason.slice(0, 8)])).toEqual([
      [2, 'not JSON'],
      [3, '401 Unau'],
    ]);
    expect(summary.failures[1].reason).toContain('Basic.code');
  });

  it('with several transactions in flight, loads an NDJSON file as one at a time would', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ambient-import-'));
    const file = join(dir, 'Basic.ndjson');
    const basic = (id: string, text: string, extra: Record<string, unknown> = {}) =>
      JSON.stringify({ resourceType: 'Basic', id, code: { text }, ...extra });
    writeFileSync(
      file,
      [
        basic('flight-1', 'first'),
        basic('flight-2', 'a'),
        basic('flight-3', 'a'),
        basic('flight-4', 'a'),
        JSON.stringify({ resourceType: 'Basic', id: 'flight-bad' }), // line 5: fails its chunk
        basic('flight-6', 'a', { subject: { reference: 'Basic/flight-3' } }),
        basic('flight-7', 'a'),
        basic('flight-8', 'a'),
        basic('flight-1', 'last'), // line 9: the same resource again, in a later chunk
        basic('flight-10', 'a'),
      ].join('\n'),
    );
    // Chunks of two lines, three in flight: lines 1-2, 3-4 and 5-6 run together.
    const summary = await new Importer(services, { chunkSize: 2, concurrency: 3 }).importFiles(findSourceFiles([file]));
    expect(summary.failures.map((f) => f.line)).toEqual([5]);
    expect(summary.resources).toBe(9);
    const first = await search('Basic', '_id=flight-1');
    expect(first.entry?.[0].resource.code.text).toBe('last');
    expect(first.entry?.[0].resource.meta.versionId).toBe('2');
    const all = await search(
      'Basic',
      '_id=flight-1,flight-2,flight-3,flight-4,flight-6,flight-7,flight-8,flight-10&_count=20',
    );
    expect(all.entry).toHaveLength(8);
    const referring = await search('Basic', 'subject=Basic/flight-3');
    expect(referring.entry?.map((e) => e.resource.id)).toEqual(['flight-6']);
  });

  it('with validation workers, still refuses invalid resources whose references it rewrote, and loads the rest', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ambient-import-'));
    const conditional = { reference: 'Basic?identifier=urn:test|pool-target' };
    writeFileSync(
      join(dir, '1-Basic.ndjson'),
      [
        JSON.stringify({
          resourceType: 'Basic',
          id: 'pool-target',
          identifier: [{ system: 'urn:test', value: 'pool-target' }],
          code: { text: 't' },
        }),
      ].join('\n'),
    );
    writeFileSync(
      join(dir, '2-Basic.ndjson'),
      [
        JSON.stringify({ resourceType: 'Basic', id: 'pool-ok', code: { text: 'ok' }, subject: conditional }),
        JSON.stringify({ resourceType: 'Basic', id: 'pool-bad', subject: conditional }), // no code: invalid
        JSON.stringify({ resourceType: 'Basic', id: 'pool-plain', code: { text: 'plain' } }),
      ].join('\n'),
    );
    const bundle = {
      resourceType: 'Bundle',
      type: 'transaction',
      entry: [
        {
          fullUrl: 'urn:uuid:1',
          resource: { resourceType: 'Basic', code: { text: 'b1' } },
          request: { method: 'POST', url: 'Basic' },
        },
        {
          fullUrl: 'urn:uuid:2',
          resource: { resourceType: 'Basic', subject: { reference: 'urn:uuid:1' } },
          request: { method: 'POST', url: 'Basic' },
        },
      ],
    };
    writeFileSync(join(dir, '3-bad-bundle.json'), JSON.stringify(bundle));
    const pool = new ValidationPool(1);
    try {
      const summary = await new Importer(services, { validationPool: pool }).importFiles(findSourceFiles([dir]));
      expect(summary.resources).toBe(3);
      expect(summary.failures.map((f) => [f.file.split('/').pop(), f.line])).toEqual([
        ['2-Basic.ndjson', 2],
        ['3-bad-bundle.json', undefined],
      ]);
      expect(summary.failures.every((f) => f.reason.includes('Basic.code'))).toBe(true);
    } finally {
      await pool.close();
    }
    const ok = await search('Basic', '_id=pool-ok');
    expect(ok.entry?.[0].resource.subject.reference).toBe('Basic/pool-target');
    expect((await search('Basic', '_id=pool-bad')).entry ?? []).toEqual([]);
  });

  it('validates a transaction Bundle ahead, as the transaction will write it: nothing again inside the transaction', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ambient-import-'));
    const bundle = {
      resourceType: 'Bundle',
      type: 'transaction',
      entry: [
        {
          fullUrl: 'urn:uuid:ahead-patient',
          resource: { resourceType: 'Patient', name: [{ family: 'Ahead' }] },
          request: { method: 'POST', url: 'Patient' },
        },
        {
          fullUrl: 'urn:uuid:ahead-obs',
          resource: {
            resourceType: 'Observation',
            status: 'final',
            code: { text: 'ahead' },
            subject: { reference: 'urn:uuid:ahead-patient' },
          },
          request: { method: 'POST', url: 'Observation' },
        },
        {
          resource: {
            resourceType: 'Basic',
            id: 'ahead-basic',
            code: { text: 'ahead' },
            subject: { reference: 'urn:uuid:ahead-patient' },
          },
          request: { method: 'PUT', url: 'Basic/ahead-basic' },
        },
      ],
    };
    writeFileSync(join(dir, 'ahead.json'), JSON.stringify(bundle));
    const { counting, validated } = countingValidations();
    const pool = new ValidationPool(1);
    try {
      const summary = await new Importer(counting, { validationPool: pool }).importFiles(findSourceFiles([dir]));
      expect(summary.failures).toEqual([]);
      expect(summary.resources).toBe(3);
    } finally {
      await pool.close();
    }
    // The worker validated each entry ahead, as the very text the transaction then wrote: the writer none.
    expect(validated).toEqual({ ahead: 0, inside: 0 });
    const patient = (await search('Patient', 'family=Ahead')).entry![0].resource;
    const observation = (await search('Observation', 'code:text=ahead')).entry![0].resource;
    expect(observation.subject.reference).toBe(`Patient/${patient.id as string}`);
    expect((await search('Basic', '_id=ahead-basic')).entry![0].resource.subject.reference).toBe(
      `Patient/${patient.id as string}`,
    );
  });

  it('validates NDJSON lines with conditional references ahead too, as their transactions rewrite them', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ambient-import-'));
    const target = { resourceType: 'Basic', id: 'ahead-target', identifier: [{ system: 'urn:ahead', value: 't' }] };
    writeFileSync(join(dir, '1-Basic.ndjson'), JSON.stringify({ ...target, code: { text: 't' } }));
    const referring = (id: string) => ({
      resourceType: 'Basic',
      id,
      code: { text: id },
      subject: { reference: 'Basic?identifier=urn:ahead|t' },
    });
    writeFileSync(
      join(dir, '2-Basic.ndjson'),
      [referring('ahead-1'), referring('ahead-2')].map((r) => JSON.stringify(r)).join('\n'),
    );
    const { counting, validated } = countingValidations();
    const pool = new ValidationPool(1);
    try {
      const importer = new Importer(counting, { validationPool: pool, database: db });
      const summary = await importer.importFiles(findSourceFiles([dir]));
      expect(summary.failures).toEqual([]);
      expect(summary.resources).toBe(3);
    } finally {
      await pool.close();
    }
    expect(validated).toEqual({ ahead: 0, inside: 0 });
    for (const id of ['ahead-1', 'ahead-2'])
      expect((await search('Basic', `_id=${id}`)).entry![0].resource.subject.reference).toBe('Basic/ahead-target');
  });

  it('reports a transaction Bundle nested deeper than JSON may be walked, and loads the files after it', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ambient-import-'));
    const deep = `${'{"a":'.repeat(100_000)}1${'}'.repeat(100_000)}`;
    writeFileSync(
      join(dir, '1-deep.json'),
      `{"resourceType":"Bundle","type":"transaction","entry":[{"resource":{"resourceType":"Basic","code":{"text":"deep"},"extension":[{"url":"urn:deep","valueString":"x"}],"modifierExtension":${deep}},"request":{"method":"POST","url":"Basic"}}]}`,
    );
    writeFileSync(
      join(dir, '2-Basic.ndjson'),
      JSON.stringify({ resourceType: 'Basic', id: 'after-deep', code: { text: 'after' } }),
    );
    const pool = new ValidationPool(1);
    try {
      const summary = await new Importer(services, { validationPool: pool }).importFiles(findSourceFiles([dir]));
      expect(summary.failures.map((f) => f.file.split('/').pop())).toEqual(['1-deep.json']);
      expect(summary.resources).toBe(1);
    } finally {
      await pool.close();
    }
    expect((await search('Basic', '_id=after-deep')).entry).toHaveLength(1);
  });

  it('with several transactions in flight, loads transaction Bundles as one at a time would', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ambient-import-'));
    const tx = (...entry: unknown[]) => JSON.stringify({ resourceType: 'Bundle', type: 'transaction', entry });
    const post = (resource: Record<string, unknown>, ifNoneExist?: string) => ({
      fullUrl: `urn:uuid:${Math.random()}`,
      resource,
      request: { method: 'POST', url: resource.resourceType, ...(ifNoneExist ? { ifNoneExist } : {}) },
    });
    const put = (resource: Record<string, unknown>) => ({
      resource,
      request: { method: 'PUT', url: `${resource.resourceType}/${resource.id}` },
    });
    const org = { resourceType: 'Organization', identifier: [{ system: 'urn:bundles', value: 'org-1' }], name: 'One' };
    const basic = (id: string, text: string, extra: Record<string, unknown> = {}) => ({
      resourceType: 'Basic',
      id,
      code: { text },
      ...extra,
    });
    const files = [
      tx(post(org)),
      // Refers to what the first creates: beside it, not there yet; it runs again after it.
      tx(put(basic('bundles-ref', 'r', { author: { reference: 'Organization?identifier=urn:bundles|org-1' } }))),
      tx(put(basic('bundles-same', 'first'))),
      tx(put({ resourceType: 'Basic', id: 'bundles-bad' })), // invalid: fails, reported once
      tx(put(basic('bundles-same', 'last'))), // the same resource: after the one before
      // A conditional create runs alone, after the others: it finds the first Bundle's Organization.
      tx(post(org, 'identifier=urn:bundles|org-1')),
    ];
    files.forEach((text, i) => writeFileSync(join(dir, `bundle-${i}.json`), text));
    const summary = await new Importer(services, { concurrency: 3 }).importFiles(findSourceFiles([dir]));
    expect(summary.failures.map((f) => f.file.split('/').pop())).toEqual(['bundle-3.json']);
    expect(summary.resources).toBe(5); // the conditional create's match counts, as a 200
    const ref = await search('Basic', '_id=bundles-ref');
    expect(ref.entry?.[0].resource.author.reference).toMatch(/^Organization\/[^?]+$/);
    const same = await search('Basic', '_id=bundles-same');
    expect(same.entry?.[0].resource.code.text).toBe('last');
    expect(same.entry?.[0].resource.meta.versionId).toBe('2');
    expect((await search('Organization', 'identifier=urn:bundles|org-1')).entry).toHaveLength(1);
  });
});
