// Asynchronous requests (https://hl7.org/fhir/R4/async.html; the Bundle of R5's async-bundle.html): a
// search sent with `Prefer: respond-async` is checked at once (fhir/router.ts asyncCapable), then runs as
// a job of the export machinery (jobs.ts, kind `request`; runner.ts claims and runs it), with the token's
// scopes within the account's current ones, the search's own limits and time budget, and, on replicas,
// after the account's last write. Its answer (the searchset, or the OperationOutcome of a search that
// failed) is stored gzip-compressed as one file, counted against the account's stored bytes, and kept
// AMBIENT_EXPORT_TTL_SECONDS. The status URL answers 202 while it runs, then 200 with a batch-response
// Bundle holding that answer; DELETE cancels and removes it. A job belongs to its account: anyone else
// gets 404, as for an export.
import { performance } from 'node:perf_hooks';
import { promisify } from 'node:util';
import { gunzip } from 'node:zlib';
import type { Principal } from '../auth/principal.js';
import { AppError, operationOutcomeFor } from '../errors.js';
import { bundleJson } from '../fhir/bundle.js';
import type { FhirResponse } from '../fhir/response.js';
import { runSavedCall } from '../fhir/router.js';
import type { AsyncRequests, FhirRequest, FhirServices, SavedCall } from '../fhir/services.js';
import { EMPTY_GZIP, gzipEnd, gzipPiece } from './gzip-file.js';
import type { ClaimedJob, ExportJobs, RequestResult, RequestSpec } from './jobs.js';

const inflate = promisify(gunzip);

/** Where the status URLs live, below the public base. */
export const ASYNC_STATUS_PATH = '/fhir/_async';

/** The file a request's answer is stored as (one per job). */
const ANSWER = { type: 'Bundle', fileNo: 1 } as const;

export type AsyncStatus =
  | { readonly state: 'in-progress'; readonly progress: string }
  | {
      readonly state: 'completed';
      readonly bundle: string;
      readonly accessed: readonly string[];
      readonly expiresAt: number;
    }
  | { readonly state: 'failed'; readonly error: AppError };

function notFound(id: string): AppError {
  return new AppError(
    'async-request-not-found',
    `No asynchronous request ${id} for this account (unknown, cancelled or expired)`,
  );
}

/** The reason phrase of an answer's status, as a batch-response entry writes it (`200 OK`). */
const REASONS: Record<number, string> = {
  200: 'OK',
  400: 'Bad Request',
  403: 'Forbidden',
  404: 'Not Found',
  410: 'Gone',
  422: 'Unprocessable Entity',
  429: 'Too Many Requests',
  503: 'Service Unavailable',
};

export class AsyncRequestService implements AsyncRequests {
  constructor(
    private readonly jobs: ExportJobs,
    private readonly publicUrl: string,
  ) {}

  statusUrl(id: string): string {
    return `${this.publicUrl}${ASYNC_STATUS_PATH}/${id}`;
  }

  async start(request: FhirRequest, call: SavedCall): Promise<string> {
    const { principal } = request;
    const spec: RequestSpec = { call, scopes: principal.scopes };
    // What the job's `request` column records (an export's kick-off URL): the route and its query.
    const described = `${call.route}${call.query ? `?${call.query}` : ''}`;
    const id = await this.jobs.create(principal.accountId, described, spec, Date.now(), 'request');
    this.started?.();
    return this.statusUrl(id);
  }

  /** Told of each new job (the runner looks for work at once). */
  started: (() => void) | undefined;

