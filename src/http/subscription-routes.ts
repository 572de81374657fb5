// Subscriptions in the HTTP server (docs/subscriptions.md): the delivery loop of this process
// (subscriptions/service.ts), started when the server is ready and stopped before the database closes,
// and the websocket channel at GET /fhir/$subscription-websocket. The websocket plugin is registered in
// this scope only, so that no other route pays for its hooks; the scope is inside the authenticated one,
// so the upgrade request needs the token (`Authorization: Bearer`) like every FHIR request.
import websocket from '@fastify/websocket';
import type { FastifyInstance } from 'fastify';
import { AccountStore } from '../auth/accounts.js';
import { currentPrincipal } from '../auth/authenticator.js';
import { AppError } from '../errors.js';
import { FHIR_ROUTES } from '../fhir/router.js';
import type { FhirServices } from '../fhir/services.js';
import type { SqlDatabase } from '../storage/sql/database.js';
import type { DeliveryOutcome } from '../subscriptions/rest-hook.js';
import { SubscriptionService } from '../subscriptions/service.js';
import { sendError } from './error-handler.js';

export interface SubscriptionRoutesOptions {
  readonly services: FhirServices;
  readonly db: SqlDatabase;
  readonly delivered?: (outcome: DeliveryOutcome) => void;
}

const route = FHIR_ROUTES.find((r) => r.name === 'subscription-websocket')!;
/** What a client may send in one websocket message (`bind <id>`). */
const MAX_MESSAGE_BYTES = 1024;

/**
 * At the root: a request that asked to upgrade its connection (any path, once the websocket plugin
 * listens for upgrades) and was answered without one, a 401 say, leaves a socket no HTTP parser or
 * time-out manages any more: it is closed once the answer is written. (A websocket that was upgraded
 * never gets here: its reply is hijacked.)
 */
export function closeRefusedUpgrades(app: FastifyInstance): void {
  // A callback hook, not an async one: it runs on every request and has nothing to wait for.
  app.addHook('onResponse', (request, _reply, done) => {
    // Node sets `upgrade` on the requests it handed to the 'upgrade' listener (not in its typings).
    if ((request.raw as { upgrade?: boolean }).upgrade) request.raw.socket?.destroy();
    done();
  });
}

export async function subscriptionRoutes(app: FastifyInstance, options: SubscriptionRoutesOptions): Promise<void> {
  const { services, db } = options;
  const accounts = new AccountStore(db);
  const subscriptions = new SubscriptionService(db, services, {
    subscriberOf: (accountId, scopes) => currentPrincipal(accounts, accountId, scopes),
    logger: app.log,
    delivered: options.delivered,
  });
  app.addHook('onReady', async () => subscriptions.start());
  // preClose: the database (closed by app.ts's onClose) is still open to give leases back.
  app.addHook('preClose', async () => subscriptions.stop());

  await app.register(websocket, { options: { maxPayload: MAX_MESSAGE_BYTES, clientTracking: false } });
  app.route({
    method: 'GET',
    url: `/fhir/${route.path}`,
    config: { fhirRoute: route },
    handler: async (request, reply) =>
      sendError(
        request,
        reply,
        new AppError(
          'bad-request',
          'GET /fhir/$subscription-websocket is a websocket: connect with Upgrade: websocket, then send "bind <subscription id>"',
        ),
      ),
    // The hub refuses a socket past its bounds (per process, per account).
    wsHandler: (socket, request) => subscriptions.hub.attach(socket, request.principal!),
  });
}
