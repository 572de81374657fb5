// The one place that reads the environment (docs/api.md "Running it"). Everything else receives the
// frozen Config object, so tests can build an app from any configuration without touching process.env.
import { isIP } from 'node:net';
import { hostname as osHostname, networkInterfaces as osNetworkInterfaces } from 'node:os';
import type { NetworkInterfaceInfo } from 'node:os';

export interface Config {
  readonly host: string;
  readonly port: number;
  readonly publicUrl: string;
  readonly databaseUrl: string;
  readonly tokenTtlSeconds: number;
  readonly maxBodyBytes: number;
  /**
   * The most request body bytes held at once across the process, from the first byte read to the
   * response (http/body-budget.ts): past it a body is refused with 503 and Retry-After. At least maxBodyBytes.
   */
  readonly maxBodyBytesInFlight: number;
  /**
   * The most bytes of stored resources one search or history page carries (at least one resource):
   * a page ends early, with its `next` link, where the next resource would not fit.
   */
  readonly maxPageBytes: number;
  /** Time allowed to receive a whole request, headers and body (408 past it); not the time to answer it. */
  readonly requestTimeoutMs: number;
  readonly redisUrl: string | undefined;
  readonly logLevel: string;
  readonly tlsCertFile: string | undefined;
  readonly tlsKeyFile: string | undefined;
  /** AMBIENT_FHIR_STANDARD_STATUS=1: 400/422 for invalid resources instead of the specification's 401. */
  readonly fhirStandardStatus: boolean;
  /** Origins allowed by CORS; empty means CORS is off, ['*'] allows any origin. */
  readonly corsOrigins: readonly string[];
  /**
   * AMBIENT_TRUST_PROXY: the reverse proxies whose X-Forwarded-For / X-Forwarded-Proto are believed, as
   * addresses, CIDR ranges or proxy-addr's names (loopback, linklocal, uniquelocal); empty: none.
   */
  readonly trustProxy: readonly string[];
  /** Failed logins for one username from one client address before that pair is locked out. */
  readonly loginMaxFailuresPerUserAddress: number;
  /** Failed logins for one username from all addresses together (addresses it logged in from are exempt). */
  readonly loginMaxFailuresPerUser: number;
  readonly loginMaxFailuresPerAddress: number;
  readonly loginLockoutSeconds: number;
  /** How long an address an account logged in from stays exempt from the per-username limit. */
  readonly loginKnownAddressSeconds: number;
  readonly maxBundleEntries: number;
  /** AMBIENT_SEARCH_TIMEOUT_MS: the time one search (or count), or all the reads of one Bundle, may take. */
  readonly searchTimeoutMs: number;
  /**
   * AMBIENT_SEARCH_WORKERS: SQLite's search threads (default 2). 0 runs searches on the event loop, as
   * before the time budget: no other request is answered while one runs, and none is stopped.
   */
  readonly searchWorkers: number;
  /**
   * AMBIENT_WORKERS (or `serve --workers N`): server processes sharing one port (Node's cluster module);
   * more than one needs PostgreSQL.
   */
  readonly workers: number;
  /** AMBIENT_SHUTDOWN_TIMEOUT_MS: how long SIGTERM waits for requests in flight before the process exits anyway. */
  readonly shutdownTimeoutMs: number;
  /**
   * AMBIENT_POSTGRES_POOLER=transaction: PostgreSQL is reached through a pooler in transaction mode
   * (PgBouncer's pool_mode=transaction), so nothing may outlive a transaction on a connection.
   */
  readonly postgresPooler: 'none' | 'transaction';
  /** DATABASE_READ_URLS: PostgreSQL streaming replicas that searches read from (read-your-writes kept). */
  readonly databaseReadUrls: readonly string[];
  /** AMBIENT_REPLICA_MAX_LAG_MS: a replica further behind the primary than this is not read from. */
  readonly replicaMaxLagMs: number;
  readonly referentialIntegrity: boolean;
  /** full: every commit's WAL is fsynced before it is acknowledged (survives power loss); normal: survives process crashes. */
  readonly sqliteSynchronous: 'full' | 'normal';
  /** AMBIENT_METRICS_PORT: Prometheus text at GET /metrics on HOST:this port; undefined: no metrics. */
  readonly metricsPort: number | undefined;
  /** The scribe records API: job processing and the optional note (LLM) and speech-to-text engines. */
  readonly scribe: ScribeConfig;
  /** Bulk Data export (src/export/, docs/export.md). */
  readonly export: ExportConfig;
  /** R4 Subscriptions (src/subscriptions/, docs/subscriptions.md). */
  readonly subscriptions: SubscriptionConfig;
}

