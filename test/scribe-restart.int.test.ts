// Jobs survive restarts, on both databases: a server closed mid-job gives the job back and the next one
// completes it; a server process killed with SIGKILL mid-job leaves a lease that expires, and the next
// server takes the job over; two server processes on one database process every job exactly once.
import { randomUUID } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { afterAll, describe, expect, it } from 'vitest';
import { assembleApp } from '../src/assemble.js';
import { AccountStore } from '../src/auth/accounts.js';
import { loadConfig } from '../src/config.js';
import { noteAnswer, startFakeEngine } from './support/scribe-fake-engine.js';
import type { FakeEngineServer } from './support/scribe-fake-engine.js';
import { fhirClient, passwordToken } from './support/fhir-client.js';
import { httpInject } from './support/http-inject.js';
import { scribeClient } from './support/scribe-client.js';
import { migrate } from '../src/storage/migrate.js';
import { openDatabase } from '../src/storage/open-database.js';
import { BACKENDS, testDatabase } from './support/databases.js';
import type { TestDatabase } from './support/databases.js';
import { startServerProcess } from './support/server-process.js';
import type { ServerProcess } from './support/server-process.js';

const SOAP = { Subjective: 'S.', Objective: 'O.', Assessment: 'A.', Plan: 'P.' };

