import type { FastifyInstance, FastifyRequest } from 'fastify';
import { AppError } from '../errors.js';

const MAX_JSON_DEPTH = 64;
const utf8 = new TextDecoder('utf-8', { fatal: true });

/** Nesting deeper than any FHIR resource needs is refused before anything walks it recursively. */
function assertDepth(value: unknown): void {
  const stack: [unknown, number][] = [[value, 1]];
  while (stack.length > 0) {
    const [node, depth] = stack.pop()!;
    if (node === null || typeof node !== 'object') continue;
    if (depth > MAX_JSON_DEPTH) {
      throw new AppError('invalid-json', `The JSON body is nested deeper than ${MAX_JSON_DEPTH} levels`);
    }
    for (const child of Object.values(node))
      if (child !== null && typeof child === 'object') stack.push([child, depth + 1]);
  }
}

/** Strict JSON: valid UTF-8, parseable, not absurdly deep. Errors are 400s with an OperationOutcome. */
export function parseJsonBody(body: Buffer): unknown {
  let text: string;
  try {
    text = utf8.decode(body);
  } catch {
    throw new AppError('invalid-json', 'The request body is not valid UTF-8');
  }
  // No body (a DELETE or GET that still names a content type): the interaction decides if it needs one.
  if (text.trim() === '') return undefined;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new AppError('invalid-json', `The request body is not valid JSON: ${(error as Error).message}`);
  }
  assertDepth(value);
  return value;
}

export const JSON_CONTENT_TYPES = ['application/fhir+json', 'application/json', 'application/json+fhir'];

export function registerBodyParsers(app: FastifyInstance): void {
  // Fastify's default JSON parser is replaced so that FHIR's media types share one strict parser.
  app.removeContentTypeParser(['application/json', 'text/plain']);
  app.addContentTypeParser(
    [...JSON_CONTENT_TYPES, 'application/json-patch+json'],
    { parseAs: 'buffer' },
    (_request: FastifyRequest, body: Buffer, done: (err: Error | null, body?: unknown) => void) => {
      try {
        done(null, parseJsonBody(body));
      } catch (error) {
        done(error as Error);
      }
    },
  );
}