export interface SubscriptionConfig {
  /** AMBIENT_SUBSCRIPTION_ENDPOINTS: the URL prefixes a rest-hook may name (none: no rest-hook is allowed). */
  readonly endpoints: readonly string[];
  /** AMBIENT_SUBSCRIPTION_WORKERS: rest-hook deliveries this process makes at once (0: it delivers none). */
  readonly workers: number;
  /** AMBIENT_SUBSCRIPTION_POLL_MS: how often a process looks for writes to match and notifications to send. */
  readonly pollMs: number;
  /** AMBIENT_SUBSCRIPTION_TIMEOUT_MS: the time one delivery may take, connection to response. */
  readonly timeoutMs: number;
  /** AMBIENT_SUBSCRIPTION_MAX_ATTEMPTS: failed deliveries in a row after which a subscription is set to error. */
  readonly maxAttempts: number;
  /** AMBIENT_SUBSCRIPTION_RETRY_BASE_MS: the wait after the first failure, doubled for each further one (at most 5 minutes). */
  readonly retryBaseMs: number;
  /** AMBIENT_SUBSCRIPTION_MAX_PER_ACCOUNT: live subscriptions one account may have; past it a new one is set to error. */
  readonly maxPerAccount: number;
  /** AMBIENT_SUBSCRIPTION_MAX_PENDING: undelivered notifications one subscription may have; past it, error. */
  readonly maxPending: number;
}

export interface ExportConfig {
  /** AMBIENT_EXPORT_TTL_SECONDS: how long a finished export's status and files stay (then 404). */
  readonly ttlSeconds: number;
  /** Export jobs this process runs at once; 0 = it only takes kick-offs and answers status and files. */
  readonly workers: number;
  /** How long a claimed job stays reserved without a heartbeat before another process may take it over. */
  readonly leaseSeconds: number;
  /** AMBIENT_EXPORT_MAX_ACTIVE: exports one account may have queued or running at once (429 past it). */
  readonly maxActive: number;
  /** AMBIENT_EXPORT_MAX_BYTES_PER_ACCOUNT: stored (compressed) bytes of one account's exports, running or kept. */
  readonly maxBytesPerAccount: number;
  /** AMBIENT_DOWNLOAD_IDLE_TIMEOUT_MS: a file download whose client reads nothing for this long is dropped. */
  readonly downloadIdleTimeoutMs: number;
  /** AMBIENT_ASYNC_WORKERS: asynchronous requests (`Prefer: respond-async`) this process runs at once. */
  readonly requestWorkers: number;
  /** AMBIENT_ASYNC_MAX_ACTIVE: asynchronous requests one account may have queued or running (429 past it). */
  readonly requestMaxActive: number;
}

/** An OpenAI-compatible HTTP engine (chat completions or audio transcriptions). */
export interface EngineConfig {
  /** Base URL, e.g. https://api.openai.com/v1 (the engine appends /chat/completions or /audio/transcriptions). */
  readonly url: string;
  readonly model: string;
  /** Sent as `Authorization: Bearer <key>`; never logged. */
  readonly apiKey: string | undefined;
  /** Time allowed for one HTTP request, in milliseconds. */
  readonly timeoutMs: number;
  /** Further attempts after a timeout, a network error, 408, 429 or 5xx. */
  readonly maxRetries: number;
}

