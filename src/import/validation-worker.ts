// A worker thread of the ValidationPool: validates NDJSON lines with the same R4 rules as the write path
// (validation/validate.ts) and answers each line's canonical text (JSON.stringify of its parse) with its
// issues, so that the importer's writer can skip validating a resource that reaches it unchanged.
import { parentPort } from 'node:worker_threads';
import { loadR4Definitions } from '../definitions/registry.js';
import { validateResource } from '../validation/validate.js';
import type { ValidationRequest, ValidationReply } from './validation-pool.js';

const registry = loadR4Definitions();
const port = parentPort!;

port.on('message', (request: ValidationRequest) => {
  const reply: ValidationReply = { id: request.id, verdicts: [] };
  for (const text of request.texts) {
    let resource: unknown;
    try {
      resource = JSON.parse(text);
    } catch {
      continue; // the importer reports the line itself
    }
    try {
      reply.verdicts.push({ key: JSON.stringify(resource), issues: validateResource(resource, registry) });
    } catch {
      // A resource the validator cannot walk is validated again by the writer, which reports the error.
    }
  }
  port.postMessage(reply);
});
port.postMessage({ ready: true });
