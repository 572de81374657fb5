// Retrying a FAILED scribe record over HTTP, on both databases (docs/api.md "Scribe"): POST
// /v1/ambient/api/scribe/{id}/retry puts the record back IN_PROGRESS (202) and its job in the queue, and
// the record then ends as the engine now dictates; 409 for a record that is not FAILED, 404 for an unknown
// record or another account's, 403 without scribe.write, 401 without a token; of concurrent retries
// exactly one is taken; the retried job survives a restart; audio that failed to be transcribed is kept
// for the retry. The engines are local fakes of OpenAI-compatible servers whose answers each test sets.
import { randomUUID } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { assembleApp } from '../src/assemble.js';
import { AccountStore } from '../src/auth/accounts.js';
import { loadConfig } from '../src/config.js';
import { migrate } from '../src/storage/migrate.js';
import { openDatabase } from '../src/storage/open-database.js';
import { BACKENDS, testDatabase } from './support/databases.js';
import { passwordToken } from './support/fhir-client.js';
import { noteAnswer, startFakeEngine } from './support/scribe-fake-engine.js';
import type { FakeAnswer, FakeEngineServer, FakeRequest } from './support/scribe-fake-engine.js';
import { SCRIBE, scribeClient } from './support/scribe-client.js';
import type { ScribeClient } from './support/scribe-client.js';
import { startTestApp } from './support/test-app.js';
import type { TestApp } from './support/test-app.js';

type Mode = 'fail' | 'ok' | 'hang';

/** What the fake engines answer for a request that names `[marker]`: the model refuses (400), answers, or never. */
function answerFor(mode: Mode, request: FakeRequest): FakeAnswer {
  if (mode === 'hang') return { hang: true };
  if (mode === 'fail') return { status: 400, json: { error: { message: 'model not found' } } };
  if (request.url.endsWith('/audio/transcriptions')) return { json: { text: 'Patient: My ankle hurts.' } };
  return noteAnswer({ Subjective: 'S.', Objective: 'O.', Assessment: 'A.', Plan: 'P.' });
}

async function jobsOf(url: string, recordId: number): Promise<{ state: string; attempts: number }[]> {
  const db = openDatabase(url);
  try {
    const rows = await db.query<{ state: string; attempts: number }>(
      'SELECT state, attempts FROM scribe_job WHERE record_id = ?',
      [recordId],
    );
    return rows.map((r) => ({ state: r.state, attempts: Number(r.attempts) }));
  } finally {
    await db.close();
  }
}

async function audioRows(url: string, recordId: number): Promise<number> {
  const db = openDatabase(url);
  try {
    const [row] = await db.query<{ n: number }>('SELECT COUNT(*) AS n FROM scribe_audio WHERE record_id = ?', [
      recordId,
    ]);
    return Number(row.n);
  } finally {
    await db.close();
  }
}

