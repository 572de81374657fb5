// The HTTP engines against a local fake OpenAI-compatible server: request shapes, answers, timeouts,
// retries and aborts.
import { afterEach, describe, expect, it } from 'vitest';
import type { EngineConfig } from '../../config.js';
import { BUILTIN_TEMPLATES } from '../builtin-templates.js';
import { chatAnswer, noteAnswer, startFakeEngine } from '../../../test/support/scribe-fake-engine.js';
import type { FakeEngineServer } from '../../../test/support/scribe-fake-engine.js';
import type { ScribeTemplate } from '../templates.js';
import { ChatCompletionsGenerator, sectionsFromAnswer, SYSTEM_PROMPT } from './chat-completions.js';
import { EngineError } from './engine.js';
import { endpoint } from './http.js';
import { TranscriptionEngine, transcriptFromAnswer } from './speech-to-text.js';

const soap: ScribeTemplate = { id: 1, ...BUILTIN_TEMPLATES.get(1)!, builtin: true, updatedAt: null };
const TITLES = ['Subjective', 'Objective', 'Assessment', 'Plan'];
const never = new AbortController().signal;

let fake: FakeEngineServer | undefined;
afterEach(async () => {
  await fake?.close();
  fake = undefined;
});

const engine = (url: string, overrides: Partial<EngineConfig> = {}): EngineConfig => ({
  url,
  model: 'test-model',
  apiKey: 'sk-test-key',
  timeoutMs: 2000,
  maxRetries: 2,
  ...overrides,
});

async function engineError(promise: Promise<unknown>): Promise<EngineError> {
  try {
    await promise;
  } catch (error) {
    if (error instanceof EngineError) return error;
    throw error;
  }
  throw new Error('expected an EngineError');
}

