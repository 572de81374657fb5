import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import type { NetworkInterfaceInfo } from 'node:os';
import { ConfigError, knownVariables, levenshtein, loadConfig, redactUrl, wildcardPublicHost } from './config.js';

describe('loadConfig', () => {
  it('applies the docs/api.md defaults and freezes the result', () => {
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
    expect(loadConfig({ HOST: '10.1.2.3', PORT: '9000' }).publicUrl).toBe('http://10.1.2.3:9000');
    expect(loadConfig({ HOST: '::1', PORT: '9000' }).publicUrl).toBe('http://[::1]:9000');
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

  it('reads the number of server processes (AMBIENT_WORKERS, 1 to 64)', () => {
    expect(loadConfig({}).workers).toBe(1);
    expect(loadConfig({ AMBIENT_WORKERS: '4' }).workers).toBe(4);
    for (const bad of ['0', '65', '1.5', 'many']) {
      expect(() => loadConfig({ AMBIENT_WORKERS: bad }), bad).toThrow(
        /AMBIENT_WORKERS must be an integer between 1 and 64/,
      );
    }
  });

  it('never prints a database password', () => {
    expect(redactUrl('postgres://app:secret@db:5432/fhir')).toBe('postgres://app:***@db:5432/fhir');
    expect(redactUrl('postgres://app@db/fhir?sslmode=require&password=secret&x=1')).toBe(
      'postgres://app@db/fhir?sslmode=require&password=***&x=1',
    );
    let message = '';
    try {
      loadConfig({ DATABASE_URL: 'mysql://app:secret@db/fhir' });
    } catch (e) {
      message = (e as Error).message;
    }
    expect(message).not.toContain('secret');
  });
});

describe('unknown and misspelt variables', () => {
  const warningsFor = (env: Record<string, string>) => {
    const lines: string[] = [];
    loadConfig(env, { warn: (line) => lines.push(line) });
    return lines;
  };

  it('warns about a misspelt name, one line naming it and the closest known name, and ignores it', () => {
    expect(warningsFor({ AMBIENT_CORS_ORIGIN: 'https://a.example' })).toEqual([
      'AMBIENT_CORS_ORIGIN is not a setting of ambient-fhir and is ignored; the closest known name is AMBIENT_CORS_ORIGINS',
    ]);
    expect(warningsFor({ AMBIENT_SEARCH_TIMEOUT: '5', AMBIENT_LLM_MODLE: 'x' })).toEqual([
      expect.stringMatching(/^AMBIENT_SEARCH_TIMEOUT is .* closest known name is AMBIENT_SEARCH_TIMEOUT_MS$/),
      expect.stringMatching(/^AMBIENT_LLM_MODLE is .* closest known name is AMBIENT_LLM_MODEL$/),
    ]);
  });

  it('warns about a near miss of an unprefixed setting: separators, case, or two edits', () => {
    expect(warningsFor({ DATABSE_URL: 'sqlite:x.db', LOGLEVEL: 'debug', redis_url: 'redis://x' })).toEqual([
      'DATABSE_URL is not a setting of ambient-fhir and is ignored; the closest known name is DATABASE_URL',
      'LOGLEVEL is not a setting of ambient-fhir and is ignored; the closest known name is LOG_LEVEL',
      'redis_url is not a setting of ambient-fhir and is ignored; the closest known name is REDIS_URL',
    ]);
  });

  it('leaves the rest of a shared environment alone, however close to PORT or HOST', () => {
    const environment = {
      ...{ HOME: '/root', PATH: '/bin', HOSTNAME: 'h', PORTS: '1', SSL_CERT_FILE: 'c', DB_URL: 'x', PGHOST: 'h' },
      ...{ NODE_ENV: 'production', REDIS_HOST: 'h', TLS_CA_FILE: 'x', LOG_FILE: 'x', LC_ALL: 'C' },
    };
    expect(warningsFor(environment)).toEqual([]);
  });

  it('knows every name it reads, including those read only when another is set, and the tooling names', () => {
    expect(
      warningsFor({
        AMBIENT_CORS_ORIGINS: '*',
        AMBIENT_LLM_MODEL: 'm',
        AMBIENT_STT_API_KEY: 'k',
        AMBIENT_TEST_POSTGRES_URL: 'postgres://x',
        AMBIENT_FULL_TESTS: '1',
        OTHER_VARIABLE: 'x',
      }),
    ).toEqual([]);
  });

  it('still warns when the configuration is refused, so that a typo behind the refusal is seen', () => {
    const lines: string[] = [];
    expect(() => loadConfig({ PORT: 'abc', AMBIENT_PUBLC_URL: 'x' }, { warn: (l) => lines.push(l) })).toThrow(
      ConfigError,
    );
    expect(lines).toEqual([expect.stringContaining('closest known name is AMBIENT_PUBLIC_URL')]);
  });

  it('records the known names as config.ts reads them: each one is documented in docs/configuration.md', () => {
    const names = knownVariables();
    expect(names).toEqual(expect.arrayContaining(['AMBIENT_CORS_ORIGINS', 'AMBIENT_LLM_API_KEY', 'HOST', 'PORT']));
    const documented = readFileSync(new URL('../docs/configuration.md', import.meta.url), 'utf8');
    expect(names.filter((name) => name.startsWith('AMBIENT_') && !documented.includes(name))).toEqual([]);
  });

  it('measures distance by Levenshtein', () => {
    expect(levenshtein('AMBIENT_CORS_ORIGIN', 'AMBIENT_CORS_ORIGINS')).toBe(1);
    expect(levenshtein('kitten', 'sitting')).toBe(3);
    expect(levenshtein('', 'abc')).toBe(3);
  });
});

describe('the public URL of a wildcard HOST', () => {
  const nic = (address: string, family: 'IPv4' | 'IPv6', internal = false) =>
    ({ address, family, internal, netmask: '', mac: '', cidr: null }) as unknown as NetworkInterfaceInfo;
  const interfaces = {
    lo: [nic('127.0.0.1', 'IPv4', true), nic('::1', 'IPv6', true)],
    eth0: [nic('fe80::1', 'IPv6'), nic('192.168.1.20', 'IPv4')],
    eth1: [nic('10.0.0.7', 'IPv4')],
  };

  it('takes the first non-internal IPv4 address and says so in one start-up line', () => {
    for (const host of ['0.0.0.0', '::']) {
      const lines: string[] = [];
      const config = loadConfig(
        { HOST: host, PORT: '9000' },
        { networkInterfaces: () => interfaces, hostname: () => 'box', inform: (l) => lines.push(l) },
      );
      expect(config.publicUrl).toBe('http://192.168.1.20:9000');
      expect(config.host).toBe(host);
      expect(lines).toEqual([
        `public URL http://192.168.1.20:9000 (HOST=${host} listens on every interface; the host is the first non-internal IPv4 address (eth0)): set AMBIENT_PUBLIC_URL to the address clients use`,
      ]);
    }
  });

  it('falls back to a global IPv6 address, then the host name, then loopback', () => {
    expect(wildcardPublicHost({ eth0: [nic('fe80::1', 'IPv6'), nic('2001:db8::5', 'IPv6')] }, 'box').host).toBe(
      '[2001:db8::5]',
    );
    expect(wildcardPublicHost({ lo: [nic('127.0.0.1', 'IPv4', true)] }, 'box.example.org').host).toBe(
      'box.example.org',
    );
    expect(wildcardPublicHost({}, 'localhost').host).toBe('127.0.0.1');
  });

  it('leaves AMBIENT_PUBLIC_URL and a specific HOST alone, with no start-up line', () => {
    const lines: string[] = [];
    const options = {
      networkInterfaces: () => interfaces,
      hostname: () => 'box',
      inform: (l: string) => lines.push(l),
    };
    expect(loadConfig({ HOST: '0.0.0.0', AMBIENT_PUBLIC_URL: 'https://fhir.example.org' }, options).publicUrl).toBe(
      'https://fhir.example.org',
    );
    expect(loadConfig({ HOST: '127.0.0.1' }, options).publicUrl).toBe('http://127.0.0.1:8080');
    expect(lines).toEqual([]);
  });
});