describe.each(BACKENDS)('scribe retry on %s', (backend) => {
  const modes = new Map<string, Mode>();
  let engine: FakeEngineServer;
  let t: TestApp;
  let scribe: ScribeClient;

  /** The marker a request names, in a chat message or an audio file's bytes. */
  const markerOf = (request: FakeRequest): string | undefined =>
    /\[([\w-]+)\]/.exec(request.body.toString('latin1'))?.[1];
  const requestsFor = (marker: string) => engine.requests.filter((r) => markerOf(r) === marker);

  beforeAll(async () => {
    engine = await startFakeEngine((request) => answerFor(modes.get(markerOf(request) ?? '') ?? 'ok', request));
    t = await startTestApp(backend, {
      AMBIENT_LLM_URL: engine.url,
      AMBIENT_LLM_MODEL: 'test-model',
      AMBIENT_LLM_MAX_RETRIES: '0',
      AMBIENT_STT_URL: engine.url,
      AMBIENT_STT_MAX_RETRIES: '0',
      AMBIENT_SCRIBE_POLL_MS: '20',
      // Two tests leave a job waiting on the engine until the app closes; the others need workers too.
      AMBIENT_SCRIBE_WORKERS: '6',
    });
    scribe = scribeClient(t.app, await t.token());
  });
  afterAll(async () => {
    await t?.close();
    await engine?.close();
  });

  /** A record that ended FAILED because the model refused it. */
  async function failedRecord(marker: string, client = scribe): Promise<Record<string, any>> {
    modes.set(marker, 'fail');
    const res = await client.submit({ transcripts: [`Patient: A cough. [${marker}]`], template_ids: [1] });
    expect(res.statusCode).toBe(202);
    const record = await client.finished(res.json().scribe_id);
    expect(record.status).toBe('FAILED');
    return record;
  }

  const oauthError = (res: { statusCode: number; json(): any }, status: number, error: string, description: RegExp) => {
    expect(res.statusCode).toBe(status);
    expect(res.json()).toEqual({ error, error_description: expect.stringMatching(description) });
  };

  it('puts a FAILED record back IN_PROGRESS (202, the record), then completes it as the engine now allows', async () => {
    const failed = await failedRecord('then-ok');
    expect(failed.error).toMatch(/^note engine: HTTP 400 .*model not found/);
    expect(failed.completed_at).not.toBeNull();

    modes.set('then-ok', 'ok');
    const res = await scribe.retry(failed.scribe_id);
    expect(res.statusCode).toBe(202);
    expect(res.headers.location).toBe(`${t.config.publicUrl}${SCRIBE}/${failed.scribe_id}`);
    expect(res.headers['cache-control']).toBe('no-store');
    expect(res.json()).toEqual({ ...failed, status: 'IN_PROGRESS', completed_at: null, error: null });

    const record = await scribe.finished(failed.scribe_id);
    expect(record).toMatchObject({ status: 'COMPLETED', error: null, submitted_at: failed.submitted_at });
    expect(Date.parse(record.completed_at)).toBeGreaterThanOrEqual(Date.parse(failed.completed_at));
    expect(record.notes).toHaveLength(1);
    expect(record.notes[0].sections[3]).toEqual({ title: 'Plan', text: 'P.' });
    const doc = await (await t.client()).get(`/fhir/${record.notes[0].document_reference}`);
    expect(doc.statusCode).toBe(200);
    expect(requestsFor('then-ok')).toHaveLength(2); // the refused attempt, then the one after the retry
    expect(await jobsOf(t.database.url, failed.scribe_id)).toEqual([{ state: 'done', attempts: 1 }]);
  });

  it('ends FAILED again when the engine still refuses, and can be retried again', async () => {
    const failed = await failedRecord('still-failing');
    expect((await scribe.retry(failed.scribe_id)).statusCode).toBe(202);
    const again = await scribe.finished(failed.scribe_id);
    expect(again.status).toBe('FAILED');
    expect(again.error).toMatch(/model not found/);
    expect(again.completed_at).not.toBeNull();
    expect(requestsFor('still-failing')).toHaveLength(2);
    expect(await jobsOf(t.database.url, failed.scribe_id)).toEqual([{ state: 'failed', attempts: 1 }]);
    expect((await scribe.retry(failed.scribe_id)).statusCode).toBe(202);
    expect((await scribe.finished(failed.scribe_id)).status).toBe('FAILED');
    expect(requestsFor('still-failing')).toHaveLength(3);
  });

  it('answers 409 for a record IN_PROGRESS or COMPLETED, and leaves it as it was', async () => {
    modes.set('busy', 'hang');
    // IN_PROGRESS from its submission on, queued or running, and kept so by an engine that never answers.
    const busy = (await scribe.submit({ transcripts: ['Patient: A cough. [busy]'], template_ids: [1] })).json();
    oauthError(
      await scribe.retry(busy.scribe_id),
      409,
      'invalid_request',
      new RegExp(`^Scribe record ${busy.scribe_id} is IN_PROGRESS: only a FAILED record can be retried$`),
    );
    expect((await scribe.get(busy.scribe_id)).json().status).toBe('IN_PROGRESS');

    const done = (await scribe.submit({ transcripts: ['Patient: A cough. [done]'], template_ids: [1] })).json();
    const completed = await scribe.finished(done.scribe_id);
    expect(completed.status).toBe('COMPLETED');
    oauthError(await scribe.retry(done.scribe_id), 409, 'invalid_request', /is COMPLETED: only a FAILED record/);
    expect((await scribe.get(done.scribe_id)).json()).toEqual(completed);
  });

  it("answers 404 for an unknown or malformed id and for another account's record, as GET does", async () => {
    const failed = await failedRecord('private');
    const other = scribeClient(t.app, await t.token());
    const res = await other.retry(failed.scribe_id);
    oauthError(res, 404, 'not_found', new RegExp(`^No scribe record ${failed.scribe_id}$`));
    expect(res.json()).toEqual((await other.get(failed.scribe_id)).json());
    expect((await scribe.get(failed.scribe_id)).json()).toEqual(failed);
    for (const id of ['99999999', '0', 'abc', '1e3', '-1', '12345678901234567890']) {
      oauthError(await scribe.retry(id), 404, 'not_found', /^No scribe record /);
    }
  });

  it('answers 403 to a token without scribe.write and 401 without a good token; the record stays FAILED', async () => {
    const failed = await failedRecord('scopes');
    const readOnly = scribeClient(t.app, await t.token('scribe.read'));
    oauthError(await readOnly.retry(failed.scribe_id), 403, 'insufficient_scope', /scribe\.write/);
    for (const headers of [{}, { authorization: 'Bearer not-a-token' }]) {
      const res = await t.app.inject({ method: 'POST', url: `${SCRIBE}/${failed.scribe_id}/retry`, headers });
      oauthError(res, 401, 'invalid_token', /./);
      expect(res.headers['www-authenticate']).toMatch(/^Bearer/);
    }
    expect((await scribe.get(failed.scribe_id)).json()).toEqual(failed);
  });

  it('answers 405 with Allow: POST for other methods on the retry path', async () => {
    for (const method of ['GET', 'PUT', 'PATCH', 'DELETE'] as const) {
      const res = await t.app.inject({ method, url: `${SCRIBE}/1/retry` });
      expect(res.statusCode).toBe(405);
      expect(res.headers.allow).toBe('POST');
    }
  });

  it('takes exactly one of concurrent retries (202), the others find the record IN_PROGRESS (409)', async () => {
    const failed = await failedRecord('race');
    modes.set('race', 'hang'); // the retried job then stays IN_PROGRESS
    const answers = await Promise.all(Array.from({ length: 8 }, () => scribe.retry(failed.scribe_id)));
    expect(answers.map((r) => r.statusCode).sort()).toEqual([202, 409, 409, 409, 409, 409, 409, 409]);
    for (const res of answers.filter((r) => r.statusCode === 409)) {
      expect(res.json().error_description).toMatch(/is IN_PROGRESS/);
    }
    expect((await scribe.get(failed.scribe_id)).json().status).toBe('IN_PROGRESS');
    const jobs = await jobsOf(t.database.url, failed.scribe_id);
    expect(jobs).toHaveLength(1);
    expect(['queued', 'running']).toContain(jobs[0].state);
  });

  it('keeps audio that could not be transcribed, so that a retry transcribes it; then drops it', async () => {
    modes.set('audio', 'fail');
    const res = await scribe.submitForm([
      ['audio_files', { filename: 'visit.wav', contentType: 'audio/wav', data: 'RIFF [audio]' }],
      ['template_ids', '1'],
    ]);
    const failed = await scribe.finished(res.json().scribe_id);
    expect(failed.status).toBe('FAILED');
    expect(failed.error).toMatch(/^speech-to-text engine: HTTP 400/);
    expect(await audioRows(t.database.url, failed.scribe_id)).toBe(1);

    modes.set('audio', 'ok');
    expect((await scribe.retry(failed.scribe_id)).statusCode).toBe(202);
    const record = await scribe.finished(failed.scribe_id);
    expect(record.status).toBe('COMPLETED');
    expect(record.transcripts).toEqual(['Patient: My ankle hurts.']);
    expect(await audioRows(t.database.url, failed.scribe_id)).toBe(0);
  });
});