describe('chat-completions note engine', () => {
  it('sends the template, the visit and the transcripts, and reads the JSON answer', async () => {
    fake = await startFakeEngine(() =>
      noteAnswer({
        Subjective: 'Cough for 2 weeks.',
        Objective: 'Lungs clear.',
        Assessment: 'Post-viral cough.',
        Plan: 'Benzonatate.',
      }),
    );
    const generator = new ChatCompletionsGenerator(engine(fake.url));
    expect(generator.name).toBe('llm:test-model');
    const sections = await generator.generate(
      {
        template: soap,
        transcripts: ['Doctor: What brings you in?\nPatient: A cough.'],
        patientName: 'Jane Doe',
        dateOfService: '2024-05-01',
        additionalContext: { reason: 'follow-up' },
      },
      never,
    );
    expect(sections).toEqual([
      { title: 'Subjective', text: 'Cough for 2 weeks.' },
      { title: 'Objective', text: 'Lungs clear.' },
      { title: 'Assessment', text: 'Post-viral cough.' },
      { title: 'Plan', text: 'Benzonatate.' },
    ]);
    const [request] = fake.requests;
    expect(request.method).toBe('POST');
    expect(request.url).toBe('/v1/chat/completions');
    expect(request.headers.authorization).toBe('Bearer sk-test-key');
    expect(request.headers['content-type']).toBe('application/json');
    const body = request.json as { model: string; temperature: number; messages: { role: string; content: string }[] };
    expect(body.model).toBe('test-model');
    expect(body.temperature).toBe(0);
    expect(body.messages[0]).toEqual({ role: 'system', content: SYSTEM_PROMPT });
    expect(body.messages[1].role).toBe('user');
    for (const text of [
      'Template: SOAP note',
      '1. Subjective: What the patient',
      '4. Plan:',
      'Patient name: Jane Doe',
      'Date of service: 2024-05-01',
      'Additional context (JSON): {"reason":"follow-up"}',
      'Doctor: What brings you in?\nPatient: A cough.',
    ]) {
      expect(body.messages[1].content).toContain(text);
    }
  });

  it('sends no Authorization header without an API key', async () => {
    fake = await startFakeEngine(() => noteAnswer({ Plan: 'Rest.' }));
    await new ChatCompletionsGenerator(engine(fake.url, { apiKey: undefined })).generate(
      { template: soap, transcripts: ['x'] },
      never,
    );
    expect(fake.requests[0].headers.authorization).toBeUndefined();
  });

  it('retries 5xx and 429 with backoff, then succeeds', async () => {
    fake = await startFakeEngine((_request, index) =>
      index === 0
        ? { status: 503, json: { error: { message: 'overloaded' } } }
        : index === 1
          ? { status: 429, body: 'slow down', headers: { 'retry-after': '0' } }
          : noteAnswer({ Plan: 'Rest.' }),
    );
    const sections = await new ChatCompletionsGenerator(engine(fake.url), { retryBaseMs: 5 }).generate(
      { template: soap, transcripts: ['x'] },
      never,
    );
    expect(fake.requests).toHaveLength(3);
    expect(sections.find((s) => s.title === 'Plan')!.text).toBe('Rest.');
    expect(sections.find((s) => s.title === 'Objective')!.text).toBe('Not discussed.');
  });

  it('gives up after maxRetries with a retryable error naming the last failure', async () => {
    fake = await startFakeEngine(() => ({ status: 502, json: { error: { message: 'bad gateway' } } }));
    const error = await engineError(
      new ChatCompletionsGenerator(engine(fake.url, { maxRetries: 2 }), { retryBaseMs: 1 }).generate(
        { template: soap, transcripts: ['x'] },
        never,
      ),
    );
    expect(fake.requests).toHaveLength(3);
    expect(error.retryable).toBe(true);
    expect(error.message).toBe(`note engine: HTTP 502 from ${fake.url}/chat/completions: bad gateway (3 attempts)`);
  });

  it('does not retry other 4xx answers: they are permanent', async () => {
    fake = await startFakeEngine(() => ({ status: 401, json: { error: { message: 'Incorrect API key provided' } } }));
    const error = await engineError(
      new ChatCompletionsGenerator(engine(fake.url), { retryBaseMs: 1 }).generate(
        { template: soap, transcripts: ['x'] },
        never,
      ),
    );
    expect(fake.requests).toHaveLength(1);
    expect(error.retryable).toBe(false);
    expect(error.message).toContain('HTTP 401');
    expect(error.message).toContain('Incorrect API key');
    expect(error.message).not.toContain('sk-test-key');
  });

  it('times out a slow answer and retries it', async () => {
    fake = await startFakeEngine((_request, index) => (index === 0 ? { hang: true } : noteAnswer({ Plan: 'Rest.' })));
    const started = Date.now();
    const sections = await new ChatCompletionsGenerator(engine(fake.url, { timeoutMs: 150 }), {
      retryBaseMs: 1,
    }).generate({ template: soap, transcripts: ['x'] }, never);
    expect(Date.now() - started).toBeGreaterThanOrEqual(140);
    expect(fake.requests).toHaveLength(2);
    expect(sections.at(-1)!.text).toBe('Rest.');
  });

  it('reports a timeout after the last attempt', async () => {
    fake = await startFakeEngine(() => ({ hang: true }));
    const error = await engineError(
      new ChatCompletionsGenerator(engine(fake.url, { timeoutMs: 100, maxRetries: 1 }), { retryBaseMs: 1 }).generate(
        { template: soap, transcripts: ['x'] },
        never,
      ),
    );
    expect(error.message).toContain('no answer from');
    expect(error.message).toContain('within 100 ms (2 attempts)');
    expect(error.retryable).toBe(true);
  });

  it('reports an unreachable server', async () => {
    fake = await startFakeEngine(() => noteAnswer({}));
    const url = fake.url;
    await fake.close();
    fake = undefined;
    const error = await engineError(
      new ChatCompletionsGenerator(engine(url, { maxRetries: 0 })).generate(
        { template: soap, transcripts: ['x'] },
        never,
      ),
    );
    expect(error.message).toMatch(/cannot reach .*ECONNREFUSED/);
  });

  it('stops at once when the job is aborted', async () => {
    fake = await startFakeEngine(() => ({ hang: true }));
    const controller = new AbortController();
    const reason = new Error('shutting down');
    const promise = new ChatCompletionsGenerator(engine(fake.url)).generate(
      { template: soap, transcripts: ['x'] },
      controller.signal,
    );
    await fake.received(1);
    controller.abort(reason);
    await expect(promise).rejects.toBe(reason);
    expect(fake.requests).toHaveLength(1);
  });

  it('treats an answer without the sections as retryable', async () => {
    fake = await startFakeEngine(() => chatAnswer('I cannot help with that.'));
    const error = await engineError(
      new ChatCompletionsGenerator(engine(fake.url, { maxRetries: 0 })).generate(
        { template: soap, transcripts: ['x'] },
        never,
      ),
    );
    expect(error.retryable).toBe(true);
    expect(error.message).toContain("none of the template's sections");
  });
});

