// Limits on JSON the server takes in, wherever it comes from: a request body (http/body-parsers.ts), a
// JSON Patch decoded from a Binary in a Bundle, or a resource a patch produced. Everything that walks
// JSON recursively (validation, structuredClone, JSON.stringify, the stores) is safe only below them.
import { AppError } from '../errors.js';

/** Deeper than any FHIR resource needs, shallow enough for every recursive walk. */
export const MAX_JSON_DEPTH = 64;

/**
 * How deep a JSON value nests (0 for a primitive, 1 for an object of primitives), walked without
 * recursion; the walk stops as soon as it passes `stopAbove` (then the answer is stopAbove + 1).
 */
export function jsonDepth(value: unknown, stopAbove = Infinity): number {
  let max = 0;
  const stack: [unknown, number][] = [[value, 1]];
  while (stack.length > 0) {
    const [node, depth] = stack.pop()!;
    if (node === null || typeof node !== 'object') continue;
    if (depth > max) max = depth;
    if (max > stopAbove) return max;
    for (const child of Object.values(node))
      if (child !== null && typeof child === 'object') stack.push([child, depth + 1]);
  }
  return max;
}

/** Refuses (400 invalid-json) JSON nested deeper than MAX_JSON_DEPTH; `what` names it in the message. */
export function assertJsonDepth(value: unknown, what: string): void {
  if (jsonDepth(value, MAX_JSON_DEPTH) > MAX_JSON_DEPTH) {
    throw new AppError('invalid-json', `${what} is nested deeper than ${MAX_JSON_DEPTH} levels`);
  }
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * Strict JSON from bytes: valid UTF-8, parseable, not nested deeper than MAX_JSON_DEPTH; each failure
 * is a 400 invalid-json naming `what`. Empty (or blank) input is undefined: the caller decides.
 */
export function parseJsonBytes(bytes: Uint8Array, what: string): unknown {
  let text: string;
  try {
    text = utf8.decode(bytes);
  } catch {
    throw new AppError('invalid-json', `${what} is not valid UTF-8`);
  }
  if (text.trim() === '') return undefined;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new AppError('invalid-json', `${what} is not valid JSON: ${(error as Error).message}`);
  }
  assertJsonDepth(value, what);
  return value;
}