describe.each(BACKENDS)('scribe retry across restarts on %s', (backend) => {
  const cleanups: (() => Promise<unknown>)[] = [];
  afterAll(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup().catch(() => undefined);
  });

  async function app(env: Record<string, string>): Promise<FastifyInstance> {
    const instance = await assembleApp(loadConfig({ LOG_LEVEL: 'silent', AMBIENT_SCRIBE_POLL_MS: '20', ...env }));
    await instance.ready();
    return instance;
  }

  it('a record retried on a server without workers is completed by the next server that has them', async () => {
    const database = await testDatabase(backend);
    cleanups.push(() => database.dispose());
    const setup = openDatabase(database.url);
    await migrate(setup);
    const username = `retry-${randomUUID()}`;
    const password = `pw-${randomUUID()}`;
    await new AccountStore(setup).create({ username, password });
    await setup.close();
    let mode: Mode = 'fail';
    const engine = await startFakeEngine((request) => answerFor(mode, request));
    cleanups.push(() => engine.close());
    const env = {
      DATABASE_URL: database.url,
      AMBIENT_LLM_URL: engine.url,
      AMBIENT_LLM_MODEL: 'test-model',
      AMBIENT_LLM_MAX_RETRIES: '0',
    };

    const first = await app(env);
    const bearer = await passwordToken(first, username, password);
    const created = await scribeClient(first, bearer).submit({ transcripts: ['Patient: Cough.'], template_ids: [1] });
    const id = created.json().scribe_id as number;
    expect((await scribeClient(first, bearer).finished(id)).status).toBe('FAILED');
    await first.close();

    const front = await app({ ...env, AMBIENT_SCRIBE_WORKERS: '0' });
    const retried = await scribeClient(front, bearer).retry(id);
    expect(retried.statusCode).toBe(202);
    await front.close();
    expect(await jobsOf(database.url, id)).toEqual([{ state: 'queued', attempts: 0 }]);

    mode = 'ok';
    const worker = await app(env);
    cleanups.push(() => worker.close());
    const record = await scribeClient(worker, bearer).finished(id);
    expect(record.status).toBe('COMPLETED');
    expect(record.error).toBeNull();
    expect(await jobsOf(database.url, id)).toEqual([{ state: 'done', attempts: 1 }]);
  });
});
