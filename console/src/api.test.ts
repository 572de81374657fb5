import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { atExpiry } from './api';

describe('atExpiry', () => {
  beforeEach(() => {
    vi.useFakeTimers({ now: new Date('2025-01-01T00:00:00Z') });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('ends the session when the lifetime is over, not a millisecond before', () => {
    const expire = vi.fn();
    atExpiry(Date.now() + 48 * 3600_000, expire);
    vi.advanceTimersByTime(48 * 3600_000 - 1);
    expect(expire).not.toHaveBeenCalled();
    vi.advanceTimersByTime(1);
    expect(expire).toHaveBeenCalledTimes(1);
    vi.advanceTimersByTime(100 * 86_400_000);
    expect(expire).toHaveBeenCalledTimes(1);
  });

  it('waits out a lifetime longer than the longest timer delay, in several timers', () => {
    const expire = vi.fn();
    const days = 60;
    atExpiry(Date.now() + days * 86_400_000, expire);
    vi.advanceTimersByTime(2 ** 31);
    expect(expire).not.toHaveBeenCalled();
    vi.advanceTimersByTime(days * 86_400_000 - 2 ** 31 - 1);
    expect(expire).not.toHaveBeenCalled();
    vi.advanceTimersByTime(1);
    expect(expire).toHaveBeenCalledTimes(1);
  });

  it('checks the clock again when the timer fires: a late or early timer changes nothing', () => {
    const expire = vi.fn();
    atExpiry(Date.now() + 10_000, expire);
    // The wall clock set back by 5 s while the timer ran: it fires at 10 s, 5 s before the expiry.
    vi.setSystemTime(Date.now() - 5_000);
    vi.advanceTimersByTime(10_000);
    expect(expire).not.toHaveBeenCalled();
    vi.advanceTimersByTime(5_000);
    expect(expire).toHaveBeenCalledTimes(1);
  });

  it('expires at once a lifetime already over, and never once cancelled', () => {
    const past = vi.fn();
    atExpiry(Date.now() - 1, past);
    expect(past).toHaveBeenCalledTimes(1);
    const cancelled = vi.fn();
    const cancel = atExpiry(Date.now() + 1_000, cancelled);
    cancel();
    vi.advanceTimersByTime(10_000);
    expect(cancelled).not.toHaveBeenCalled();
  });
});
