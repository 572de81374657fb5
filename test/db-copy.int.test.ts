// `ambient-fhir db copy --to <postgres-url>` as an operator moves to PostgreSQL: a database built through
// the API (resources with several versions and deletes, a Binary, accounts and a rotated signing key,
// a scribe record, a custom template, an export job), the stopped server, the real command as a process,
// then a server on the copy that answers every read, old version, history and search as the source does,
// takes the old tokens and the passwords, and numbers new rows after the copied ones. From SQLite and
// from PostgreSQL. The refusals: a non-empty target, a target that is no PostgreSQL URL or unreachable.
import { randomUUID } from 'node:crypto';
import { Readable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { assembleApp } from '../src/assemble.js';
import { AccountStore } from '../src/auth/accounts.js';
import { addSigningKey } from '../src/auth/signing-keys.js';
import { runCli } from '../src/cli/main.js';
import { createTemplateCommand } from '../src/cli/template.js';
import { loadConfig } from '../src/config.js';
import { targetRefusal } from '../src/storage/copy/copy-database.js';
import { COPIED_TABLES } from '../src/storage/copy/tables.js';
import { migrate } from '../src/storage/migrate.js';
import { openDatabase } from '../src/storage/open-database.js';
import { BulkClient } from './support/bulk-export-client.js';
import { cliProcess } from './support/cli-process.js';
import type { CliResult } from './support/cli-process.js';
import { BACKENDS, postgresTestDatabase, sqliteTestDatabase, testDatabase } from './support/databases.js';
import type { TestDatabase } from './support/databases.js';
import { fhirClient, linkOf, passwordToken, pathOf } from './support/fhir-client.js';
import type { Bundle, FhirClient, Reply } from './support/fhir-client.js';
import { scribeClient, TEMPLATES } from './support/scribe-client.js';
import { TEST_PUBLIC_URL } from './support/test-app.js';

const LOINC = 'http://loinc.org';

/** A server on `url` as `serve` assembles it. */
async function serverOn(url: string): Promise<FastifyInstance> {
  const app = await assembleApp(
    loadConfig({
      DATABASE_URL: url,
      AMBIENT_PUBLIC_URL: TEST_PUBLIC_URL,
      LOG_LEVEL: 'silent',
      AMBIENT_SCRIBE_POLL_MS: '20',
    }),
  );
  await app.ready();
  return app;
}

/** An answer as compared between the two servers: a Bundle without what each answer makes anew. */
function comparable(res: Reply): unknown {
  if (!String(res.headers['content-type']).includes('json')) return { status: res.statusCode, bytes: res.rawPayload };
  const body = res.json<Record<string, unknown>>();
  if (body.resourceType === 'Bundle') {
    delete body.id;
    delete body.meta;
  }
  return { status: res.statusCode, etag: res.headers.etag, body };
}

/** Every page of a search along its next links, as comparable answers. */
async function allPages(client: FhirClient, url: string): Promise<unknown[]> {
  const pages: unknown[] = [];
  for (let next: string | undefined = url; next !== undefined;) {
    const res = await client.get(pathOf(next));
    pages.push(comparable(res));
    next = res.statusCode === 200 ? linkOf(res.json<Bundle>(), 'next') : undefined;
  }
  return pages;
}

async function runTemplate(databaseUrl: string, args: string[]): Promise<{ id: number }> {
  let stdout = '';
  const io = {
    stdin: Readable.from([]),
    stdout: { write: (text: string) => (stdout += text) },
    stderr: { write: () => true },
    env: { DATABASE_URL: databaseUrl },
  };
  expect(await createTemplateCommand(io).run(args)).toBe(0);
  return JSON.parse(stdout) as { id: number };
}

describe.each(BACKENDS)('db copy from %s into an empty PostgreSQL database', (backend) => {
  const run = randomUUID().slice(0, 8);
  const family = `Copy${run}`;
  const alice = { username: `alice-${run}`, password: `pw-${randomUUID()}` };
  const bob = { username: `bob-${run}`, password: `pw-${randomUUID()}` };
  let sourceDb: TestDatabase;
  let targetDb: TestDatabase;
  let source: FastifyInstance | undefined;
  let target: FastifyInstance | undefined;
  let copied: CliResult;
  /** Issued before the copy: by the first signing key, by the rotated one, and one revoked. */
  let tokens: { first: string; rotated: string; revoked: string };
  const patients: string[] = [];
  const deleted: string[] = [];
  const observations: string[] = [];
  let binaryId: string;
  let scribeId: number;
  let templateId: number;
  let exportStatus: string;

  beforeAll(async () => {
    sourceDb = await testDatabase(backend);
    targetDb = await postgresTestDatabase();
    const app = await serverOn(sourceDb.url);
    const admin = openDatabase(sourceDb.url);
    const accounts = new AccountStore(admin);
    for (const who of [alice, bob]) {
      await accounts.create({ ...who, scopes: ['system/*.cruds', 'scribe.read', 'scribe.write'], rateLimit: null });
    }
    tokens = {
      first: await passwordToken(app, alice.username, alice.password),
      revoked: await passwordToken(app, bob.username, bob.password),
      rotated: '',
    };
    await accounts.revokeTokens(bob.username);
    await addSigningKey(admin);
    tokens.rotated = await passwordToken(app, alice.username, alice.password);
    const client = fhirClient(app, tokens.first);

    for (let i = 0; i < 24; i++) {
      const patient = {
        resourceType: 'Patient',
        name: [{ family, given: [`G${i}`] }],
        gender: i % 2 === 0 ? 'female' : 'male',
        birthDate: `19${50 + i}-0${1 + (i % 9)}-1${i % 10}`,
      };
      const res = await client.create(patient);
      expect(res.statusCode, res.body).toBe(201);
      const id = res.json<{ id: string }>().id;
      patients.push(id);
      // Several versions of some, deletes of others.
      if (i % 4 === 0) {
        for (const given of ['Second', 'Third']) {
          const put = await client.put(`/fhir/Patient/${id}`, { ...patient, id, name: [{ family, given: [given] }] });
          expect(put.statusCode, put.body).toBe(200);
        }
      }
      if (i % 5 === 3) {
        expect((await client.delete(`/fhir/Patient/${id}`)).statusCode).toBe(204);
        deleted.push(id);
      }
      const obs = await client.create({
        resourceType: 'Observation',
        status: 'final',
        code: { coding: [{ system: LOINC, code: i % 3 === 0 ? '8867-4' : '8310-5' }] },
        subject: { reference: `Patient/${id}` },
        effectiveDateTime: `2024-02-${String(1 + i).padStart(2, '0')}T10:00:00Z`,
        valueQuantity: { value: 36 + i / 10, unit: 'Cel', system: 'http://unitsofmeasure.org', code: 'Cel' },
      });
      expect(obs.statusCode, obs.body).toBe(201);
      observations.push(obs.json<{ id: string }>().id);
    }
    const binary = await client.request('POST', '/fhir/Binary', Buffer.from([0, 1, 2, 250, 251, 255]), {
      'content-type': 'application/octet-stream',
    });
    expect(binary.statusCode, binary.body).toBe(201);
    binaryId = binary.json<{ id: string }>().id;

    templateId = (
      await runTemplate(sourceDb.url, ['create', '--name', `Copied ${run}`, '--section', 'Summary: the visit'])
    ).id;
    const scribe = scribeClient(app, tokens.first);
    const submitted = await scribe.submit({
      transcripts: ['Doctor: How are you?\nPatient: Well.'],
      template_ids: [1, templateId],
    });
    expect(submitted.statusCode, submitted.body).toBe(202);
    scribeId = submitted.json<{ scribe_id: number }>().scribe_id;
    expect((await scribe.finished(scribeId)).status).toBe('COMPLETED');

    const bulk = new BulkClient(app, tokens.first);
    exportStatus = await bulk.start('/fhir/Patient/$export');
    await bulk.manifest(exportStatus);

    // The servers are stopped before the copy.
    await app.close();
    await admin.close();
    copied = await cliProcess(['db', 'copy', '--to', targetDb.url], { DATABASE_URL: sourceDb.url }, 120_000);
    source = await serverOn(sourceDb.url);
    target = await serverOn(targetDb.url);
  }, 180_000);

  afterAll(async () => {
    await source?.close();
    await target?.close();
    await sourceDb?.dispose();
    await targetDb?.dispose();
  });

  const both = () => [fhirClient(source!, tokens.first), fhirClient(target!, tokens.first)] as const;

  it('exits 0 with counts and checksums that agree for every table, progress on stderr', () => {
    expect(copied.code, copied.stderr).toBe(0);
    const lines = copied.stdout.split('\n');
    expect(lines[0]).toMatch(/^table +source rows +target rows +source checksum +target checksum$/);
    for (const { name } of COPIED_TABLES) {
      const row = lines.find((line) => line.startsWith(`${name} `));
      expect(row, name).toMatch(/^\S+ +(\d+) +\1 +([0-9a-f]{16}) +\2 +ok$/);
    }
    expect(lines.find((line) => line.startsWith('resource '))).toMatch(/^resource +(\d+) /);
    expect(copied.stdout).toMatch(
      /^Copied \d+ rows of \d+ tables \(\d+ resources\) in [0-9.]+ s \(\d+ resources\/s\); every count and checksum agrees\.$/m,
    );
    expect(copied.stdout).toMatch(
      /^Not copied: export_job \(Bulk Data export jobs: kick exports off again on the new database\)\.$/m,
    );
    const stderr = copied.stderr.split('\n');
    expect(stderr[0]).toMatch(/^database: (sqlite:\/|postgres:\/\/)/);
    expect(stderr).toContain('copying account: 2/2 rows');
    expect(stderr.some((line) => /^copying resource: (\d+)\/\1 rows$/.test(line))).toBe(true);
    expect(stderr.some((line) => /^verifying resource_history: (\d+)\/\1 rows$/.test(line))).toBe(true);
  });

  it('answers reads, old versions, history and searches exactly as the source does', async () => {
    const [onSource, onTarget] = both();
    const urls = [
      ...patients.flatMap((id) => [
        `/fhir/Patient/${id}`,
        `/fhir/Patient/${id}/_history/1`,
        `/fhir/Patient/${id}/_history`,
      ]),
      ...observations.map((id) => `/fhir/Observation/${id}`),
      `/fhir/Patient/${patients[0]}/_history/2`,
      `/fhir/Binary/${binaryId}?_format=json`,
    ];
    for (const url of urls) {
      const [a, b] = await Promise.all([onSource.get(url), onTarget.get(url)]);
      expect(comparable(b), url).toEqual(comparable(a));
    }
    for (const id of deleted) expect((await onTarget.get(`/fhir/Patient/${id}`)).statusCode).toBe(410);
    const searches = [
      `/fhir/Patient?family=${family}&_count=5`,
      `/fhir/Patient?family=${family}&gender=female&_sort=birthdate`,
      `/fhir/Patient?family=${family}&birthdate=ge1960-01-01&_sort=-birthdate&_count=4`,
      `/fhir/Observation?code=${LOINC}|8867-4&_include=Observation:subject&_total=accurate`,
      `/fhir/Observation?value-quantity=gt37&_sort=date&_count=6`,
      `/fhir/Observation?subject:Patient.family=${family}&date=ge2024-02-10&_count=7`,
      `/fhir/Patient?_has:Observation:subject:code=${LOINC}|8867-4&family=${family}`,
      `/fhir/Patient/_history?_count=10`,
      `/fhir/_history?_count=15`,
    ];
    for (const url of searches) {
      const [a, b] = await Promise.all([allPages(onSource, url), allPages(onTarget, url)]);
      expect(b, url).toEqual(a);
      expect(JSON.stringify(a), url).toContain('"entry"');
    }
    // A page link the source signed is followed on the copy (the cursor key came along).
    const page = await onSource.get(`/fhir/Patient?family=${family}&_count=3`);
    const next = pathOf(linkOf(page.json<Bundle>(), 'next')!);
    expect(comparable(await onTarget.get(next))).toEqual(comparable(await onSource.get(next)));
  });

  it('serves the Binary’s bytes', async () => {
    const [onSource, onTarget] = both();
    const [a, b] = await Promise.all([
      onSource.get(`/fhir/Binary/${binaryId}`),
      onTarget.get(`/fhir/Binary/${binaryId}`),
    ]);
    expect(b.statusCode).toBe(200);
    expect(b.rawPayload).toEqual(Buffer.from([0, 1, 2, 250, 251, 255]));
    expect(b.rawPayload).toEqual(a.rawPayload);
  });

  it('takes the tokens issued before the copy and the passwords, and refuses the revoked token', async () => {
    const probe = `/fhir/Patient/${patients[1]}`;
    for (const token of [tokens.first, tokens.rotated]) {
      expect((await fhirClient(target!, token).get(probe)).statusCode).toBe(200);
    }
    expect((await fhirClient(target!, tokens.revoked).get(probe)).statusCode).toBe(401);
    const fresh = await passwordToken(target!, alice.username, alice.password);
    expect((await fhirClient(target!, fresh).get(probe)).statusCode).toBe(200);
    const bobAgain = await passwordToken(target!, bob.username, bob.password);
    expect((await fhirClient(target!, bobAgain).get(probe)).statusCode).toBe(200);
  });

  it('has the scribe record and the custom template', async () => {
    const [onSource, onTarget] = [scribeClient(source!, tokens.first), scribeClient(target!, tokens.first)];
    const [a, b] = await Promise.all([onSource.get(scribeId), onTarget.get(scribeId)]);
    expect(b.statusCode).toBe(200);
    expect(b.json()).toEqual(a.json());
    expect(b.json().notes.map((n: { template_id: number }) => n.template_id)).toEqual([1, templateId]);
    const [templatesA, templatesB] = await Promise.all(both().map((c) => c.get(TEMPLATES)));
    expect(templatesB.json()).toEqual(templatesA.json());
    expect(templatesB.json().items.map((t: { name: string }) => t.name)).toContain(`Copied ${run}`);
  });

  it('does not copy export jobs', async () => {
    const [onSource, onTarget] = both();
    expect((await onSource.get(pathOf(exportStatus))).statusCode).toBe(200);
    expect((await onTarget.get(pathOf(exportStatus))).statusCode).toBe(404);
  });

  it('numbers new resources, versions and scribe records after the copied ones', async () => {
    const [onSource, onTarget] = both();
    const created = await onTarget.create({ resourceType: 'Patient', name: [{ family, given: ['After'] }] });
    expect(created.statusCode, created.body).toBe(201);
    const id = created.json<{ id: string }>().id;
    expect((await onTarget.get(`/fhir/Patient/${id}`)).json()).toMatchObject({ id, name: [{ given: ['After'] }] });
    expect((await onSource.get(`/fhir/Patient/${id}`)).statusCode).toBe(404);
    const updated = await onTarget.put(`/fhir/Patient/${patients[0]}`, {
      resourceType: 'Patient',
      id: patients[0],
      name: [{ family, given: ['Fourth'] }],
    });
    expect(updated.statusCode, updated.body).toBe(200);
    expect(updated.json().meta.versionId).toBe('4');
    const history = await onTarget.get(`/fhir/Patient/${patients[0]}/_history`);
    expect(history.json<Bundle>().entry!.map((e) => (e.resource!.meta as { versionId: string }).versionId)).toEqual([
      '4',
      '3',
      '2',
      '1',
    ]);
    const found = await onTarget.get(`/fhir/Patient?family=${family}&given=After`);
    expect(found.json<Bundle>().entry!.map((e) => e.resource!.id)).toEqual([id]);
    const scribe = scribeClient(target!, tokens.first);
    const submitted = await scribe.submit({ transcripts: ['Doctor: Hello.'], template_ids: [templateId] });
    expect(submitted.statusCode, submitted.body).toBe(202);
    expect(submitted.json().scribe_id).toBe(scribeId + 1);
    // Its note is filed as a new DocumentReference too.
    const note = await scribe.finished(scribeId + 1);
    expect(note.status).toBe('COMPLETED');
  });

  it('refuses to copy into it again (it is not empty), writing nothing', async () => {
    const targetAdmin = openDatabase(targetDb.url);
    try {
      const before = await targetAdmin.query('SELECT pk, version FROM resource ORDER BY pk');
      const again = await cliProcess(['db', 'copy', '--to', targetDb.url], { DATABASE_URL: sourceDb.url }, 60_000);
      expect(again.code).toBe(1);
      expect(again.stdout).toBe('');
      expect(again.stderr).toMatch(
        /^database: .*\nambient-fhir db: the database named by --to \(postgres:\/\/.*\) is not empty: resource, resource_history, .*account.* hold rows; db copy writes only into an empty database\n$/,
      );
      expect(await targetAdmin.query('SELECT pk, version FROM resource ORDER BY pk')).toEqual(before);
    } finally {
      await targetAdmin.close();
    }
  });
});

describe('db copy refuses', () => {
  async function inProcess(argv: string[], env: Record<string, string>): Promise<CliResult> {
    let stdout = '';
    let stderr = '';
    const io = {
      stdin: Readable.from([]),
      stdout: { write: (text: string) => (stdout += text) },
      stderr: { write: (text: string) => (stderr += text) },
      env,
    };
    return { code: await runCli(argv, io), stdout, stderr };
  }

  let sourceDb: TestDatabase;
  beforeAll(async () => {
    sourceDb = sqliteTestDatabase();
    const app = await serverOn(sourceDb.url);
    await app.close();
  });
  afterAll(async () => sourceDb?.dispose());

  it('a missing --to, or one that is not a PostgreSQL URL: wrong usage, exit 2', async () => {
    const env = { DATABASE_URL: sourceDb.url };
    const cases: [string[], string][] = [
      [['db', 'copy'], 'db copy needs --to <postgres-url>'],
      [['db', 'copy', '--to'], '--to needs a value'],
      [
        ['db', 'copy', '--to', 'sqlite:/tmp/x.db'],
        '--to must be a postgres:// or postgresql:// URL, got "sqlite:/tmp/x.db"',
      ],
      [
        ['db', 'copy', '--to', 'mysql://u:s3cret@h/db'],
        '--to must be a postgres:// or postgresql:// URL, got "mysql://u:***@h/db"',
      ],
      [['db', 'copy', 'postgres://h/db'], 'db copy takes no arguments but --to'],
      [['db', 'move'], 'Unknown verb "move"'],
    ];
    for (const [argv, message] of cases) {
      const result = await inProcess(argv, env);
      expect(result.code, argv.join(' ')).toBe(2);
      expect(result.stdout).toBe('');
      expect(result.stderr.split('\n')[0], argv.join(' ')).toContain(message);
      expect(result.stderr).toContain('Usage: ambient-fhir db');
      expect(result.stderr).not.toContain('s3cret');
    }
  });

  it('a row PostgreSQL cannot hold stops the copy with its reason, and nothing is kept', async () => {
    const broken = sqliteTestDatabase();
    const targetDb = await postgresTestDatabase();
    const db = openDatabase(broken.url);
    const target = openDatabase(targetDb.url);
    try {
      await migrate(db);
      // Copied before the bad row is reached.
      await db.execute(
        `INSERT INTO resource (type, id, version, last_updated, deleted, content) VALUES ('Patient', 'p', 1, 1, 0, '{}')`,
      );
      // SQLite takes a NUL in a text; PostgreSQL's text cannot hold one.
      await db.execute(
        `INSERT INTO auth_secret (name, secret, created_at) VALUES ('broken', ?, '2024-01-01T00:00:00.000Z')`,
        ['a\u0000b'],
      );
      await db.close();
      const result = await inProcess(['db', 'copy', '--to', targetDb.url], { DATABASE_URL: broken.url });
      expect(result.code).toBe(1);
      expect(result.stdout).toBe('');
      expect(result.stderr.trimEnd().split('\n').at(-1)).toMatch(
        /^ambient-fhir db: the copy stopped and nothing was kept in the target: invalid byte sequence for encoding "UTF8": 0x00$/,
      );
      expect(await targetRefusal(target)).toBeUndefined();
      expect(await target.query('SELECT pk FROM resource')).toEqual([]);
    } finally {
      await target.close();
      await targetDb.dispose();
      await broken.dispose();
    }
  });

  it('an unreachable target, named without its password, and a source that does not exist: exit 1', async () => {
    const unreachable = await cliProcess(['db', 'copy', '--to', 'postgres://admin:s3cret@127.0.0.1:1/ambient'], {
      DATABASE_URL: sourceDb.url,
    });
    expect(unreachable.code).toBe(1);
    expect(unreachable.stderr.trimEnd().split('\n').at(-1)).toBe(
      'ambient-fhir db: cannot connect to the database named by --to (postgres://admin:***@127.0.0.1:1/ambient): connection refused',
    );
    expect(unreachable.stderr).not.toContain('s3cret');
    const targetDb = await postgresTestDatabase();
    try {
      const missing = await inProcess(['db', 'copy', '--to', targetDb.url], {
        DATABASE_URL: `sqlite:${sourceDb.url.slice('sqlite:'.length)}.missing`,
      });
      expect(missing.code).toBe(1);
      expect(missing.stderr).toMatch(
        /^ambient-fhir db: there is no database to copy: DATABASE_URL names sqlite:\/.*\.missing, which holds none\n$/,
      );
    } finally {
      await targetDb.dispose();
    }
  });
});
