// Counters for the per-account rate limits and the login lockout, through rate-limiter-flexible: in this
// process by default, in the cluster's primary for the processes of `serve --workers N`, or in Redis when
// REDIS_URL is set so that every server process of every host counts together.
// Should Redis fail mid-flight, each limiter falls back to an in-process one (its "insurance") rather than
// refusing or waving through every request; the fallback is logged.
import { isIP } from 'node:net';
import { RateLimiterCluster, RateLimiterMemory, RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible';
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

/**
 * For the processes of `serve --workers N` without Redis: the counters live in the cluster's primary
 * process (rate-limiter-flexible's RateLimiterClusterMaster, made by src/cli/cluster.ts), so the workers
 * count together instead of each granting the whole limit.
 */
export function clusterLimiters(): LimiterFactory {
  return ({ name, points, durationSeconds }) =>
    new RateLimiterCluster({ keyPrefix: `${KEY_PREFIX}:${name}`, points, duration: durationSeconds, timeoutMs: 5000 });
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

  /**
   * Takes `points` (one per request; a batch or transaction Bundle takes one per entry) from the account's
   * window. A refusal takes them too (a client that keeps pushing stays refused); `refund` gives back
   * points a request took but should not pay for.
   */
  async consume(accountId: string, limit: number, points = 1): Promise<RateLimitDecision> {
    const limiter = this.limiter(limit);
    try {
      const res = await limiter.consume(accountId, points);
      return { allowed: true, limit, remaining: res.remainingPoints, resetSeconds: seconds(res.msBeforeNext) };
    } catch (rejection) {
      if (rejection instanceof RateLimiterRes) {
        return { allowed: false, limit, remaining: 0, resetSeconds: seconds(rejection.msBeforeNext) };
      }
      throw rejection;
    }
  }

  async refund(accountId: string, limit: number, points: number): Promise<void> {
    await this.limiter(limit).reward(accountId, points);
  }

  private limiter(limit: number): RateLimiterAbstract {
    let limiter = this.limiters.get(limit);
    if (!limiter) {
      // The limit is part of the key: changing an account's limit starts a fresh window.
      limiter = this.factory({ name: `rate:${limit}`, points: limit, durationSeconds: 60 });
      this.limiters.set(limit, limiter);
    }
    return limiter;
  }
}

function seconds(ms: number): number {
  return Math.max(1, Math.ceil(ms / 1000));
}

/** Which counter refused a login attempt: one username from one address, one username, one address. */
export type LockScope = 'username-address' | 'username' | 'address';

export interface LoginLock {
  readonly by: LockScope;
  readonly retryAfterSeconds: number;
}

export interface LoginGuardOptions {
  /** Failures for one username from one client address (the lock an attacker can only set on himself). */
  readonly maxFailuresPerUserAddress: number;
  /** Failures for one username from every address together (throttles a distributed attack). */
  readonly maxFailuresPerUser: number;
  /** Failures from one client address over every username (throttles a spray). */
  readonly maxFailuresPerAddress: number;
  readonly lockoutSeconds: number;
  /** How long an address the account logged in from stays exempt from the per-username limit (0: never). */
  readonly knownAddressSeconds: number;
}

/** What the counters know of an attempt: keys only, never the username or password in clear. */
export interface LoginSubject {
  /** Stands for the username: its keyed hash plus the account's unlock epoch (see token-endpoint.ts). */
  readonly user: string;
  /** The client address (see `addressCounterKey`). */
  readonly address: string;
}

interface Counter {
  readonly by: LockScope;
  readonly limiter: RateLimiterAbstract;
  readonly points: number;
  key(subject: LoginSubject): string;
}

/** An attempt that holds a slot in each counter it passed; settle it with `failed` or `succeeded`. */
export interface LoginReservation {
  readonly subject: LoginSubject;
  /** The counters this attempt took a point from, with the count it brought each to. */
  readonly taken: readonly { readonly counter: Counter; readonly consumed: number }[];
}

/**
 * Login lockouts, counted BEFORE the password is checked: each attempt first takes a point from three
 * counters (atomically: rate-limiter-flexible's consume is one increment, in process or in Redis), and an
 * attempt past any threshold is refused without a password check. So however many guesses arrive at
 * once, at most the threshold of them are checked. Counters, each a window of `lockoutSeconds`:
 *
 *   (username, address)  the lock one address can set: it shuts out that address only;
 *   username             every address together, set high: it slows a distributed attack, and an address
 *                        the account logged in from recently is exempt, so the attack does not shut the
 *                        account's own clients out;
 *   address              one address over every username (a spray).
 *
 * The failure that reaches a threshold blocks that counter for the full lockout time. A success clears
 * its (username, address) count and gives back the points it took from the others. Unknown usernames are
 * counted like known ones, so a lockout says nothing about which accounts exist.
 */
export class LoginGuard {
  private readonly counters: readonly Counter[];
  /** Addresses each username logged in from lately (keyed as the pair), when the exemption is on. */
  private readonly known: RateLimiterAbstract | undefined;

  constructor(
    factory: LimiterFactory,
    private readonly options: LoginGuardOptions,
  ) {
    const counter = (by: LockScope, name: string, points: number, key: Counter['key']): Counter => ({
      by,
      points,
      key,
      limiter: factory({ name, points, durationSeconds: options.lockoutSeconds }),
    });
    // The order matters: an attempt refused by an earlier counter takes nothing from the later ones, so
    // an attacker hammering through his own (username, address) lock adds nothing to the username's count.
    this.counters = [
      counter('username-address', 'login-user-address', options.maxFailuresPerUserAddress, pairKey),
      counter('address', 'login-address', options.maxFailuresPerAddress, (s) => s.address),
      counter('username', 'login-user', options.maxFailuresPerUser, (s) => s.user),
    ];
    this.known =
      options.knownAddressSeconds > 0
        ? factory({ name: 'login-known', points: 1, durationSeconds: options.knownAddressSeconds })
        : undefined;
  }

  /** Takes this attempt's slots, or says which lock refuses it (having given back what it took). */
  async reserve(subject: LoginSubject): Promise<LoginReservation | LoginLock> {
    const taken: { counter: Counter; consumed: number }[] = [];
    for (const counter of this.counters) {
      try {
        const res = await counter.limiter.consume(counter.key(subject));
        taken.push({ counter, consumed: res.consumedPoints });
      } catch (rejection) {
        if (!(rejection instanceof RateLimiterRes)) throw rejection;
        if (counter.by === 'username' && this.known && (await this.known.get(pairKey(subject)))) continue;
        await Promise.all(taken.map((t) => t.counter.limiter.reward(t.counter.key(subject))));
        return { by: counter.by, retryAfterSeconds: seconds(rejection.msBeforeNext) };
      }
    }
    return { subject, taken };
  }

  /** The attempt failed: its slots stay taken. Returns the locks it just started (for the operator's log). */
  async failed(reservation: LoginReservation): Promise<LoginLock[]> {
    const started: LoginLock[] = [];
    for (const { counter, consumed } of reservation.taken) {
      // Exactly one attempt brings a counter to its threshold; it starts the full lockout from now.
      if (consumed !== counter.points) continue;
      await counter.limiter.block(counter.key(reservation.subject), this.options.lockoutSeconds);
      started.push({ by: counter.by, retryAfterSeconds: this.options.lockoutSeconds });
    }
    return started;
  }

  /**
   * The attempt succeeded: the (username, address) count starts again, the points taken from the username
   * and address counts are given back (a success is no failure; it does not wipe the others' failures, so
   * one good password cannot unlock a spray), and the address becomes known for the username.
   */
  async succeeded(reservation: LoginReservation): Promise<void> {
    const { subject } = reservation;
    await Promise.all([
      ...reservation.taken.map(({ counter }) =>
        counter.by === 'username-address'
          ? counter.limiter.delete(counter.key(subject))
          : counter.limiter.reward(counter.key(subject)),
      ),
      // block() rather than set(): it records the key for the whole window in every store, the cluster's
      // included (which has no set()).
      this.known?.block(pairKey(subject), this.options.knownAddressSeconds),
    ]);
  }
}

export function isLoginLock(value: LoginReservation | LoginLock): value is LoginLock {
  return 'by' in value;
}

function pairKey(subject: LoginSubject): string {
  // Addresses never contain '|', so the pair is unambiguous.
  return `${subject.user}|${subject.address}`;
}

/**
 * The key of a client address in the per-address counters. An IPv6 client usually holds a whole /64
 * (often far more), so it is counted by its /64: otherwise each of its 2^64 addresses would have a
 * counter of its own. IPv4-mapped IPv6 addresses count as their IPv4 address.
 */
export function addressCounterKey(address: string): string {
  const plain = address.replace(/%.*$/, '');
  if (plain.toLowerCase().startsWith('::ffff:') && isIP(plain.slice(7)) === 4) return plain.slice(7);
  if (isIP(plain) !== 6) return plain;
  const [head, tail] = plain.toLowerCase().split('::');
  const groups = (part: string | undefined) =>
    part ? part.split(':').flatMap((g) => (g.includes('.') ? ['0', '0'] : [g])) : [];
  const left = groups(head);
  const right = groups(tail);
  const all =
    tail === undefined ? left : [...left, ...Array<string>(8 - left.length - right.length).fill('0'), ...right];
  return `${all
    .slice(0, 4)
    .map((g) => parseInt(g, 16).toString(16))
    .join(':')}::/64`;
}
