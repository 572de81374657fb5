// The per-request logger (request-logger.ts): no child logger for a request that logs nothing its level
// lets through; the same lines as a child logger's for one that does.
import { Writable } from 'node:stream';
import { describe, expect, it, vi } from 'vitest';
import pino from 'pino';
import type { FastifyBaseLogger } from 'fastify';
import { lazyRequestLogger } from './request-logger.js';

function capture(level: string): { parent: FastifyBaseLogger; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  const destination = new Writable({
    write(chunk, _encoding, done) {
      lines.push(JSON.parse(chunk.toString()) as Record<string, unknown>);
      done();
    },
  });
  return { parent: pino({ level }, destination) as unknown as FastifyBaseLogger, lines };
}

describe('lazyRequestLogger', () => {
  it('makes no child for calls its level drops', () => {
    const { parent, lines } = capture('warn');
    const child = vi.spyOn(parent, 'child');
    const log = lazyRequestLogger(parent, { req_id: 'r1' }, {});
    log.info({ a: 1 }, 'dropped');
    log.debug('dropped too');
    expect(child).not.toHaveBeenCalled();
    expect(lines).toEqual([]);
    expect(log.level).toBe('warn');
  });

  it('logs what its level lets through with the request’s bindings, through one child', () => {
    const { parent, lines } = capture('info');
    const child = vi.spyOn(parent, 'child');
    const log = lazyRequestLogger(parent, { req_id: 'r2' }, {});
    log.warn({ err: new Error('boom') }, 'failed');
    log.info('second');
    expect(child).toHaveBeenCalledTimes(1);
    expect(lines.map((l) => [l.req_id, l.msg, l.level])).toEqual([
      ['r2', 'failed', 40],
      ['r2', 'second', 30],
    ]);
    expect((lines[0].err as { message: string }).message).toBe('boom');
    expect((log.child({ more: 1 }) as unknown as pino.Logger).bindings()).toEqual({ req_id: 'r2', more: 1 });
  });
});