describe('sectionsFromAnswer', () => {
  it('reads JSON inside a code fence, matching titles loosely and keeping the template order', () => {
    const answer =
      '```json\n{"sections": [{"title": "plan", "text": "Rest. "}, {"title": "SUBJECTIVE", "text": "Cough."}]}\n```';
    expect(sectionsFromAnswer(answer, TITLES)).toEqual([
      { title: 'Subjective', text: 'Cough.' },
      { title: 'Objective', text: 'Not discussed.' },
      { title: 'Assessment', text: 'Not discussed.' },
      { title: 'Plan', text: 'Rest.' },
    ]);
  });

  it('reads a JSON object keyed by title', () => {
    expect(sectionsFromAnswer('{"Subjective": "Cough.", "Plan": "Rest."}', TITLES)[3]).toEqual({
      title: 'Plan',
      text: 'Rest.',
    });
  });

  it('reads a Markdown answer with a heading per section', () => {
    const answer =
      'Here is the note.\n\n## Subjective\nCough for two weeks.\nWorse at night.\n\n**Objective:**\nLungs clear.\n\nASSESSMENT\nViral.\n\n### Plan\n- Rest\n- Fluids';
    expect(sectionsFromAnswer(answer, TITLES)).toEqual([
      { title: 'Subjective', text: 'Cough for two weeks.\nWorse at night.' },
      { title: 'Objective', text: 'Lungs clear.' },
      { title: 'Assessment', text: 'Viral.' },
      { title: 'Plan', text: '- Rest\n- Fluids' },
    ]);
  });
});

describe('speech-to-text engine', () => {
  it('uploads the file with the model and returns the text', async () => {
    fake = await startFakeEngine(() => ({ json: { text: ' Doctor: Hello. Patient: I have a cough. ' } }));
    const stt = new TranscriptionEngine(engine(fake.url, { model: 'whisper-1' }));
    expect(stt.name).toBe('stt:whisper-1');
    const audio = Buffer.from('RIFF....WAVEfmt fake audio bytes');
    const text = await stt.transcribe({ filename: 'visit.wav', contentType: 'audio/wav', data: audio }, never);
    expect(text).toBe('Doctor: Hello. Patient: I have a cough.');
    const [request] = fake.requests;
    expect(request.url).toBe('/v1/audio/transcriptions');
    expect(request.headers.authorization).toBe('Bearer sk-test-key');
    expect(request.headers['content-type']).toMatch(/^multipart\/form-data; boundary=/);
    const body = request.body.toString('latin1');
    expect(body).toMatch(
      /name="file"; filename="visit.wav"\r\nContent-Type: audio\/wav\r\n\r\nRIFF....WAVEfmt fake audio bytes\r\n/,
    );
    expect(body).toMatch(/name="model"\r\n\r\nwhisper-1\r\n/);
    expect(body).toMatch(/name="response_format"\r\n\r\njson\r\n/);
  });

  it('retries a failed upload with a fresh body', async () => {
    fake = await startFakeEngine((_request, index) =>
      index === 0 ? { status: 500, body: 'oops' } : { json: { text: 'ok' } },
    );
    const stt = new TranscriptionEngine(engine(fake.url), { retryBaseMs: 1 });
    expect(
      await stt.transcribe({ filename: 'a.mp3', contentType: 'audio/mpeg', data: Buffer.from('ID3') }, never),
    ).toBe('ok');
    expect(fake.requests).toHaveLength(2);
    expect(fake.requests[1].body.toString('latin1')).toContain('ID3');
  });

  it('turns speaker-labelled segments into speaker turns', () => {
    expect(
      transcriptFromAnswer({
        text: 'Hello. Hi. I have a cough.',
        segments: [
          { speaker: 'A', text: 'Hello.' },
          { speaker: 'B', text: 'Hi.' },
          { speaker: 'B', text: 'I have a cough.' },
        ],
      }),
    ).toBe('A: Hello.\nB: Hi. I have a cough.');
    expect(transcriptFromAnswer({ text: 'plain', segments: [{ start: 0, text: 'plain' }] })).toBe('plain');
    expect(() => transcriptFromAnswer({})).toThrow(EngineError);
  });
});

describe('endpoint', () => {
  it('appends the path unless the URL already ends with it', () => {
    expect(endpoint('http://h/v1', '/chat/completions')).toBe('http://h/v1/chat/completions');
    expect(endpoint('http://h/v1/chat/completions', '/chat/completions')).toBe('http://h/v1/chat/completions');
  });
});
