// One HTTP call to an OpenAI-compatible engine, with a timeout per attempt and retries with exponential
// backoff for what may pass: timeouts, network errors, 408, 409, 429 and 5xx (Retry-After is honoured, up to
// a limit). Other 4xx answers are not retried: the request or the configuration is wrong.
import type { EngineConfig } from '../../config.js';
import { EngineError } from './engine.js';

export interface EngineCall {
  readonly engine: EngineConfig;
  /** For messages: "note engine", "speech-to-text engine". */
  readonly what: string;
  readonly path: string;
  /** Builds the request body afresh for each attempt (a FormData or a stream cannot be sent twice). */
  readonly body: () => string | FormData;
  readonly contentType?: string;
  /** The job's signal: aborting it ends the call at once, without retries. */
  readonly signal: AbortSignal;
  /** Base of the backoff between attempts (doubled each time, capped at 10 s). */
  readonly retryBaseMs?: number;
}

const RETRYABLE_STATUS = new Set([408, 409, 425, 429, 500, 502, 503, 504]);
const MAX_BACKOFF_MS = 10_000;
const MAX_RETRY_AFTER_MS = 30_000;

/** `https://host/v1` + `/chat/completions`, unless the URL already ends with the path. */
export function endpoint(base: string, path: string): string {
  return base.endsWith(path) ? base : `${base}${path}`;
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

/** The error text of an OpenAI-style error body ({"error": {"message": ...}}), or its start. */
function errorText(body: string): string {
  try {
    const parsed = JSON.parse(body) as { error?: { message?: unknown } | string; message?: unknown };
    const message =
      typeof parsed.error === 'string'
        ? parsed.error
        : typeof parsed.error?.message === 'string'
          ? parsed.error.message
          : parsed.message;
    if (typeof message === 'string') return message.slice(0, 200);
  } catch {
    // not JSON
  }
  return body.replace(/\s+/g, ' ').trim().slice(0, 200);
}

function retryAfterMs(header: string | null): number | undefined {
  if (!header) return undefined;
  const seconds = Number(header);
  if (Number.isFinite(seconds) && seconds >= 0) return Math.min(seconds * 1000, MAX_RETRY_AFTER_MS);
  const date = Date.parse(header);
  return Number.isNaN(date) ? undefined : Math.min(Math.max(0, date - Date.now()), MAX_RETRY_AFTER_MS);
}

/** POSTs to the engine and returns its JSON answer; throws EngineError once the retries are used up. */
export async function callEngine(call: EngineCall): Promise<unknown> {
  const { engine, what, signal } = call;
  const url = endpoint(engine.url, call.path);
  const base = call.retryBaseMs ?? 500;
  let lastError: EngineError | undefined;
  for (let attempt = 0; attempt <= engine.maxRetries; attempt++) {
    if (attempt > 0) await sleep(lastErrorDelay(lastError, base, attempt), signal);
    signal.throwIfAborted();
    const headers: Record<string, string> = { accept: 'application/json' };
    if (call.contentType) headers['content-type'] = call.contentType;
    if (engine.apiKey) headers.authorization = `Bearer ${engine.apiKey}`;
    const timeout = AbortSignal.timeout(engine.timeoutMs);
    try {
      const response = await fetch(url, {
        method: 'POST',
        headers,
        body: call.body(),
        signal: AbortSignal.any([signal, timeout]),
      });
      const text = await response.text();
      if (response.ok) {
        try {
          return JSON.parse(text) as unknown;
        } catch {
          lastError = new EngineError(`${what}: the answer from ${url} is not JSON`, true);
          continue;
        }
      }
      const message = `${what}: HTTP ${response.status} from ${url}${text ? `: ${errorText(text)}` : ''}`;
      lastError = Object.assign(new EngineError(message, RETRYABLE_STATUS.has(response.status)), {
        retryAfterMs: retryAfterMs(response.headers.get('retry-after')),
      });
      if (!lastError.retryable) throw lastError;
    } catch (error) {
      if (signal.aborted) throw signal.reason;
      if (error instanceof EngineError) throw error;
      lastError = timeout.aborted
        ? new EngineError(`${what}: no answer from ${url} within ${engine.timeoutMs} ms`, true)
        : new EngineError(`${what}: cannot reach ${url}: ${describe(error)}`, true);
    }
  }
  const attempts = engine.maxRetries + 1;
  throw new EngineError(`${lastError!.message} (${attempts} attempt${attempts === 1 ? '' : 's'})`, true);
}

function lastErrorDelay(error: EngineError | undefined, base: number, attempt: number): number {
  const hinted = (error as { retryAfterMs?: number } | undefined)?.retryAfterMs;
  return hinted ?? Math.min(base * 2 ** (attempt - 1), MAX_BACKOFF_MS);
}

function describe(error: unknown): string {
  const cause = (error as { cause?: { code?: string; message?: string } }).cause;
  return cause?.code ?? cause?.message ?? (error as Error).message ?? String(error);
}
