// Start-up failures as one line an operator can act on: which setting, which value (never a password),
// what went wrong. The commands throw StartupError with these lines; cli/main.ts prints them.
import { DatabaseUnavailableError } from '../storage/sql/database.js';
import { redactUrl } from '../config.js';
import { StartupError } from './command.js';

/** Node's and PostgreSQL's error codes for "could not reach or log in to the server", in words. */
const CONNECTION_PROBLEMS: Record<string, string> = {
  ECONNREFUSED: 'connection refused',
  ECONNRESET: 'connection reset',
  ENOTFOUND: 'host not found',
  EAI_AGAIN: 'host name lookup failed (temporarily)',
  ETIMEDOUT: 'connection timed out',
  EHOSTUNREACH: 'host unreachable',
  ENETUNREACH: 'network unreachable',
  EACCES: 'permission denied',
  EPERM: 'operation not permitted',
  ENOENT: 'no such file or directory',
  EISDIR: 'is a directory',
  EEXIST: 'a file is in the way',
  ENOTDIR: 'not a directory',
  EADDRINUSE: 'address already in use',
  EADDRNOTAVAIL: 'address not available on this machine',
  '28P01': 'password authentication failed',
  '28000': 'not authorised',
  '3D000': 'the database does not exist',
  '57P03': 'the server is not accepting connections yet',
  '53300': 'too many connections',
};

interface CodedError {
  code?: unknown;
  message?: unknown;
  errors?: unknown;
}

function codeOf(error: unknown): string | undefined {
  const e = error as CodedError | null;
  if (e && typeof e.code === 'string') return e.code;
  // net's "happy eyballs" (localhost → ::1 and 127.0.0.1) fails with an AggregateError of each attempt.
  if (e && Array.isArray(e.errors)) return e.errors.map(codeOf).find((c) => c !== undefined);
  return undefined;
}

/** An error's message on one line (a message spanning lines is joined with "; "). */
export function oneLine(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  // "Invalid configuration:\n  - A\n  - B" → "Invalid configuration: A; B".
  const flat = message
    .split('\n')
    .map((line) => line.trim().replace(/^- /, ''))
    .filter((line) => line !== '')
    .reduce((text, line) => (text === '' ? line : `${text}${text.endsWith(':') ? ' ' : '; '}${line}`), '');
  if (flat !== '') return flat;
  const code = codeOf(error);
  return code ? (CONNECTION_PROBLEMS[code] ?? code) : 'unknown error';
}

/** What went wrong: a system error's code in words (not "connect ECONNREFUSED ..."), else the message. */
export function reason(error: unknown): string {
  // A file-system error's message names the path: "ENOENT: no such file or directory, open '/x'".
  if (typeof (error as { syscall?: unknown } | null)?.syscall === 'string' && (error as { path?: unknown }).path) {
    return oneLine(error);
  }
  const code = codeOf(error);
  if (code !== undefined && /^E[A-Z]+$/.test(code) && CONNECTION_PROBLEMS[code]) return CONNECTION_PROBLEMS[code];
  return oneLine(error);
}

/** An error of reaching, logging in to or opening a database (not of a statement run on it). */
export function isDatabaseAccessError(error: unknown): boolean {
  const code = codeOf(error);
  if (code === undefined) return false;
  return (
    CONNECTION_PROBLEMS[code] !== undefined ||
    code.startsWith('SQLITE_') ||
    typeof (error as { syscall?: unknown }).syscall === 'string'
  );
}

/** The database named by DATABASE_URL (or by `setting`) could not be opened, reached or migrated. */
export function databaseFailure(databaseUrl: string, failure: unknown, setting = 'DATABASE_URL'): StartupError {
  // A lost or unreachable PostgreSQL comes wrapped (storage/sql/database.ts): the reason is its cause,
  // or, with none (every host answered, none accepts writes), its own message.
  const unavailable = failure instanceof DatabaseUnavailableError;
  const error = unavailable && failure.cause !== undefined ? failure.cause : failure;
  const verb = unavailable
    ? 'connect to'
    : !isDatabaseAccessError(error)
      ? 'prepare (migrate)'
      : /^postgres/.test(databaseUrl)
        ? 'connect to'
        : 'open';
  return new StartupError(
    `cannot ${verb} the database named by ${setting} (${redactUrl(databaseUrl)}): ${reason(error)}`,
  );
}

/** `listen` failed: the port is taken, not ours to use, or HOST is not an address of this machine. */
export function listenFailure(host: string, port: number, error: unknown): StartupError {
  const code = codeOf(error);
  const hint =
    code === 'EADDRINUSE'
      ? ' (another process listens there: stop it or choose another PORT)'
      : code === 'EACCES'
        ? ' (ports below 1024 need privileges: choose another PORT)'
        : code === 'EADDRNOTAVAIL' || code === 'ENOTFOUND'
          ? ' (HOST must be an address of this machine, 0.0.0.0 or ::)'
          : '';
  return new StartupError(`cannot listen on HOST=${host} PORT=${port}: ${reason(error)}${hint}`);
}

/** TLS_CERT_FILE / TLS_KEY_FILE could not be read, or do not hold a certificate and its key. */
export function tlsFailure(error: unknown, variable?: string, path?: string): StartupError {
  if (variable) return new StartupError(`cannot read ${variable} (${path}): ${reason(error)}`);
  return new StartupError(
    `TLS_CERT_FILE and TLS_KEY_FILE are not a PEM certificate and its private key: ${oneLine(error)}`,
  );
}