export interface ScribeConfig {
  /** Jobs this process works on at once; 0 = this process only takes submissions, others process them. */
  readonly workers: number;
  /** How often an idle worker pool looks for jobs (other processes' submissions, retries that fell due). */
  readonly pollMs: number;
  /** How long a claimed job stays reserved without a heartbeat before another process may take it over. */
  readonly leaseSeconds: number;
  /** Attempts before a job that keeps failing ends FAILED. */
  readonly maxAttempts: number;
  /** Wait before the first retry; doubled for each further one (capped at 5 minutes). */
  readonly retryBaseMs: number;
  /** AMBIENT_LLM_*: notes come from this chat-completions engine; unset = the built-in generator. */
  readonly llm: EngineConfig | undefined;
  /** AMBIENT_STT_*: audio_files are accepted and transcribed by this engine; unset = transcripts only. */
  readonly stt: EngineConfig | undefined;
}

export class ConfigError extends Error {}

export interface ConfigOptions {
  /** Told each warning as one line: an AMBIENT_* variable this configuration does not know (ignored). */
  readonly warn?: (line: string) => void;
  /** Told facts worth one start-up line: the public URL derived for a wildcard HOST. */
  readonly inform?: (line: string) => void;
  /** The machine's network interfaces and name (os.networkInterfaces, os.hostname); tests pass their own. */
  readonly networkInterfaces?: () => NodeJS.Dict<NetworkInterfaceInfo[]>;
  readonly hostname?: () => string;
}

/**
 * The longest window of an in-process counter: rate-limiter-flexible expires them with setTimeout, which
 * fires at once for anything beyond 2^31 - 1 ms (24.8 days).
 */
const MAX_COUNTER_WINDOW_SECONDS = 2_000_000;

/** Names proxy-addr (Fastify's trustProxy) understands besides addresses and CIDR ranges. */
const PROXY_RANGE_NAMES = ['loopback', 'linklocal', 'uniquelocal'];

/**
 * AMBIENT_TRUST_PROXY: a comma-separated list of the proxies' addresses or CIDR ranges. A bare `1`/`true`
 * (which used to trust every peer, and so let any client write its own address and scheme) is refused:
 * the operator must say which peers are proxies.
 */
function trustedProxies(raw: string | undefined, problems: string[]): string[] {
  const value = (raw ?? '').trim();
  if (value === '' || /^(0|false|no)$/i.test(value)) return [];
  if (/^(1|true|yes)$/i.test(value)) {
    problems.push(
      `AMBIENT_TRUST_PROXY=${value} would trust X-Forwarded-For from any client: name the proxies' addresses or CIDR ranges instead, e.g. AMBIENT_TRUST_PROXY=10.0.0.5 or 10.0.0.0/8,loopback`,
    );
    return [];
  }
  const entries = value.split(',').map((e) => e.trim());
  for (const entry of entries) {
    if (!isAddressOrRange(entry)) {
      problems.push(
        `AMBIENT_TRUST_PROXY: "${entry}" is not an IP address, a CIDR range (address/prefix) or one of ${PROXY_RANGE_NAMES.join(', ')}`,
      );
    }
  }
  return entries;
}

function isAddressOrRange(entry: string): boolean {
  if (PROXY_RANGE_NAMES.includes(entry)) return true;
  const [address, prefix, ...more] = entry.split('/');
  const family = isIP(address);
  if (family === 0 || more.length > 0) return false;
  if (prefix === undefined) return true;
  return /^\d{1,3}$/.test(prefix) && Number(prefix) <= (family === 4 ? 32 : 128);
}

type Env = Record<string, string | undefined>;

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

/**
 * Variables with the AMBIENT_ prefix that the project's own tooling (tests, benchmarks, soak) reads, not
 * the server: an environment exported for `npm test` must not make every server it starts warn.
 */
const TOOLING_VARIABLES = /^AMBIENT_(TEST|BENCH|SOAK)_|^AMBIENT_(FULL_TESTS|FIXTURES|AUTH_BENCH)$/;

