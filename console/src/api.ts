// The console's one way to the server: the public API, with the signed-in account's token. The token
// lives in this module's variable and nowhere else (no localStorage, sessionStorage or cookie): a reload
// or a closed tab signs out, and no script can find it in storage. The session ends at the token's
// expiry (a timer from the token response's `expires_in`), on Sign out, or on the server's 401.

export interface Session {
  readonly username: string;
  readonly token: string;
  /** The scopes the token endpoint granted (its `scope`, split). */
  readonly scopes: readonly string[];
  readonly expiresAt: number;
}

export interface OperationOutcomeIssue {
  severity?: string;
  code?: string;
  diagnostics?: string;
  details?: { text?: string };
  expression?: string[];
  location?: string[];
}

export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly issues: readonly OperationOutcomeIssue[] = [],
  ) {
    super(message);
  }
}

export const TOKEN_PATH = '/v1/ambient/api/auth/token';

let session: Session | undefined;
let sessionListener: (session: Session | undefined, reason?: string) => void = () => undefined;
let cancelExpiry: () => void = () => undefined;

/** What the sign-in form says when the token's lifetime (the token response's `expires_in`) is over. */
export const EXPIRED = 'Your session expired: sign in again.';

/** setTimeout's longest delay (2^31 - 1 ms, about 24.8 days): a longer one would fire at once. */
const MAX_TIMER_DELAY = 2 ** 31 - 1;

/**
 * Calls `expire` once the clock reaches `expiresAt` (ms since the epoch), checking the clock again when
 * the timer fires (a timer may be late after the computer slept; a lifetime past setTimeout's longest
 * delay takes several). Returns the function that cancels it.
 */
export function atExpiry(expiresAt: number, expire: () => void): () => void {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const check = () => {
    const remaining = expiresAt - Date.now();
    if (remaining <= 0) expire();
    else timer = setTimeout(check, Math.min(remaining, MAX_TIMER_DELAY));
  };
  check();
  return () => clearTimeout(timer);
}

/** Where the console's own path starts: everything before `/console` (empty unless behind a prefix). */
export function basePath(pathname = location.pathname): string {
  const at = pathname.indexOf('/console');
  return at > 0 ? pathname.slice(0, at) : '';
}

export const currentSession = (): Session | undefined => session;

export function onSessionChange(listener: (session: Session | undefined, reason?: string) => void): void {
  sessionListener = listener;
}

export function endSession(reason?: string): void {
  cancelExpiry();
  session = undefined;
  sessionListener(undefined, reason);
}

/** The token's lifetime in ms from its response's `expires_in` (seconds); without one, no end is known. */
function lifetimeOf(expiresIn: unknown): number {
  const seconds = Number(expiresIn);
  return Number.isFinite(seconds) && seconds > 0 ? seconds * 1000 : Infinity;
}

/** The message of an error body: an OperationOutcome's diagnostics, an OAuth error, the scribe API's. */
export function errorMessage(status: number, body: unknown): { message: string; issues: OperationOutcomeIssue[] } {
  const b = body as Record<string, any> | undefined;
  if (b?.resourceType === 'OperationOutcome' && Array.isArray(b.issue)) {
    const issues = b.issue as OperationOutcomeIssue[];
    const texts = issues.map((i) => i.diagnostics ?? i.details?.text ?? i.code ?? '').filter(Boolean);
    return { message: texts.join(' ') || `HTTP ${status}`, issues };
  }
  if (typeof b?.error_description === 'string') return { message: b.error_description, issues: [] };
  if (typeof b?.error === 'string') return { message: b.error, issues: [] };
  if (typeof b?.error?.message === 'string') return { message: b.error.message, issues: [] };
  if (typeof b?.message === 'string') return { message: b.message, issues: [] };
  return { message: `The server answered ${status}.`, issues: [] };
}

