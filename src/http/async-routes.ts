// The status URLs of asynchronous requests over HTTP (https://hl7.org/fhir/R4/async.html): GET answers
// 202 with X-Progress while the request runs, then 200 with the batch-response Bundle (or the status and
// OperationOutcome of a job that could not finish); DELETE cancels. The thin adapter: the rest lives in
// export/async-requests.ts; export-routes.ts registers these with the export routes, whose runner runs
// the requests.
import type { FastifyReply, FastifyRequest, RouteHandlerMethod } from 'fastify';
import { auditAccess } from '../auth/audit.js';
import type { AppError } from '../errors.js';
import { operationOutcomeFor } from '../errors.js';
import { RETRY_AFTER_SECONDS } from '../export/service.js';
import type { AsyncRequestService } from '../export/async-requests.js';
import { assertJsonFormat, FHIR_JSON } from './fhir-reply.js';

/** The handlers of the route table's `async-status` and `async-cancel` routes. */
export function asyncRequestHandlers(requests: AsyncRequestService): Record<string, RouteHandlerMethod> {
  async function status(request: FastifyRequest, reply: FastifyReply) {
    assertJsonFormat(request);
    const { job } = request.params as { job: string };
    const status = await requests.status(request.principal!, job);
    if (status.state !== 'completed') return replyUnfinished(reply, status);
    if (status.accessed.length > 0) auditAccess(request, { interaction: 'async-result', ids: status.accessed });
    return reply
      .code(200)
      .header('Expires', new Date(status.expiresAt).toUTCString())
      .type(FHIR_JSON)
      .send(status.bundle);
  }

  async function cancel(request: FastifyRequest, reply: FastifyReply) {
    await requests.cancel(request.principal!, (request.params as { job: string }).job);
    const outcome = {
      resourceType: 'OperationOutcome',
      issue: [
        { severity: 'information', code: 'informational', diagnostics: 'The asynchronous request was cancelled' },
      ],
    };
    return reply.code(202).type(FHIR_JSON).send(JSON.stringify(outcome));
  }

  return { 'async-status': status, 'async-cancel': cancel };
}

/**
 * The answer to a status poll of a job not yet done (FHIR's asynchronous pattern, for exports and
 * asynchronous requests alike): 202 with its progress while it runs, its OperationOutcome once failed.
 */
export function replyUnfinished(
  reply: FastifyReply,
  status: { state: 'in-progress'; progress: string } | { state: 'failed'; error: AppError },
): FastifyReply {
  if (status.state === 'in-progress') {
    return reply
      .code(202)
      .header('X-Progress', status.progress)
      .header('Retry-After', String(RETRY_AFTER_SECONDS))
      .send();
  }
  return reply
    .code(status.error.status)
    .type(FHIR_JSON)
    .send(JSON.stringify(operationOutcomeFor(status.error)));
}
