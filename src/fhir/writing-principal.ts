// Who is writing, for the code that runs inside a write's transaction without the request in hand: the
// Subscription rows (subscriptions/index-writer.ts) record the account that wrote the Subscription as its
// owner. Set around each FHIR request's handler (http/fhir-routes.ts), and to SERVER_WRITE around the
// server's own writes of a Subscription (its status), which keep its owner. A write with neither (the
// import command) has no owner.
import { AsyncLocalStorage } from 'node:async_hooks';
import type { Principal } from '../auth/principal.js';

export const SERVER_WRITE = Symbol('the server writes');

export const writingPrincipal = new AsyncLocalStorage<Principal | typeof SERVER_WRITE>();
