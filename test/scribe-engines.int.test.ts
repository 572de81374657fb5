// The scribe with its HTTP engines configured (AMBIENT_LLM_*, AMBIENT_STT_*), each against a local fake
// OpenAI-compatible server started here: notes from the chat-completions engine, job retries that resume
// where they stopped, permanent and repeated failures ending FAILED with the reason, and audio transcribed.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { noteAnswer, startFakeEngine } from './support/scribe-fake-engine.js';
import type { FakeEngineServer, FakeRequest } from './support/scribe-fake-engine.js';
import { scribeClient } from './support/scribe-client.js';
import type { ScribeClient } from './support/scribe-client.js';
import { BACKENDS } from './support/databases.js';
import { startTestApp } from './support/test-app.js';
import type { TestApp } from './support/test-app.js';

type ChatBody = { model: string; messages: { role: string; content: string }[] };

const userMessage = (request: FakeRequest): string => (request.json as ChatBody).messages[1].content;
const templateOf = (request: FakeRequest): string => /^Template: (.*)$/m.exec(userMessage(request))![1];

describe.each(BACKENDS)('scribe engines on %s', (backend) => {
  describe('chat-completions note engine', () => {
    let llm: FakeEngineServer;
    let t: TestApp;
    let scribe: ScribeClient;
    /** Failures still to serve, per marker in the transcript. */
    const failuresLeft = new Map<string, number>();

    beforeAll(async () => {
      llm = await startFakeEngine((request) => {
        const message = userMessage(request);
        if (message.includes('[permanent]')) return { status: 400, json: { error: { message: 'model not found' } } };
        if (message.includes('[always-503]')) return { status: 503, json: { error: { message: 'overloaded' } } };
        const marker = /\[fail-(\w+)-(\d+)\]/.exec(message);
        if (marker && templateOf(request) === 'History and physical') {
          const left = failuresLeft.get(marker[1]) ?? Number(marker[2]);
          if (left > 0) {
            failuresLeft.set(marker[1], left - 1);
            return { status: 500, json: { error: { message: 'try again' } } };
          }
        }
        const titles = [...message.matchAll(/^\d+\. ([^:\n]+)/gm)].map((m) => m[1]);
        return noteAnswer(
          Object.fromEntries(titles.map((title) => [title, `LLM ${title} for ${templateOf(request)}`])),
        );
      });
      t = await startTestApp(backend, {
        AMBIENT_LLM_URL: llm.url,
        AMBIENT_LLM_MODEL: 'test-model',
        AMBIENT_LLM_API_KEY: 'sk-test-secret',
        AMBIENT_LLM_MAX_RETRIES: '0',
        AMBIENT_SCRIBE_MAX_ATTEMPTS: '3',
        AMBIENT_SCRIBE_RETRY_BASE_MS: '20',
        AMBIENT_SCRIBE_POLL_MS: '20',
      });
      scribe = scribeClient(t.app, await t.token());
    });
    afterAll(async () => {
      await t?.close();
      await llm?.close();
    });

    const requestsFor = (marker: string) => llm.requests.filter((r) => userMessage(r).includes(marker));

    it('writes each note with the model and files it', async () => {
      const res = await scribe.submit({
        transcripts: ['Doctor: What brings you in? [ok-1]\nPatient: A cough.'],
        template_ids: [1, 2],
        patient_name: 'Lee Model',
      });
      expect(res.statusCode).toBe(202);
      const record = await scribe.finished(res.json().scribe_id);
      expect(record.status).toBe('COMPLETED');
      expect(record.notes[0].sections).toEqual([
        { title: 'Subjective', text: 'LLM Subjective for SOAP note' },
        { title: 'Objective', text: 'LLM Objective for SOAP note' },
        { title: 'Assessment', text: 'LLM Assessment for SOAP note' },
        { title: 'Plan', text: 'LLM Plan for SOAP note' },
      ]);
      expect(record.notes[1].sections[0]).toEqual({
        title: 'Chief Complaint',
        text: 'LLM Chief Complaint for History and physical',
      });
      const requests = requestsFor('[ok-1]');
      expect(requests).toHaveLength(2);
      expect(requests[0].headers.authorization).toBe('Bearer sk-test-secret');
      expect((requests[0].json as ChatBody).model).toBe('test-model');
      expect(userMessage(requests[0])).toContain('Patient name: Lee Model');
      const doc = await (await t.client()).get(`/fhir/${record.notes[0].document_reference}`);
      expect(doc.json().description).toContain('llm:test-model');
    });

    it('retries a failed job later and resumes where it stopped: finished notes are not written again', async () => {
      const res = await scribe.submit({ transcripts: ['Patient: Back pain. [fail-resume-2]'], template_ids: [1, 2] });
      const record = await scribe.finished(res.json().scribe_id);
      expect(record.status).toBe('COMPLETED');
      expect(record.error).toBeNull();
      const requests = requestsFor('[fail-resume-2]').map(templateOf);
      // Attempt 1: SOAP ok, H&P 500. Attempt 2: H&P 500. Attempt 3: H&P ok. The SOAP note is written once.
      expect(requests).toEqual(['SOAP note', 'History and physical', 'History and physical', 'History and physical']);
      expect(record.notes.map((n: { template_id: number }) => n.template_id)).toEqual([1, 2]);
    });

    it('ends FAILED with the reason at once when the engine refuses the request (4xx)', async () => {
      const res = await scribe.submit({ transcripts: ['Patient: Hi. [permanent]'], template_ids: [1] });
      const record = await scribe.finished(res.json().scribe_id);
      expect(record.status).toBe('FAILED');
      expect(record.error).toMatch(
        /^note engine: HTTP 400 from http:\/\/127\.0\.0\.1:\d+\/v1\/chat\/completions: model not found/,
      );
      expect(record.error).not.toContain('sk-test-secret');
      expect(record.notes).toEqual([]);
      expect(record.completed_at).not.toBeNull();
      expect(requestsFor('[permanent]')).toHaveLength(1);
    });

    it('ends FAILED with the reason after AMBIENT_SCRIBE_MAX_ATTEMPTS attempts that keep failing', async () => {
      const res = await scribe.submit({ transcripts: ['Patient: Hi. [always-503]'], template_ids: [1] });
      const record = await scribe.finished(res.json().scribe_id);
      expect(record.status).toBe('FAILED');
      expect(record.error).toMatch(/HTTP 503 .*overloaded.*\(gave up after 3 attempts\)$/);
      expect(requestsFor('[always-503]')).toHaveLength(3);
    });
  });

  describe('speech-to-text engine', () => {
    let stt: FakeEngineServer;
    let t: TestApp;
    let scribe: ScribeClient;

    beforeAll(async () => {
      stt = await startFakeEngine((request) => {
        const body = request.body.toString('latin1');
        if (body.includes('first-visit-audio')) {
          return { json: { text: 'Doctor: What brings you in today?\nPatient: My ankle hurts since I fell.' } };
        }
        if (body.includes('second-visit-audio')) return { json: { text: 'Doctor: Your ankle is swollen.' } };
        return { json: { text: 'Patient: Something else.' } };
      });
      t = await startTestApp(backend, {
        AMBIENT_STT_URL: stt.url,
        AMBIENT_STT_API_KEY: 'sk-stt',
        AMBIENT_SCRIBE_POLL_MS: '20',
      });
      scribe = scribeClient(t.app, await t.token());
    });
    afterAll(async () => {
      await t?.close();
      await stt?.close();
    });

    it('transcribes audio_files in order and writes the note from them', async () => {
      const res = await scribe.submitForm([
        ['audio_files', { filename: 'part1.wav', contentType: 'audio/wav', data: 'RIFF first-visit-audio' }],
        ['audio_files', { filename: 'part2.mp3', contentType: 'audio/mpeg', data: 'ID3 second-visit-audio' }],
        ['template_ids', '2'],
      ]);
      expect(res.statusCode).toBe(202);
      const record = await scribe.finished(res.json().scribe_id);
      expect(record.status).toBe('COMPLETED');
      expect(record.transcripts).toEqual([
        'Doctor: What brings you in today?\nPatient: My ankle hurts since I fell.',
        'Doctor: Your ankle is swollen.',
      ]);
      const sections = Object.fromEntries(
        record.notes[0].sections.map((s: { title: string; text: string }) => [s.title, s.text]),
      );
      expect(sections['Chief Complaint']).toBe(
        'Doctor: What brings you in today?\nPatient: My ankle hurts since I fell.',
      );
      expect(sections['Physical Examination']).toBe('Doctor: Your ankle is swollen.');
      expect(stt.requests).toHaveLength(2);
      for (const request of stt.requests) {
        expect(request.url).toBe('/v1/audio/transcriptions');
        expect(request.headers.authorization).toBe('Bearer sk-stt');
        expect(request.body.toString('latin1')).toMatch(/name="model"\r\n\r\nwhisper-1\r\n/);
      }
      expect(stt.requests[0].body.toString('latin1')).toContain('filename="part1.wav"');
      expect(stt.requests[1].body.toString('latin1')).toContain('filename="part2.mp3"');
    });

    it('takes transcripts and audio together: the typed transcripts first', async () => {
      const res = await scribe.submitForm([
        ['transcripts', 'Patient: I also have a headache.'],
        ['audio_files', { filename: 'x.webm', contentType: 'audio/webm', data: 'webm bytes' }],
        ['template_ids', '1'],
      ]);
      const record = await scribe.finished(res.json().scribe_id);
      expect(record.transcripts).toEqual(['Patient: I also have a headache.', 'Patient: Something else.']);
    });

    it('refuses a file that is not audio, and an empty one, naming audio_files', async () => {
      const text = await scribe.submitForm([
        ['audio_files', { filename: 'notes.txt', contentType: 'text/plain', data: 'hello' }],
        ['template_ids', '1'],
      ]);
      expect(text.statusCode).toBe(400);
      expect(text.json().error_description).toMatch(
        /audio_files\[0\] \(notes\.txt\): text\/plain is not an audio type/,
      );
      const empty = await scribe.submitForm([
        ['audio_files', { filename: 'empty.wav', contentType: 'audio/wav', data: '' }],
        ['template_ids', '1'],
      ]);
      expect(empty.statusCode).toBe(400);
      expect(empty.json().error_description).toMatch(/audio_files\[0\] \(empty\.wav\): the file is empty/);
    });
  });
});
