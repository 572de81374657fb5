import { describe, expect, it } from 'vitest';
import { AppError } from '../errors.js';
import { decodeCursor, encodeCursor } from './cursor.js';

describe('paging cursors', () => {
  const secret = 'k'.repeat(64);
  it('round-trips a position and direction', () => {
    const token = encodeCursor(secret, { position: ['smith', null, 1.5, 42], backwards: true }, 'query');
    expect(decodeCursor(secret, token, 'query')).toEqual({ position: ['smith', null, 1.5, 42], backwards: true });
    expect(token).toMatch(/^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/);
  });
  it('keeps the format of links issued by earlier releases', () => {
    const token = encodeCursor(secret, { position: ['smith', null, 1.5, 42], backwards: true }, 'query');
    expect(token).toBe('WzEsInNtaXRoIixudWxsLDEuNSw0Ml0.yx7ARWpZ1DG2eKQwKtvYgQ');
  });
  it('refuses a cursor altered, signed with another key, or issued for another query', () => {
    const token = encodeCursor(secret, { position: [42], backwards: false }, 'query');
    const [payload, mac] = token.split('.');
    const forged = Buffer.from('[0,43]').toString('base64url');
    for (const bad of [`${forged}.${mac}`, `${payload}.x${mac.slice(1)}`, `${payload}`, `${token}.x`, '', '..']) {
      expect(() => decodeCursor(secret, bad, 'query')).toThrow(AppError);
    }
    expect(() => decodeCursor('other'.repeat(13), token, 'query')).toThrow(AppError);
    expect(() => decodeCursor(secret, token, 'another query')).toThrow(AppError);
  });
});
