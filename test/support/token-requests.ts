// What the suites of the token endpoint share: its form posts as a client sends them (from any address,
// with any extra headers), addresses that keep their login counters apart, and the log they read.
import type { FastifyInstance, InjectOptions, LightMyRequestResponse } from 'fastify';
import { pino } from 'pino';
import type { Logger } from '../../src/logger.js';
import { FORM_URLENCODED, TOKEN_PATH } from './fhir-client.js';

export const FORM = { 'content-type': FORM_URLENCODED };

/** POST of `fields` as a form to the token endpoint; `options` may add headers or a remote address. */
export function tokenRequest(
  target: FastifyInstance,
  fields: Record<string, string>,
  options: Partial<InjectOptions> = {},
): Promise<LightMyRequestResponse> {
  return target.inject({
    method: 'POST',
    url: TOKEN_PATH,
    payload: new URLSearchParams(fields).toString(),
    ...options,
    headers: { ...FORM, ...(options.headers ?? {}) },
  });
}

let addressCounter = 0;
/** A fresh loopback address, so that per-address login counters of different tests never meet. */
export const freshLoopback = (): string => `127.${(process.pid >> 8) & 255}.${process.pid & 255}.${++addressCounter}`;

/** Captures the JSON log lines of an app (the audit trail among them). */
export class LogCapture {
  readonly lines: string[] = [];
  readonly logger: Logger;

  constructor(level = 'info') {
    this.logger = pino({ level }, { write: (line: string) => void this.lines.push(line) });
  }

  events(event: string): Record<string, unknown>[] {
    return this.lines.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l.event === event);
  }
}