export function loadConfig(environment: Env = process.env, options: ConfigOptions = {}): Readonly<Config> {
  const { config, problems, known, publicUrlNote } = readConfig(environment, options);
  for (const name of Object.keys(environment)) {
    if (known.has(name) || TOOLING_VARIABLES.test(name)) continue;
    const suggestion = name.startsWith('AMBIENT_') ? closest(name, known) : nearMiss(name, known);
    if (suggestion === undefined) continue;
    options.warn?.(`${name} is not a setting of ambient-fhir and is ignored; the closest known name is ${suggestion}`);
  }
  if (problems.length > 0) throw new ConfigError(`Invalid configuration:\n  - ${problems.join('\n  - ')}`);
  if (publicUrlNote) options.inform?.(publicUrlNote);
  return Object.freeze(config);
}

/** Every variable the configuration reads (the names are recorded as it reads them, so they cannot drift). */
export function knownVariables(): string[] {
  return [...readConfig({}, { networkInterfaces: () => ({}), hostname: () => 'localhost' }).known].sort();
}

/** The known name nearest to an unknown one (Levenshtein distance; the first in sorted order on a tie). */
function closest(name: string, known: ReadonlySet<string>): string {
  let best = '';
  let bestDistance = Infinity;
  for (const candidate of [...known].sort()) {
    const distance = levenshtein(name, candidate);
    if (distance < bestDistance) [best, bestDistance] = [candidate, distance];
  }
  return best;
}

/**
 * A known unprefixed name (DATABASE_URL, LOG_LEVEL, ...) that an unknown name almost spells: the same
 * letters but for case and separators (`LOGLEVEL`, `database_url`), or at most two edits away
 * (`DATABSE_URL`). Only names with a separator qualify: PORT and HOST are too short to guess at, and
 * the rest of a shared environment (HOME, PATH, SSL_CERT_FILE) must not draw warnings.
 */
function nearMiss(name: string, known: ReadonlySet<string>): string | undefined {
  const squeezed = squeeze(name);
  for (const candidate of [...known].sort()) {
    if (candidate.startsWith('AMBIENT_') || !candidate.includes('_')) continue;
    if (squeeze(candidate) === squeezed) return candidate;
    if (Math.abs(candidate.length - name.length) <= 2 && levenshtein(name, candidate) <= 2) return candidate;
  }
  return undefined;
}

function squeeze(name: string): string {
  return name.toUpperCase().replace(/[^A-Z0-9]/g, '');
}

export function levenshtein(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      current[j] = Math.min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    previous = current;
  }
  return previous[b.length];
}

/** Addresses that stand for "every interface": no client can send a request to them. */
const WILDCARD_HOSTS = new Set(['0.0.0.0', '::', '[::]', '::0', '0:0:0:0:0:0:0:0']);

/**
 * The host of the default public URL when HOST is a wildcard: the first non-internal IPv4 address (in the
 * order the system lists its interfaces), else the first non-internal IPv6 address that is not link-local
 * (which would need a zone), else the machine's name, else 127.0.0.1. An address rather than the name
 * first, because a name need not resolve on the clients' side while an interface's address is reachable
 * at least from its own network.
 */
export function wildcardPublicHost(
  interfaces: NodeJS.Dict<NetworkInterfaceInfo[]>,
  hostname: string,
): { host: string; source: string } {
  const all = Object.entries(interfaces).flatMap(([name, list]) => (list ?? []).map((i) => ({ name, ...i })));
  const external = all.filter((i) => !i.internal);
  const v4 = external.find((i) => i.family === 'IPv4');
  if (v4) return { host: v4.address, source: `the first non-internal IPv4 address (${v4.name})` };
  const v6 = external.find((i) => i.family === 'IPv6' && !/^fe80:/i.test(i.address));
  if (v6) return { host: `[${v6.address}]`, source: `the first non-internal IPv6 address (${v6.name})` };
  if (hostname !== '' && hostname !== 'localhost') return { host: hostname, source: 'the host name' };
  return { host: '127.0.0.1', source: 'loopback (no other address found)' };
}