describe.each(BACKENDS)('scribe jobs across restarts on %s', (backend) => {
  const cleanups: (() => Promise<unknown>)[] = [];
  afterAll(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup().catch(() => undefined);
  });

  /** A fresh database with one account; returns its URL and the account's credentials. */
  async function setUp(): Promise<{ database: TestDatabase; username: string; password: string }> {
    const database = await testDatabase(backend);
    cleanups.push(() => database.dispose());
    const db = openDatabase(database.url);
    await migrate(db);
    const username = `restart-${randomUUID()}`;
    const password = `pw-${randomUUID()}`;
    await new AccountStore(db).create({ username, password });
    await db.close();
    return { database, username, password };
  }

  async function app(env: Record<string, string>): Promise<FastifyInstance> {
    const instance = await assembleApp(loadConfig({ LOG_LEVEL: 'silent', AMBIENT_SCRIBE_POLL_MS: '20', ...env }));
    await instance.ready();
    return instance;
  }

  async function jobState(url: string, recordId: number) {
    const db = openDatabase(url);
    try {
      const [row] = await db.query<{ state: string; attempts: number }>(
        'SELECT state, attempts FROM scribe_job WHERE record_id = ?',
        [recordId],
      );
      return { state: row.state, attempts: Number(row.attempts) };
    } finally {
      await db.close();
    }
  }

  async function fakeLlm(): Promise<FakeEngineServer> {
    const llm = await startFakeEngine(() => ({ hang: true }));
    cleanups.push(() => llm.close());
    return llm;
  }

  it('a job in flight when the server closes is given back and completed by the next server', async () => {
    const { database, username, password } = await setUp();
    const llm = await fakeLlm();
    const env = { DATABASE_URL: database.url, AMBIENT_LLM_URL: llm.url, AMBIENT_LLM_MODEL: 'm' };
    const first = await app(env);
    const bearer = await passwordToken(first, username, password);
    const created = await scribeClient(first, bearer).submit({ transcripts: ['Patient: Cough.'], template_ids: [1] });
    expect(created.statusCode).toBe(202);
    const id = created.json().scribe_id as number;
    await llm.received(1); // the job is running, waiting for the model
    expect(await jobState(database.url, id)).toEqual({ state: 'running', attempts: 1 });

    await first.close();
    expect(await jobState(database.url, id)).toEqual({ state: 'queued', attempts: 0 });

    llm.handle(() => noteAnswer(SOAP));
    const second = await app(env);
    cleanups.push(() => second.close());
    const record = await scribeClient(second, bearer).finished(id);
    expect(record.status).toBe('COMPLETED');
    expect(record.notes[0].sections[3]).toEqual({ title: 'Plan', text: 'P.' });
    expect(await jobState(database.url, id)).toEqual({ state: 'done', attempts: 1 });
  });

  it('a job of a server killed with SIGKILL is taken over by the next server once its lease expires', async () => {
    const { database, username, password } = await setUp();
    const llm = await fakeLlm();
    const env = {
      DATABASE_URL: database.url,
      AMBIENT_LLM_URL: llm.url,
      AMBIENT_LLM_MODEL: 'm',
      AMBIENT_SCRIBE_LEASE_SECONDS: '2',
      AMBIENT_SCRIBE_POLL_MS: '100',
    };
    const first: ServerProcess = await startServerProcess(env);
    cleanups.push(async () => first.child.kill('SIGKILL'));
    const bearer = await passwordToken(httpInject(first.url), username, password);
    const created = await scribeClient(httpInject(first.url), bearer).submit({
      transcripts: ['Patient: Cough.'],
      template_ids: [1],
    });
    expect(created.statusCode).toBe(202);
    const id = created.json<{ scribe_id: number }>().scribe_id;
    await llm.received(1);
    first.child.kill('SIGKILL');
    await first.exited;
    expect((await jobState(database.url, id)).state).toBe('running'); // nobody gave it back

    llm.handle(() => noteAnswer(SOAP));
    const second = await startServerProcess(env);
    cleanups.push(async () => second.child.kill('SIGKILL'));
    const record = await scribeClient(httpInject(second.url), bearer).finished(id, 20_000);
    expect(record.status).toBe('COMPLETED');
    expect(record.notes).toHaveLength(1);
    expect(await jobState(database.url, id)).toEqual({ state: 'done', attempts: 2 });
  });

  it('a server with AMBIENT_SCRIBE_WORKERS=0 only takes submissions; another one does the work', async () => {
    const { database, username, password } = await setUp();
    const env = { DATABASE_URL: database.url, AMBIENT_REFERENTIAL_INTEGRITY: '1' };
    const front = await app({ ...env, AMBIENT_SCRIBE_WORKERS: '0' });
    cleanups.push(() => front.close());
    const bearer = await passwordToken(front, username, password);
    const fhir = fhirClient(front, bearer);
    const kept = `Patient/${(await fhir.create({ resourceType: 'Patient' })).json().id}`;
    const gone = `Patient/${(await fhir.create({ resourceType: 'Patient' })).json().id}`;
    const client = scribeClient(front, bearer);
    const ok = (await client.submit({ transcripts: ['Patient: Cough.'], template_ids: [1], patient: kept })).json();
    const orphan = (await client.submit({ transcripts: ['Patient: Cough.'], template_ids: [1], patient: gone })).json();
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect((await jobState(database.url, ok.scribe_id)).state).toBe('queued'); // nobody works here
    expect((await fhir.delete(`/fhir/${gone}`)).statusCode).toBeLessThan(300); // before its note is filed

    const worker = await app(env);
    cleanups.push(() => worker.close());
    expect((await client.finished(ok.scribe_id)).status).toBe('COMPLETED');
    const failed = await client.finished(orphan.scribe_id);
    expect(failed.status).toBe('FAILED');
    expect(failed.error).toMatch(/^the note for template 1 could not be filed: Referential integrity: .* → Patient\//);
    expect(await jobState(database.url, orphan.scribe_id)).toEqual({ state: 'failed', attempts: 1 }); // permanent
  });

  it('two server processes on one database process every job exactly once', async () => {
    const { database, username, password } = await setUp();
    const env = { DATABASE_URL: database.url, AMBIENT_SCRIBE_WORKERS: '3', AMBIENT_SCRIBE_POLL_MS: '50' };
    const servers = await Promise.all([startServerProcess(env), startServerProcess(env)]);
    for (const server of servers) cleanups.push(async () => server.child.kill('SIGKILL'));
    const bearer = await passwordToken(httpInject(servers[0].url), username, password);
    const scribes = servers.map((server) => scribeClient(httpInject(server.url), bearer));
    const fhir = fhirClient(httpInject(servers[0].url), bearer);
    const ids = await Promise.all(
      Array.from({ length: 16 }, async (_, i) => {
        const res = await scribes[i % 2].submit({ transcripts: [`Patient: Visit ${i}.`], template_ids: [1, 2] });
        expect(res.statusCode).toBe(202);
        return res.json<{ scribe_id: number }>().scribe_id;
      }),
    );
    for (const id of ids) {
      const record = await scribes[id % 2].finished(id, 20_000);
      expect(record.status).toBe('COMPLETED');
      for (const note of record.notes as { document_reference: string }[]) {
        const doc = (await fhir.get(`/fhir/${note.document_reference}`)).json<{ meta: { versionId: string } }>();
        expect(doc.meta.versionId).toBe('1'); // filed once
      }
      expect(await jobState(database.url, id)).toEqual({ state: 'done', attempts: 1 });
    }
    // Both processes did work.
    for (const server of servers) expect(server.output()).toContain('scribe: record completed');
  });
});
