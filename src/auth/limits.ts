// Counters for the per-account rate limits and the login lockout, through rate-limiter-flexible: in this
// process by default, or in Redis when REDIS_URL is set so that every server process counts together.
// Should Redis fail mid-flight, each limiter falls back to an in-process one (its "insurance") rather than
// refusing or waving through every request; the fallback is logged.
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible';
import type { RateLimiterAbstract } from 'rate-limiter-flexible';
import type { Redis } from 'ioredis';

const KEY_PREFIX = 'ambient-fhir';

export interface LimiterOptions {
  readonly name: string;
  readonly points: number;
  readonly durationSeconds: number;
}

export type LimiterFactory = (options: LimiterOptions) => RateLimiterAbstract;

export function memoryLimiters(): LimiterFactory {
  return ({ name, points, durationSeconds }) =>
    new RateLimiterMemory({ keyPrefix: `${KEY_PREFIX}:${name}`, points, duration: durationSeconds });
}

export function redisLimiters(redis: Redis): LimiterFactory {
  return ({ name, points, durationSeconds }) =>
    new RateLimiterRedis({
      storeClient: redis,
      keyPrefix: `${KEY_PREFIX}:${name}`,
      points,
      duration: durationSeconds,
      rejectIfRedisNotReady: true,
      insuranceLimiter: new RateLimiterMemory({
        keyPrefix: `${KEY_PREFIX}:${name}`,
        points,
        duration: durationSeconds,
      }),
    });
}

export interface RateLimitDecision {
  readonly allowed: boolean;
  readonly limit: number;
  readonly remaining: number;
  /** Seconds until the window resets (RateLimit-Reset, and Retry-After when refused). */
  readonly resetSeconds: number;
}

/** Requests per minute per account; one limiter per distinct limit, keyed by account id. */
export class AccountRateLimiter {
  private readonly limiters = new Map<number, RateLimiterAbstract>();

  constructor(private readonly factory: LimiterFactory) {}

  async consume(accountId: string, limit: number): Promise<RateLimitDecision> {
    let limiter = this.limiters.get(limit);
    if (!limiter) {
      // The limit is part of the key: changing an account's limit starts a fresh window.
      limiter = this.factory({ name: `rate:${limit}`, points: limit, durationSeconds: 60 });
      this.limiters.set(limit, limiter);
    }
    try {
      const res = await limiter.consume(accountId);
      return { allowed: true, limit, remaining: res.remainingPoints, resetSeconds: seconds(res.msBeforeNext) };
    } catch (rejection) {
      if (rejection instanceof RateLimiterRes) {
        return { allowed: false, limit, remaining: 0, resetSeconds: seconds(rejection.msBeforeNext) };
      }
      throw rejection;
    }
  }
}

function seconds(ms: number): number {
  return Math.max(1, Math.ceil(ms / 1000));
}

export interface LoginLock {
  readonly by: 'username' | 'address';
  readonly retryAfterSeconds: number;
}

export interface LoginGuardOptions {
  readonly maxFailuresPerUser: number;
  readonly maxFailuresPerAddress: number;
  readonly lockoutSeconds: number;
}

/**
 * Failed logins per username and per client address within the lockout window. Reaching the threshold
 * locks that username (or address) for the full lockout time, counted from the failure that reached it.
 * Unknown usernames are counted like known ones, so a lockout says nothing about which accounts exist.
 */
export class LoginGuard {
  private readonly byUser: RateLimiterAbstract;
  private readonly byAddress: RateLimiterAbstract;

  constructor(
    factory: LimiterFactory,
    private readonly options: LoginGuardOptions,
  ) {
    this.byUser = factory({
      name: 'login-user',
      points: options.maxFailuresPerUser,
      durationSeconds: options.lockoutSeconds,
    });
    this.byAddress = factory({
      name: 'login-address',
      points: options.maxFailuresPerAddress,
      durationSeconds: options.lockoutSeconds,
    });
  }

  /** The lock that refuses this attempt before any password is checked, if any. */
  async check(username: string, address: string): Promise<LoginLock | undefined> {
    const [user, addr] = await Promise.all([this.byUser.get(username), this.byAddress.get(address)]);
    if (addr && addr.consumedPoints >= this.options.maxFailuresPerAddress) {
      return { by: 'address', retryAfterSeconds: seconds(addr.msBeforeNext) };
    }
    if (user && user.consumedPoints >= this.options.maxFailuresPerUser) {
      return { by: 'username', retryAfterSeconds: seconds(user.msBeforeNext) };
    }
    return undefined;
  }

  /** Counts a failure; returns the locks this failure just started (for the operator's log). */
  async recordFailure(username: string, address: string): Promise<LoginLock[]> {
    const started: LoginLock[] = [];
    const [user, addr] = await Promise.all([this.byUser.penalty(username), this.byAddress.penalty(address)]);
    if (user.consumedPoints === this.options.maxFailuresPerUser) {
      await this.byUser.block(username, this.options.lockoutSeconds);
      started.push({ by: 'username', retryAfterSeconds: this.options.lockoutSeconds });
    }
    if (addr.consumedPoints === this.options.maxFailuresPerAddress) {
      await this.byAddress.block(address, this.options.lockoutSeconds);
      started.push({ by: 'address', retryAfterSeconds: this.options.lockoutSeconds });
    }
    return started;
  }

  /** A successful login clears the username's count (not the address's: one success must not unlock a spray). */
  async recordSuccess(username: string): Promise<void> {
    await this.byUser.delete(username);
  }
}
