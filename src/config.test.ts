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
      AMBIENT_TRUST_PROXY: '10.0.0.5, 10.1.0.0/16,2001:db8::/32 , loopback',
    });
    expect(config.fhirStandardStatus).toBe(true);
    expect(config.corsOrigins).toEqual(['https://a.example', 'https://b.example']);
    expect(config.trustProxy).toEqual(['10.0.0.5', '10.1.0.0/16', '2001:db8::/32', 'loopback']);
    expect(loadConfig({}).trustProxy).toEqual([]);
    expect(loadConfig({ AMBIENT_TRUST_PROXY: '0' }).trustProxy).toEqual([]);
  });

  it('refuses AMBIENT_TRUST_PROXY=1 (it would believe any client) and names a bad entry', () => {
    for (const value of ['1', 'true', 'yes']) {
      expect(() => loadConfig({ AMBIENT_TRUST_PROXY: value })).toThrow(/name the proxies' addresses or CIDR ranges/);
    }
    for (const bad of ['proxy.example.org', '10.0.0.0/33', '10.0.0.1/8/1', '::1/129', '10.0.0.0/x', '']) {
      expect(() => loadConfig({ AMBIENT_TRUST_PROXY: `10.0.0.1,${bad}` }), bad).toThrow(
        `AMBIENT_TRUST_PROXY: "${bad}" is not an IP address`,
      );
    }
  });

  it('reads the login lockout thresholds, per (username, address), per username and per address', () => {
    expect(loadConfig({})).toMatchObject({
      loginMaxFailuresPerUserAddress: 10,
      loginMaxFailuresPerUser: 100,
      loginMaxFailuresPerAddress: 100,
      loginLockoutSeconds: 900,
      loginKnownAddressSeconds: 14 * 86400,
    });
    expect(() => loadConfig({ AMBIENT_LOGIN_KNOWN_ADDRESS_SECONDS: String(30 * 86400) })).toThrow(
      /AMBIENT_LOGIN_KNOWN_ADDRESS_SECONDS must be an integer between 0 and 2000000/,
    );
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

  it('reads the search time budget and the number of SQLite search threads', () => {
    expect(loadConfig({})).toMatchObject({ searchTimeoutMs: 10_000, searchWorkers: 2 });
    expect(loadConfig({ AMBIENT_SEARCH_TIMEOUT_MS: '250', AMBIENT_SEARCH_WORKERS: '0' })).toMatchObject({
      searchTimeoutMs: 250,
      searchWorkers: 0,
    });
    for (const bad of ['0', '-1', '2.5', 'ten']) {
      expect(() => loadConfig({ AMBIENT_SEARCH_TIMEOUT_MS: bad }), bad).toThrow(/AMBIENT_SEARCH_TIMEOUT_MS/);
    }
    expect(() => loadConfig({ AMBIENT_SEARCH_WORKERS: '65' })).toThrow(/AMBIENT_SEARCH_WORKERS/);
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
