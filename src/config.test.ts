import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig, redactUrl } from './config.js';

describe('loadConfig', () => {
  it('applies the CONTRACT.md defaults and freezes the result', () => {
    const config = loadConfig({});
    expect(config).toMatchObject({
      host: '127.0.0.1',
      port: 8080,
      publicUrl: 'http://127.0.0.1:8080',
      databaseUrl: 'sqlite:./data/ambient.db',
      tokenTtlSeconds: 172800,
      maxBodyBytes: 16 * 1024 * 1024,
      requestTimeoutMs: 30_000,
      logLevel: 'info',
      fhirStandardStatus: false,
      corsOrigins: [],
    });
    expect(Object.isFrozen(config)).toBe(true);
  });

  it('derives the public URL from HOST, PORT and TLS, and trims a trailing slash from AMBIENT_PUBLIC_URL', () => {
    expect(loadConfig({ HOST: '0.0.0.0', PORT: '9000' }).publicUrl).toBe('http://0.0.0.0:9000');
    expect(loadConfig({ TLS_CERT_FILE: 'c.pem', TLS_KEY_FILE: 'k.pem' }).publicUrl).toBe('https://127.0.0.1:8080');
    expect(loadConfig({ AMBIENT_PUBLIC_URL: 'https://fhir.example.org/' }).publicUrl).toBe('https://fhir.example.org');
  });

  it('reads flags and lists', () => {
    const config = loadConfig({
      AMBIENT_FHIR_STANDARD_STATUS: '1',
      AMBIENT_CORS_ORIGINS: 'https://a.example, https://b.example/',
      AMBIENT_TRUST_PROXY: 'true',
    });
    expect(config.fhirStandardStatus).toBe(true);
    expect(config.corsOrigins).toEqual(['https://a.example', 'https://b.example']);
    expect(config.trustProxy).toBe(true);
  });

  it('names every invalid value at once', () => {
    let error: unknown;
    try {
      loadConfig({ PORT: 'eighty', DATABASE_URL: 'mysql://x', LOG_LEVEL: 'loud', TLS_CERT_FILE: 'c.pem' });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const message = (error as Error).message;
    expect(message).toContain('PORT');
    expect(message).toContain('DATABASE_URL');
    expect(message).toContain('LOG_LEVEL');
    expect(message).toContain('TLS_KEY_FILE');
  });

  it('reads AMBIENT_REQUEST_TIMEOUT_MS as a whole number of milliseconds', () => {
    expect(loadConfig({ AMBIENT_REQUEST_TIMEOUT_MS: '500' }).requestTimeoutMs).toBe(500);
    for (const bad of ['0', '1.5', 'soon', '99']) {
      expect(() => loadConfig({ AMBIENT_REQUEST_TIMEOUT_MS: bad }), bad).toThrow(/AMBIENT_REQUEST_TIMEOUT_MS/);
    }
  });

  it('never prints a database password', () => {
    expect(redactUrl('postgres://app:secret@db:5432/fhir')).toBe('postgres://app:***@db:5432/fhir');
    let message = '';
    try {
      loadConfig({ DATABASE_URL: 'mysql://app:secret@db/fhir' });
    } catch (e) {
      message = (e as Error).message;
    }
    expect(message).not.toContain('secret');
  });
});