/** Reads the environment: every name read is recorded (the names loadConfig knows are exactly the ones it reads), every bad value a problem. */
class EnvReader {
  readonly known = new Set<string>();
  readonly problems: string[] = [];
  readonly env: Env;

  constructor(environment: Env) {
    const known = this.known;
    this.env = new Proxy(environment, {
      get(target, name) {
        if (typeof name === 'string') known.add(name);
        return Reflect.get(target, name) as string | undefined;
      },
    });
  }

  integer(name: string, fallback: number, min: number, max = Number.MAX_SAFE_INTEGER): number {
    const raw = this.env[name];
    if (raw === undefined || raw === '') return fallback;
    const value = Number(raw);
    if (!Number.isInteger(value) || value < min || value > max) {
      this.problems.push(`${name} must be an integer between ${min} and ${max}, got "${raw}"`);
      return fallback;
    }
    return value;
  }

  flag(name: string): boolean {
    const raw = (this.env[name] ?? '').trim().toLowerCase();
    if (raw === '' || raw === '0' || raw === 'false' || raw === 'no') return false;
    if (raw === '1' || raw === 'true' || raw === 'yes') return true;
    this.problems.push(`${name} must be 1/true/yes or 0/false/no, got "${this.env[name]}"`);
    return false;
  }
}

/** AMBIENT_LLM_* / AMBIENT_STT_*: an engine when <prefix>_URL is set. */
function engineSettings(
  reader: EnvReader,
  prefix: string,
  defaultModel: string | undefined,
  defaultTimeoutMs: number,
): EngineConfig | undefined {
  const { env, problems } = reader;
  const url = (env[`${prefix}_URL`] ?? '').trim().replace(/\/+$/, '');
  const timeoutMs = reader.integer(`${prefix}_TIMEOUT_MS`, defaultTimeoutMs, 100, 3_600_000);
  const maxRetries = reader.integer(`${prefix}_MAX_RETRIES`, 2, 0, 10);
  // Read before the early return, so that both names are known even while the engine is off.
  const model = (env[`${prefix}_MODEL`] ?? '').trim() || defaultModel;
  const apiKey = env[`${prefix}_API_KEY`] || undefined;
  if (url === '') return undefined;
  try {
    const parsed = new URL(url);
    if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') throw new Error();
  } catch {
    problems.push(`${prefix}_URL must be an absolute http(s) URL, got "${redactUrl(url)}"`);
  }
  if (model === undefined) problems.push(`${prefix}_MODEL must be set when ${prefix}_URL is`);
  return Object.freeze({
    url,
    model: model ?? '',
    apiKey,
    timeoutMs,
    maxRetries,
  });
}

/** HOST, PORT, TLS and the public URL clients follow (derived when HOST is a wildcard, with a note). */
function listenerSettings(reader: EnvReader, options: ConfigOptions) {
  const { env, problems } = reader;
  const host = env.HOST || '127.0.0.1';
  const port = reader.integer('PORT', 8080, 0, 65535);
  const tlsCertFile = env.TLS_CERT_FILE || undefined;
  const tlsKeyFile = env.TLS_KEY_FILE || undefined;
  if (Boolean(tlsCertFile) !== Boolean(tlsKeyFile))
    problems.push('TLS_CERT_FILE and TLS_KEY_FILE must be set together');
  const scheme = tlsCertFile ? 'https' : 'http';
  let publicUrlNote: string | undefined;
  let publicHost = host.includes(':') && !host.startsWith('[') ? `[${host}]` : host;
  if (!env.AMBIENT_PUBLIC_URL && WILDCARD_HOSTS.has(host)) {
    // http://0.0.0.0:8080/... is no address a client can follow (Location, fullUrl, paging links, iss, aud).
    const derived = wildcardPublicHost(
      (options.networkInterfaces ?? osNetworkInterfaces)(),
      (options.hostname ?? osHostname)(),
    );
    publicHost = derived.host;
    publicUrlNote = `public URL ${scheme}://${publicHost}:${port} (HOST=${host} listens on every interface; the host is ${derived.source}): set AMBIENT_PUBLIC_URL to the address clients use`;
  }
  const publicUrl = (env.AMBIENT_PUBLIC_URL || `${scheme}://${publicHost}:${port}`).replace(/\/+$/, '');
  try {
    const parsed = new URL(publicUrl);
    if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') throw new Error();
  } catch {
    problems.push(`AMBIENT_PUBLIC_URL must be an absolute http(s) URL, got "${publicUrl}"`);
  }
  return { host, port, tlsCertFile, tlsKeyFile, publicUrl, publicUrlNote };
}