  /**
   * Runs a claimed request as `principal` (undefined: the account may no longer read anything): the
   * answer the request would have had, stored as the job's file. `signal` stops it (a shutdown, a cancel):
   * then it throws, and the runner gives the job back or lets it go.
   */
  async run(
    services: FhirServices,
    job: ClaimedJob,
    principal: Principal | undefined,
    signal: AbortSignal,
    save: (chunk: { type: string; fileNo: number; seq: number; offset: number; data: Buffer }) => Promise<void>,
  ): Promise<RequestResult> {
    const { call } = job.spec as RequestSpec;
    let answer: { status: number; text: string; accessed: readonly string[] };
    try {
      if (!principal)
        throw new AppError('forbidden', 'The account may no longer use the API (deactivated or its scopes removed)');
      const limitMs = services.config.searchTimeoutMs;
      const positions = services.writePositions;
      const request: FhirRequest = {
        services,
        principal,
        budget: {
          deadline: performance.now() + limitMs,
          limitMs,
          signal,
          readAfter: positions ? () => positions.of(principal.accountId) : undefined,
        },
      };
      const response: FhirResponse = await runSavedCall(request, call);
      const text = typeof response.body === 'string' ? response.body : JSON.stringify(response.body ?? {});
      answer = { status: response.status, text, accessed: response.accessed ?? [] };
    } catch (error) {
      if (signal.aborted || !(error instanceof AppError)) throw error;
      answer = { status: error.status, text: JSON.stringify(operationOutcomeFor(error)), accessed: [] };
    }
    const piece = await gzipPiece(EMPTY_GZIP, Buffer.from(answer.text));
    const end = gzipEnd(piece.state);
    await save({ ...ANSWER, seq: 0, offset: 0, data: Buffer.concat([piece.data, end.data]) });
    return {
      status: answer.status,
      file: { ...ANSWER, count: 1, bytes: end.state.bytes, textBytes: end.state.textBytes },
      accessed: answer.accessed,
    };
  }

  /**
   * The request's state: running, or its answer in a batch-response Bundle, which the caller must be
   * allowed to search every type of (the same account may fetch it with a narrower token than it started
   * it with).
   */
  async status(principal: Principal, id: string): Promise<AsyncStatus> {
    const job = await this.jobs.find(id, principal.accountId, 'request');
    if (!job) throw notFound(id);
    if (job.state === 'failed') {
      const reason = job.error ?? 'the request failed';
      const error = job.errorCode
        ? new AppError(job.errorCode, reason)
        : new AppError('async-request-failed', `The asynchronous request failed: ${reason}`);
      return { state: 'failed', error };
    }
    const result = job.result;
    if (job.state !== 'completed' || !result || job.expiresAt === undefined) {
      return { state: 'in-progress', progress: job.state === 'queued' ? 'queued' : 'running' };
    }
    const types = new Set(result.accessed.map((key) => key.split('/')[0]));
    for (const type of types) {
      if (!principal.canFhir('search', type)) {
        throw new AppError(
          'forbidden',
          `The answer holds ${type} resources, which this token's scopes do not allow searching (needs system/${type}.s or wider)`,
        );
      }
    }
    const text = await this.answerText(id, result);
    const status = `${result.status} ${REASONS[result.status] ?? ''}`.trim();
    const entry =
      result.status < 300
        ? { resourceText: text, response: { status } }
        : { response: { status, outcome: JSON.parse(text) as unknown } };
    return {
      state: 'completed',
      bundle: bundleJson({ type: 'batch-response', entries: [entry] }),
      accessed: result.accessed,
      expiresAt: job.expiresAt,
    };
  }

  /** Cancels a request, queued, running or done: its job and answer are removed (then 404). */
  async cancel(principal: Principal, id: string): Promise<void> {
    if (!(await this.jobs.find(id, principal.accountId, 'request'))) throw notFound(id);
    await this.jobs.remove(id);
  }

  private async answerText(id: string, result: RequestResult): Promise<string> {
    const pieces: Buffer[] = [];
    for await (const piece of this.jobs.read(id, ANSWER.type, ANSWER.fileNo, result.file.bytes)) pieces.push(piece);
    return (await inflate(Buffer.concat(pieces))).toString('utf8');
  }
}
