// The authentication part of the server, assembled: accounts, keys, tokens, limits, the bearer check, the
// token endpoint, JWKS, security headers and the audit trail. See docs/auth.md for the design.
import cluster from 'node:cluster';
import type { FastifyInstance } from 'fastify';
import { Redis } from 'ioredis';
import type { Config } from '../config.js';
import { redactUrl } from '../config.js';
import type { Logger } from '../logger.js';
import type { SqlDatabase } from '../storage/sql/database.js';
import { AccountStore } from './accounts.js';
import { UsernameHasher } from './auth-secret.js';
import { AccountCache, AuthStateVersion } from './auth-state.js';
import { AuditLog, principalOf } from './audit.js';
import { BearerAuthenticator } from './authenticator.js';
import { AssertionJtis } from './client-assertion.js';
import { bundleCost, FHIR_BATCH_PATH } from './bundle-cost.js';
import { AccountRateLimiter, clusterLimiters, LoginGuard, memoryLimiters, redisLimiters } from './rate-counters.js';
import type { LimiterFactory } from './rate-counters.js';
import { dummyPasswordHash } from './passwords.js';
import type { AuthModule } from './principal.js';
import { registerSecurityHeaders } from './security-headers.js';
import { ensureSigningKey, KeyRing } from './signing-keys.js';
import { registerSmartConfiguration, tokenEndpointUrl } from './smart-configuration.js';
import { registerTokenEndpoint } from './token-endpoint.js';
import { TokenService } from './tokens.js';

export const JWKS_PATH = '/.well-known/jwks.json';

const REDIS_CONNECT_TIMEOUT_MS = 5000;

async function connectRedis(url: string, logger: Logger | undefined): Promise<Redis> {
  const redis = new Redis(url, {
    lazyConnect: true,
    // Fail fast while disconnected: the limiters then fall back to in-process counting.
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    connectTimeout: REDIS_CONNECT_TIMEOUT_MS,
  });
  let lastWarning = 0;
  let lastError: Error | undefined;
  redis.on('error', (error: Error) => {
    lastError = error;
    if (Date.now() - lastWarning < 60_000) return;
    lastWarning = Date.now();
    logger?.warn(
      { err: { message: error.message }, redis: redactUrl(url) },
      'Redis unreachable: rate limits and login lockouts are counted per process until it is back',
    );
  });
  try {
    await redis.connect();
  } catch (error) {
    redis.disconnect();
    // The connection's own error (e.g. ECONNREFUSED) says more than connect()'s "Connection is closed.".
    const cause = lastError ?? (error as Error);
    throw new Error(`Cannot connect to Redis at ${redactUrl(url)} (REDIS_URL): ${cause.message}`, { cause });
  }
  return redis;
}

export interface AuthModuleInternals extends AuthModule {
  readonly accounts: AccountStore;
  readonly tokens: TokenService;
  readonly keys: KeyRing;
}

export async function createAuthModule(config: Config, db: SqlDatabase, logger?: Logger): Promise<AuthModuleInternals> {
  await ensureSigningKey(db);
  const accounts = new AccountStore(db);
  const version = new AuthStateVersion(db);
  const keys = new KeyRing(db);
  await keys.sync(await version.read());
  const dummyHash = await dummyPasswordHash();
  const usernames = await UsernameHasher.load(db);
  // Last, so that nothing after it can fail and leave the connection open.
  const redis = config.redisUrl ? await connectRedis(config.redisUrl, logger) : undefined;
  const limiters: LimiterFactory = redis
    ? redisLimiters(redis)
    : cluster.isWorker
      ? clusterLimiters()
      : memoryLimiters();

  const tokens = new TokenService(keys, {
    issuer: config.publicUrl,
    audience: `${config.publicUrl}/fhir`,
    ttlSeconds: config.tokenTtlSeconds,
  });
  const audit = new AuditLog(logger);
  const guard = new LoginGuard(limiters, {
    maxFailuresPerUserAddress: config.loginMaxFailuresPerUserAddress,
    maxFailuresPerUser: config.loginMaxFailuresPerUser,
    maxFailuresPerAddress: config.loginMaxFailuresPerAddress,
    lockoutSeconds: config.loginLockoutSeconds,
    knownAddressSeconds: config.loginKnownAddressSeconds,
  });
  const authenticator = new BearerAuthenticator({
    version,
    tokens,
    accounts: new AccountCache(accounts),
    rateLimiter: new AccountRateLimiter(limiters),
    audit,
  });

  return {
    authenticator,
    accounts,
    tokens,
    keys,

    async registerRoutes(app: FastifyInstance) {
      registerSecurityHeaders(app);
      // Every 403 as an audit event (the access line of each request is src/http/access-log.ts's).
      app.addHook('onResponse', (request, reply, done) => {
        const principal = principalOf(request);
        if (principal && reply.statusCode === 403) {
          audit.event(
            'warn',
            'auth.forbidden',
            request,
            { outcome: 'forbidden', status: 403, account_id: principal.accountId, username: principal.username },
            'request forbidden: the token does not grant it',
          );
        }
        done();
      });
      // A batch or transaction Bundle is as many requests as it has entries: the bearer check took one
      // point before the body was read; the rest is taken here, before any entry runs.
      app.addHook('preHandler', async (request, reply) => {
        if (request.method !== 'POST' || request.routeOptions.url !== FHIR_BATCH_PATH) return;
        await authenticator.chargeMore(request, reply, bundleCost(request.body, config.maxBundleEntries) - 1);
      });

      registerTokenEndpoint(app, {
        accounts,
        version,
        tokens,
        guard,
        audit,
        usernames,
        dummyHash,
        tokenUrl: tokenEndpointUrl(config.publicUrl),
        jtis: new AssertionJtis(db),
      });
      registerSmartConfiguration(app, config.publicUrl);

      app.get(
        JWKS_PATH,
        {
          schema: {
            response: {
              200: {
                type: 'object',
                required: ['keys'],
                properties: { keys: { type: 'array', items: { type: 'object', additionalProperties: true } } },
              },
            },
          },
        },
        async (_request, reply) => {
          const jwks = await keys.jwks(await version.read());
          return reply.header('Cache-Control', 'public, max-age=300').send(jwks);
        },
      );
    },

    async close() {
      if (redis) await redis.quit().catch(() => redis.disconnect());
    },
  };
}