/** DATABASE_URL and DATABASE_READ_URLS. */
function databaseSettings(reader: EnvReader) {
  const { env, problems } = reader;
  const databaseUrl = env.DATABASE_URL || 'sqlite:./data/ambient.db';
  if (!/^sqlite:./.test(databaseUrl) && !/^postgres(ql)?:\/\//.test(databaseUrl)) {
    problems.push(
      `DATABASE_URL must be sqlite:<path>, sqlite::memory: or postgres://..., got "${redactUrl(databaseUrl)}"`,
    );
  }

  const databaseReadUrls = (env.DATABASE_READ_URLS ?? '')
    .split(',')
    .map((u) => u.trim())
    .filter((u) => u !== '');
  if (databaseReadUrls.length > 0 && !/^postgres(ql)?:\/\//.test(databaseUrl)) {
    problems.push(
      'DATABASE_READ_URLS needs DATABASE_URL to be PostgreSQL (replicas are PostgreSQL streaming replicas)',
    );
  }
  for (const url of databaseReadUrls) {
    if (!/^postgres(ql)?:\/\/[^,]+$/.test(url)) {
      problems.push(`DATABASE_READ_URLS must list postgres:// URLs separated by commas, got "${redactUrl(url)}"`);
    }
  }
  return { databaseUrl, databaseReadUrls };
}

