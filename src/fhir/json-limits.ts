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

/**
 * Most values one JSON text may hold (each object and array, and each element or member after the first
 * in one: what the parsed value costs in memory grows with it). A million admits the largest resources
 * the index-row bound lets through (100,000 rows) and a Bundle of AMBIENT_MAX_BUNDLE_ENTRIES ordinary
 * entries many times over; past it a 16 MiB body of `[0,0,...]` or `[{},{},...]` parses into some
 * 100-150 MB of objects, for nothing the server could store.
 */
export const MAX_JSON_VALUES = 1_000_000;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;

/**
 * Watches JSON bytes as they arrive, without parsing them, and refuses (throws) as soon as they nest
 * deeper than MAX_JSON_DEPTH (400 invalid-json) or hold more than MAX_JSON_VALUES values (413): a body
 * that breaks a bound is refused at the byte that breaks it, before the rest is read or anything is
 * parsed. Syntax is left to JSON.parse; only brackets and commas outside strings are counted. Strings are
 * skipped with indexOf, so a large base64 string costs about what copying it does.
 */
export class JsonLimitScanner {
  private depth = 0;
  private values = 0;
  private inString = false;
  /** Inside a string, the previous chunk ended in an unpaired backslash: this chunk's first byte is escaped. */
  private escaped = false;

  constructor(private readonly what: string) {}

  feed(chunk: Uint8Array): void {
    const bytes = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    const length = bytes.length;
    let i = 0;
    if (this.escaped && length > 0) {
      this.escaped = false;
      i = 1;
    }
    while (i < length) {
      if (this.inString) {
        const quote = bytes.indexOf(QUOTE, i);
        const runEnd = quote < 0 ? length : quote;
        // A quote (or the chunk's end) preceded by an odd run of backslashes is escaped: the run starts
        // at or after i, since the byte before i is never an unpaired backslash.
        let run = 0;
        while (runEnd - run - 1 >= i && bytes[runEnd - run - 1] === BACKSLASH) run++;
        if (quote < 0) {
          this.escaped = run % 2 === 1;
          return;
        }
        if (run % 2 === 0) this.inString = false;
        i = quote + 1;
        continue;
      }
      const byte = bytes[i++];
      if (byte === QUOTE) this.inString = true;
      else if (byte === 0x7b || byte === 0x5b) {
        if (++this.depth > MAX_JSON_DEPTH) {
          throw new AppError('invalid-json', `${this.what} is nested deeper than ${MAX_JSON_DEPTH} levels`);
        }
        this.countValue();
      } else if (byte === 0x7d || byte === 0x5d) this.depth--;
      else if (byte === 0x2c) this.countValue();
    }
  }

  private countValue(): void {
    if (++this.values > MAX_JSON_VALUES) {
      throw new AppError(
        'payload-too-large',
        `${this.what} holds more than ${MAX_JSON_VALUES.toLocaleString('en-US')} JSON values, the most this server parses`,
      );
    }
  }
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * Strict JSON from bytes: within MAX_JSON_DEPTH and MAX_JSON_VALUES (checked before parsing, see
 * JsonLimitScanner), valid UTF-8, parseable; each failure is a 4xx naming `what`. Empty (or blank) input
 * is undefined: the caller decides. `scanned` says the bytes already went through a JsonLimitScanner as
 * they arrived (a request body): they are not scanned twice.
 */
export function parseJsonBytes(bytes: Uint8Array, what: string, { scanned = false } = {}): unknown {
  if (!scanned) new JsonLimitScanner(what).feed(bytes);
  let text: string;
  try {
    text = utf8.decode(bytes);
  } catch {
    throw new AppError('invalid-json', `${what} is not valid UTF-8`);
  }
  if (text.trim() === '') return undefined;
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new AppError('invalid-json', `${what} is not valid JSON: ${(error as Error).message}`);
  }
}
