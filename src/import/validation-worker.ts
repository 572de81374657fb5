// A worker thread of the ValidationPool: validates NDJSON lines with the same R4 rules as the write path
// (validation/validate.ts) and answers each line's canonical text (JSON.stringify of its parse) with its
// issues, so that the importer's writer can skip validating a resource that reaches it unchanged.
import { parentPort, workerData } from 'node:worker_threads';
import { loadR4Definitions } from '../definitions/registry.js';
import { ReferenceParser } from '../fhir/references.js';
import { validateResource } from '../validation/validate.js';
import type { ValidationIssue } from '../validation/validate.js';
import { CLAIMED_BY_WORKER } from './validation-protocol.js';
import type { ValidationRequest, ValidationReply, ValidationWorkerData } from './validation-protocol.js';

const registry = loadR4Definitions();
const references = new ReferenceParser((workerData as ValidationWorkerData | null)?.baseUrl, (t) =>
  registry.isResourceType(t),
);
const port = parentPort!;

/** The verdict of one line, or undefined for one it cannot parse or walk (the writer handles those). */
function verdictOf(text: string): { key: string; issues: ValidationIssue[] } | undefined {
  let resource: unknown;
  try {
    resource = JSON.parse(text);
  } catch {
    return undefined; // the importer reports the line itself
  }
  try {
    return { key: JSON.stringify(resource), issues: validateResource(resource, registry, references) };
  } catch {
    return undefined; // a resource the validator cannot walk is validated again by the writer, which reports the error
  }
}

port.on('message', (request: ValidationRequest) => {
  const reply: ValidationReply = { id: request.id, verdicts: [] };
  const { texts, shared } = request;
  if (!shared) {
    for (const text of texts) {
      const verdict = verdictOf(text);
      if (verdict) reply.verdicts.push(verdict);
    }
  } else {
    // Shared with the importer's thread, which claims from the end: take the next line from the front
    // until one is taken (see ValidationPool.prevalidateResources).
    Atomics.store(shared.entered, shared.slot, 1);
    for (;;) {
      const i = Atomics.add(shared.front, 0, 1);
      if (i >= texts.length || Atomics.compareExchange(shared.claims, i, 0, CLAIMED_BY_WORKER) !== 0) break;
      const verdict = verdictOf(texts[i]);
      if (verdict) reply.verdicts.push(verdict);
    }
  }
  port.postMessage(reply);
});
port.postMessage({ ready: true });
