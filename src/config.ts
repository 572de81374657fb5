// The one place that reads the environment (CONTRACT.md "Running it"). Everything else receives the
// frozen Config object, so tests can build an app from any configuration without touching process.env.

export interface Config {
  readonly host: string;
  readonly port: number;
  readonly publicUrl: string;
  readonly databaseUrl: string;
  readonly tokenTtlSeconds: number;
  readonly maxBodyBytes: number;
  readonly redisUrl: string | undefined;
  readonly logLevel: string;
  readonly tlsCertFile: string | undefined;
  readonly tlsKeyFile: string | undefined;
  /** AMBIENT_FHIR_STANDARD_STATUS=1: 400/422 for invalid resources instead of SPEC.md's 401. */
  readonly fhirStandardStatus: boolean;
  /** Origins allowed by CORS; empty means CORS is off, ['*'] allows any origin. */
  readonly corsOrigins: readonly string[];
  readonly trustProxy: boolean;
  readonly loginMaxFailuresPerUser: number;
  readonly loginMaxFailuresPerAddress: number;
  readonly loginLockoutSeconds: number;
  readonly maxBundleEntries: number;
  readonly referentialIntegrity: boolean;
}

export class ConfigError extends Error {}

type Env = Record<string, string | undefined>;

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

export function loadConfig(env: Env = process.env): Readonly<Config> {
  const problems: string[] = [];
  const integer = (name: string, fallback: number, min: number, max = Number.MAX_SAFE_INTEGER): number => {
    const raw = env[name];
    if (raw === undefined || raw === '') return fallback;
    const value = Number(raw);
    if (!Number.isInteger(value) || value < min || value > max) {
      problems.push(`${name} must be an integer between ${min} and ${max}, got "${raw}"`);
      return fallback;
    }
    return value;
  };
  const flag = (name: string): boolean => {
    const raw = (env[name] ?? '').trim().toLowerCase();
    if (raw === '' || raw === '0' || raw === 'false' || raw === 'no') return false;
    if (raw === '1' || raw === 'true' || raw === 'yes') return true;
    problems.push(`${name} must be 1/true/yes or 0/false/no, got "${env[name]}"`);
    return false;
  };

  const host = env.HOST || '127.0.0.1';
  const port = integer('PORT', 8080, 0, 65535);
  const tlsCertFile = env.TLS_CERT_FILE || undefined;
  const tlsKeyFile = env.TLS_KEY_FILE || undefined;
  if (Boolean(tlsCertFile) !== Boolean(tlsKeyFile))
    problems.push('TLS_CERT_FILE and TLS_KEY_FILE must be set together');
  const scheme = tlsCertFile ? 'https' : 'http';
  const publicUrl = (
    env.AMBIENT_PUBLIC_URL || `${scheme}://${host.includes(':') ? `[${host}]` : host}:${port}`
  ).replace(/\/+$/, '');
  try {
    const parsed = new URL(publicUrl);
    if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') throw new Error();
  } catch {
    problems.push(`AMBIENT_PUBLIC_URL must be an absolute http(s) URL, got "${publicUrl}"`);
  }

  const databaseUrl = env.DATABASE_URL || 'sqlite:./data/ambient.db';
  if (!/^sqlite:./.test(databaseUrl) && !/^postgres(ql)?:\/\//.test(databaseUrl)) {
    problems.push(
      `DATABASE_URL must be sqlite:<path>, sqlite::memory: or postgres://..., got "${redactUrl(databaseUrl)}"`,
    );
  }

  const logLevel = env.LOG_LEVEL || 'info';
  if (!LOG_LEVELS.includes(logLevel)) problems.push(`LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')}`);

  const corsRaw = (env.AMBIENT_CORS_ORIGINS ?? '').trim();
  const corsOrigins = corsRaw === '' ? [] : corsRaw.split(',').map((o) => o.trim().replace(/\/+$/, ''));

  const config: Config = {
    host,
    port,
    publicUrl,
    databaseUrl,
    tokenTtlSeconds: integer('AMBIENT_TOKEN_TTL_SECONDS', 172800, 1),
    maxBodyBytes: integer('AMBIENT_MAX_BODY_BYTES', 16 * 1024 * 1024, 1024),
    redisUrl: env.REDIS_URL || undefined,
    logLevel,
    tlsCertFile,
    tlsKeyFile,
    fhirStandardStatus: flag('AMBIENT_FHIR_STANDARD_STATUS'),
    corsOrigins,
    trustProxy: flag('AMBIENT_TRUST_PROXY'),
    loginMaxFailuresPerUser: integer('AMBIENT_LOGIN_MAX_FAILURES_PER_USER', 10, 1),
    loginMaxFailuresPerAddress: integer('AMBIENT_LOGIN_MAX_FAILURES_PER_ADDRESS', 100, 1),
    loginLockoutSeconds: integer('AMBIENT_LOGIN_LOCKOUT_SECONDS', 900, 1),
    maxBundleEntries: integer('AMBIENT_MAX_BUNDLE_ENTRIES', 1000, 1),
    referentialIntegrity: flag('AMBIENT_REFERENTIAL_INTEGRITY'),
  };
  if (problems.length > 0) throw new ConfigError(`Invalid configuration:\n  - ${problems.join('\n  - ')}`);
  return Object.freeze(config);
}

/** Hides the password of a database or Redis URL so it can be logged. */
export function redactUrl(url: string): string {
  return url.replace(/(\/\/[^:/@]*:)[^@]*@/, '$1***@');
}
