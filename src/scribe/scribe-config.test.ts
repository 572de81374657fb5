// The scribe's settings in config.ts: defaults, the engines, and refusals naming the variable.
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../config.js';

describe('scribe configuration', () => {
  it('defaults to two workers, the built-in generator and no speech to text', () => {
    const { scribe } = loadConfig({});
    expect(scribe).toEqual({
      workers: 2,
      pollMs: 1000,
      leaseSeconds: 60,
      maxAttempts: 5,
      retryBaseMs: 5000,
      llm: undefined,
      stt: undefined,
    });
    expect(Object.isFrozen(scribe)).toBe(true);
  });

  it('reads the engines', () => {
    const { scribe } = loadConfig({
      AMBIENT_SCRIBE_WORKERS: '0',
      AMBIENT_LLM_URL: 'https://llm.example/v1/',
      AMBIENT_LLM_MODEL: 'gpt-4o-mini',
      AMBIENT_LLM_API_KEY: 'sk-1',
      AMBIENT_LLM_TIMEOUT_MS: '30000',
      AMBIENT_LLM_MAX_RETRIES: '4',
      AMBIENT_STT_URL: 'http://127.0.0.1:9000/v1',
    });
    expect(scribe.workers).toBe(0);
    expect(scribe.llm).toEqual({
      url: 'https://llm.example/v1',
      model: 'gpt-4o-mini',
      apiKey: 'sk-1',
      timeoutMs: 30000,
      maxRetries: 4,
    });
    expect(scribe.stt).toEqual({
      url: 'http://127.0.0.1:9000/v1',
      model: 'whisper-1',
      apiKey: undefined,
      timeoutMs: 120000,
      maxRetries: 2,
    });
  });

  it('names every bad setting', () => {
    let error: unknown;
    try {
      loadConfig({
        AMBIENT_LLM_URL: 'ftp://x',
        AMBIENT_STT_URL: 'not a url',
        AMBIENT_SCRIBE_WORKERS: '-1',
        AMBIENT_SCRIBE_MAX_ATTEMPTS: '0',
        AMBIENT_LLM_TIMEOUT_MS: 'soon',
      });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const message = (error as Error).message;
    for (const name of [
      'AMBIENT_LLM_URL must be an absolute http(s) URL',
      'AMBIENT_LLM_MODEL must be set when AMBIENT_LLM_URL is',
      'AMBIENT_STT_URL must be an absolute http(s) URL',
      'AMBIENT_SCRIBE_WORKERS',
      'AMBIENT_SCRIBE_MAX_ATTEMPTS',
      'AMBIENT_LLM_TIMEOUT_MS',
    ]) {
      expect(message).toContain(name);
    }
  });
});