function readConfig(environment: Env, options: ConfigOptions) {
  const reader = new EnvReader(environment);
  const { env, problems, known } = reader;
  const integer = reader.integer.bind(reader);
  const flag = reader.flag.bind(reader);
  const engine = (prefix: string, defaultModel: string | undefined, defaultTimeoutMs: number) =>
    engineSettings(reader, prefix, defaultModel, defaultTimeoutMs);
  const { host, port, tlsCertFile, tlsKeyFile, publicUrl, publicUrlNote } = listenerSettings(reader, options);
  const { databaseUrl, databaseReadUrls } = databaseSettings(reader);

  const logLevel = env.LOG_LEVEL || 'info';
  if (!LOG_LEVELS.includes(logLevel)) problems.push(`LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')}`);

  const metricsPort =
    (env.AMBIENT_METRICS_PORT ?? '') === '' ? undefined : integer('AMBIENT_METRICS_PORT', 0, 0, 65535);
  if (metricsPort !== undefined && metricsPort !== 0 && metricsPort === port) {
    problems.push(`AMBIENT_METRICS_PORT must differ from PORT (${port}): metrics have a listener of their own`);
  }

  const corsRaw = (env.AMBIENT_CORS_ORIGINS ?? '').trim();
  const corsOrigins = corsRaw === '' ? [] : corsRaw.split(',').map((o) => o.trim().replace(/\/+$/, ''));

  const maxBodyBytes = integer('AMBIENT_MAX_BODY_BYTES', 16 * 1024 * 1024, 1024);
  const config: Config = {
    host,
    port,
    publicUrl,
    databaseUrl,
    tokenTtlSeconds: integer('AMBIENT_TOKEN_TTL_SECONDS', 172800, 1),
    maxBodyBytes,
    maxBodyBytesInFlight: integer('AMBIENT_MAX_BODY_BYTES_IN_FLIGHT', 4 * maxBodyBytes, maxBodyBytes),
    maxPageBytes: integer('AMBIENT_MAX_PAGE_BYTES', 32 * 1024 * 1024, 1024),
    requestTimeoutMs: integer('AMBIENT_REQUEST_TIMEOUT_MS', 30_000, 100, 3_600_000),
    redisUrl: env.REDIS_URL || undefined,
    logLevel,
    tlsCertFile,
    tlsKeyFile,
    fhirStandardStatus: flag('AMBIENT_FHIR_STANDARD_STATUS'),
    corsOrigins,
    trustProxy: Object.freeze(trustedProxies(env.AMBIENT_TRUST_PROXY, problems)),
    loginMaxFailuresPerUserAddress: integer('AMBIENT_LOGIN_MAX_FAILURES_PER_USER_ADDRESS', 10, 1),
    loginMaxFailuresPerUser: integer('AMBIENT_LOGIN_MAX_FAILURES_PER_USER', 100, 1),
    loginMaxFailuresPerAddress: integer('AMBIENT_LOGIN_MAX_FAILURES_PER_ADDRESS', 100, 1),
    loginLockoutSeconds: integer('AMBIENT_LOGIN_LOCKOUT_SECONDS', 900, 1, MAX_COUNTER_WINDOW_SECONDS),
    loginKnownAddressSeconds: integer('AMBIENT_LOGIN_KNOWN_ADDRESS_SECONDS', 14 * 86400, 0, MAX_COUNTER_WINDOW_SECONDS),
    maxBundleEntries: integer('AMBIENT_MAX_BUNDLE_ENTRIES', 1000, 1),
    searchTimeoutMs: integer('AMBIENT_SEARCH_TIMEOUT_MS', 10_000, 1, 3_600_000),
    searchWorkers: integer('AMBIENT_SEARCH_WORKERS', 2, 0, 64),
    workers: integer('AMBIENT_WORKERS', 1, 1, 64),
    shutdownTimeoutMs: integer('AMBIENT_SHUTDOWN_TIMEOUT_MS', 25_000, 100, 3_600_000),
    postgresPooler: postgresPooler(env.AMBIENT_POSTGRES_POOLER, problems),
    databaseReadUrls: Object.freeze(databaseReadUrls),
    replicaMaxLagMs: integer('AMBIENT_REPLICA_MAX_LAG_MS', 5000, 0, 3_600_000),
    referentialIntegrity: flag('AMBIENT_REFERENTIAL_INTEGRITY'),
    sqliteSynchronous: sqliteSynchronous(env.AMBIENT_SQLITE_SYNCHRONOUS, problems),
    metricsPort,
    scribe: Object.freeze({
      workers: integer('AMBIENT_SCRIBE_WORKERS', 2, 0, 64),
      pollMs: integer('AMBIENT_SCRIBE_POLL_MS', 1000, 10, 3_600_000),
      leaseSeconds: integer('AMBIENT_SCRIBE_LEASE_SECONDS', 60, 1, 86_400),
      maxAttempts: integer('AMBIENT_SCRIBE_MAX_ATTEMPTS', 5, 1, 100),
      retryBaseMs: integer('AMBIENT_SCRIBE_RETRY_BASE_MS', 5000, 0, 3_600_000),
      llm: engine('AMBIENT_LLM', undefined, 60_000),
      stt: engine('AMBIENT_STT', 'whisper-1', 120_000),
    }),
    export: Object.freeze({
      ttlSeconds: integer('AMBIENT_EXPORT_TTL_SECONDS', 86_400, 1, 365 * 86_400),
      workers: integer('AMBIENT_EXPORT_WORKERS', 1, 0, 16),
      leaseSeconds: integer('AMBIENT_EXPORT_LEASE_SECONDS', 30, 1, 86_400),
      maxActive: integer('AMBIENT_EXPORT_MAX_ACTIVE', 3, 1, 1000),
      maxBytesPerAccount: integer('AMBIENT_EXPORT_MAX_BYTES_PER_ACCOUNT', 1024 ** 3, 1024),
      downloadIdleTimeoutMs: integer('AMBIENT_DOWNLOAD_IDLE_TIMEOUT_MS', 30_000, 100, 3_600_000),
      requestWorkers: integer('AMBIENT_ASYNC_WORKERS', 2, 0, 16),
      requestMaxActive: integer('AMBIENT_ASYNC_MAX_ACTIVE', 5, 1, 1000),
    }),
    subscriptions: Object.freeze({
      endpoints: Object.freeze(subscriptionEndpoints(env.AMBIENT_SUBSCRIPTION_ENDPOINTS, problems)),
      workers: integer('AMBIENT_SUBSCRIPTION_WORKERS', 8, 0, 256),
      pollMs: integer('AMBIENT_SUBSCRIPTION_POLL_MS', 250, 10, 60_000),
      timeoutMs: integer('AMBIENT_SUBSCRIPTION_TIMEOUT_MS', 10_000, 100, 600_000),
      maxAttempts: integer('AMBIENT_SUBSCRIPTION_MAX_ATTEMPTS', 10, 1, 1000),
      retryBaseMs: integer('AMBIENT_SUBSCRIPTION_RETRY_BASE_MS', 1000, 0, 3_600_000),
      maxPerAccount: integer('AMBIENT_SUBSCRIPTION_MAX_PER_ACCOUNT', 100, 1, 100_000),
      maxPending: integer('AMBIENT_SUBSCRIPTION_MAX_PENDING', 1000, 1, 1_000_000),
    }),
  };
  return { config, problems, known, publicUrlNote };
}