async function bodyOf(response: Response): Promise<unknown> {
  const type = response.headers.get('content-type') ?? '';
  if (!/json/i.test(type)) return undefined;
  const text = await response.text();
  try {
    return text ? JSON.parse(text) : undefined;
  } catch {
    return undefined;
  }
}

export async function signIn(username: string, password: string): Promise<Session> {
  const response = await fetch(basePath() + TOKEN_PATH, {
    method: 'POST',
    headers: { 'Content-Type': 'application/x-www-form-urlencoded', Accept: 'application/json' },
    body: new URLSearchParams({ username, password }).toString(),
    credentials: 'omit',
    cache: 'no-store',
  });
  const body = (await bodyOf(response)) as Record<string, any> | undefined;
  if (!response.ok || typeof body?.access_token !== 'string') {
    const { message } = errorMessage(response.status, body);
    throw new ApiError(response.status, message);
  }
  const started: Session = {
    username,
    token: body.access_token,
    scopes: String(body.scope ?? '')
      .split(' ')
      .filter(Boolean),
    expiresAt: Date.now() + lifetimeOf(body.expires_in),
  };
  cancelExpiry();
  session = started;
  if (started.expiresAt !== Infinity) {
    cancelExpiry = atExpiry(started.expiresAt, () => session === started && endSession(EXPIRED));
  }
  sessionListener(started);
  return started;
}

export interface ApiResponse<T> {
  readonly status: number;
  readonly body: T;
  readonly headers: Headers;
}

export interface RequestOptions {
  readonly method?: string;
  readonly body?: unknown;
  readonly headers?: Record<string, string>;
  /** The body as a Blob, as it came (a file to save), instead of parsed JSON. */
  readonly raw?: boolean;
}

/**
 * A request to the API with the token. A 401 for the token ends the session (the sign-in form comes
 * back); any other error status throws an ApiError with the server's own words.
 */
export async function api<T = any>(path: string, options: RequestOptions = {}): Promise<ApiResponse<T>> {
  const current = session;
  if (!current) throw new ApiError(401, 'Not signed in.');
  // Past its lifetime the token is refused: no request, the sign-in form (the timer may be late).
  if (Date.now() >= current.expiresAt) {
    endSession(EXPIRED);
    throw new ApiError(401, EXPIRED);
  }
  const headers: Record<string, string> = {
    Accept: 'application/fhir+json, application/json',
    Authorization: `Bearer ${current.token}`,
    ...options.headers,
  };
  let body: string | undefined;
  if (options.body !== undefined) {
    body = typeof options.body === 'string' ? options.body : JSON.stringify(options.body);
    headers['Content-Type'] ??= 'application/fhir+json';
  }
  const response = await fetch(basePath() + path, {
    method: options.method ?? 'GET',
    headers,
    body,
    credentials: 'omit',
    cache: 'no-store',
  });
  if (options.raw && response.ok)
    return { status: response.status, body: (await response.blob()) as T, headers: response.headers };
  const parsed = await bodyOf(response);
  // A 401 with `WWW-Authenticate` is the token (expired, revoked): the session ends. Without it, it is
  // the server's answer to an invalid resource (docs/api.md "Invalid resources"), shown like any error.
  if (response.status === 401 && response.headers.has('www-authenticate')) {
    const { message } = errorMessage(401, parsed);
    if (session === current) endSession(`Signed out: ${message}`);
    throw new ApiError(401, message);
  }
  if (!response.ok) {
    const { message, issues } = errorMessage(response.status, parsed);
    throw new ApiError(response.status, response.status === 403 ? `Forbidden: ${message}` : message, issues);
  }
  return { status: response.status, body: parsed as T, headers: response.headers };
}

/**
 * The path and query of a link the server wrote (Bundle paging links are absolute, on the server's
 * public address), from its `/fhir` on: the console asks its own origin.
 */
export function fhirPathOf(link: string): string {
  const url = new URL(link, location.href);
  const at = url.pathname.indexOf('/fhir');
  return (at >= 0 ? url.pathname.slice(at) : url.pathname) + url.search;
}
