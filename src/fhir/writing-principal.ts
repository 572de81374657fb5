// Who is writing, for the code that runs inside a write's transaction without the request in hand: the
// Subscription rows (subscriptions/index-writer.ts) record the account that wrote the Subscription as its
// owner. Set around each FHIR request's handler (http/fhir-routes.ts); absent where the server writes
// on its own (a subscription's status) or the import command writes.
import { AsyncLocalStorage } from 'node:async_hooks';
import type { Principal } from '../auth/principal.js';

export const writingPrincipal = new AsyncLocalStorage<Principal>();