/**
 * The rest-hook prefixes: absolute http(s) URLs. A prefix without a path gets `/` (the URL parser adds
 * it), so that `https://hooks.example` cannot be matched by `https://hooks.example.attacker.net`.
 */
function subscriptionEndpoints(raw: string | undefined, problems: string[]): string[] {
  const prefixes: string[] = [];
  for (const item of (raw ?? '').split(',')) {
    const prefix = item.trim();
    if (prefix === '') continue;
    let url: URL;
    try {
      url = new URL(prefix);
    } catch {
      problems.push(`AMBIENT_SUBSCRIPTION_ENDPOINTS must list http:// or https:// URLs, got "${prefix}"`);
      continue;
    }
    if (
      (url.protocol !== 'http:' && url.protocol !== 'https:') ||
      url.username ||
      url.password ||
      url.search ||
      url.hash
    ) {
      problems.push(
        `AMBIENT_SUBSCRIPTION_ENDPOINTS must list http:// or https:// URLs without credentials, query or fragment, got "${prefix}"`,
      );
      continue;
    }
    // As the URL parser writes it (lower-case host, no default port, `/` after a bare origin), as endpoints are compared.
    prefixes.push(url.href);
  }
  return prefixes;
}

function postgresPooler(raw: string | undefined, problems: string[]): 'none' | 'transaction' {
  const value = (raw ?? 'none').trim().toLowerCase() || 'none';
  if (value === 'none' || value === 'transaction') return value;
  problems.push(`AMBIENT_POSTGRES_POOLER must be none or transaction, got "${raw}"`);
  return 'none';
}

function sqliteSynchronous(raw: string | undefined, problems: string[]): 'full' | 'normal' {
  const value = (raw ?? 'full').trim().toLowerCase();
  if (value === 'full' || value === 'normal') return value;
  problems.push(`AMBIENT_SQLITE_SYNCHRONOUS must be full or normal, got "${raw}"`);
  return 'full';
}

/** Hides the password of a database or Redis URL so it can be logged: `user:***@`, and libpq's `password=***`. */
export function redactUrl(url: string): string {
  return url.replace(/(\/\/[^:/@]*:)[^@]*@/, '$1***@').replace(/([?&]password=)[^&#]*/gi, '$1***');
}
